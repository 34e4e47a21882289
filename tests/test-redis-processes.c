/* test-redis-processes.c - producers and workers as separate processes on
 * one Redis, in both modes: every task runs exactly once.
 *
 * Three producer processes (tests/helpers/producer-proc) enqueue 50,000
 * tasks with known ids while two worker processes (tests/helpers/
 * worker-proc) run them; each execution appends one line to a shared log
 * (one write(2) with O_APPEND, so lines never interleave). The oracle reads
 * the log: every id present, none twice. Nothing is killed here, so a
 * duplicate in either mode would be a bug.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <sluice/sluice.h>

#include "tests/helpers/broker-calls.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/slot-log.h"

#define PRODUCERS 3
#define WORKERS 2
#define TASKS 50000

static gchar *
helper_path(const gchar *name)
{
  return g_build_filename(TEST_BUILDDIR, "tests", "helpers", name, NULL);
}

static GPid
spawn(gchar **argv)
{
  g_autoptr(GError) error = NULL;
  GPid pid = 0;

  ck_assert_msg(g_spawn_async(NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                              NULL, &pid, &error),
                "cannot start %s: %s", argv[0],
                error != NULL ? error->message : "");
  return pid;
}

static gint
wait_exit(GPid pid)
{
  int status = 0;

  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static guint
count_lines(const gchar *path)
{
  g_autofree gchar *text = NULL;
  guint n = 0;

  if (!g_file_get_contents(path, &text, NULL, NULL))
    return 0;
  for (const gchar *p = text; *p != '\0'; p++)
    if (*p == '\n')
      n++;
  return n;
}

static void
run_exactly_once(const gchar *mode)
{
  g_autofree gchar *dir = g_dir_make_tmp("sluice-procs-XXXXXX", NULL);
  g_autofree gchar *log = g_build_filename(dir, "executions.log", NULL);
  g_autofree gchar *ns = g_strdup_printf("procs-%s-%d", mode, (int)getpid());
  g_autofree gchar *worker = helper_path("worker-proc");
  g_autofree gchar *producer = helper_path("producer-proc");
  g_autofree gchar *text = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_auto(GStrv) lines = NULL;
  GPid workers[WORKERS], producers[PRODUCERS];
  gint64 deadline;
  guint per = TASKS / PRODUCERS;
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = sluice_test_redis_broker_new(
      g_strcmp0(mode, "fast") == 0 ? SLUICE_REDIS_FAST : SLUICE_REDIS_RELIABLE,
      url, ns, 0, NULL, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  for (guint w = 0; w < WORKERS; w++) {
    g_autofree gchar *id = g_strdup_printf("w%u", w);
    gchar *argv[] = {
        worker,        "--url", (gchar *)url,  "--mode", (gchar *)mode,
        "--namespace", ns,      "--worker-id", id,       "--concurrency",
        "4",           "--log", log,           NULL};
    workers[w] = spawn(argv);
  }
  sluice_test_wait_alive(broker, workers, WORKERS);
  for (guint p = 0; p < PRODUCERS; p++) {
    g_autofree gchar *prefix = g_strdup_printf("p%u", p);
    g_autofree gchar *count = g_strdup_printf(
        "%u", p == PRODUCERS - 1 ? TASKS - per * (PRODUCERS - 1) : per);
    gchar *argv[] = {producer,      "--url",       (gchar *)url, "--mode",
                     (gchar *)mode, "--namespace", ns,           "--prefix",
                     prefix,        "--task",      "t.log",      "--count",
                     count,         "--batch",     "200",        NULL};
    producers[p] = spawn(argv);
  }
  for (guint p = 0; p < PRODUCERS; p++)
    ck_assert_int_eq(wait_exit(producers[p]), 0);

  /* Wait (bounded, real time) for the workers to get through the log. */
  deadline = g_get_monotonic_time() + 300 * G_USEC_PER_SEC;
  while (count_lines(log) < TASKS && g_get_monotonic_time() < deadline)
    g_usleep(50000);
  for (guint w = 0; w < WORKERS; w++) {
    kill(workers[w], SIGTERM);
    ck_assert_int_eq(wait_exit(workers[w]), 0);
  }

  ck_assert(g_file_get_contents(log, &text, NULL, NULL));
  lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    g_auto(GStrv) fields = g_strsplit(lines[i], " ", 2);
    ck_assert_msg(g_hash_table_add(seen, g_strdup(fields[0])),
                  "%s mode: task %s ran twice", mode, fields[0]);
  }
  ck_assert_uint_eq(g_hash_table_size(seen), TASKS);
  for (guint p = 0; p < PRODUCERS; p++) {
    guint n = p == PRODUCERS - 1 ? TASKS - per * (PRODUCERS - 1) : per;
    for (guint i = 0; i < n; i++) {
      g_autofree gchar *id = g_strdup_printf("p%u-%u", p, i);
      ck_assert_msg(g_hash_table_contains(seen, id), "%s mode: task %s lost",
                    mode, id);
    }
  }
  g_unlink(log);
  g_rmdir(dir);
}

START_TEST(fast_mode_runs_each_task_once)
{
  run_exactly_once("fast");
}
END_TEST

START_TEST(reliable_mode_runs_each_task_once)
{
  run_exactly_once("reliable");
}
END_TEST

/* A concurrency limit of 3 over 4 reliable-mode worker processes (of 2
 * threads each): never more than 3 run at once, by the order of their
 * start and end lines; one worker is killed -9 while it holds a slot, and
 * once that slot's lease lapses the limit is reached again (a leaked slot
 * would leave 2), and every task, the killed one's included, is done. */
START_TEST(reliable_concurrency_limit_holds_over_four_processes_and_a_crash)
{
  g_autofree gchar *dir = g_dir_make_tmp("sluice-slots-XXXXXX", NULL);
  g_autofree gchar *log = g_build_filename(dir, "slots.log", NULL);
  g_autofree gchar *ns = g_strdup_printf("slots-%d", (int)getpid());
  g_autofree gchar *worker = helper_path("worker-proc");
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  /* msgpack {"ms": 300} */
  g_autoptr(GBytes) nap = g_bytes_new_static("\x81\xa2ms\xcd\x01\x2c", 7);
  SluiceRedisOptions ro;
  SluiceTestSlotLog seen;
  GPid pids[4];
  guint kill_line;
  gint64 deadline;

  sluice_redis_options_init(&ro);
  ro.url = url;
  ro.mode = SLUICE_REDIS_RELIABLE;
  ro.ns = ns;
  broker = sluice_redis_broker_new(&ro, NULL, &error);
  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  client = sluice_client_new(broker, NULL, &error);
  ck_assert(client != NULL);
  for (guint i = 0; i < 40; i++) {
    g_autofree gchar *id =
        sluice_client_enqueue(client, "t.slotted", nap, NULL, &error);
    ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  }
  for (guint w = 0; w < 4; w++) {
    g_autofree gchar *wid = g_strdup_printf("slots-%u", w);
    gchar *argv[] = {worker,       "--url",
                     (gchar *)url, "--mode",
                     "reliable",   "--namespace",
                     ns,           "--worker-id",
                     wid,          "--concurrency",
                     "2",          "--prefetch",
                     "2",          "--visibility-timeout",
                     "1000",       "--slots",
                     "3",          "--slot-log",
                     log,          NULL};
    pids[w] = spawn(argv);
  }
  sluice_test_wait_alive(broker, pids, 4);
  deadline = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
  while (!sluice_test_slot_log_running(log, pids[0]) &&
         g_get_monotonic_time() < deadline)
    g_usleep(2000);
  ck_assert_msg(sluice_test_slot_log_running(log, pids[0]),
                "the first worker never ran a task");
  kill(pids[0], SIGKILL);
  ck_assert_int_eq(wait_exit(pids[0]), 128 + SIGKILL);
  kill_line = sluice_test_slot_log_count(log);

  deadline = g_get_monotonic_time() + 300 * G_USEC_PER_SEC;
  for (;;) {
    sluice_test_slot_log_read(log, 3, pids[0], kill_line, &seen);
    if (g_hash_table_size(seen.ended) == 40 ||
        g_get_monotonic_time() >= deadline)
      break;
    sluice_test_slot_log_clear(&seen);
    g_usleep(50000);
  }
  for (guint w = 1; w < 4; w++) {
    kill(pids[w], SIGTERM);
    ck_assert_int_eq(wait_exit(pids[w]), 0);
  }
  ck_assert_msg(seen.first_overrun == NULL, "over the limit at %s",
                seen.first_overrun);
  ck_assert_uint_eq(g_hash_table_size(seen.ended), 40);
  ck_assert_uint_le(seen.peak, 3);
  ck_assert_uint_eq(seen.peak_after, 3);
  sluice_test_slot_log_clear(&seen);
  g_unlink(log);
  g_rmdir(dir);
}
END_TEST

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  Suite *suite = suite_create("redis-processes");
  TCase *tc = tcase_create("processes");
  SRunner *runner;
  int failed;

  tcase_add_unchecked_fixture(tc, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, fast_mode_runs_each_task_once);
  tcase_add_test(tc, reliable_mode_runs_each_task_once);
  tcase_add_test(
      tc, reliable_concurrency_limit_holds_over_four_processes_and_a_crash);
  suite_add_tcase(suite, tc);
  runner = srunner_create(suite);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

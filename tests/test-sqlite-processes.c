/* test-sqlite-processes.c - worker and producer processes sharing one
 * SQLite database (tests/helpers/worker-proc and producer-proc, the same
 * programs as the Redis process tests).
 *
 * Each execution appends "<id> <delivery count> <pid>" to a shared log
 * (one O_APPEND write(2), so lines never interleave and a line written
 * before a kill -9 survives it): the oracle. Nothing may be lost, and no
 * task may run twice unless its process was killed while running it.
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
#include "tests/helpers/slot-log.h"
#include "tests/helpers/sqlite-fixture.h"

#define WORKERS 3
#define PRODUCERS 3
#define TASKS 20000

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

static gchar **
log_lines(const gchar *path)
{
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents(path, &text, NULL, NULL))
    return g_new0(gchar *, 1);
  return g_strsplit(text, "\n", -1);
}

static guint
count_lines(const gchar *path)
{
  g_auto(GStrv) lines = log_lines(path);
  guint n = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    n += lines[i][0] != '\0';
  return n;
}

static GPid
start_worker(const gchar *url, const gchar *id, const gchar *log,
             const gchar *visibility)
{
  g_autofree gchar *worker = helper_path("worker-proc");
  gchar *argv[] = {worker,
                   "--url",
                   (gchar *)url,
                   "--worker-id",
                   (gchar *)id,
                   "--concurrency",
                   "4",
                   "--prefetch",
                   "16",
                   "--visibility-timeout",
                   (gchar *)visibility,
                   "--log",
                   (gchar *)log,
                   NULL};

  return spawn(argv);
}

/* Three workers and three producers on one file: every task runs, and
 * exactly once (nothing is killed). */
START_TEST(three_processes_run_each_of_20000_tasks_once)
{
  g_autofree gchar *db = sluice_test_sqlite_new_path();
  g_autofree gchar *dir = g_path_get_dirname(db);
  g_autofree gchar *url = g_strconcat("sqlite://", db, NULL);
  g_autofree gchar *log = g_build_filename(dir, "executions.log", NULL);
  g_autofree gchar *producer = helper_path("producer-proc");
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_auto(GStrv) lines = NULL;
  GPid workers[WORKERS], producers[PRODUCERS];
  guint per = TASKS / PRODUCERS;
  gint64 deadline;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) init = NULL;

  /* The schema exists before six processes race to make it. */
  init = sluice_broker_new_for_url(url, NULL, NULL, &error);
  ck_assert_msg(init != NULL, "%s", error != NULL ? error->message : "");
  for (guint w = 0; w < WORKERS; w++) {
    g_autofree gchar *id = g_strdup_printf("w%u", w);
    workers[w] = start_worker(url, id, log, "5000");
  }
  sluice_test_wait_alive(init, workers, WORKERS);
  for (guint p = 0; p < PRODUCERS; p++) {
    g_autofree gchar *prefix = g_strdup_printf("p%u", p);
    g_autofree gchar *count = g_strdup_printf(
        "%u", p == PRODUCERS - 1 ? TASKS - per * (PRODUCERS - 1) : per);
    gchar *argv[] = {producer, "--url",   url,   "--prefix", prefix, "--task",
                     "t.log",  "--count", count, "--batch",  "200",  NULL};
    producers[p] = spawn(argv);
  }
  for (guint p = 0; p < PRODUCERS; p++)
    ck_assert_int_eq(wait_exit(producers[p]), 0);

  deadline = g_get_monotonic_time() + 600 * G_USEC_PER_SEC;
  while (count_lines(log) < TASKS && g_get_monotonic_time() < deadline)
    g_usleep(50000);
  for (guint w = 0; w < WORKERS; w++) {
    kill(workers[w], SIGTERM);
    ck_assert_int_eq(wait_exit(workers[w]), 0);
  }

  lines = log_lines(log);
  for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    g_auto(GStrv) fields = g_strsplit(lines[i], " ", 2);
    ck_assert_msg(g_hash_table_add(seen, g_strdup(fields[0])),
                  "task %s ran twice", fields[0]);
  }
  for (guint p = 0; p < PRODUCERS; p++) {
    guint n = p == PRODUCERS - 1 ? TASKS - per * (PRODUCERS - 1) : per;
    for (guint i = 0; i < n; i++) {
      g_autofree gchar *id = g_strdup_printf("p%u-%u", p, i);
      ck_assert_msg(g_hash_table_contains(seen, id), "task %s lost", id);
    }
  }
  ck_assert_uint_eq(g_hash_table_size(seen), TASKS);
}
END_TEST

static gboolean
log_has(const gchar *log, const gchar *prefix, guint *out_n)
{
  g_auto(GStrv) lines = log_lines(log);
  guint n = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix(lines[i], prefix))
      n++;
  if (out_n != NULL)
    *out_n = n;
  return n > 0;
}

/* A worker killed with -9 while running a task: a second worker process
 * takes it over once the first's lease lapses, runs it (its second
 * delivery) and it succeeds; the other tasks the first held are done too,
 * and nothing acknowledged before the kill runs again. */
START_TEST(a_task_of_a_killed_worker_is_completed_by_another)
{
  g_autofree gchar *db = sluice_test_sqlite_new_path();
  g_autofree gchar *dir = g_path_get_dirname(db);
  g_autofree gchar *url = g_strconcat("sqlite://", db, NULL);
  g_autofree gchar *log = g_build_filename(dir, "executions.log", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker =
      sluice_broker_new_for_url(url, NULL, NULL, &error);
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceResult) result = NULL;
  g_autoptr(GPtrArray) quick = g_ptr_array_new_with_free_func(g_free);
  SluiceClientOptions co;
  SluiceEnqueueOptions eo;
  g_autofree gchar *slow = NULL;
  /* msgpack {"ms": 3000} */
  g_autoptr(GBytes) sleep_3s = g_bytes_new_static("\x81\xa2ms\xcd\x0b\xb8", 7);
  g_autofree gchar *slow_line = NULL;
  g_autofree gchar *second = NULL;
  gint64 deadline;
  GPid first, other;
  guint n;

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  sluice_client_options_init(&co);
  co.track_state = TRUE;
  client = sluice_client_new(broker, &co, &error);
  ck_assert(client != NULL);
  sluice_enqueue_options_init(&eo);
  eo.id = "slow";
  slow = sluice_client_enqueue(client, "t.sleep", sleep_3s, &eo, &error);
  ck_assert_msg(slow != NULL, "%s", error != NULL ? error->message : "");
  for (guint i = 0; i < 20; i++) {
    g_autofree gchar *id = g_strdup_printf("quick-%u", i);
    gchar *got;
    eo.id = id;
    got = sluice_client_enqueue(client, "t.log", NULL, &eo, &error);
    ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
    g_ptr_array_add(quick, got);
  }

  first = start_worker(url, "first", log, "1000");
  slow_line = g_strdup("slow 1 ");
  deadline = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
  while (!log_has(log, slow_line, NULL) && g_get_monotonic_time() < deadline)
    g_usleep(20000);
  ck_assert_msg(log_has(log, slow_line, NULL), "the first worker never ran it");
  kill(first, SIGKILL);
  ck_assert_int_eq(wait_exit(first), 128 + SIGKILL);

  other = start_worker(url, "second", log, "1000");
  result = sluice_client_get_result(client, "slow", 120 * 1000, NULL, &error);
  ck_assert_msg(result != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_result_get_state(result), SLUICE_STATE_SUCCEEDED);
  second = g_strdup("slow 2 ");
  ck_assert_msg(log_has(log, second, NULL), "not run as a second delivery");
  for (guint i = 0; i < quick->len; i++) {
    g_autoptr(SluiceResult) r = sluice_client_get_result(
        client, quick->pdata[i], 120 * 1000, NULL, &error);
    g_autofree gchar *prefix = g_strdup_printf("%s ", (gchar *)quick->pdata[i]);
    ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
    /* Done once, unless the first worker was killed between running it
     * and its acknowledgement. */
    log_has(log, prefix, &n);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_le(n, 2);
  }
  kill(other, SIGTERM);
  ck_assert_int_eq(wait_exit(other), 0);
}
END_TEST

/* A concurrency limit of 3 over 4 worker processes (of 2 threads each):
 * never more than 3 run at once, by the order of their start and end
 * lines; one worker is killed -9 while it holds a slot, and once that
 * slot's lease lapses the limit is reached again (a leaked slot would
 * leave 2), and every task, the killed one's included, is done. */
START_TEST(a_concurrency_limit_holds_over_four_processes_and_a_crash)
{
  g_autofree gchar *db = sluice_test_sqlite_new_path();
  g_autofree gchar *dir = g_path_get_dirname(db);
  g_autofree gchar *url = g_strconcat("sqlite://", db, NULL);
  g_autofree gchar *log = g_build_filename(dir, "slots.log", NULL);
  g_autofree gchar *worker = helper_path("worker-proc");
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker =
      sluice_broker_new_for_url(url, NULL, NULL, &error);
  g_autoptr(SluiceClient) client = NULL;
  /* msgpack {"ms": 300} */
  g_autoptr(GBytes) nap = g_bytes_new_static("\x81\xa2ms\xcd\x01\x2c", 7);
  SluiceTestSlotLog seen;
  GPid pids[4];
  guint kill_line;
  gint64 deadline;

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
    gchar *argv[] = {worker, "--url",
                     url,    "--worker-id",
                     wid,    "--concurrency",
                     "2",    "--prefetch",
                     "2",    "--visibility-timeout",
                     "1000", "--slots",
                     "3",    "--slot-log",
                     log,    NULL};
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
}
END_TEST

int
main(void)
{
  Suite *suite = suite_create("sqlite-processes");
  TCase *tc = tcase_create("processes");
  SRunner *runner;
  int failed;

  sluice_test_sqlite_setup();
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, a_task_of_a_killed_worker_is_completed_by_another);
  tcase_add_test(tc, three_processes_run_each_of_20000_tasks_once);
  tcase_add_test(tc, a_concurrency_limit_holds_over_four_processes_and_a_crash);
  suite_add_tcase(suite, tc);
  runner = srunner_create(suite);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  sluice_test_sqlite_teardown();
  return failed == 0 ? 0 : 1;
}

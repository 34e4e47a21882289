/* test-workflow-processes.c - a chord across worker processes, on Redis
 * (fast and reliable) and SQLite: its callback runs exactly once, with
 * every member's result, while members fail and retry at random on three
 * workers at once; and (brokers with leases) while a worker is killed with
 * members in its hands, whose deliveries are then taken over.
 *
 * The workers are tests/helpers/worker-proc (t.member, t.collect); every
 * execution appends one line to a shared log, the callback's with its
 * arguments as JSON. The oracle reads the log once the workers have
 * stopped: one callback line, whose results are 0..N-1 in order.
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
#include "tests/helpers/sqlite-fixture.h"

#define WORKERS 3
#define MEMBERS 100

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

typedef struct {
  const gchar *url;
  const gchar *mode;
  gchar *ns;
  gchar *dir;
  gchar *log;
} World;

static GPid
start_worker(World *w, guint n)
{
  g_autofree gchar *worker = helper_path("worker-proc");
  g_autofree gchar *id = g_strdup_printf("w%u-%d", n, (int)getpid());
  gchar *argv[] = {worker,
                   "--url",
                   (gchar *)w->url,
                   "--mode",
                   (gchar *)w->mode,
                   "--namespace",
                   w->ns,
                   "--worker-id",
                   id,
                   "--concurrency",
                   "4",
                   "--visibility-timeout",
                   "1000",
                   "--log",
                   w->log,
                   NULL};
  return spawn(argv);
}

/* The log's lines that are not empty. */
static GPtrArray *
log_lines(World *w)
{
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);

  if (!g_file_get_contents(w->log, &text, NULL, NULL))
    return out;
  lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (lines[i][0] != '\0')
      g_ptr_array_add(out, g_strdup(lines[i]));
  return out;
}

/* The callback's lines: "<id> <count> <pid> <json>" of task @callback. */
static GPtrArray *
callback_lines(World *w, const gchar *callback)
{
  g_autoptr(GPtrArray) lines = log_lines(w);
  g_autofree gchar *prefix = g_strconcat(callback, " ", NULL);
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);

  for (guint i = 0; i < lines->len; i++)
    if (g_str_has_prefix(g_ptr_array_index(lines, i), prefix))
      g_ptr_array_add(out, g_strdup(g_ptr_array_index(lines, i)));
  return out;
}

static guint
lines_of(World *w, const gchar *prefix)
{
  g_autoptr(GPtrArray) lines = log_lines(w);
  guint n = 0;

  for (guint i = 0; i < lines->len; i++)
    if (g_str_has_prefix(g_ptr_array_index(lines, i), prefix))
      n++;
  return n;
}

static SluiceBroker *
client_broker(World *w)
{
  g_autoptr(GError) error = NULL;
  SluiceBroker *b;

  if (sluice_url_is_sqlite(w->url))
    b = sluice_broker_new_for_url(w->url, NULL, NULL, &error);
  else
    b = sluice_test_redis_broker_new(g_strcmp0(w->mode, "fast") == 0
                                         ? SLUICE_REDIS_FAST
                                         : SLUICE_REDIS_RELIABLE,
                                     w->url, w->ns, 0, NULL, &error);
  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  return b;
}

/* Enqueues a chord of MEMBERS t.member tasks ([i, ms, fail%]) and a
 * t.collect callback; returns the workflow id. */
static gchar *
enqueue_chord(SluiceClient *client, gint64 ms, gint64 fail_percent)
{
  SluiceWorkflow *group = sluice_workflow_group();
  g_autoptr(SluiceWorkflow) chord = NULL;
  g_autoptr(GError) error = NULL;
  gchar *id;

  for (guint i = 0; i < MEMBERS; i++) {
    g_autofree gchar *json =
        g_strdup_printf("[%u, %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", i,
                        ms, fail_percent);
    g_autoptr(GBytes) args = sluice_args_from_json(json, -1, &error);
    ck_assert(args != NULL);
    sluice_workflow_add(group, sluice_workflow_task("t.member", args, NULL));
  }
  chord = sluice_workflow_chord(group,
                                sluice_workflow_task("t.collect", NULL, NULL),
                                SLUICE_CHORD_WAIT_ALL);
  id = sluice_client_enqueue_workflow(client, chord, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  return id;
}

/* Waits (bounded, real time) until the workflow's end join is complete. */
static void
wait_finished(SluiceClient *client, const gchar *id)
{
  gint64 deadline = g_get_monotonic_time() + 300 * G_USEC_PER_SEC;

  for (;;) {
    SluiceWorkflowStatus st;
    g_autoptr(GError) error = NULL;

    if (sluice_client_get_workflow(client, id, &st, &error) &&
        st.finished == st.total)
      return;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the workflow did not finish within 300 s");
    g_usleep(50000);
  }
}

static void
check_one_callback(World *w, const gchar *id)
{
  g_autofree gchar *callback = g_strdup_printf("%s.%u", id, MEMBERS);
  g_autoptr(GPtrArray) lines = callback_lines(w, callback);
  GString *want = g_string_new("{\"results\":[");
  const gchar *json;

  ck_assert_msg(lines->len == 1, "%s: the callback ran %u times", w->mode,
                lines->len);
  for (guint i = 0; i < MEMBERS; i++)
    g_string_append_printf(want, "%s%u", i > 0 ? "," : "", i);
  g_string_append(want, "],\"errors\":[],\"args\":null}");
  json = strchr(strchr(strchr(g_ptr_array_index(lines, 0), ' ') + 1, ' ') + 1,
                ' ') +
         1;
  ck_assert_str_eq(json, want->str);
  g_string_free(want, TRUE);
}

static void
world_init(World *w, const gchar *url, const gchar *mode)
{
  w->url = url;
  w->mode = mode;
  w->ns =
      g_strdup_printf("wfprocs-%s-%d-%u", mode, (int)getpid(), g_random_int());
  w->dir = g_dir_make_tmp("sluice-wfprocs-XXXXXX", NULL);
  w->log = g_build_filename(w->dir, "executions.log", NULL);
}

static void
world_clear(World *w)
{
  g_unlink(w->log);
  g_rmdir(w->dir);
  g_free(w->log);
  g_free(w->dir);
  g_free(w->ns);
}

/* Three workers; members fail their first attempt half the time. */
static void
chord_across_workers(const gchar *url, const gchar *mode)
{
  World w;
  GPid workers[WORKERS];
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree gchar *id = NULL;

  world_init(&w, url, mode);
  broker = client_broker(&w);
  client = sluice_client_new(broker, NULL, NULL);
  for (guint i = 0; i < WORKERS; i++)
    workers[i] = start_worker(&w, i);
  id = enqueue_chord(client, 5, 50);
  sluice_test_wait_alive(broker, workers, WORKERS);
  wait_finished(client, id);
  /* The callback is the workflow's last task: once its arrival is in,
   * its line is too (it is written before the task returns). */
  for (guint i = 0; i < WORKERS; i++) {
    kill(workers[i], SIGTERM);
    ck_assert_int_eq(wait_exit(workers[i]), 0);
  }
  check_one_callback(&w, id);
  world_clear(&w);
}

/* A worker killed while it holds members: they are taken over once its
 * leases lapse, and the callback still runs once with every result. */
static void
chord_survives_a_killed_worker(const gchar *url, const gchar *mode)
{
  World w;
  GPid workers[WORKERS + 1];
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree gchar *id = NULL;
  gint64 deadline;

  world_init(&w, url, mode);
  broker = client_broker(&w);
  client = sluice_client_new(broker, NULL, NULL);
  /* One worker alone first: it takes the first members, and dies with
   * some of them running (each takes 200 ms). */
  workers[0] = start_worker(&w, 0);
  id = enqueue_chord(client, 200, 20);
  deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
  while (lines_of(&w, id) < 4) {
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the first worker started no members within 60 s");
    g_usleep(10000);
  }
  kill(workers[0], SIGKILL);
  ck_assert_int_eq(wait_exit(workers[0]), 128 + SIGKILL);
  for (guint i = 1; i <= WORKERS; i++)
    workers[i] = start_worker(&w, i);
  sluice_test_wait_alive(broker, workers + 1, WORKERS);
  wait_finished(client, id);
  for (guint i = 1; i <= WORKERS; i++) {
    kill(workers[i], SIGTERM);
    ck_assert_int_eq(wait_exit(workers[i]), 0);
  }
  check_one_callback(&w, id);
  /* Some member really was run twice: the killed one's, taken over. */
  {
    g_autoptr(GPtrArray) lines = log_lines(&w);
    gboolean taken_over = FALSE;
    for (guint i = 0; i < lines->len; i++) {
      g_auto(GStrv) f = g_strsplit(g_ptr_array_index(lines, i), " ", 4);
      if (f[1] != NULL && g_strcmp0(f[1], "1") != 0)
        taken_over = TRUE;
    }
    ck_assert_msg(taken_over, "no delivery of the killed worker was taken "
                              "over");
  }
  world_clear(&w);
}

START_TEST(redis_fast_chord_across_workers)
{
  chord_across_workers(sluice_test_redis_url(sluice_test_redis_shared()),
                       "fast");
}
END_TEST

START_TEST(redis_reliable_chord_across_workers)
{
  chord_across_workers(sluice_test_redis_url(sluice_test_redis_shared()),
                       "reliable");
}
END_TEST

START_TEST(redis_reliable_chord_survives_a_killed_worker)
{
  chord_survives_a_killed_worker(
      sluice_test_redis_url(sluice_test_redis_shared()), "reliable");
}
END_TEST

static gchar *
sqlite_url(void)
{
  g_autofree gchar *path = sluice_test_sqlite_new_path();
  return g_strconcat("sqlite://", path, NULL);
}

START_TEST(sqlite_chord_across_workers)
{
  g_autofree gchar *url = sqlite_url();
  chord_across_workers(url, "reliable");
}
END_TEST

START_TEST(sqlite_chord_survives_a_killed_worker)
{
  g_autofree gchar *url = sqlite_url();
  chord_survives_a_killed_worker(url, "reliable");
}
END_TEST

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  Suite *suite = suite_create("workflow-processes");
  TCase *redis = tcase_create("redis");
  TCase *sqlite = tcase_create("sqlite");
  SRunner *runner;
  int failed;

  tcase_add_unchecked_fixture(redis, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(redis, 900);
  tcase_add_test(redis, redis_fast_chord_across_workers);
  tcase_add_test(redis, redis_reliable_chord_across_workers);
  tcase_add_test(redis, redis_reliable_chord_survives_a_killed_worker);
  suite_add_tcase(suite, redis);
  tcase_add_unchecked_fixture(sqlite, sluice_test_sqlite_setup,
                              sluice_test_sqlite_teardown);
  tcase_set_timeout(sqlite, 900);
  tcase_add_test(sqlite, sqlite_chord_across_workers);
  tcase_add_test(sqlite, sqlite_chord_survives_a_killed_worker);
  suite_add_tcase(suite, sqlite);
  runner = srunner_create(suite);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

/* test-redis-reliable-load.c - R25 of docs/redis.md: a run of 100,000
 * tasks (results off), then 40,000 (results on), through one in-process
 * worker on redis-reliable, must leave the streams, the PEL, the consumer
 * group and the dead letters empty. It prints what the run cost Redis (CPU
 * and commands per task) and how fast it went, for people to read: no
 * assertion depends on either. With SLUICE_TEST_COMMANDSTATS set it also
 * prints Redis's INFO commandstats and cpu of the consume phase.
 */
#include "config.h"

#include <check.h>
#include <string.h>

#include <sluice/sluice.h>

#include "tests/helpers/broker-calls.h"
#include "tests/helpers/redis-fixture.h"

static gboolean
task_noop(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return TRUE;
}

static gdouble
redis_cpu_s(SluiceTestRedis *server)
{
  redisReply *r = sluice_test_redis_command(server, "INFO cpu");
  gdouble total = 0;

  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    const gchar *u = strstr(r->str, "used_cpu_user:");
    const gchar *sy = strstr(r->str, "used_cpu_sys:");
    if (u != NULL)
      total += g_ascii_strtod(u + strlen("used_cpu_user:"), NULL);
    if (sy != NULL)
      total += g_ascii_strtod(sy + strlen("used_cpu_sys:"), NULL);
  }
  if (r != NULL)
    freeReplyObject(r);
  return total;
}

static gint64
commands_processed(SluiceTestRedis *server)
{
  return sluice_test_redis_info_int(server, "stats",
                                    "total_commands_processed");
}

typedef struct {
  SluiceTestRedis *server;
  const gchar *ns;
  guint64 want;
  SluiceWorker *worker;
} RunCheck;

static gboolean
run_done(gpointer data)
{
  RunCheck *c = data;
  SluiceWorkerStats st;

  sluice_worker_get_stats(c->worker, &st);
  return st.succeeded >= c->want;
}

/* Runs @n no-op tasks through one in-process worker and prints what they
 * cost Redis. */
static void
run_and_measure(SluiceTestRedis *server, const gchar *ns, guint n,
                gboolean results)
{
  g_autoptr(SluiceBroker) b = sluice_test_redis_broker(
      SLUICE_REDIS_RELIABLE, sluice_test_redis_url(server), ns, 0);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree SluiceEnqueueRequest *requests =
      g_new0(SluiceEnqueueRequest, 1000);
  SluiceTaskOptions topts;
  SluiceWorkerOptions wopts;
  gdouble cpu0, cpu1, cpu2;
  gint64 cmd0, cmd1, cmd2, t1, t2;
  RunCheck check;

  sluice_task_options_init(&topts);
  topts.store_result = results ? SLUICE_ON : SLUICE_OFF;
  ck_assert(sluice_registry_add(registry, "t.noop", task_noop, NULL, NULL,
                                &topts, &error));
  client = sluice_client_new(b, NULL, &error);
  for (guint i = 0; i < 1000; i++)
    requests[i].task = "t.noop";

  cpu0 = redis_cpu_s(server);
  cmd0 = commands_processed(server);
  for (guint done = 0; done < n; done += 1000) {
    g_autoptr(GPtrArray) batch = sluice_client_enqueue_batch(
        client, requests, MIN(1000, n - done), &error);
    ck_assert_msg(batch != NULL, "%s", error != NULL ? error->message : "");
  }
  if (g_getenv("SLUICE_TEST_COMMANDSTATS") != NULL)
    freeReplyObject(sluice_test_redis_command(server, "CONFIG RESETSTAT"));
  cpu1 = redis_cpu_s(server);
  cmd1 = commands_processed(server);

  sluice_worker_options_init(&wopts);
  wopts.concurrency = 4;
  wopts.prefetch = 252;
  wopts.settle_batch = 256;
  worker = sluice_worker_new(b, registry, &wopts, &error);
  ck_assert(worker != NULL);
  t1 = g_get_monotonic_time();
  ck_assert(sluice_worker_start(worker, &error));
  check = (RunCheck){server, ns, n, worker};
  ck_assert(sluice_test_wait_for(run_done, &check, 600000));
  t2 = g_get_monotonic_time();
  cpu2 = redis_cpu_s(server);
  cmd2 = commands_processed(server);
  sluice_worker_stop(worker);

  if (g_getenv("SLUICE_TEST_COMMANDSTATS") != NULL) {
    redisReply *r = sluice_test_redis_command(server, "INFO commandstats");
    g_print("%s\n", r->str);
    freeReplyObject(r);
    r = sluice_test_redis_command(server, "INFO cpu");
    g_print("%s\n", r->str);
    freeReplyObject(r);
  }
  /* R25: nothing left behind. */
  ck_assert_int_eq(sluice_test_redis_xlen(server, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_pending(server, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_integer(server, "XLEN {%s}:dlq", ns), 0);
  ck_assert_int_eq(sluice_test_redis_consumers(server, ns, "default"), 0);
  g_print("%u tasks, results %s: consumed at %.0f tasks/s (one worker, "
          "concurrency 4, prefetch 252); Redis CPU per task %.2f us "
          "enqueue + %.2f us consume; commands per task %.3f enqueue + "
          "%.3f consume\n",
          n, results ? "on" : "off", n / ((t2 - t1) / 1e6),
          (cpu1 - cpu0) * 1e6 / n, (cpu2 - cpu1) * 1e6 / n,
          (gdouble)(cmd1 - cmd0) / n, (gdouble)(cmd2 - cmd1) / n);
}

/* R25: after 100,000 tasks the stream, the PEL and the dead letters are
 * back to empty; prints the cost per task. */
START_TEST(test_run_of_100000_leaves_nothing_behind)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);

  run_and_measure(server, "load-off", 100000, FALSE);
  run_and_measure(server, "load-on", 40000, TRUE);
}
END_TEST

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  Suite *s = suite_create("redis-reliable-load");
  TCase *load = tcase_create("load");
  SRunner *runner;
  int failed;

  tcase_set_timeout(load, 900);
  tcase_add_test(load, test_run_of_100000_leaves_nothing_behind);
  suite_add_tcase(s, load);
  runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

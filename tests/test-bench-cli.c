/* test-bench-cli.c - the benchmark harness still measures what it claims.
 *
 * bench/bench-cli reads the end of a run from Redis with the key layout of
 * PROTOCOL.md and checks afterwards that every task really finished. These
 * tests run it on small workloads against the real `sluice worker`
 * command, so a change to the broker's keys or to the worker command that
 * would make bench/compare.sh or bench/run.sh hang or report nonsense
 * fails here first. Nothing here looks at a rate: only that the run ends,
 * prints its fields, and left Redis as a finished run does.
 */
#include "config.h"

#include <check.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/helpers/redis-fixture.h"

static gchar *
build_path(const gchar *first, ...)
{
  va_list ap;
  g_autoptr(GPtrArray) parts = g_ptr_array_new();
  const gchar *p;

  g_ptr_array_add(parts, (gpointer)TEST_BUILDDIR);
  va_start(ap, first);
  for (p = first; p != NULL; p = va_arg(ap, const gchar *))
    g_ptr_array_add(parts, (gpointer)p);
  va_end(ap);
  g_ptr_array_add(parts, NULL);
  return g_build_filenamev((gchar **)parts->pdata);
}

/* Runs bench-cli with @options, then "--", then @command (NULL: the
 * sluice worker command for @mode, with @worker_options); returns its exit
 * status and output. */
static gint
run_bench_cli_full(const gchar *mode, const gchar *const *options,
                   const gchar *const *command,
                   const gchar *const *worker_options, gchar **out, gchar **err)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  g_autofree gchar *bench_cli = build_path("bench", "bench-cli", NULL);
  g_autofree gchar *sluice = build_path("cli", "sluice", NULL);
  g_autofree gchar *module =
      build_path("examples", "demo-module", ".libs", "demo.so", NULL);
  const gchar *url = sluice_test_redis_url(server);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(GError) error = NULL;
  redisReply *reply;
  gint status = -1;

  g_ptr_array_add(argv, bench_cli);
  g_ptr_array_add(argv, (gpointer) "--url");
  g_ptr_array_add(argv, (gpointer)url);
  g_ptr_array_add(argv, (gpointer) "--mode");
  g_ptr_array_add(argv, (gpointer)mode);
  g_ptr_array_add(argv, (gpointer) "--namespace");
  g_ptr_array_add(argv, (gpointer) "t");
  g_ptr_array_add(argv, (gpointer) "--timeout");
  g_ptr_array_add(argv, (gpointer) "240");
  for (; options != NULL && *options != NULL; options++)
    g_ptr_array_add(argv, (gpointer)*options);
  g_ptr_array_add(argv, (gpointer) "--");
  if (command != NULL) {
    for (; *command != NULL; command++)
      g_ptr_array_add(argv, (gpointer)*command);
  } else {
    const gchar *worker[] = {sluice,        "worker", "--module", module,
                             "--url",       url,      "--mode",   mode,
                             "--namespace", "t"};
    for (gsize i = 0; i < G_N_ELEMENTS(worker); i++)
      g_ptr_array_add(argv, (gpointer)worker[i]);
    for (; worker_options != NULL && *worker_options != NULL; worker_options++)
      g_ptr_array_add(argv, (gpointer)*worker_options);
  }
  g_ptr_array_add(argv, NULL);

  reply = sluice_test_redis_command(server, "FLUSHALL");
  ck_assert_ptr_nonnull(reply);
  freeReplyObject(reply);
  ck_assert_msg(g_spawn_sync(NULL, (gchar **)argv->pdata, NULL, G_SPAWN_DEFAULT,
                             NULL, NULL, out, err, &status, &error),
                "cannot run bench-cli: %s",
                error != NULL ? error->message : "");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static gint
run_bench_cli(const gchar *mode, const gchar *const *options,
              const gchar *const *command, gchar **out, gchar **err)
{
  return run_bench_cli_full(mode, options, command, NULL, out, err);
}

/* The value of " key=" in @line, or NULL. */
static gchar *
field(const gchar *line, const gchar *key)
{
  g_autofree gchar *needle = g_strdup_printf(" %s=", key);
  const gchar *at = strstr(line, needle);
  gsize len;

  if (at == NULL)
    return NULL;
  at += strlen(needle);
  len = strcspn(at, " \n");
  return g_strndup(at, len);
}

static gdouble
number(const gchar *line, const gchar *key)
{
  g_autofree gchar *v = field(line, key);

  ck_assert_msg(v != NULL, "no %s= in: %s", key, line);
  return g_ascii_strtod(v, NULL);
}

static gint64
keys_matching(const gchar *pattern)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  return sluice_test_redis_integer(
      server, "EVAL %s 0 %s", "return #redis.call('KEYS', ARGV[1])", pattern);
}

static void
check_ran(const gchar *out, const gchar *err, gint status, gint tasks)
{
  ck_assert_msg(status == 0, "bench-cli failed (%d): %s", status, err);
  ck_assert_int_eq((gint)number(out, "tasks"), tasks);
  ck_assert_msg(number(out, "rate_per_s") > 0, "%s", out);
  ck_assert_msg(number(out, "worker_cpu_us_per_task") > 0, "%s", out);
  ck_assert_msg(number(out, "rss_mb") > 0, "%s", out);
  ck_assert_msg(number(out, "redis_cpu_us_per_task") > 0, "%s", out);
}

static void
process_with_results(const gchar *mode)
{
  const gchar *options[] = {"--tasks", "2000", NULL};
  /* A worker that fetches and settles in large batches sends little more
   * than the records, so a miscount shows. */
  const gchar *tuned[] = {"-c", "8", "--prefetch", "256", "--no-track-state",
                          NULL};
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = run_bench_cli_full(mode, options, NULL, tuned, &out, &err);

  check_ran(out, err, status, 2000);
  /* Each final record is at least one command naming its key (a SET, in a
   * script or not): fewer than one per task means the counting is wrong
   * (say, the harness's own end checks counted against Redis's total). */
  ck_assert_msg(number(out, "redis_cmds_per_task") >= 1.0, "%s", out);
  ck_assert_msg(number(out, "redis_bytes_per_queued_task") > 0, "%s", out);
  ck_assert_int_eq(keys_matching("{t}:r:*"), 2000);
}

START_TEST(reliable_process_ends_when_every_record_is_final)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  process_with_results("reliable");
  ck_assert_int_eq(sluice_test_redis_integer(server, "XLEN {t}:s:default"), 0);
}
END_TEST

START_TEST(fast_process_ends_when_every_record_is_final)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  process_with_results("fast");
  ck_assert_int_eq(sluice_test_redis_integer(server, "LLEN {t}:q:default"), 0);
}
END_TEST

START_TEST(fast_process_without_results_leaves_nothing)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  const gchar *options[] = {"--tasks", "2000", "--results", "off", NULL};
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = run_bench_cli("fast", options, NULL, &out, &err);

  check_ran(out, err, status, 2000);
  ck_assert_ptr_nonnull(strstr(out, " results=off "));
  ck_assert_int_eq(keys_matching("{t}:r:*"), 0);
  ck_assert_int_eq(sluice_test_redis_integer(server, "LLEN {t}:q:default"), 0);
}
END_TEST

START_TEST(several_queues_and_workers_drain_them_all)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  const gchar *options[] = {"--tasks",     "3000", "--queues",        "3",
                            "--workers",   "2",    "--payload-bytes", "100",
                            "--breakdown", NULL};
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = run_bench_cli("reliable", options, NULL, &out, &err);
  g_autofree gchar *cmds = NULL;

  check_ran(out, err, status, 3000);
  ck_assert_ptr_nonnull(strstr(out, " queues=3 workers=2 payload_bytes=100 "));
  /* Arguments of 100 bytes are in Redis: more than 100 bytes a task. */
  ck_assert_msg(number(out, "redis_bytes_per_queued_task") > 100, "%s", out);
  for (gint q = 0; q < 3; q++)
    ck_assert_int_eq(sluice_test_redis_integer(server, "XLEN {t}:s:q%d", q), 0);
  ck_assert_int_eq(keys_matching("{t}:r:*"), 3000);
  cmds = field(out, "cmds");
  ck_assert_msg(cmds != NULL && strstr(cmds, "set:") != NULL, "%s", out);
}
END_TEST

START_TEST(delayed_tasks_are_promoted_and_run)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  const gchar *options[] = {"--op",     "delayed", "--tasks", "1000",
                            "--due-ms", "3000",    NULL};
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = run_bench_cli("fast", options, NULL, &out, &err);

  check_ran(out, err, status, 1000);
  ck_assert_msg(number(out, "promote_rate_per_s") > 0, "%s", out);
  ck_assert_msg(number(out, "redis_bytes_per_scheduled_task") > 0, "%s", out);
  ck_assert_int_eq(sluice_test_redis_integer(server, "ZCARD {t}:schedule"), 0);
  ck_assert_int_eq(keys_matching("{t}:r:*"), 1000);
}
END_TEST

START_TEST(command_line_gets_redis_costs_added)
{
  const gchar *options[] = {"--op",    "command",          "--tasks", "10",
                            "--label", "compare system=x", NULL};
  const gchar *command[] = {"sh", "-c", "echo rate_per_s=5 rss_mb=1", NULL};
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = run_bench_cli("fast", options, command, &out, &err);

  ck_assert_msg(status == 0, "bench-cli failed (%d): %s", status, err);
  ck_assert_msg(g_str_has_prefix(out, "compare system=x tasks=10 rate_per_s=5 "
                                      "rss_mb=1 redis_cmds_per_task="),
                "%s", out);
}
END_TEST

START_TEST(a_worker_that_dies_fails_the_run)
{
  const gchar *options[] = {"--tasks", "100", NULL};
  const gchar *command[] = {"false", NULL};
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = run_bench_cli("reliable", options, command, &out, &err);

  ck_assert_int_ne(status, 0);
  ck_assert_msg(strstr(err, "exited before the run ended") != NULL, "%s", err);
  ck_assert_ptr_null(strstr(out, "rate_per_s="));
}
END_TEST

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  Suite *suite = suite_create("bench-cli");
  TCase *tc = tcase_create("bench-cli");
  SRunner *runner;
  int failed;

  tcase_add_unchecked_fixture(tc, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, reliable_process_ends_when_every_record_is_final);
  tcase_add_test(tc, fast_process_ends_when_every_record_is_final);
  tcase_add_test(tc, fast_process_without_results_leaves_nothing);
  tcase_add_test(tc, several_queues_and_workers_drain_them_all);
  tcase_add_test(tc, delayed_tasks_are_promoted_and_run);
  tcase_add_test(tc, command_line_gets_redis_costs_added);
  tcase_add_test(tc, a_worker_that_dies_fails_the_run);
  suite_add_tcase(suite, tc);
  runner = srunner_create(suite);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

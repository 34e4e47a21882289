/* test-cli.c - the `sluice` command, end to end.
 *
 * Every test drives the built binary (cli/sluice) as a user would: it runs
 * commands with GSubprocess, reads their stdout, stderr and exit status,
 * and parses --json output with json-glib. Workers are `sluice worker`
 * processes loading the demo module (examples/demo-module/.libs/demo.so),
 * started in the background, stopped with SIGTERM and waited for.
 *
 * One redis-server is shared by the suite (started once, before Check
 * forks a process per test); each test works in its own namespace
 * ("t<pid>"), so tests cannot see each other's queues. Tests that need a
 * server of their own (a password) start one.
 *
 * The end-to-end tests are loop tests over the Redis modes: fast always,
 * and reliable when this build supports it (sluice_redis_broker_new with
 * SLUICE_REDIS_RELIABLE does not fail with UNSUPPORTED). Until then the
 * reliable iterations, and the reliable-only poison-message test, are not
 * registered, and main() says so on stderr.
 *
 * No assertion depends on timing: a test waits for a state (polling the
 * CLI, or blocking in `sluice result --wait`) with a generous bound, and
 * Check's timeout is the backstop.
 */
/* posix_openpt() and friends, for the terminal a test gives a command. */
#define _GNU_SOURCE 1

#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sqlite3.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <sluice/sluice.h>

#include "tests/helpers/redis-fixture.h"

#define SLUICE_BIN TEST_BUILDDIR "/cli/sluice"
#define DEMO_MODULE TEST_BUILDDIR "/examples/demo-module/.libs/demo.so"
#define NO_INIT_MODULE TEST_BUILDDIR "/tests/cli/.libs/no-init.so"

/* How long a test waits for something that should happen in well under a
 * second: a bound for broken code, not a timing assertion. */
#define PATIENCE_US (60 * G_USEC_PER_SEC)

/* The modes the end-to-end tests loop over (_i indexes it); the reliable
 * iteration is registered only if the build supports it. */
static const gchar *const modes[] = {"fast", "reliable"};

/* ---- Fixtures and helpers ------------------------------------------------ */

/* One test's world: its mode, namespace, environment and scratch dir. */
typedef struct {
  const gchar *mode;
  gchar *ns;
  gchar **env;
  gchar *dir;
  guint n_workers; /* to name their log files */
} Ctx;

static void
ctx_free(Ctx *ctx)
{
  g_free(ctx->ns);
  g_strfreev(ctx->env);
  if (ctx->dir != NULL) {
    g_autoptr(GDir) d = g_dir_open(ctx->dir, 0, NULL);
    const gchar *name;
    while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
      g_autofree gchar *path = g_build_filename(ctx->dir, name, NULL);
      g_unlink(path);
    }
    g_rmdir(ctx->dir);
  }
  g_free(ctx->dir);
  g_free(ctx);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Ctx, ctx_free)

/* An environment for the CLI: the caller's, without any SLUICE_* setting
 * or debug switch, in a fixed locale, plus @url, @mode and @ns (each
 * nullable). */
static gchar **
cli_environ(const gchar *url, const gchar *mode, const gchar *ns)
{
  gchar **env = g_get_environ();

  env = g_environ_unsetenv(env, "SLUICE_URL");
  env = g_environ_unsetenv(env, "SLUICE_MODE");
  env = g_environ_unsetenv(env, "SLUICE_NAMESPACE");
  env = g_environ_unsetenv(env, "SLUICE_CONFIG");
  for (const gchar *const *tls =
           (const gchar *const[]){
               "SLUICE_REDIS_TLS_CA", "SLUICE_REDIS_TLS_CA_DIR",
               "SLUICE_REDIS_TLS_CERT", "SLUICE_REDIS_TLS_KEY",
               "SLUICE_REDIS_TLS_SERVER_NAME", "SLUICE_REDIS_TLS_MIN_VERSION",
               "SLUICE_REDIS_TLS_INSECURE", NULL};
       *tls != NULL; tls++)
    env = g_environ_unsetenv(env, *tls);
  env = g_environ_unsetenv(env, "STATE_DIRECTORY");
  env = g_environ_unsetenv(env, "G_MESSAGES_DEBUG");
  env = g_environ_setenv(env, "LC_ALL", "C.UTF-8", TRUE);
  if (url != NULL)
    env = g_environ_setenv(env, "SLUICE_URL", url, TRUE);
  if (mode != NULL)
    env = g_environ_setenv(env, "SLUICE_MODE", mode, TRUE);
  if (ns != NULL)
    env = g_environ_setenv(env, "SLUICE_NAMESPACE", ns, TRUE);
  return env;
}

static Ctx *
ctx_new(int mode_index)
{
  Ctx *ctx = g_new0(Ctx, 1);
  g_autoptr(GError) error = NULL;

  ctx->mode = modes[mode_index];
  ctx->ns = sluice_test_namespace();
  ctx->env = cli_environ(sluice_test_redis_url(sluice_test_redis_shared()),
                         ctx->mode, ctx->ns);
  ctx->dir = g_dir_make_tmp("sluice-cli-XXXXXX", &error);
  ck_assert_msg(ctx->dir != NULL, "%s", error != NULL ? error->message : "");
  return ctx;
}

/* What a command did. */
typedef struct {
  int status; /* exit status, or -signal */
  gchar *out;
  gchar *err;
} Run;

static void
run_free(Run *run)
{
  g_free(run->out);
  g_free(run->err);
  g_free(run);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Run, run_free)

/* Child setup: no core files from demo.crash, and no worker outliving a
 * test process that failed half-way. */
static void
child_setup(gpointer data)
{
  struct rlimit none = {0, 0};

  setrlimit(RLIMIT_CORE, &none);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

static int
exit_status_of(GSubprocess *proc)
{
  if (g_subprocess_get_if_exited(proc))
    return g_subprocess_get_exit_status(proc);
  if (g_subprocess_get_if_signaled(proc))
    return -g_subprocess_get_term_sig(proc);
  return -1000;
}

/* Runs `sluice ARGV...` with @env in @cwd (nullable: the test's own),
 * feeding @input (nullable) on stdin. */
static Run *
run_argv_in(gchar **env, const gchar *cwd, const gchar *input,
            const gchar *const *argv)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(
      G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
      G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GPtrArray) args = g_ptr_array_new();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  Run *run = g_new0(Run, 1);

  g_ptr_array_add(args, (gpointer)SLUICE_BIN);
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add(args, (gpointer)argv[i]);
  g_ptr_array_add(args, NULL);
  g_subprocess_launcher_set_environ(launcher, env);
  if (cwd != NULL)
    g_subprocess_launcher_set_cwd(launcher, cwd);
  g_subprocess_launcher_set_child_setup(launcher, child_setup, NULL, NULL);
  proc = g_subprocess_launcher_spawnv(
      launcher, (const gchar *const *)args->pdata, &error);
  ck_assert_msg(proc != NULL, "spawn: %s", error->message);
  ck_assert_msg(g_subprocess_communicate_utf8(proc, input, NULL, &run->out,
                                              &run->err, &error),
                "communicate: %s", error != NULL ? error->message : "");
  run->status = exit_status_of(proc);
  return run;
}

static Run *
run_argv(gchar **env, const gchar *input, const gchar *const *argv)
{
  return run_argv_in(env, NULL, input, argv);
}

static Run *
run_v(gchar **env, const gchar *input, const gchar *first, va_list ap)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();

  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  g_ptr_array_add(argv, NULL);
  return run_argv(env, input, (const gchar *const *)argv->pdata);
}

/* `sluice ARGS... NULL` in the test's namespace and mode. */
static Run *cli(Ctx *ctx, const gchar *first, ...) G_GNUC_NULL_TERMINATED;
static Run *
cli(Ctx *ctx, const gchar *first, ...)
{
  va_list ap;
  Run *run;

  va_start(ap, first);
  run = run_v(ctx->env, NULL, first, ap);
  va_end(ap);
  return run;
}

/* As cli(), with an explicit environment and standard input. */
static Run *cli_env(gchar **env, const gchar *input, const gchar *first,
                    ...) G_GNUC_NULL_TERMINATED;
static Run *
cli_env(gchar **env, const gchar *input, const gchar *first, ...)
{
  va_list ap;
  Run *run;

  va_start(ap, first);
  run = run_v(env, input, first, ap);
  va_end(ap);
  return run;
}

#define assert_status(run, expected)                                           \
  ck_assert_msg((run)->status == (expected),                                   \
                "exit status %d, expected %d\nstdout: %s\nstderr: %s",         \
                (run)->status, (expected), (run)->out, (run)->err)

/* A failing command says what went wrong on exactly one line. */
static void
assert_one_line_error(const Run *run, const gchar *needle)
{
  const gchar *newline = strchr(run->err, '\n');

  ck_assert_msg(run->status != 0, "succeeded: %s", run->out);
  ck_assert_msg(newline != NULL && newline[1] == '\0',
                "not one line on stderr: [%s]", run->err);
  ck_assert_msg(g_str_has_prefix(run->err, "sluice"), "no program name: %s",
                run->err);
  if (needle != NULL)
    ck_assert_msg(strstr(run->err, needle) != NULL, "“%s” not in: %s", needle,
                  run->err);
}

/* The task id `sluice enqueue` printed. */
static gchar *enqueue(Ctx *ctx, const gchar *first, ...) G_GNUC_NULL_TERMINATED;
static gchar *
enqueue(Ctx *ctx, const gchar *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(Run) run = NULL;
  va_list ap;

  g_ptr_array_add(argv, (gpointer) "enqueue");
  va_start(ap, first);
  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  va_end(ap);
  g_ptr_array_add(argv, NULL);
  run = run_argv(ctx->env, NULL, (const gchar *const *)argv->pdata);
  assert_status(run, 0);
  ck_assert_msg(g_str_has_suffix(run->out, "\n") && strlen(run->out) > 1,
                "enqueue printed: [%s]", run->out);
  return g_strndup(run->out, strlen(run->out) - 1);
}

/* ---- JSON ---------------------------------------------------------------- */

static JsonNode *
parse_json(const gchar *text)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) error = NULL;

  ck_assert_msg(json_parser_load_from_data(parser, text, -1, &error),
                "not JSON (%s): %s", error != NULL ? error->message : "", text);
  return json_node_copy(json_parser_get_root(parser));
}

static JsonObject *
object_of(JsonNode *node)
{
  ck_assert_msg(JSON_NODE_HOLDS_OBJECT(node), "not an object");
  return json_node_get_object(node);
}

static const gchar *
member_string(JsonObject *o, const gchar *name)
{
  JsonNode *n = json_object_get_member(o, name);

  ck_assert_msg(n != NULL, "no member %s", name);
  if (JSON_NODE_HOLDS_NULL(n))
    return NULL;
  ck_assert_msg(json_node_get_value_type(n) == G_TYPE_STRING,
                "%s is not a string", name);
  return json_node_get_string(n);
}

static gint64
member_int(JsonObject *o, const gchar *name)
{
  JsonNode *n = json_object_get_member(o, name);

  ck_assert_msg(n != NULL, "no member %s", name);
  ck_assert_msg(JSON_NODE_HOLDS_VALUE(n) &&
                    json_node_get_value_type(n) == G_TYPE_INT64,
                "%s is not an integer", name);
  return json_node_get_int(n);
}

static gboolean
member_is_null(JsonObject *o, const gchar *name)
{
  JsonNode *n = json_object_get_member(o, name);

  ck_assert_msg(n != NULL, "no member %s", name);
  return JSON_NODE_HOLDS_NULL(n);
}

/* The record of @id, as `sluice inspect --json` prints it. */
static JsonNode *
inspect(Ctx *ctx, const gchar *id)
{
  g_autoptr(Run) run = cli(ctx, "inspect", id, "--json", NULL);

  assert_status(run, 0);
  return parse_json(run->out);
}

static gchar *
state_of(Ctx *ctx, const gchar *id)
{
  g_autoptr(JsonNode) record = inspect(ctx, id);

  return g_strdup(member_string(object_of(record), "state"));
}

/* Polls `sluice inspect` until @id is in @state or @or_state (nullable);
 * returns the state it found. */
static gchar *
wait_for_state(Ctx *ctx, const gchar *id, const gchar *state,
               const gchar *or_state)
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  for (;;) {
    gchar *now = state_of(ctx, id);
    if (g_strcmp0(now, state) == 0 || g_strcmp0(now, or_state) == 0)
      return now;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "task %s stayed %s, never %s", id, now, state);
    g_free(now);
    g_usleep(20 * 1000);
  }
}

/* ---- Workers ------------------------------------------------------------- */

typedef struct {
  GSubprocess *proc;
  gchar *log;
} Worker;

static gchar *
worker_log(const Worker *w)
{
  gchar *text = NULL;

  if (!g_file_get_contents(w->log, &text, NULL, NULL))
    return g_strdup("");
  return text;
}

/* Starts `sluice worker` with the demo module, JSON logs to a file, and
 * the extra arguments; returns at once. */
static Worker *
worker_spawn_va(Ctx *ctx, const gchar *first, va_list ap)
{
  g_autoptr(GSubprocessLauncher) launcher =
      g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(GError) error = NULL;
  Worker *w = g_new0(Worker, 1);

  w->log = g_strdup_printf("%s/worker-%u.log", ctx->dir, ctx->n_workers++);
  g_ptr_array_add(argv, (gpointer)SLUICE_BIN);
  g_ptr_array_add(argv, (gpointer) "worker");
  g_ptr_array_add(argv, (gpointer) "--module");
  g_ptr_array_add(argv, (gpointer)DEMO_MODULE);
  g_ptr_array_add(argv, (gpointer) "--log-format=json");
  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  g_ptr_array_add(argv, NULL);
  g_subprocess_launcher_set_environ(launcher, ctx->env);
  g_subprocess_launcher_set_stderr_file_path(launcher, w->log);
  g_subprocess_launcher_set_child_setup(launcher, child_setup, NULL, NULL);
  w->proc = g_subprocess_launcher_spawnv(
      launcher, (const gchar *const *)argv->pdata, &error);
  ck_assert_msg(w->proc != NULL, "spawn: %s", error->message);
  return w;
}

/* As worker_spawn_va(); the arguments NULL-terminated (@first may be the
 * NULL). */
static Worker *
worker_spawn(Ctx *ctx, const gchar *first, ...)
{
  Worker *w;
  va_list ap;

  va_start(ap, first);
  w = worker_spawn_va(ctx, first, ap);
  va_end(ap);
  return w;
}

/* As worker_spawn(), and returns once the worker logged that it is
 * ready. */
static Worker *
worker_start(Ctx *ctx, const gchar *first, ...)
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;
  Worker *w;
  va_list ap;

  va_start(ap, first);
  w = worker_spawn_va(ctx, first, ap);
  va_end(ap);
  for (;;) {
    g_autofree gchar *log = worker_log(w);
    if (strstr(log, " ready: ") != NULL)
      return w;
    ck_assert_msg(g_subprocess_get_identifier(w->proc) != NULL,
                  "the worker exited before it was ready:\n%s", log);
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the worker never got ready:\n%s", log);
    g_usleep(20 * 1000);
  }
}

static void
worker_free(Worker *w)
{
  if (w->proc != NULL && g_subprocess_get_identifier(w->proc) != NULL)
    g_subprocess_force_exit(w->proc);
  g_clear_object(&w->proc);
  g_free(w->log);
  g_free(w);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Worker, worker_free)

/* SIGTERM, then waits: a graceful stop exits 0. Returns the log. */
static gchar *
worker_stop(Worker *w)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *log = NULL;

  g_subprocess_send_signal(w->proc, SIGTERM);
  ck_assert_msg(g_subprocess_wait(w->proc, NULL, &error), "wait: %s",
                error != NULL ? error->message : "");
  log = worker_log(w);
  ck_assert_msg(g_subprocess_get_if_exited(w->proc) &&
                    g_subprocess_get_exit_status(w->proc) == 0,
                "the worker did not exit 0 after SIGTERM (status %d):\n%s",
                exit_status_of(w->proc), log);
  return g_steal_pointer(&log);
}

/* Every line of a --log-format=json log is one JSON object with the
 * documented fields; returns those that mention @task_id. */
static guint
check_json_log(const gchar *log, const gchar *task_id, guint *out_attempts)
{
  g_auto(GStrv) lines = g_strsplit(log, "\n", -1);
  guint mentions = 0;

  *out_attempts = 0;
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autoptr(JsonNode) node = NULL;
    JsonObject *o;

    if (lines[i][0] == '\0')
      continue;
    node = parse_json(lines[i]);
    o = object_of(node);
    ck_assert(member_string(o, "time") != NULL);
    ck_assert(member_string(o, "level") != NULL);
    ck_assert(member_string(o, "message") != NULL);
    if (json_object_has_member(o, "task_id") &&
        g_strcmp0(member_string(o, "task_id"), task_id) == 0) {
      mentions++;
      ck_assert(member_string(o, "task") != NULL);
      ck_assert(member_string(o, "queue") != NULL);
      *out_attempts = MAX(*out_attempts, (guint)member_int(o, "attempt"));
    }
  }
  return mentions;
}

/* The outcomes the worker logged for @task_id, in order, joined by "|";
 * each such line also carries its duration. */
static gchar *
logged_outcomes(const gchar *log, const gchar *task_id)
{
  g_auto(GStrv) lines = g_strsplit(log, "\n", -1);
  g_autoptr(GString) out = g_string_new(NULL);

  for (guint i = 0; lines[i] != NULL; i++) {
    g_autoptr(JsonNode) node = NULL;
    JsonObject *o;

    if (lines[i][0] == '\0')
      continue;
    node = parse_json(lines[i]);
    o = object_of(node);
    if (!json_object_has_member(o, "outcome") ||
        g_strcmp0(member_string(o, "task_id"), task_id) != 0)
      continue;
    ck_assert_msg(json_object_has_member(o, "duration_us"), "%s", lines[i]);
    ck_assert_str_eq(member_string(o, "level"), "info");
    /* One word: text lines split fields on spaces, readers on commas. */
    ck_assert_msg(strpbrk(member_string(o, "outcome"), " ,") == NULL, "%s",
                  lines[i]);
    if (out->len > 0)
      g_string_append_c(out, '|');
    g_string_append(out, member_string(o, "outcome"));
  }
  return g_strdup(out->str);
}

/* ---- End to end, per mode ------------------------------------------------ */

/* A worker given a queue's rate and concurrency limits, and queue
 * weights, runs its tasks under them: each on its first attempt. The rate
 * is written as Celery writes one (1000/s: a bare unit is one of it). */
START_TEST(test_worker_runs_under_queue_limits)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w =
      worker_start(ctx, "--rate-limit", "default=1000/s:50",
                   "--concurrency-limit", "default=2", "--queue", "default",
                   "--queue", "other", "--weight", "default=3", NULL);
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);

  for (guint i = 0; i < 10; i++)
    g_ptr_array_add(ids, enqueue(ctx, "demo.noop", NULL, NULL));
  for (guint i = 0; i < ids->len; i++) {
    g_autoptr(Run) result =
        cli(ctx, "result", ids->pdata[i], "--wait", "60s", "--json", NULL);
    g_autoptr(JsonNode) record = NULL;

    assert_status(result, 0);
    record = parse_json(result->out);
    ck_assert_str_eq(member_string(object_of(record), "state"), "succeeded");
    ck_assert_int_eq(member_int(object_of(record), "attempt"), 1);
  }

  /* `sluice stats` shows the limits the worker announced, in JSON and in
   * text (announcements are rewritten every 2 s: wait for one). */
  for (gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;;) {
    g_autoptr(Run) stats = cli(ctx, "stats", "--json", NULL);
    g_autoptr(Run) text = NULL;
    g_autoptr(JsonNode) node = NULL;
    JsonArray *workers;
    JsonArray *limits = NULL;

    assert_status(stats, 0);
    node = parse_json(stats->out);
    workers = json_object_get_array_member(object_of(node), "workers");
    if (workers != NULL && json_array_get_length(workers) > 0)
      limits = json_object_get_array_member(
          json_array_get_object_element(workers, 0), "limits");
    if (limits == NULL || json_array_get_length(limits) == 0) {
      ck_assert_msg(g_get_monotonic_time() < deadline,
                    "no limits announced: %s", stats->out);
      g_usleep(200 * 1000);
      continue;
    }
    ck_assert_uint_eq(json_array_get_length(limits), 4);
    ck_assert_str_eq(json_array_get_string_element(limits, 0),
                     "rate queue default: 1000 per 1000 ms, burst 50");
    ck_assert_str_eq(json_array_get_string_element(limits, 1),
                     "concurrency queue default: 2 at once");
    ck_assert_str_eq(json_array_get_string_element(limits, 2),
                     "weight queue default: 3");
    ck_assert_str_eq(json_array_get_string_element(limits, 3),
                     "weight queue other: 1");
    text = cli(ctx, "stats", NULL);
    assert_status(text, 0);
    ck_assert_msg(strstr(text->out, "Limits of ") != NULL &&
                      strstr(text->out, "  concurrency queue default: 2 at "
                                        "once\n") != NULL,
                  "%s", text->out);
    break;
  }

  /* Three long tasks under the limit of 2: stats show the key's two
   * holders and one message waiting. */
  for (guint i = 0; i < 3; i++)
    g_ptr_array_add(ids, enqueue(ctx, "demo.sleep", "{\"ms\": 4000}", NULL));
  for (gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;;) {
    g_autoptr(Run) stats = cli(ctx, "stats", "--json", NULL);
    g_autoptr(JsonNode) node = NULL;
    JsonArray *slots;
    JsonObject *slot = NULL;

    assert_status(stats, 0);
    node = parse_json(stats->out);
    slots = json_object_get_array_member(object_of(node), "slots");
    ck_assert_msg(slots != NULL, "%s", stats->out);
    if (json_array_get_length(slots) == 1)
      slot = json_array_get_object_element(slots, 0);
    if (slot == NULL ||
        json_array_get_length(json_object_get_array_member(slot, "holders")) !=
            2 ||
        json_object_get_int_member(slot, "waiting") != 1) {
      ck_assert_msg(g_get_monotonic_time() < deadline,
                    "never 2 holders and 1 waiting: %s", stats->out);
      g_usleep(100 * 1000);
      continue;
    }
    break;
  }
  {
    g_autoptr(Run) text = cli(ctx, "stats", NULL);
    assert_status(text, 0);
    ck_assert_msg(strstr(text->out, "CONCURRENCY KEY") != NULL, "%s",
                  text->out);
  }
  for (guint i = 10; i < ids->len; i++) {
    g_autoptr(Run) result =
        cli(ctx, "result", ids->pdata[i], "--wait", "60s", NULL);
    assert_status(result, 0);
  }
}
END_TEST

START_TEST(test_enqueue_worker_result)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, "--concurrency", "2", NULL);
  g_autofree gchar *id = enqueue(ctx, "demo.echo",
                                 "{\"greeting\": \"héllo\", \"n\": [1, -2, 3], "
                                 "\"nested\": {\"ok\": true}}",
                                 NULL);
  g_autoptr(Run) result =
      cli(ctx, "result", id, "--wait", "60s", "--json", NULL);
  g_autoptr(Run) table = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *log = NULL;
  g_autofree gchar *outcomes = NULL;
  JsonObject *o, *value;
  guint attempts;

  assert_status(result, 0);
  record = parse_json(result->out);
  o = object_of(record);
  ck_assert_str_eq(member_string(o, "id"), id);
  ck_assert_str_eq(member_string(o, "state"), "succeeded");
  ck_assert_str_eq(member_string(o, "task"), "demo.echo");
  ck_assert_str_eq(member_string(o, "queue"), "default");
  ck_assert_int_eq(member_int(o, "attempt"), 1);
  ck_assert(member_string(o, "worker") != NULL);
  ck_assert(member_int(o, "enqueued_at") > 0);
  ck_assert(member_int(o, "finished_at") >= member_int(o, "started_at"));
  ck_assert(member_is_null(o, "error"));
  /* demo.echo's result is its arguments, back through msgpack. */
  value = json_object_get_object_member(o, "result");
  ck_assert_str_eq(json_object_get_string_member(value, "greeting"), "héllo");
  ck_assert_int_eq(
      json_array_get_int_element(json_object_get_array_member(value, "n"), 1),
      -2);
  ck_assert(json_object_get_boolean_member(
      json_object_get_object_member(value, "nested"), "ok"));

  table = cli(ctx, "result", id, NULL);
  assert_status(table, 0);
  ck_assert_msg(strstr(table->out, "succeeded") != NULL &&
                    strstr(table->out, "\"greeting\":\"héllo\"") != NULL,
                "%s", table->out);

  log = worker_stop(w);
  ck_assert_msg(check_json_log(log, id, &attempts) == 0 || attempts == 1, "%s",
                log);
  outcomes = logged_outcomes(log, id);
  ck_assert_str_eq(outcomes, "succeeded");
}
END_TEST

/* A keyring made by `sluice keys new`, rotated, given to the producer and
 * the worker: the task runs, its record holds no byte of the args, the
 * result reads with the keyring and says which key without it. */
START_TEST(test_keyring_seals_from_enqueue_to_result)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *ring = g_build_filename(ctx->dir, "ring", NULL);
  g_autoptr(Run) made =
      cli(ctx, "keys", "new", "--keyring", ring, "--id", "first", NULL);
  g_autoptr(Run) again = cli(ctx, "keys", "new", "--keyring", ring, NULL);
  g_autoptr(Run) rotated =
      cli(ctx, "keys", "rotate", "--keyring", ring, "--id", "second", NULL);
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *id = NULL;
  g_autoptr(Run) opened = NULL;
  g_autoptr(Run) sealed = NULL;
  g_autoptr(Run) open_table = NULL;
  g_autoptr(Run) loose = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *text = NULL;
  JsonObject *o;

  assert_status(made, 0);
  ck_assert_msg(strstr(made->out, "key first added") != NULL, "%s", made->out);
  assert_status(again, 2);
  ck_assert_msg(strstr(again->err, "sluice keys rotate") != NULL, "%s",
                again->err);
  assert_status(rotated, 0);
  ck_assert(g_file_get_contents(ring, &text, NULL, NULL));
  ck_assert_msg(strstr(made->out, "=") == NULL &&
                    strstr(rotated->out, "=") == NULL,
                "a key was printed");

  w = worker_start(ctx, "--keyring", ring, NULL);
  id = enqueue(ctx, "--keyring", ring, "demo.echo",
               "{\"card\": \"4111-seal-me\"}", NULL);
  opened = cli(ctx, "result", id, "--wait", "60s", "--json", "--keyring", ring,
               NULL);
  assert_status(opened, 0);
  record = parse_json(opened->out);
  o = object_of(record);
  ck_assert_str_eq(member_string(o, "state"), "succeeded");
  ck_assert_str_eq(json_object_get_string_member(
                       json_object_get_object_member(o, "result"), "card"),
                   "4111-seal-me");
  ck_assert(member_is_null(o, "sealed_with"));

  /* Without the keyring the record shows, its result does not. */
  sealed = cli(ctx, "result", id, NULL);
  assert_status(sealed, 0);
  ck_assert_msg(strstr(sealed->out, "encrypted with key second") != NULL &&
                    strstr(sealed->out, "4111-seal-me") == NULL,
                "%s", sealed->out);
  open_table = cli(ctx, "inspect", id, NULL);
  assert_status(open_table, 0);
  ck_assert_msg(strstr(open_table->out, "encrypted with key second") != NULL &&
                    strstr(open_table->out, "4111-seal-me") == NULL,
                "%s", open_table->out);

  /* A dead letter's args: opened by `dlq show` given the keyring. */
  {
    g_autofree gchar *dead = enqueue(ctx, "--keyring", ring, "demo.fatal",
                                     "{\"card\": \"4111-buried\"}", NULL);
    g_autoptr(Run) waited = cli(ctx, "result", dead, "--wait", "60s", NULL);
    g_autoptr(Run) list = cli(ctx, "dlq", "list", "--json", NULL);
    g_autoptr(JsonNode) entries = NULL;
    g_autoptr(Run) shown = NULL;
    g_autoptr(Run) hidden = NULL;
    JsonArray *a;
    const gchar *entry_id = NULL;

    ck_assert_msg(strstr(waited->out, "dead") != NULL, "%s", waited->out);
    assert_status(list, 0);
    entries = parse_json(list->out);
    a = json_object_get_array_member(object_of(entries), "entries");
    for (guint i = 0; i < json_array_get_length(a); i++)
      if (g_strcmp0(
              member_string(json_array_get_object_element(a, i), "task_id"),
              dead) == 0)
        entry_id =
            member_string(json_array_get_object_element(a, i), "entry_id");
    ck_assert_ptr_nonnull(entry_id);
    shown = cli(ctx, "dlq", "show", entry_id, "--keyring", ring, NULL);
    assert_status(shown, 0);
    ck_assert_msg(strstr(shown->out, "4111-buried") != NULL, "%s", shown->out);
    hidden = cli(ctx, "dlq", "show", entry_id, NULL);
    assert_status(hidden, 0);
    ck_assert_msg(strstr(hidden->out, "4111-buried") == NULL &&
                      strstr(hidden->out, "encrypted") != NULL,
                  "%s", hidden->out);
  }

  /* A keyring others can read is refused, naming the fix. */
  ck_assert_int_eq(g_chmod(ring, 0644), 0);
  loose = cli(ctx, "result", id, "--keyring", ring, NULL);
  assert_status(loose, 2);
  ck_assert_msg(strstr(loose->err, "chmod 600") != NULL, "%s", loose->err);
  g_free(worker_stop(w));
}
END_TEST

/* After a rotation, `sluice keys reseal` seals what waits with the new
 * key: a keyring without the old key then reads every waiting task, and a
 * second run finds nothing left to do. No worker runs meanwhile. */
START_TEST(test_keys_reseal_lets_the_old_key_go)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *ring = g_build_filename(ctx->dir, "ring", NULL);
  g_autofree gchar *newer = g_build_filename(ctx->dir, "ring-new", NULL);
  g_autoptr(Run) made =
      cli(ctx, "keys", "new", "--keyring", ring, "--id", "old", NULL);
  g_autofree gchar *queued = enqueue(ctx, "--keyring", ring, "demo.echo",
                                     "{\"card\": \"4111-reseal\"}", NULL);
  g_autofree gchar *later =
      enqueue(ctx, "--keyring", ring, "--delay", "1h", "demo.echo",
              "{\"card\": \"4111-later\"}", NULL);
  g_autoptr(Run) rotated =
      cli(ctx, "keys", "rotate", "--keyring", ring, "--id", "new", NULL);
  g_autoptr(Run) before = NULL;
  g_autoptr(Run) resealed = NULL;
  g_autoptr(Run) again = NULL;
  g_autoptr(Run) listed = NULL;
  g_autoptr(Run) scheduled = NULL;
  g_autoptr(Run) bare = NULL;
  g_autoptr(JsonNode) counts = NULL;
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GString) kept = g_string_new(NULL);

  assert_status(made, 0);
  assert_status(rotated, 0);
  /* The keyring without the old key: what it cannot open yet shows so. */
  ck_assert(g_file_get_contents(ring, &text, NULL, NULL));
  lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (strstr(lines[i], " old ") == NULL && lines[i][0] != '\0')
      g_string_append_printf(kept, "%s\n", lines[i]);
  ck_assert(g_file_set_contents(newer, kept->str, -1, NULL));
  ck_assert_int_eq(g_chmod(newer, 0600), 0);
  before = cli(ctx, "ls", "default", "--keyring", newer, NULL);
  assert_status(before, 0);
  ck_assert_msg(strstr(before->out, "encrypted (aes-256-gcm:old)") != NULL,
                "%s", before->out);

  bare = cli(ctx, "keys", "reseal", NULL);
  assert_status(bare, 2);
  ck_assert_msg(strstr(bare->err, "--keyring") != NULL, "%s", bare->err);

  resealed = cli(ctx, "keys", "reseal", "--keyring", ring, "--json", NULL);
  assert_status(resealed, 0);
  counts = parse_json(resealed->out);
  ck_assert_str_eq(member_string(object_of(counts), "key"), "new");
  ck_assert_int_eq(json_object_get_int_member(object_of(counts), "resealed"),
                   2);
  ck_assert_int_eq(json_object_get_int_member(object_of(counts), "unreadable"),
                   0);

  listed = cli(ctx, "ls", "default", "--keyring", newer, NULL);
  assert_status(listed, 0);
  ck_assert_msg(strstr(listed->out, "4111-reseal") != NULL &&
                    strstr(listed->out, "encrypted") == NULL,
                "%s", listed->out);
  scheduled = cli(ctx, "ls", "--state", "scheduled", "--json", "--keyring",
                  newer, NULL);
  assert_status(scheduled, 0);
  ck_assert_msg(strstr(scheduled->out, "4111-later") != NULL, "%s",
                scheduled->out);

  again = cli(ctx, "keys", "reseal", "--keyring", newer, NULL);
  assert_status(again, 0);
  ck_assert_msg(strstr(again->out, "0 waiting tasks now; 2 already were") !=
                    NULL,
                "%s", again->out);
}
END_TEST

/* `sluice result --follow` prints the running task's progress, then its
 * record; the last report (1.0) always comes before the record, which is
 * written after it. */
START_TEST(test_result_follow_prints_progress)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, NULL);
  g_autofree gchar *id =
      enqueue(ctx, "demo.progress", "{\"steps\": 3, \"ms\": 300}", NULL);
  g_autoptr(Run) text = NULL;
  g_autoptr(Run) json =
      cli(ctx, "result", id, "--follow", "--wait", "60s", "--json", NULL);
  const gchar *last, *record;

  assert_status(json, 0);
  /* One object per report, then the record. */
  last = strstr(json->out, "\"progress\": 1.0000");
  record = strstr(json->out, "\"state\": \"succeeded\"");
  ck_assert_msg(last != NULL && record != NULL && last < record &&
                    strstr(last, "\"message\": \"step 3 of 3\"") != NULL,
                "%s", json->out);
  text = cli(ctx, "result", id, "--follow", NULL);
  assert_status(text, 0);
  ck_assert_msg(strstr(text->out, "progress 100% step 3 of 3") != NULL, "%s",
                text->out);
  g_free(worker_stop(w));
}
END_TEST

/* `sluice events` prints what a worker started with --events wrote, in
 * order, and --follow ends its blocking read when an event comes. */
START_TEST(test_events_of_a_task)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, "--events", NULL);
  g_autofree gchar *id =
      enqueue(ctx, "demo.progress", "{\"steps\": 1, \"ms\": 0}", NULL);
  g_autoptr(Run) result = cli(ctx, "result", id, "--wait", "60s", NULL);
  g_autoptr(Run) events = NULL;
  const gchar *started, *progress, *succeeded;

  assert_status(result, 0);
  g_free(worker_stop(w));
  events = cli(ctx, "events", "--id", id, NULL);
  assert_status(events, 0);
  started = strstr(events->out, "  started ");
  progress = strstr(events->out, "  progress ");
  succeeded = strstr(events->out, "  succeeded ");
  ck_assert_msg(started != NULL && progress != NULL && succeeded != NULL &&
                    started < progress && progress < succeeded &&
                    strstr(progress, "100% step 1 of 1") != NULL,
                "%s", events->out);
}
END_TEST

/* `sluice workflow show` draws a workflow enqueued through the C API. */
START_TEST(test_workflow_show_draws_the_tree)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, NULL);
  g_autoptr(SluiceBroker) broker = sluice_test_redis_broker(
      g_strcmp0(ctx->mode, "fast") == 0 ? SLUICE_REDIS_FAST
                                        : SLUICE_REDIS_RELIABLE,
      sluice_test_redis_url(sluice_test_redis_shared()), ctx->ns, 0);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  SluiceWorkflow *group = sluice_workflow_group();
  g_autoptr(SluiceWorkflow) chord = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL, *last = NULL;
  g_autoptr(Run) result = NULL, show = NULL, cancel = NULL;

  sluice_workflow_add(group, sluice_workflow_task("demo.noop", NULL, NULL));
  sluice_workflow_add(group, sluice_workflow_task("demo.noop", NULL, NULL));
  chord = sluice_workflow_chord(group,
                                sluice_workflow_task("demo.echo", NULL, NULL),
                                SLUICE_CHORD_WAIT_ALL);
  id = sluice_client_enqueue_workflow(client, chord, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  last = g_strdup_printf("%s.2", id);
  result = cli(ctx, "result", last, "--wait", "60s", NULL);
  assert_status(result, 0);
  show = cli(ctx, "workflow", "show", id, NULL);
  assert_status(show, 0);
  ck_assert_msg(strstr(show->out, "chord (wait for all)\n├─ group\n│  ├─ "
                                  "demo.noop") != NULL &&
                    strstr(show->out, "└─ demo.echo") != NULL &&
                    strstr(show->out, "1 of 1 results in, 0 failed") != NULL,
                "%s", show->out);
  cancel = cli(ctx, "workflow", "show", "no-such-workflow", NULL);
  ck_assert_int_eq(cancel->status, 1);
  g_free(worker_stop(w));
}
END_TEST

/* With no URL anywhere, a worker and `sluice enqueue` meet in the SQLite
 * database of the user's state directory, made on first use and named in
 * the worker's first log line: a fresh machine needs no server. */
START_TEST(test_default_broker_is_sqlite_in_the_state_directory)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *db_dir = g_build_filename(ctx->dir, "sluice", NULL);
  g_autofree gchar *db = g_build_filename(db_dir, "sluice.db", NULL);
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *log = NULL;
  g_autoptr(Run) result = NULL;
  g_autoptr(Run) stats = NULL;
  g_autoptr(Run) elsewhere = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autoptr(JsonNode) first_line = NULL;
  g_auto(GStrv) lines = NULL;
  g_auto(GStrv) system_env = NULL;
  g_autofree gchar *system_dir = g_build_filename(ctx->dir, "system", NULL);
  g_autofree gchar *system_db = g_build_filename(system_dir, "sluice.db", NULL);

  g_strfreev(ctx->env);
  ctx->env = cli_environ(NULL, NULL, NULL);
  ctx->env = g_environ_setenv(ctx->env, "XDG_STATE_HOME", ctx->dir, TRUE);
  ck_assert(!g_file_test(db_dir, G_FILE_TEST_EXISTS));

  w = worker_start(ctx, NULL);
  ck_assert(g_file_test(db, G_FILE_TEST_IS_REGULAR));
  log = worker_log(w);
  lines = g_strsplit(log, "\n", 2);
  first_line = parse_json(lines[0]);
  ck_assert_msg(strstr(member_string(object_of(first_line), "message"), db) !=
                    NULL,
                "the first line does not name %s: %s", db, lines[0]);
  g_clear_pointer(&log, g_free);

  id = enqueue(ctx, "demo.echo", "{}", NULL);
  result = cli(ctx, "result", id, "--wait", "60s", "--json", NULL);
  assert_status(result, 0);
  record = parse_json(result->out);
  ck_assert_str_eq(member_string(object_of(record), "state"), "succeeded");
  stats = cli(ctx, "stats", "--json", NULL);
  assert_status(stats, 0);
  ck_assert_msg(strstr(stats->out, "\"sqlite\"") != NULL, "%s", stats->out);
  log = worker_stop(w);

  /* The same database named by a sqlite:// URL in a configuration file:
   * the task is there. */
  {
    g_autofree gchar *conf = g_build_filename(ctx->dir, "sqlite.conf", NULL);
    g_autofree gchar *text =
        g_strdup_printf("[connection]\nurl=sqlite://%s\n", db);
    g_auto(GStrv) bare = cli_environ(NULL, NULL, NULL);
    g_autoptr(Run) from_file = NULL;

    ck_assert(g_file_set_contents(conf, text, -1, NULL));
    bare = g_environ_setenv(bare, "XDG_STATE_HOME", "/nonexistent", TRUE);
    from_file =
        cli_env(bare, NULL, "result", id, "--json", "--config", conf, NULL);
    assert_status(from_file, 0);
    ck_assert_msg(strstr(from_file->out, "succeeded") != NULL, "%s",
                  from_file->out);
  }

  /* A system service (systemd's StateDirectory=) uses its own directory,
   * where the task above is not. */
  ck_assert_int_eq(g_mkdir(system_dir, 0700), 0);
  system_env = g_environ_setenv(g_strdupv(ctx->env), "STATE_DIRECTORY",
                                system_dir, TRUE);
  elsewhere = cli_env(system_env, NULL, "result", id, "--json", NULL);
  ck_assert_int_ne(elsewhere->status, 0);
  ck_assert(g_file_test(system_db, G_FILE_TEST_IS_REGULAR));

  /* ctx_free removes plain files of ctx->dir only. */
  for (const gchar *const *d = (const gchar *const[]){db_dir, system_dir, NULL};
       *d != NULL; d++) {
    g_autoptr(GDir) dir = g_dir_open(*d, 0, NULL);
    const gchar *name;
    while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
      g_autofree gchar *path = g_build_filename(*d, name, NULL);
      g_unlink(path);
    }
    g_rmdir(*d);
  }
}
END_TEST

/* Child setup of a user who may only read: as root, nobody. */
static void
child_setup_reader(gpointer data)
{
  child_setup(data);
  if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
    _exit(126);
}

/* `sluice ARGV...` as a user who may not write what the test's user made
 * (nobody, when the test runs as root); NULL when that user cannot even
 * run the command (a build tree it may not enter). */
static Run *
run_as_reader(gchar **env, const gchar *const *argv)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(
      G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GPtrArray) args = g_ptr_array_new();
  g_autoptr(GSubprocess) proc = NULL;
  Run *run;

  g_ptr_array_add(args, (gpointer)SLUICE_BIN);
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add(args, (gpointer)argv[i]);
  g_ptr_array_add(args, NULL);
  g_subprocess_launcher_set_environ(launcher, env);
  g_subprocess_launcher_set_child_setup(launcher, child_setup_reader, NULL,
                                        NULL);
  proc = g_subprocess_launcher_spawnv(launcher,
                                      (const gchar *const *)args->pdata, NULL);
  if (proc == NULL)
    return NULL;
  run = g_new0(Run, 1);
  ck_assert(g_subprocess_communicate_utf8(proc, NULL, NULL, &run->out,
                                          &run->err, NULL));
  run->status = exit_status_of(proc);
  if (run->status == 126 || run->status == 127) {
    run_free(run);
    return NULL;
  }
  return run;
}

/* An operator who may read a service's SQLite database but not write it
 * (nor its directory) sees its queues with the commands that only read;
 * one that writes is refused in one line saying why and what to do, not
 * with SQLite's "(not an error)". */
START_TEST(test_sqlite_read_only_for_this_user)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *db = g_build_filename(ctx->dir, "service.db", NULL);
  g_autofree gchar *url = g_strconcat("sqlite://", db, NULL);
  g_autofree gchar *shm = g_strconcat(db, "-shm", NULL);
  g_autofree gchar *wal = g_strconcat(db, "-wal", NULL);
  g_autofree gchar *wake = g_strconcat(db, "-wake", NULL);
  const gchar *const files[] = {db, shm, wal, wake};
  gboolean root = geteuid() == 0;
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  g_autofree gchar *id = NULL;
  g_autoptr(Run) made = NULL;
  g_autoptr(Run) probe = NULL;

  made = cli_env(env, NULL, "enqueue", "demo.noop", "--url", url, NULL);
  assert_status(made, 0);
  id = g_strstrip(g_strdup(made->out));
  ck_assert_int_eq(g_chmod(ctx->dir, root ? 0755 : 0555), 0);
  for (gsize i = 0; i < G_N_ELEMENTS(files); i++)
    ck_assert_int_eq(g_chmod(files[i], root ? 0644 : 0444), 0);

  probe = run_as_reader(env, (const gchar *[]){"--version", NULL});
  if (probe == NULL) {
    fprintf(stderr,
            "test-cli: nobody cannot run %s (the build tree is "
            "closed to it): the read-only checks are not run\n",
            SLUICE_BIN);
  } else {
    const gchar *const readers[][6] = {
        {"stats", "--json", "--url", url, NULL},
        {"ls", "default", "--url", url, NULL},
        {"inspect", id, "--url", url, NULL},
        {"dlq", "list", "--url", url, NULL},
        {"events", "--url", url, NULL},
    };
    g_autoptr(Run) writer = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS(readers); i++) {
      g_autoptr(Run) run = run_as_reader(env, readers[i]);

      ck_assert_msg(run != NULL && run->status == 0, "%s: %d: %s",
                    readers[i][0], run != NULL ? run->status : -1,
                    run != NULL ? run->err : "");
      if (i == 1)
        ck_assert_msg(strstr(run->out, id) != NULL, "%s", run->out);
    }
    writer = run_as_reader(
        env, (const gchar *[]){"enqueue", "demo.noop", "--url", url, NULL});
    ck_assert_ptr_nonnull(writer);
    assert_status(writer, 1);
    assert_one_line_error(writer, "is read-only for this user");
    assert_one_line_error(writer, "commands that only read");
    ck_assert_msg(strstr(writer->err, "not an error") == NULL, "%s",
                  writer->err);
  }
  ck_assert_int_eq(g_chmod(ctx->dir, 0700), 0);
  for (gsize i = 0; i < G_N_ELEMENTS(files); i++)
    g_chmod(files[i], 0644);
}
END_TEST

/* Runs @sql on the SQLite database @db, without a broker. */
static void
sqlite_exec(const gchar *db, const gchar *sql)
{
  sqlite3 *raw = NULL;

  ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(raw, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(raw);
}

/* `sluice migrate` on a file at version 1 (what the first releases made):
 * --dry-run shows the pending step and changes nothing, without it the
 * step runs and `sluice stats` shows the new version (a line of text, a
 * field of --json); a file one version newer is refused by both in one
 * line that says to upgrade. */
START_TEST(test_migrate_a_sqlite_file)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *db = g_build_filename(ctx->dir, "old.db", NULL);
  g_autofree gchar *url = g_strconcat("sqlite://", db, NULL);
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  g_autoptr(Run) made =
      cli_env(env, NULL, "enqueue", "demo.noop", "--url", url, NULL);
  g_autoptr(Run) dry = NULL, dry_text = NULL, run = NULL, stats = NULL;
  g_autoptr(Run) text = NULL;
  g_autoptr(Run) newer = NULL, newer_stats = NULL;
  g_autoptr(JsonNode) root = NULL, after = NULL;
  JsonObject *before, *step;

  assert_status(made, 0);
  sqlite_exec(db, "DROP TABLE migrations; "
                  "UPDATE meta SET value = '1' WHERE key = 'schema'");

  dry =
      cli_env(env, NULL, "migrate", "--dry-run", "--json", "--url", url, NULL);
  assert_status(dry, 0);
  root = parse_json(dry->out);
  before = json_object_get_object_member(object_of(root), "before");
  ck_assert_int_eq(json_object_get_int_member(before, "version"), 1);
  ck_assert_int_eq(json_object_get_int_member(before, "current"), 2);
  ck_assert_uint_eq(
      json_array_get_length(json_object_get_array_member(before, "pending")),
      1);
  step = json_array_get_object_element(
      json_object_get_array_member(before, "pending"), 0);
  ck_assert_str_eq(member_string(step, "name"), "002-migrations");
  ck_assert(!json_object_get_boolean_member(object_of(root), "migrated"));
  g_clear_pointer(&root, json_node_unref);
  /* Nothing changed: still version 1. */
  dry_text = cli_env(env, NULL, "migrate", "--dry-run", "--url", url, NULL);
  assert_status(dry_text, 0);
  ck_assert_msg(strstr(dry_text->out, "layout version: 1 ") != NULL &&
                    strstr(dry_text->out, "002-migrations") != NULL &&
                    strstr(dry_text->out, "Dry run") != NULL,
                "%s", dry_text->out);

  run = cli_env(env, NULL, "migrate", "--url", url, NULL);
  assert_status(run, 0);
  ck_assert_msg(strstr(run->out, "Migrated: the SQLite database") != NULL &&
                    strstr(run->out, "layout version 2") != NULL,
                "%s", run->out);
  stats = cli_env(env, NULL, "stats", "--json", "--url", url, NULL);
  assert_status(stats, 0);
  after = parse_json(stats->out);
  ck_assert_int_eq(
      json_object_get_int_member(object_of(after), "layout_version"), 2);
  text = cli_env(env, NULL, "stats", "--url", url, NULL);
  assert_status(text, 0);
  ck_assert_msg(g_regex_match_simple("^layout version +2$", text->out,
                                     G_REGEX_MULTILINE, 0),
                "%s", text->out);

  sqlite_exec(db, "UPDATE meta SET value = '3' WHERE key = 'schema'");
  newer = cli_env(env, NULL, "migrate", "--url", url, NULL);
  assert_one_line_error(newer, "newer than this sluice's (2): upgrade this "
                               "program");
  newer_stats = cli_env(env, NULL, "stats", "--url", url, NULL);
  assert_one_line_error(newer_stats, "schema version 3, newer than this "
                                     "program's (2): upgrade this program");
}
END_TEST

/* --no-task-log turns the line per finished task off, and nothing else. */
START_TEST(test_no_task_log)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, "--no-task-log", NULL);
  g_autofree gchar *id = enqueue(ctx, "demo.noop", NULL);
  g_autofree gchar *log = NULL;
  g_autofree gchar *outcomes = NULL;

  g_free(wait_for_state(ctx, id, "succeeded", NULL));
  log = worker_stop(w);
  outcomes = logged_outcomes(log, id);
  ck_assert_msg(outcomes[0] == '\0', "%s", log);
  ck_assert_msg(strstr(log, " ready: ") != NULL, "%s", log);
}
END_TEST

START_TEST(test_flaky_retries_then_succeeds)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, "--backoff", "20ms", "--backoff-max",
                                     "50ms", "--no-jitter", NULL);
  g_autofree gchar *id = enqueue(ctx, "demo.flaky", "{\"fail_times\": 2}",
                                 "--max-attempts", "5", NULL);
  g_autoptr(Run) result =
      cli(ctx, "result", id, "--wait", "60s", "--json", NULL);
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *log = NULL;
  g_autofree gchar *outcomes = NULL;
  JsonObject *o;
  guint attempts = 0;

  assert_status(result, 0);
  record = parse_json(result->out);
  o = object_of(record);
  ck_assert_str_eq(member_string(o, "state"), "succeeded");
  ck_assert_int_eq(member_int(o, "attempt"), 3);
  ck_assert_int_eq(json_object_get_int_member(
                       json_object_get_object_member(o, "result"), "attempt"),
                   3);

  /* The two failed attempts were logged with the task's fields. */
  log = worker_stop(w);
  ck_assert_msg(check_json_log(log, id, &attempts) >= 2, "%s", log);
  ck_assert_msg(attempts >= 2, "%s", log);
  outcomes = logged_outcomes(log, id);
  ck_assert_str_eq(outcomes, "retry|retry|succeeded");
  /* The retry lines say the delay (20 ms, then 40: no jitter), apart from
   * the run time, in words and in a field. */
  ck_assert_msg(strstr(log, "\"delay_ms\":\"20\"") != NULL, "%s", log);
  ck_assert_msg(strstr(log, "\"delay_ms\":\"40\"") != NULL, "%s", log);
  ck_assert_msg(strstr(log, "demo.flaky failed in ") != NULL, "%s", log);
  ck_assert_msg(strstr(log, " ms; will retry in 20 ms") != NULL, "%s", log);
  ck_assert_msg(strstr(log, " ms; will retry in 40 ms") != NULL, "%s", log);
}
END_TEST

START_TEST(test_fail_dead_letter_replay_runs_again)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w =
      worker_start(ctx, "--backoff", "20ms", "--no-jitter", NULL);
  g_autofree gchar *id = enqueue(ctx, "demo.fail", "--max-attempts", "2", NULL);
  g_autoptr(Run) result = NULL;
  g_autoptr(Run) list = NULL;
  g_autoptr(Run) show = NULL;
  g_autoptr(Run) replay = NULL;
  g_autoptr(Run) stats = NULL;
  g_autoptr(Run) purge = NULL;
  g_autoptr(Run) empty = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autoptr(JsonNode) entries = NULL;
  g_autoptr(JsonNode) entry = NULL;
  g_autoptr(JsonNode) queued = NULL;
  g_autoptr(JsonNode) stats_json = NULL;
  g_autoptr(JsonNode) again = NULL;
  g_autoptr(JsonNode) purged = NULL;
  g_autofree gchar *entry_id = NULL;
  g_autofree gchar *log = NULL;
  JsonObject *o, *e;
  JsonArray *a;

  /* Exit status 3: the task ended, and not well. */
  result = cli(ctx, "result", id, "--wait", "60s", "--json", NULL);
  assert_status(result, 3);
  record = parse_json(result->out);
  o = object_of(record);
  ck_assert_str_eq(member_string(o, "state"), "dead_lettered");
  ck_assert_str_eq(member_string(o, "dead_letter_reason"), "max_attempts");
  ck_assert_int_eq(member_int(o, "attempt"), 2);
  ck_assert(strstr(member_string(o, "error"), "demo.fail") != NULL);
  log = worker_stop(w);

  list = cli(ctx, "dlq", "list", "--json", NULL);
  assert_status(list, 0);
  entries = parse_json(list->out);
  a = json_object_get_array_member(object_of(entries), "entries");
  ck_assert_int_eq(json_array_get_length(a), 1);
  e = json_array_get_object_element(a, 0);
  entry_id = g_strdup(member_string(e, "entry_id"));
  ck_assert_str_eq(member_string(e, "task_id"), id);
  ck_assert_str_eq(member_string(e, "task"), "demo.fail");
  ck_assert_str_eq(member_string(e, "reason"), "max_attempts");
  ck_assert_str_eq(member_string(e, "source"), "default");
  ck_assert(strstr(member_string(e, "detail"), "demo.fail") != NULL);
  ck_assert(member_int(e, "deliveries") >= 1);
  ck_assert(member_int(e, "at") > 0);
  ck_assert(member_is_null(object_of(entries), "next_after"));

  {
    g_autoptr(Run) other =
        cli(ctx, "dlq", "list", "--reason", "non_retryable", NULL);
    g_autoptr(Run) table = cli(ctx, "dlq", "list", NULL);
    assert_status(other, 0);
    ck_assert_msg(strstr(other->out, "no dead letters match") != NULL, "%s",
                  other->out);
    assert_status(table, 0);
    ck_assert(strstr(table->out, entry_id) != NULL);
    ck_assert(strstr(table->out, "max_attempts") != NULL);
  }

  show = cli(ctx, "dlq", "show", entry_id, "--json", NULL);
  assert_status(show, 0);
  entry = parse_json(show->out);
  e = object_of(entry);
  ck_assert(!json_object_get_boolean_member(e, "malformed"));
  ck_assert_int_eq(member_int(e, "attempt"), 2);
  ck_assert_int_eq(
      json_array_get_length(json_object_get_array_member(e, "history")), 1);
  ck_assert(member_string(e, "payload_base64") != NULL);

  /* Replay: the entry goes, the task is queued again under the same id. */
  replay = cli(ctx, "dlq", "replay", entry_id, NULL);
  assert_status(replay, 0);
  ck_assert(strstr(replay->out, "replayed") != NULL);
  ck_assert(strstr(replay->out, id) != NULL);
  queued = inspect(ctx, id);
  ck_assert_str_eq(member_string(object_of(queued), "state"), "queued");
  stats = cli(ctx, "stats", "--json", NULL);
  assert_status(stats, 0);
  stats_json = parse_json(stats->out);
  ck_assert_int_eq(member_int(object_of(stats_json), "dead_letters"), 0);

  /* ... and runs again: a new worker takes it and buries it anew. */
  {
    g_autoptr(Worker) w2 =
        worker_start(ctx, "--backoff", "20ms", "--no-jitter", NULL);
    g_autoptr(Run) second =
        cli(ctx, "result", id, "--wait", "60s", "--json", NULL);
    g_autoptr(Run) relist = cli(ctx, "dlq", "list", "--json", NULL);
    g_autofree gchar *log2 = NULL;
    JsonArray *b;

    assert_status(second, 3);
    assert_status(relist, 0);
    again = parse_json(relist->out);
    b = json_object_get_array_member(object_of(again), "entries");
    ck_assert_int_eq(json_array_get_length(b), 1);
    e = json_array_get_object_element(b, 0);
    ck_assert_str_eq(member_string(e, "task_id"), id);
    ck_assert_str_ne(member_string(e, "entry_id"), entry_id);
    log2 = worker_stop(w2);
    ck_assert_msg(strstr(log2, id) != NULL, "the replay did not run:\n%s",
                  log2);
  }

  /* A dry run changes nothing; purge empties the queue. */
  {
    g_autoptr(Run) dry = cli(ctx, "dlq", "replay", "--all", "--dry-run", NULL);
    assert_status(dry, 0);
    ck_assert(strstr(dry->out, "would replay 1 dead letter") != NULL);
  }
  purge = cli(ctx, "dlq", "purge", "--json", NULL);
  assert_status(purge, 0);
  purged = parse_json(purge->out);
  ck_assert_int_eq(member_int(object_of(purged), "purged"), 1);
  empty = cli(ctx, "dlq", "list", NULL);
  assert_status(empty, 0);
  ck_assert_str_eq(empty->out, "no dead letters\n");
}
END_TEST

START_TEST(test_cancel_delayed_is_certain)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *id = enqueue(ctx, "demo.noop", "--delay", "1h", NULL);
  g_autofree gchar *at =
      enqueue(ctx, "demo.noop", "--at", "2099-01-01T00:00:00Z", NULL);
  g_autofree gchar *state = state_of(ctx, id);
  g_autofree gchar *at_state = state_of(ctx, at);
  g_autoptr(Run) cancel = NULL;
  g_autoptr(Run) cancel_json = NULL;
  g_autoptr(Run) twice = NULL;
  g_autoptr(JsonNode) outcome = NULL;
  g_autofree gchar *after = NULL;

  ck_assert_str_eq(state, "scheduled");
  ck_assert_str_eq(at_state, "scheduled");

  cancel = cli(ctx, "cancel", id, NULL);
  assert_status(cancel, 0);
  ck_assert_msg(strstr(cancel->out, "certainly") != NULL, "%s", cancel->out);
  after = state_of(ctx, id);
  ck_assert_str_eq(after, "cancelled");

  cancel_json = cli(ctx, "cancel", at, "--json", NULL);
  assert_status(cancel_json, 0);
  outcome = parse_json(cancel_json->out);
  ck_assert_str_eq(member_string(object_of(outcome), "outcome"), "removed");
  ck_assert(json_object_get_boolean_member(object_of(outcome), "certain"));

  /* Nothing left to cancel: said on one line, exit status 1. */
  twice = cli(ctx, "cancel", id, NULL);
  assert_status(twice, 1);
  assert_one_line_error(twice, "already finished");
}
END_TEST

START_TEST(test_cancel_queued_records_revocation)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *id = enqueue(ctx, "demo.noop", NULL);
  g_autoptr(Run) cancel = cli(ctx, "cancel", id, "--json", NULL);
  g_autoptr(JsonNode) outcome = NULL;
  g_autoptr(Worker) w = NULL;
  g_autoptr(Run) result = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *log = NULL;

  assert_status(cancel, 0);
  outcome = parse_json(cancel->out);
  ck_assert_str_eq(member_string(object_of(outcome), "outcome"), "revoked");
  ck_assert(!json_object_get_boolean_member(object_of(outcome), "certain"));

  /* The worker loads revocations before it fetches: the task is skipped. */
  w = worker_start(ctx, NULL);
  result = cli(ctx, "result", id, "--wait", "60s", "--json", NULL);
  assert_status(result, 3);
  record = parse_json(result->out);
  ck_assert_str_eq(member_string(object_of(record), "state"), "cancelled");
  log = worker_stop(w);
}
END_TEST

START_TEST(test_stats_and_inspect_json_fields)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *queued = enqueue(ctx, "demo.noop", "--queue", "q1", NULL);
  g_autofree gchar *later =
      enqueue(ctx, "demo.noop", "--queue", "q1", "--delay", "1h", NULL);
  g_autoptr(Worker) w =
      worker_start(ctx, "--queue", "elsewhere", "--worker-id", "w-stats", NULL);
  g_autoptr(Run) stats = cli(ctx, "stats", "--json", NULL);
  g_autoptr(Run) only = cli(ctx, "stats", "--json", "--queue", "q1", NULL);
  g_autoptr(Run) table = cli(ctx, "stats", NULL);
  g_autoptr(JsonNode) s = NULL;
  g_autoptr(JsonNode) s1 = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *log = NULL;
  JsonObject *o, *r;
  JsonArray *queues, *workers;
  gboolean found_q1 = FALSE, found_worker = FALSE;

  assert_status(stats, 0);
  s = parse_json(stats->out);
  o = object_of(s);
  ck_assert_str_eq(member_string(o, "mode"), ctx->mode);
  ck_assert_str_eq(member_string(o, "namespace"), ctx->ns);
  ck_assert_int_eq(member_int(o, "scheduled"), 1);
  ck_assert_int_eq(member_int(o, "dead_letters"), 0);
  ck_assert(JSON_NODE_HOLDS_OBJECT(
      json_object_get_member(o, "dead_letters_by_reason")));
  if (strcmp(ctx->mode, "fast") == 0)
    ck_assert(member_is_null(o, "in_flight"));
  else
    ck_assert_int_eq(member_int(o, "in_flight"), 0);
  queues = json_object_get_array_member(o, "queues");
  for (guint i = 0; i < json_array_get_length(queues); i++) {
    JsonObject *q = json_array_get_object_element(queues, i);
    if (g_strcmp0(member_string(q, "name"), "q1") == 0) {
      found_q1 = TRUE;
      ck_assert_int_eq(member_int(q, "ready"), 1);
    }
  }
  ck_assert_msg(found_q1, "%s", stats->out);
  workers = json_object_get_array_member(o, "workers");
  for (guint i = 0; i < json_array_get_length(workers); i++) {
    JsonObject *wk = json_array_get_object_element(workers, i);
    if (g_strcmp0(member_string(wk, "id"), "w-stats") == 0) {
      found_worker = TRUE;
      ck_assert(member_int(wk, "last_seen") > 0);
    }
  }
  ck_assert_msg(found_worker, "%s", stats->out);

  assert_status(only, 0);
  s1 = parse_json(only->out);
  queues = json_object_get_array_member(object_of(s1), "queues");
  ck_assert_int_eq(json_array_get_length(queues), 1);

  assert_status(table, 0);
  ck_assert_msg(strstr(table->out, "q1") != NULL &&
                    strstr(table->out, "w-stats") != NULL &&
                    strstr(table->out, "scheduled") != NULL,
                "%s", table->out);

  /* Every documented field of a record, with its type. */
  record = inspect(ctx, queued);
  r = object_of(record);
  ck_assert_int_eq(json_object_get_size(r), 14);
  ck_assert(member_is_null(r, "sealed_with"));
  ck_assert_str_eq(member_string(r, "id"), queued);
  ck_assert_str_eq(member_string(r, "state"), "queued");
  ck_assert_str_eq(member_string(r, "task"), "demo.noop");
  ck_assert_str_eq(member_string(r, "queue"), "q1");
  ck_assert_int_eq(member_int(r, "attempt"), 0);
  ck_assert(member_is_null(r, "worker"));
  ck_assert(member_int(r, "enqueued_at") > 0);
  ck_assert(member_is_null(r, "started_at"));
  ck_assert(member_is_null(r, "finished_at"));
  ck_assert(member_is_null(r, "result"));
  ck_assert(member_is_null(r, "error"));
  ck_assert(member_is_null(r, "dead_letter_reason"));
  ck_assert(member_is_null(r, "due_at"));
  log = worker_stop(w);
}
END_TEST

START_TEST(test_sigterm_stops_gracefully)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, "--shutdown-timeout", "200ms", NULL);
  g_autofree gchar *long_id =
      enqueue(ctx, "demo.sleep", "{\"ms\": 600000}", NULL);
  g_autofree gchar *log = NULL;
  g_autofree gchar *state = NULL;
  g_autoptr(Run) cancel = NULL;
  g_autoptr(Run) result = NULL;
  g_autoptr(JsonNode) record = NULL;

  /* A task that would run for 10 minutes is running; SIGTERM still stops
   * the worker promptly (exit 0), and the task is cancelled and given
   * back, not lost and not recorded as failed. */
  g_free(wait_for_state(ctx, long_id, "running", NULL));
  log = worker_stop(w);
  state = state_of(ctx, long_id);
  ck_assert_msg(
      !g_str_equal(state, "failed") && !g_str_equal(state, "dead_lettered") &&
          !g_str_equal(state, "cancelled") && !g_str_equal(state, "succeeded"),
      "released task is %s", state);

  /* Given back: a new worker meets it again. Revoke it first so it is
   * skipped instead of sleeping for 10 minutes. */
  cancel = cli(ctx, "cancel", long_id, NULL);
  assert_status(cancel, 0);
  ck_assert(strstr(cancel->out, "revocation recorded") != NULL);
  {
    g_autoptr(Worker) w2 = worker_start(ctx, NULL);
    g_autofree gchar *log2 = NULL;
    result = cli(ctx, "result", long_id, "--wait", "60s", "--json", NULL);
    assert_status(result, 3);
    record = parse_json(result->out);
    ck_assert_str_eq(member_string(object_of(record), "state"), "cancelled");
    log2 = worker_stop(w2);
  }
}
END_TEST

START_TEST(test_sigterm_lets_short_task_finish)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, NULL);
  g_autofree gchar *id = enqueue(ctx, "demo.sleep", "{\"ms\": 1500}", NULL);
  g_autofree gchar *log = NULL;
  g_autoptr(Run) result = NULL;

  /* Within the default 30 s shutdown timeout the task finishes (if it had
   * not already) and its result is stored before the worker exits. */
  g_free(wait_for_state(ctx, id, "running", "succeeded"));
  log = worker_stop(w);
  result = cli(ctx, "result", id, NULL);
  assert_status(result, 0);
  ck_assert(strstr(result->out, "succeeded") != NULL);
  ck_assert(strstr(result->out, "{\"slept_ms\":1500}") != NULL);
}
END_TEST

/* --unique-key: a second enqueue of a held key writes nothing and names
 * the holder; --replace lets the new one win while the holder waits;
 * --debounce pushes the run on; a worker runs one of each. */
START_TEST(test_enqueue_unique)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *first =
      enqueue(ctx, "demo.noop", "--unique-key", "report-7", "--unique-scope",
              "running", NULL);
  g_autoptr(Run) again =
      cli(ctx, "enqueue", "demo.noop", "--unique-key", "report-7",
          "--unique-scope", "running", "--json", NULL);
  g_autoptr(Run) bad = cli(ctx, "enqueue", "demo.noop", "--unique-key", "k",
                           "--unique-scope", "forever", NULL);
  g_autoptr(Run) lonely = cli(ctx, "enqueue", "demo.noop", "--replace", NULL);
  g_autofree gchar *old = enqueue(ctx, "demo.noop", "--unique-key", "sync",
                                  "--replace", "--delay", "1h", NULL);
  g_autofree gchar *new = enqueue(ctx, "demo.noop", "--unique-key", "sync",
                                  "--replace", "--delay", "1h", NULL);
  g_autofree gchar *debounced = enqueue(ctx, "demo.noop", "--unique-scope",
                                        "ttl:1h", "--debounce", "1h", NULL);
  g_autoptr(JsonNode) existed = NULL;
  g_autoptr(Run) old_inspect = NULL;
  g_autoptr(Run) new_inspect = NULL;
  g_autoptr(Run) deb_inspect = NULL;
  g_autoptr(Run) result = NULL;
  g_autoptr(Worker) w = NULL;

  assert_status(again, 0);
  existed = parse_json(again->out);
  ck_assert_str_eq(member_string(object_of(existed), "id"), first);
  ck_assert(json_object_get_boolean_member(object_of(existed), "existed"));
  ck_assert(json_object_get_boolean_member(object_of(existed), "unique_held"));
  ck_assert_msg(strstr(again->err, "held by task") != NULL, "%s", again->err);
  assert_status(bad, 2);
  assert_one_line_error(bad, "--unique-scope");
  assert_status(lonely, 2);
  assert_one_line_error(lonely, "--unique-key");

  /* The replaced one is off the schedule; the new one waits there. */
  ck_assert_str_ne(old, new);
  old_inspect = cli(ctx, "inspect", old, "--json", NULL);
  ck_assert_msg(strstr(old_inspect->out, "\"scheduled\"") == NULL, "%s",
                old_inspect->out);
  new_inspect = cli(ctx, "inspect", new, "--json", NULL);
  assert_status(new_inspect, 0);
  ck_assert_msg(strstr(new_inspect->out, "\"scheduled\"") != NULL, "%s",
                new_inspect->out);
  deb_inspect = cli(ctx, "inspect", debounced, "--json", NULL);
  ck_assert_msg(strstr(deb_inspect->out, "\"scheduled\"") != NULL, "%s",
                deb_inspect->out);

  w = worker_start(ctx, NULL);
  result = cli(ctx, "result", first, "--wait", "60s", NULL);
  assert_status(result, 0);
  g_free(worker_stop(w));
}
END_TEST

START_TEST(test_enqueue_options)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *fixed_id = g_strdup_printf("order-%s", ctx->ns);
  g_autoptr(Run) first = cli(ctx, "enqueue", "demo.fatal", "--id", fixed_id,
                             "--header", "tenant=acme", NULL);
  g_autoptr(Run) again =
      cli(ctx, "enqueue", "demo.fatal", "--id", fixed_id, "--json", NULL);
  g_autofree gchar *slow =
      enqueue(ctx, "demo.sleep", "{\"ms\": 600000}", "--timeout", "100ms",
              "--max-attempts", "1", NULL);
  g_autofree gchar *stale = enqueue(ctx, "demo.noop", "--expires", "1ms", NULL);
  g_autoptr(JsonNode) existed = NULL;
  g_autoptr(Worker) w = NULL;
  g_autoptr(Run) fatal = NULL;
  g_autoptr(Run) timed_out = NULL;
  g_autoptr(Run) expired = NULL;
  g_autoptr(Run) list = NULL;
  g_autoptr(Run) show = NULL;
  g_autoptr(JsonNode) a = NULL;
  g_autoptr(JsonNode) b = NULL;
  g_autoptr(JsonNode) c = NULL;
  g_autoptr(JsonNode) entries = NULL;
  g_autoptr(JsonNode) entry = NULL;
  g_autofree gchar *log = NULL;
  JsonArray *arr;
  JsonObject *headers;

  /* A caller-chosen id is enqueued once; the second time says so. */
  assert_status(first, 0);
  ck_assert(g_str_has_prefix(first->out, fixed_id));
  ck_assert_str_eq(first->out + strlen(fixed_id), "\n");
  assert_status(again, 0);
  existed = parse_json(again->out);
  ck_assert_str_eq(member_string(object_of(existed), "id"), fixed_id);
  ck_assert(json_object_get_boolean_member(object_of(existed), "existed"));
  ck_assert(strstr(again->err, "enqueued before") != NULL);

  w = worker_start(ctx, NULL);
  fatal = cli(ctx, "result", fixed_id, "--wait", "60s", "--json", NULL);
  assert_status(fatal, 3);
  a = parse_json(fatal->out);
  ck_assert_str_eq(member_string(object_of(a), "dead_letter_reason"),
                   "non_retryable");
  /* --timeout: the attempt is cancelled and fails; one attempt allowed. */
  timed_out = cli(ctx, "result", slow, "--wait", "60s", "--json", NULL);
  assert_status(timed_out, 3);
  b = parse_json(timed_out->out);
  ck_assert_str_eq(member_string(object_of(b), "dead_letter_reason"),
                   "max_attempts");
  /* --expires: it was still waiting when it expired. */
  expired = cli(ctx, "result", stale, "--wait", "60s", "--json", NULL);
  assert_status(expired, 3);
  c = parse_json(expired->out);
  ck_assert_str_eq(member_string(object_of(c), "dead_letter_reason"),
                   "expired");
  log = worker_stop(w);

  /* The header travelled with the message into the dead-letter queue. */
  list = cli(ctx, "dlq", "list", "--reason", "non_retryable", "--json", NULL);
  assert_status(list, 0);
  entries = parse_json(list->out);
  arr = json_object_get_array_member(object_of(entries), "entries");
  ck_assert_int_eq(json_array_get_length(arr), 1);
  show = cli(ctx, "dlq", "show",
             member_string(json_array_get_object_element(arr, 0), "entry_id"),
             "--json", NULL);
  assert_status(show, 0);
  entry = parse_json(show->out);
  headers = json_object_get_object_member(object_of(entry), "headers");
  ck_assert_str_eq(json_object_get_string_member(headers, "tenant"), "acme");
}
END_TEST

/* Reliable mode only: a task that kills its worker is buried
 * max_deliveries instead of killing workers forever. */
START_TEST(test_poison_message_buried)
{
  g_autoptr(Ctx) ctx = ctx_new(1);
  g_autofree gchar *id = enqueue(ctx, "demo.crash", NULL);
  gint64 deadline = g_get_monotonic_time() + 4 * PATIENCE_US;
  g_autoptr(Run) result = NULL;
  g_autoptr(JsonNode) record = NULL;

  for (;;) {
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(
        G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
    g_autoptr(GSubprocess) proc = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree gchar *state = NULL;
    const gchar *argv[] = {SLUICE_BIN,
                           "worker",
                           "--module",
                           DEMO_MODULE,
                           "--visibility-timeout",
                           "500ms",
                           "--max-deliveries",
                           "2",
                           NULL};

    state = state_of(ctx, id);
    if (g_str_equal(state, "dead_lettered"))
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline, "still %s", state);
    g_subprocess_launcher_set_environ(launcher, ctx->env);
    g_subprocess_launcher_set_child_setup(launcher, child_setup, NULL, NULL);
    proc = g_subprocess_launcher_spawnv(launcher, argv, &error);
    ck_assert(proc != NULL);
    /* It either crashes on the task, or buries it and keeps running. */
    while (g_subprocess_get_identifier(proc) != NULL) {
      g_autofree gchar *now = state_of(ctx, id);
      if (g_str_equal(now, "dead_lettered")) {
        g_subprocess_send_signal(proc, SIGTERM);
        break;
      }
      ck_assert(g_get_monotonic_time() < deadline);
      g_usleep(50 * 1000);
    }
    ck_assert(g_subprocess_wait(proc, NULL, NULL));
  }
  result = cli(ctx, "result", id, "--json", NULL);
  assert_status(result, 3);
  record = parse_json(result->out);
  ck_assert_str_eq(member_string(object_of(record), "dead_letter_reason"),
                   "max_deliveries");
}
END_TEST

/* ---- Defects found by users (issue 10) ----------------------------------- */

/* How many times @needle occurs in @text. */
static guint
count_in(const gchar *text, const gchar *needle)
{
  guint n = 0;

  for (const gchar *p = text; p != NULL && (p = strstr(p, needle)) != NULL;
       p += strlen(needle))
    n++;
  return n;
}

/* Waits until the worker's log contains @needle (bounded). */
static void
wait_for_log(Worker *w, const gchar *needle)
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  for (;;) {
    g_autofree gchar *log = worker_log(w);
    if (strstr(log, needle) != NULL)
      return;
    ck_assert_msg(g_get_monotonic_time() < deadline, "“%s” never logged:\n%s",
                  needle, log);
    g_usleep(20 * 1000);
  }
}

/* The JSON of `sluice stats --json`. */
static JsonNode *
stats_json(Ctx *ctx)
{
  g_autoptr(Run) run = cli(ctx, "stats", "--json", NULL);

  assert_status(run, 0);
  return parse_json(run->out);
}

/* One poison message among thirty healthy ones, with a worker restarted
 * after every crash: only the poison is buried (max_deliveries), because a
 * delivery taken over from a dead worker runs alone. */
START_TEST(test_poison_batch_mates_survive)
{
  g_autoptr(Ctx) ctx = ctx_new(1);
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autofree gchar *poison = NULL;
  gint64 deadline = g_get_monotonic_time() + 4 * PATIENCE_US;
  guint restarts = 0;

  for (guint i = 0; i < 10; i++)
    g_ptr_array_add(ids, enqueue(ctx, "demo.sleep", "{\"ms\": 30}", NULL));
  poison = enqueue(ctx, "demo.crash", NULL);
  for (guint i = 0; i < 20; i++)
    g_ptr_array_add(ids, enqueue(ctx, "demo.sleep", "{\"ms\": 30}", NULL));

  for (;;) {
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(
        G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
    g_autoptr(GSubprocess) proc = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree gchar *state = state_of(ctx, poison);
    guint done = 0;
    const gchar *argv[] = {SLUICE_BIN,
                           "worker",
                           "--module",
                           DEMO_MODULE,
                           "--visibility-timeout",
                           "500ms",
                           "--max-deliveries",
                           "2",
                           "--concurrency",
                           "4",
                           "--prefetch",
                           "4",
                           NULL};

    for (guint i = 0; i < ids->len; i++) {
      g_autofree gchar *st = state_of(ctx, ids->pdata[i]);
      if (g_str_equal(st, "succeeded") || g_str_equal(st, "dead_lettered"))
        done++;
    }
    if (g_str_equal(state, "dead_lettered") && done == ids->len)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline, "poison %s, %u of %u done",
                  state, done, ids->len);
    g_subprocess_launcher_set_environ(launcher, ctx->env);
    g_subprocess_launcher_set_child_setup(launcher, child_setup, NULL, NULL);
    proc = g_subprocess_launcher_spawnv(launcher, argv, &error);
    ck_assert(proc != NULL);
    restarts++;
    /* It crashes on the poison, or finishes everything and is stopped. */
    while (g_subprocess_get_identifier(proc) != NULL) {
      g_autofree gchar *now = state_of(ctx, poison);
      guint finished = 0;
      for (guint i = 0; i < ids->len; i++) {
        g_autofree gchar *st = state_of(ctx, ids->pdata[i]);
        if (g_str_equal(st, "succeeded") || g_str_equal(st, "dead_lettered"))
          finished++;
      }
      if (g_str_equal(now, "dead_lettered") && finished == ids->len) {
        g_subprocess_send_signal(proc, SIGTERM);
        break;
      }
      ck_assert(g_get_monotonic_time() < deadline);
      g_usleep(50 * 1000);
    }
    ck_assert(g_subprocess_wait(proc, NULL, NULL));
  }
  ck_assert_uint_ge(restarts, 2);
  for (guint i = 0; i < ids->len; i++) {
    g_autofree gchar *st = state_of(ctx, ids->pdata[i]);
    ck_assert_msg(g_str_equal(st, "succeeded"), "healthy task %s is %s",
                  (gchar *)ids->pdata[i], st);
  }
  {
    g_autoptr(JsonNode) stats = stats_json(ctx);
    JsonObject *o = object_of(stats);
    ck_assert_int_eq(member_int(o, "dead_letters"), 1);
    ck_assert_int_eq(
        json_object_get_int_member(
            json_object_get_object_member(o, "dead_letters_by_reason"),
            "max_deliveries"),
        1);
  }
}
END_TEST

/* A worker started before its Redis (systemd often does that) waits for
 * it, saying so once, and serves once it is there. */
START_TEST(test_worker_waits_for_redis_at_start)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(Ctx) ctx = ctx_new(1);
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *log = NULL;
  g_autoptr(Run) result = NULL;

  g_strfreev(ctx->env);
  ctx->env = cli_environ(sluice_test_redis_url(server), ctx->mode, ctx->ns);
  sluice_test_redis_kill(server, SIGTERM);
  w = worker_spawn(ctx, NULL);
  wait_for_log(w, "the broker is unreachable");
  ck_assert(g_subprocess_get_identifier(w->proc) != NULL);
  ck_assert(sluice_test_redis_restart(server, &error));
  id = enqueue(ctx, "demo.echo", "{\"late\": true}", NULL);
  result = cli(ctx, "result", id, "--wait", "60s", NULL);
  assert_status(result, 0);
  log = worker_stop(w);
  ck_assert_uint_eq(count_in(log, "the broker is unreachable"), 1);
  ck_assert_uint_eq(count_in(log, "reachable again after"), 1);
}
END_TEST

/* An outage is one line when it begins and one, with its length, when it
 * ends, however many threads and ticks meet it meanwhile. */
START_TEST(test_outage_is_one_line_each_way)
{
  g_autoptr(GError) error = NULL;
  SluiceTestRedisOptions options = {.appendonly = TRUE};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(&options);
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *before = NULL;
  g_autofree gchar *after = NULL;
  g_autofree gchar *log = NULL;
  g_autoptr(Run) r1 = NULL;
  g_autoptr(Run) r2 = NULL;

  g_strfreev(ctx->env);
  ctx->env = cli_environ(sluice_test_redis_url(server), ctx->mode, ctx->ns);
  w = worker_start(ctx, "--visibility-timeout", "600ms", NULL);
  before = enqueue(ctx, "demo.noop", NULL);
  r1 = cli(ctx, "result", before, "--wait", "60s", NULL);
  assert_status(r1, 0);
  sluice_test_redis_kill(server, SIGKILL);
  /* Long enough for every periodic tick (revocations, heartbeats,
   * promotion, reclaim) to fail several times over. */
  wait_for_log(w, "the broker is unreachable");
  g_usleep(3 * G_USEC_PER_SEC);
  ck_assert(sluice_test_redis_restart(server, &error));
  wait_for_log(w, "reachable again after");
  after = enqueue(ctx, "demo.noop", NULL);
  r2 = cli(ctx, "result", after, "--wait", "60s", NULL);
  assert_status(r2, 0);
  log = worker_stop(w);
  if (count_in(log, "the broker is unreachable") != 1 ||
      count_in(log, "reachable again after") != 1 ||
      count_in(log, "failed:") != 0)
    g_printerr("the worker's log:\n%s\n", log); /* too long for Check */
  ck_assert_uint_eq(count_in(log, "the broker is unreachable"), 1);
  ck_assert_uint_eq(count_in(log, "reachable again after"), 1);
  ck_assert_uint_eq(count_in(log, "failed:"), 0);
}
END_TEST

/* A second SIGTERM during a graceful stop stops at once: the running
 * task is given back, not waited for, and the exit status says so. */
START_TEST(test_second_signal_stops_at_once)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, "--shutdown-timeout", "1h", NULL);
  g_autofree gchar *id = enqueue(ctx, "demo.sleep", "{\"ms\": 600000}", NULL);
  g_autofree gchar *log = NULL;
  g_autofree gchar *state = NULL;
  g_autoptr(GError) error = NULL;

  g_free(wait_for_state(ctx, id, "running", NULL));
  g_subprocess_send_signal(w->proc, SIGTERM);
  wait_for_log(w, "send it again to stop at once");
  g_subprocess_send_signal(w->proc, SIGTERM);
  ck_assert(g_subprocess_wait(w->proc, NULL, &error));
  log = worker_log(w);
  ck_assert_msg(g_subprocess_get_if_exited(w->proc) &&
                    g_subprocess_get_exit_status(w->proc) == 1,
                "status %d:\n%s", exit_status_of(w->proc), log);
  ck_assert(strstr(log, "second signal") != NULL);
  state = state_of(ctx, id);
  ck_assert_str_eq(state, "queued");
}
END_TEST

/* docs/redis.md promises a warning about an eviction policy that loses
 * messages; it must reach the worker's log. */
START_TEST(test_eviction_policy_warning_reaches_the_worker_log)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *log = NULL;
  redisReply *r;

  r = sluice_test_redis_command(server,
                                "CONFIG SET maxmemory-policy allkeys-lru");
  ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  g_strfreev(ctx->env);
  ctx->env = cli_environ(sluice_test_redis_url(server), ctx->mode, ctx->ns);
  w = worker_start(ctx, NULL);
  wait_for_log(w, "maxmemory-policy allkeys-lru");
  log = worker_stop(w);
}
END_TEST

/* A task name no live worker serves: the enqueue warns (and enqueues),
 * inspect says why it waits, the worker says it once. */
START_TEST(test_unserved_task_names_are_reported)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Run) lonely = cli(ctx, "enqueue", "demo.noop", NULL);
  g_autoptr(Worker) w = NULL;
  g_autoptr(Run) typo = NULL;
  g_autoptr(Run) fine = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *log = NULL;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  assert_status(lonely, 0);
  ck_assert_msg(strstr(lonely->err, "no worker of namespace") != NULL, "%s",
                lonely->err);
  w = worker_start(ctx, NULL);
  typo = cli(ctx, "enqueue", "demo.unknwon", NULL);
  assert_status(typo, 0);
  ck_assert_msg(strstr(typo->err, "serves a task named “demo.unknwon”") != NULL,
                "%s", typo->err);
  fine = cli(ctx, "enqueue", "demo.noop", NULL);
  assert_status(fine, 0);
  ck_assert_msg(fine->err[0] == '\0', "%s", fine->err);
  id = g_strstrip(g_strdup(typo->out));
  for (;;) {
    const gchar *note;
    g_clear_pointer(&record, json_node_unref);
    record = inspect(ctx, id);
    note = member_string(object_of(record), "error");
    if (note != NULL && strstr(note, "no worker knows a task named") != NULL)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline, "never deferred");
    g_usleep(20 * 1000);
  }
  ck_assert_str_eq(member_string(object_of(record), "state"), "scheduled");
  ck_assert(member_int(object_of(record), "due_at") > 0);
  log = worker_stop(w);
  ck_assert_uint_eq(count_in(log, "no task named “demo.unknwon”"), 1);
}
END_TEST

/* A worker killed with -9 is shown dead once its lease lapsed, never as
 * alive; a live one is shown with what it serves. */
START_TEST(test_stats_show_a_killed_worker_as_dead)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) live = worker_start(ctx, "--worker-id", "w-live", NULL);
  g_autoptr(Worker) doomed = worker_start(
      ctx, "--worker-id", "w-doomed", "--visibility-timeout", "600ms", NULL);
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;
  g_autofree gchar *log = NULL;

  g_subprocess_send_signal(doomed->proc, SIGKILL);
  ck_assert(g_subprocess_wait(doomed->proc, NULL, NULL));
  for (;;) {
    g_autoptr(JsonNode) stats = stats_json(ctx);
    JsonArray *workers =
        json_object_get_array_member(object_of(stats), "workers");
    gboolean doomed_dead = FALSE, live_alive = FALSE;

    for (guint i = 0; i < json_array_get_length(workers); i++) {
      JsonObject *wk = json_array_get_object_element(workers, i);
      const gchar *id = member_string(wk, "id");
      gboolean alive = json_object_get_boolean_member(wk, "alive");
      if (g_strcmp0(id, "w-doomed") == 0 && !alive)
        doomed_dead = TRUE;
      if (g_strcmp0(id, "w-live") == 0 && alive) {
        JsonArray *tasks = json_object_get_array_member(wk, "tasks");
        live_alive = TRUE;
        ck_assert_uint_ge(json_array_get_length(tasks), 7);
        ck_assert(member_int(wk, "pid") > 0);
      }
    }
    if (doomed_dead && live_alive)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline, "never shown dead");
    g_usleep(50 * 1000);
  }
  {
    g_autoptr(Run) table = cli(ctx, "stats", NULL);
    assert_status(table, 0);
    ck_assert_msg(strstr(table->out, "dead") != NULL, "%s", table->out);
  }
  log = worker_stop(live);
}
END_TEST

/* With --isolation process, a task that aborts costs one attempt at a
 * time: it is retried and buried with the signal in its history, while the
 * same worker process, never restarted, finishes all its batch-mates. */
START_TEST(test_process_isolation_survives_a_crash)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = NULL;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autofree gchar *poison = NULL;
  g_autofree gchar *hung = NULL;
  g_autofree gchar *pid = NULL;
  g_autofree gchar *log = NULL;
  g_autoptr(Run) refused = NULL;
  const gchar *error_text;

  /* A message's own hard timeout, on a task that has none. */
  hung = enqueue(ctx, "demo.sleep", "{\"ms\": 600000}", "--hard-timeout",
                 "300ms", "--max-attempts", "1", NULL);
  refused = cli(ctx, "enqueue", "demo.noop", "--hard-timeout", "0s", NULL);
  assert_status(refused, 2);
  ck_assert_msg(strstr(refused->err, "--hard-timeout") != NULL, "%s",
                refused->err);
  for (guint i = 0; i < 10; i++)
    g_ptr_array_add(ids, enqueue(ctx, "demo.sleep", "{\"ms\": 30}", NULL));
  poison = enqueue(ctx, "demo.crash", "--max-attempts", "2", NULL);
  for (guint i = 0; i < 20; i++)
    g_ptr_array_add(ids, enqueue(ctx, "demo.sleep", "{\"ms\": 30}", NULL));
  w = worker_start(ctx, "--isolation", "process", "--concurrency", "4",
                   "--backoff", "100ms", NULL);
  pid = g_strdup(g_subprocess_get_identifier(w->proc));

  g_free(wait_for_state(ctx, poison, "dead_lettered", NULL));
  for (guint i = 0; i < ids->len; i++)
    g_free(wait_for_state(ctx, ids->pdata[i], "succeeded", NULL));
  ck_assert_str_eq(g_subprocess_get_identifier(w->proc), pid);
  {
    g_autoptr(JsonNode) record = inspect(ctx, poison);
    JsonObject *o = object_of(record);
    ck_assert_int_eq(member_int(o, "attempt"), 2);
    ck_assert_str_eq(member_string(o, "dead_letter_reason"), "max_attempts");
    error_text = member_string(o, "error");
    ck_assert_msg(strstr(error_text, "killed by SIGABRT") != NULL, "error: %s",
                  error_text);
  }
  g_free(wait_for_state(ctx, hung, "dead_lettered", NULL));
  {
    g_autoptr(JsonNode) record = inspect(ctx, hung);
    error_text = member_string(object_of(record), "error");
    ck_assert_msg(strstr(error_text, "hard timeout of 300 ms") != NULL,
                  "error: %s", error_text);
  }
  log = worker_stop(w);
  ck_assert_msg(strstr(log, "process isolation") != NULL, "%s", log);
  ck_assert_msg(count_in(log, "child process was lost: killed by SIGABRT") == 2,
                "%s", log);
}
END_TEST

/* Datagrams received on @fd until @needle is among them or the deadline
 * passes; appended to @got. */
static gboolean
notify_until(int fd, GString *got, const gchar *needle)
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  while (strstr(got->str, needle) == NULL) {
    struct pollfd p = {fd, POLLIN, 0};
    gchar buf[4096];
    ssize_t n;
    gint64 left = (deadline - g_get_monotonic_time()) / 1000;

    if (left <= 0)
      return FALSE;
    if (poll(&p, 1, (int)MIN(left, 1000)) <= 0)
      continue;
    n = recv(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      g_string_append(got, buf);
      g_string_append_c(got, '\n');
    }
  }
  return TRUE;
}

/* Under systemd (a NOTIFY_SOCKET of the test's own): READY=1 once it
 * serves, STATUS= with counts, WATCHDOG=1 at half of WatchdogSec, and
 * STOPPING=1 when SIGTERM starts the graceful stop. */
START_TEST(test_systemd_notify)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *path = g_build_filename(ctx->dir, "notify.sock", NULL);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  g_autoptr(GString) got = g_string_new(NULL);
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *log = NULL;
  gchar **saved = ctx->env;
  gchar **env;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  ck_assert_int_ge(fd, 0);
  ck_assert_uint_lt(strlen(path), sizeof addr.sun_path);
  strcpy(addr.sun_path, path);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  env = g_environ_setenv(g_strdupv(saved), "NOTIFY_SOCKET", path, TRUE);
  env = g_environ_setenv(env, "WATCHDOG_USEC", "400000", TRUE);
  ctx->env = env;
  w = worker_start(ctx, NULL);
  ctx->env = saved;
  g_strfreev(env);

  ck_assert_msg(notify_until(fd, got, "READY=1"), "%s", got->str);
  ck_assert_msg(notify_until(fd, got, "STATUS=running"), "%s", got->str);
  id = enqueue(ctx, "demo.noop", NULL);
  g_free(wait_for_state(ctx, id, "succeeded", NULL));
  /* Two pings at least: they keep coming from the housekeeping thread. */
  ck_assert_msg(notify_until(fd, got, "WATCHDOG=1\nWATCHDOG=1"), "%s",
                got->str);
  log = worker_stop(w);
  ck_assert_msg(notify_until(fd, got, "STOPPING=1"), "%s", got->str);
  close(fd);
}
END_TEST

/* "Ready" means it can serve: a worker started while its Redis is down
 * neither logs "ready" nor sends READY=1 until Redis answers, and says it
 * waits in STATUS= meanwhile. */
START_TEST(test_ready_waits_for_redis)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(Ctx) ctx = ctx_new(1);
  g_autofree gchar *path = g_build_filename(ctx->dir, "notify.sock", NULL);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  g_autoptr(GString) got = g_string_new(NULL);
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *log = NULL;
  g_autofree gchar *id = NULL;
  gchar **env;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  ck_assert_int_ge(fd, 0);
  ck_assert_uint_lt(strlen(path), sizeof addr.sun_path);
  strcpy(addr.sun_path, path);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  g_strfreev(ctx->env);
  env = cli_environ(sluice_test_redis_url(server), ctx->mode, ctx->ns);
  ctx->env = g_environ_setenv(env, "NOTIFY_SOCKET", path, TRUE);
  sluice_test_redis_kill(server, SIGTERM);
  w = worker_spawn(ctx, NULL);
  wait_for_log(w, "the broker is unreachable");
  /* The first word from the worker: it waits, it is not ready. */
  ck_assert_msg(notify_until(fd, got, "STATUS="), "%s", got->str);
  ck_assert_msg(strstr(got->str, "READY=1") == NULL, "%s", got->str);
  log = worker_log(w);
  ck_assert_msg(strstr(log, " ready: ") == NULL, "%s", log);
  g_clear_pointer(&log, g_free);

  ck_assert(sluice_test_redis_restart(server, &error));
  ck_assert_msg(notify_until(fd, got, "READY=1"), "%s", got->str);
  log = worker_log(w);
  ck_assert_msg(strstr(log, " ready: ") != NULL &&
                    strstr(log, "reachable again") != NULL &&
                    strstr(log, " ready: ") > strstr(log, "reachable again"),
                "%s", log);
  g_clear_pointer(&log, g_free);
  /* And it serves. */
  id = enqueue(ctx, "demo.noop", NULL);
  g_free(wait_for_state(ctx, id, "succeeded", NULL));
  g_free(worker_stop(w));
  close(fd);
}
END_TEST

/* A namespace is used in one mode: a client of the other is refused with
 * an error naming both, in either direction. */
/* ---- Seeing and steering -------------------------------------------------- */

/* `sluice ARGS... NULL` with its stderr on a terminal (a pseudo-terminal
 * of the test's own); what it wrote there is in run->err. */
static Run *cli_on_terminal(Ctx *ctx, const gchar *first,
                            ...) G_GNUC_NULL_TERMINATED;
static Run *
cli_on_terminal(Ctx *ctx, const gchar *first, ...)
{
  g_autoptr(GSubprocessLauncher) launcher =
      g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) err = g_string_new(NULL);
  g_autofree gchar *out = NULL;
  Run *run = g_new0(Run, 1);
  int master, slave;
  va_list ap;

  master = posix_openpt(O_RDWR | O_NOCTTY);
  ck_assert_int_ge(master, 0);
  ck_assert(grantpt(master) == 0 && unlockpt(master) == 0);
  slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ck_assert_int_ge(slave, 0);
  g_ptr_array_add(argv, (gpointer)SLUICE_BIN);
  va_start(ap, first);
  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  va_end(ap);
  g_ptr_array_add(argv, NULL);
  g_subprocess_launcher_set_environ(launcher, ctx->env);
  g_subprocess_launcher_take_stderr_fd(launcher, slave);
  proc = g_subprocess_launcher_spawnv(
      launcher, (const gchar *const *)argv->pdata, &error);
  ck_assert_msg(proc != NULL, "spawn: %s", error != NULL ? error->message : "");
  g_clear_object(&launcher); /* closes our copy of the terminal's end */
  /* Read the terminal until its last writer is gone (EIO), so a child
   * never blocks on a full terminal. */
  for (;;) {
    gchar buf[4096];
    ssize_t n = read(master, buf, sizeof buf);
    if (n > 0)
      g_string_append_len(err, buf, n);
    else if (n < 0 && errno == EINTR)
      continue;
    else
      break;
  }
  close(master);
  ck_assert(g_subprocess_communicate_utf8(proc, NULL, NULL, &out, NULL, NULL));
  run->status = exit_status_of(proc);
  run->out = g_steal_pointer(&out);
  run->err = g_strdup(err->str);
  return run;
}

/* The tasks `sluice ls ARGS... --json` listed (a JSON array node), and its
 * next_cursor in @out_cursor (nullable). */
static JsonNode *ls_json(Ctx *ctx, gchar **out_cursor, const gchar *first,
                         ...) G_GNUC_NULL_TERMINATED;
static JsonNode *
ls_json(Ctx *ctx, gchar **out_cursor, const gchar *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(Run) run = NULL;
  g_autoptr(JsonNode) root = NULL;
  JsonObject *o;
  va_list ap;

  g_ptr_array_add(argv, (gpointer) "ls");
  va_start(ap, first);
  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  va_end(ap);
  g_ptr_array_add(argv, (gpointer) "--json");
  g_ptr_array_add(argv, NULL);
  run = run_argv(ctx->env, NULL, (const gchar *const *)argv->pdata);
  assert_status(run, 0);
  root = parse_json(run->out);
  o = object_of(root);
  if (out_cursor != NULL)
    *out_cursor = g_strdup(member_string(o, "next_cursor"));
  return json_node_copy(json_object_get_member(o, "tasks"));
}

static guint
n_listed(JsonNode *tasks)
{
  return json_array_get_length(json_node_get_array(tasks));
}

static JsonObject *
listed(JsonNode *tasks, guint i)
{
  return json_array_get_object_element(json_node_get_array(tasks), i);
}

/* Every state, paged with cursors: what `ls` prints, in JSON and tables. */
START_TEST(test_ls_lists_each_state)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(JsonNode) page = NULL;
  g_autoptr(JsonNode) rest = NULL;
  g_autoptr(Run) table = NULL;
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *cursor = NULL;
  g_autofree gchar *end = NULL;
  g_autofree gchar *q1 = enqueue(ctx, "demo.noop", "--queue", "q-ls", NULL);
  g_autofree gchar *q2 =
      enqueue(ctx, "demo.echo", "{\"n\": 2}", "--queue", "q-ls", NULL);
  g_autofree gchar *q3 = enqueue(ctx, "demo.noop", "--queue", "q-ls", NULL);
  g_autofree gchar *later =
      enqueue(ctx, "demo.noop", "--queue", "q-ls", "--delay", "1h", NULL);
  g_autofree gchar *failing = NULL;
  g_autofree gchar *fatal = NULL;
  g_autofree gchar *sleeper = NULL;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  /* Queued, two pages: in the order a worker takes them. */
  page = ls_json(ctx, &cursor, "q-ls", "-n", "2", NULL);
  ck_assert_uint_eq(n_listed(page), 2);
  ck_assert_str_eq(member_string(listed(page, 0), "id"), q1);
  ck_assert_str_eq(member_string(listed(page, 1), "id"), q2);
  ck_assert_str_eq(member_string(listed(page, 1), "state"), "queued");
  ck_assert_ptr_nonnull(cursor);
  rest = ls_json(ctx, &end, "q-ls", "-n", "2", "--cursor", cursor, NULL);
  ck_assert_uint_eq(n_listed(rest), 1);
  ck_assert_str_eq(member_string(listed(rest, 0), "id"), q3);
  ck_assert_ptr_null(end);
  g_clear_pointer(&page, json_node_unref);
  page = ls_json(ctx, NULL, "q-ls", "--task", "demo.echo", NULL);
  ck_assert_uint_eq(n_listed(page), 1);
  ck_assert_str_eq(member_string(listed(page, 0), "id"), q2);
  table = cli(ctx, "ls", "q-ls", "-n", "2", NULL);
  assert_status(table, 0);
  ck_assert_msg(strstr(table->out, q1) != NULL &&
                    strstr(table->out, "--cursor ") != NULL &&
                    strstr(table->out, "{\"n\":2}") != NULL,
                "%s", table->out);

  /* Scheduled, with its due time. */
  g_clear_pointer(&page, json_node_unref);
  page = ls_json(ctx, NULL, "--state", "scheduled", NULL);
  ck_assert_uint_eq(n_listed(page), 1);
  ck_assert_str_eq(member_string(listed(page, 0), "id"), later);
  ck_assert(member_int(listed(page, 0), "due_at") >
            member_int(listed(page, 0), "enqueued_at"));

  /* Retrying (with its next attempt and last error), dead, running. */
  w = worker_start(ctx, "--queue", "q-run", "--backoff", "1h", "--no-jitter",
                   "--concurrency", "2", NULL);
  failing = enqueue(ctx, "demo.fail", "--queue", "q-run", NULL);
  fatal = enqueue(ctx, "demo.fatal", "--queue", "q-run", NULL);
  sleeper =
      enqueue(ctx, "demo.sleep", "{\"ms\": 600000}", "--queue", "q-run", NULL);
  g_free(wait_for_state(ctx, failing, "retrying", NULL));
  g_free(wait_for_state(ctx, fatal, "dead_lettered", NULL));
  g_clear_pointer(&page, json_node_unref);
  page = ls_json(ctx, NULL, "q-run", "--state", "retrying", NULL);
  ck_assert_uint_eq(n_listed(page), 1);
  ck_assert_str_eq(member_string(listed(page, 0), "id"), failing);
  ck_assert_int_eq(member_int(listed(page, 0), "attempt"), 2);
  ck_assert(member_int(listed(page, 0), "due_at") > 0);
  ck_assert(strstr(member_string(listed(page, 0), "error"), "demo.fail") !=
            NULL);
  g_clear_pointer(&page, json_node_unref);
  page = ls_json(ctx, NULL, "--state", "dead", NULL);
  ck_assert_uint_eq(n_listed(page), 1);
  ck_assert_str_eq(member_string(listed(page, 0), "id"), fatal);
  ck_assert_str_eq(member_string(listed(page, 0), "dead_letter_reason"),
                   "non_retryable");
  ck_assert(member_string(listed(page, 0), "entry_id") != NULL);
  /* Running tasks are what workers announce (every 2 s). */
  for (;;) {
    g_clear_pointer(&page, json_node_unref);
    page = ls_json(ctx, NULL, "--state", "running", NULL);
    if (n_listed(page) == 1)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the running task was never listed");
    g_usleep(100 * 1000);
  }
  ck_assert_str_eq(member_string(listed(page, 0), "id"), sleeper);
  ck_assert(member_string(listed(page, 0), "worker") != NULL);
  ck_assert(member_int(listed(page, 0), "started_at") > 0);
  g_clear_pointer(&table, run_free);
  table = cli(ctx, "ls", "--state", "running", NULL);
  ck_assert_msg(strstr(table->out, sleeper) != NULL, "%s", table->out);
  {
    g_autoptr(Run) none = cli(ctx, "ls", "nowhere", NULL);
    g_autoptr(Run) bad = cli(ctx, "ls", "--state", "finished", NULL);
    g_autoptr(Run) no_queue = cli(ctx, "ls", NULL);
    assert_status(none, 0);
    ck_assert_str_eq(none->out, "no queued tasks in queue nowhere\n");
    assert_status(bad, 2);
    assert_one_line_error(bad, "“finished”");
    assert_status(no_queue, 2);
    assert_one_line_error(no_queue, "which queue");
  }
  g_free(worker_stop(w));
}
END_TEST

/* A paused queue: the worker says so and takes nothing from it, producers
 * still enqueue, stats show it; resumed, the task runs. */
START_TEST(test_pause_and_resume_a_queue)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, NULL);
  g_autoptr(Run) paused = cli(ctx, "pause", "default", NULL);
  g_autoptr(Run) stats = NULL;
  g_autoptr(Run) table = NULL;
  g_autoptr(Run) resumed = NULL;
  g_autoptr(Run) result = NULL;
  g_autoptr(JsonNode) s = NULL;
  g_autoptr(JsonNode) page = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *state = NULL;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;
  JsonArray *queues;
  gboolean found = FALSE;

  assert_status(paused, 0);
  for (;;) {
    g_autofree gchar *log = worker_log(w);
    if (strstr(log, "queue “default” is paused") != NULL)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the worker never saw the pause:\n%s", log);
    g_usleep(20 * 1000);
  }
  id = enqueue(ctx, "demo.noop", NULL);
  stats = cli(ctx, "stats", "--json", NULL);
  assert_status(stats, 0);
  s = parse_json(stats->out);
  queues = json_object_get_array_member(object_of(s), "queues");
  for (guint i = 0; i < json_array_get_length(queues); i++) {
    JsonObject *q = json_array_get_object_element(queues, i);
    if (g_strcmp0(member_string(q, "name"), "default") == 0) {
      found = TRUE;
      ck_assert(json_object_get_boolean_member(q, "paused"));
    }
  }
  ck_assert_msg(found, "%s", stats->out);
  table = cli(ctx, "stats", NULL);
  ck_assert_msg(strstr(table->out, "paused") != NULL, "%s", table->out);
  /* Longer than a pause takes to reach a worker: it stays queued. */
  g_usleep(2 * G_USEC_PER_SEC);
  state = state_of(ctx, id);
  ck_assert_str_eq(state, "queued");
  page = ls_json(ctx, NULL, "default", NULL);
  ck_assert_uint_eq(n_listed(page), 1);

  resumed = cli(ctx, "resume", "default", NULL);
  assert_status(resumed, 0);
  result = cli(ctx, "result", id, "--wait", "60s", NULL);
  assert_status(result, 0);
  g_free(worker_stop(w));
}
END_TEST

/* Purging more than one task takes --yes; a dry run counts. */
START_TEST(test_purge_needs_yes)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Run) refused = NULL;
  g_autoptr(Run) dry = NULL;
  g_autoptr(Run) purged = NULL;
  g_autoptr(Run) one = NULL;
  g_autoptr(JsonNode) page = NULL;
  g_autoptr(JsonNode) j = NULL;

  for (guint i = 0; i < 3; i++)
    g_free(enqueue(ctx, "demo.noop", "--queue", "q-purge", NULL));
  refused = cli(ctx, "purge", "q-purge", NULL);
  assert_status(refused, 2);
  assert_one_line_error(refused, "--yes");
  ck_assert(strstr(refused->err, "3 ready tasks") != NULL);
  page = ls_json(ctx, NULL, "q-purge", NULL);
  ck_assert_uint_eq(n_listed(page), 3);
  dry = cli(ctx, "purge", "q-purge", "--dry-run", NULL);
  assert_status(dry, 0);
  ck_assert_str_eq(dry->out, "would purge 3 ready tasks of queue q-purge\n");
  purged = cli(ctx, "purge", "q-purge", "--yes", "--json", NULL);
  assert_status(purged, 0);
  j = parse_json(purged->out);
  ck_assert_int_eq(member_int(object_of(j), "purged"), 3);
  /* One task is not many: no --yes needed. */
  g_free(enqueue(ctx, "demo.noop", "--queue", "q-purge", NULL));
  one = cli(ctx, "purge", "q-purge", NULL);
  assert_status(one, 0);
  ck_assert_str_eq(one->out, "purged 1 ready task of queue q-purge\n");
}
END_TEST

/* Run now takes a delayed task off the schedule; delete finds a task
 * wherever it is; both say when they cannot. */
START_TEST(test_run_now_and_delete)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, NULL);
  g_autofree gchar *later = enqueue(ctx, "demo.noop", "--delay", "1h", NULL);
  g_autofree gchar *doomed = enqueue(ctx, "demo.noop", "--delay", "1h", NULL);
  g_autofree gchar *fatal = enqueue(ctx, "demo.fatal", NULL);
  g_autoptr(Run) moved = cli(ctx, "run-now", later, NULL);
  g_autoptr(Run) result = NULL;
  g_autoptr(Run) again = NULL;
  g_autoptr(Run) del = NULL;
  g_autoptr(Run) del_dead = NULL;
  g_autoptr(Run) dead = NULL;
  g_autoptr(JsonNode) j = NULL;
  g_autofree gchar *state = NULL;

  assert_status(moved, 0);
  result = cli(ctx, "result", later, "--wait", "60s", NULL);
  assert_status(result, 0);
  again = cli(ctx, "run-now", later, NULL);
  assert_status(again, 1);
  assert_one_line_error(again, "not on the schedule");
  ck_assert(strstr(again->err, "succeeded") != NULL);

  del = cli(ctx, "delete", doomed, "--json", NULL);
  assert_status(del, 0);
  j = parse_json(del->out);
  ck_assert_str_eq(member_string(object_of(j), "outcome"), "unscheduled");
  state = state_of(ctx, doomed);
  ck_assert_str_eq(state, "cancelled");
  g_free(wait_for_state(ctx, fatal, "dead_lettered", NULL));
  del_dead = cli(ctx, "delete", fatal, NULL);
  assert_status(del_dead, 0);
  ck_assert(strstr(del_dead->out, "was a dead letter") != NULL);
  dead = cli(ctx, "dlq", "list", NULL);
  ck_assert_str_eq(dead->out, "no dead letters\n");
  g_free(worker_stop(w));
}
END_TEST

/* Bulk dead-letter commands: more than one entry takes --yes; a progress
 * bar on a terminal, a summary line always. */
START_TEST(test_dlq_bulk_commands_need_yes)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(Worker) w = worker_start(ctx, NULL);
  g_autoptr(Run) replay = NULL;
  g_autoptr(Run) purge = NULL;
  g_autoptr(Run) replayed = NULL;
  g_autoptr(Run) purged = NULL;
  g_autoptr(Run) list = NULL;
  gchar *ids[3];

  for (guint i = 0; i < 3; i++)
    ids[i] = enqueue(ctx, "demo.fatal", NULL);
  for (guint i = 0; i < 3; i++) {
    g_free(wait_for_state(ctx, ids[i], "dead_lettered", NULL));
    g_free(ids[i]);
  }
  g_free(worker_stop(w));

  replay = cli(ctx, "dlq", "replay", "--all", NULL);
  assert_status(replay, 2);
  assert_one_line_error(replay, "--yes");
  purge = cli(ctx, "dlq", "purge", NULL);
  assert_status(purge, 2);
  assert_one_line_error(purge, "--yes");
  ck_assert(strstr(purge->err, "3 dead letters") != NULL);
  list = cli(ctx, "dlq", "list", "--json", NULL);
  {
    g_autoptr(JsonNode) l = parse_json(list->out);
    ck_assert_int_eq(json_array_get_length(
                         json_object_get_array_member(object_of(l), "entries")),
                     3);
  }

  /* Off a terminal: the summary line alone. */
  replayed = cli(ctx, "dlq", "replay", "--all", "--yes", NULL);
  assert_status(replayed, 0);
  ck_assert_str_eq(replayed->out, "replayed 3 dead letters\n");
  ck_assert_str_eq(replayed->err, "");
  g_clear_pointer(&w, worker_free);
  w = worker_start(ctx, NULL);
  for (;;) {
    g_autoptr(Run) l = cli(ctx, "dlq", "list", "--json", NULL);
    g_autoptr(JsonNode) n = parse_json(l->out);
    if (json_array_get_length(
            json_object_get_array_member(object_of(n), "entries")) == 3)
      break;
    g_usleep(20 * 1000);
  }
  g_free(worker_stop(w));

  /* On a terminal: a bar on stderr too. */
  purged = cli_on_terminal(ctx, "dlq", "purge", "--yes", NULL);
  assert_status(purged, 0);
  ck_assert_str_eq(purged->out, "purged 3 dead letters\n");
  ck_assert_msg(strstr(purged->err, "purging dead letters [") != NULL &&
                    strstr(purged->err, "3/3") != NULL,
                "no progress bar: [%s]", purged->err);
}
END_TEST

/* Schedules from the worker's key file: dispatched, and listed with their
 * next and last occurrences; a bad one stops the worker at start. */
START_TEST(test_periodic_from_the_key_file)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *config = g_build_filename(ctx->dir, "periodic.conf", NULL);
  g_autofree gchar *bad = g_build_filename(ctx->dir, "bad.conf", NULL);
  g_autofree gchar *config_arg = g_strdup_printf("--config=%s", config);
  g_autofree gchar *bad_arg = g_strdup_printf("--config=%s", bad);
  g_autoptr(Worker) w = NULL;
  g_autoptr(Run) listed_before = NULL;
  g_autoptr(Run) table = NULL;
  g_autoptr(Run) refused = NULL;
  g_autofree gchar *occurrence = NULL;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;
  gint64 last = 0;

  ck_assert(g_file_set_contents(config,
                                "[periodic \"tick\"]\n"
                                "task = demo.echo\n"
                                "args = {\"from\": \"the key file\"}\n"
                                "interval = 1s\n"
                                "\n"
                                "[periodic \"nightly\"]\n"
                                "task = demo.noop\n"
                                "cron = 30 2 * * *\n"
                                "timezone = Europe/Berlin\n"
                                "overlap = skip\n",
                                -1, NULL));
  listed_before = cli(ctx, "periodic", "ls", config_arg, "--json", NULL);
  assert_status(listed_before, 0);
  {
    g_autoptr(JsonNode) j = parse_json(listed_before->out);
    JsonArray *a = json_object_get_array_member(object_of(j), "schedules");
    ck_assert_int_eq(json_array_get_length(a), 2);
    ck_assert_str_eq(member_string(json_array_get_object_element(a, 0), "name"),
                     "tick");
    ck_assert(member_is_null(json_array_get_object_element(a, 0), "last_at"));
    ck_assert(member_int(json_array_get_object_element(a, 0), "next_at") > 0);
    ck_assert_str_eq(
        member_string(json_array_get_object_element(a, 1), "timezone"),
        "Europe/Berlin");
  }

  w = worker_start(ctx, config_arg, NULL);
  for (;;) {
    g_autoptr(Run) run = cli(ctx, "periodic", "ls", config_arg, "--json", NULL);
    g_autoptr(JsonNode) j = parse_json(run->out);
    JsonObject *tick = json_array_get_object_element(
        json_object_get_array_member(object_of(j), "schedules"), 0);
    if (!member_is_null(tick, "last_at")) {
      last = member_int(tick, "last_at");
      break;
    }
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "no occurrence was dispatched");
    g_usleep(100 * 1000);
  }
  occurrence = g_strdup_printf("periodic:tick:%" G_GINT64_FORMAT, last);
  {
    g_autoptr(Run) result =
        cli(ctx, "result", occurrence, "--wait", "60s", "--json", NULL);
    g_autoptr(JsonNode) r = NULL;
    assert_status(result, 0);
    r = parse_json(result->out);
    ck_assert_str_eq(
        member_string(json_object_get_object_member(object_of(r), "result"),
                      "from"),
        "the key file");
  }
  table = cli(ctx, "periodic", "ls", config_arg, NULL);
  assert_status(table, 0);
  ck_assert_msg(strstr(table->out, "every 1s") != NULL &&
                    strstr(table->out, "cron 30 2 * * * in Europe/Berlin") !=
                        NULL,
                "%s", table->out);
  g_free(worker_stop(w));

  /* A mistake in a schedule: the worker refuses to start, naming it. */
  ck_assert(g_file_set_contents(bad,
                                "[periodic \"broken\"]\n"
                                "task = demo.noop\n"
                                "cron = 61 * * * *\n",
                                -1, NULL));
  refused = cli(ctx, "worker", "--module", DEMO_MODULE, bad_arg, NULL);
  assert_status(refused, 2);
  assert_one_line_error(refused, "[periodic \"broken\"]");
}
END_TEST

START_TEST(test_mode_mismatch_is_refused)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  const gchar *other = g_str_equal(ctx->mode, "fast") ? "reliable" : "fast";
  g_autofree gchar *id = enqueue(ctx, "demo.noop", NULL);
  g_auto(GStrv) env = cli_environ(
      sluice_test_redis_url(sluice_test_redis_shared()), other, ctx->ns);
  g_autoptr(Run) enq = cli_env(env, NULL, "enqueue", "demo.noop", NULL);
  g_autoptr(Run) worker =
      cli_env(env, NULL, "worker", "--module", DEMO_MODULE, NULL);
  g_autoptr(Run) dlq = cli_env(env, NULL, "dlq", "list", NULL);
  g_autofree gchar *both = g_strdup_printf("is used in %s mode", ctx->mode);

  g_autofree gchar *fix =
      g_strdup_printf("set this client's mode to %s (--mode, SLUICE_MODE or "
                      "mode= in the [connection] group",
                      ctx->mode);

  assert_status(enq, 2);
  assert_one_line_error(enq, both);
  ck_assert(strstr(enq->err, other) != NULL);
  /* A command-line user is told the option, not the C field. */
  assert_one_line_error(enq, fix);
  ck_assert_msg(strstr(enq->err, "SluiceRedisOptions") == NULL, "%s", enq->err);
  assert_status(worker, 2);
  ck_assert_msg(strstr(worker->err, both) != NULL, "%s", worker->err);
  ck_assert_msg(strstr(worker->err, "SluiceRedisOptions") == NULL, "%s",
                worker->err);
  assert_status(dlq, 2);
}
END_TEST

/* ---- Errors a user will make --------------------------------------------- */

START_TEST(test_error_unreachable_redis)
{
  guint16 port = sluice_test_closed_port();
  g_autofree gchar *url =
      g_strdup_printf("redis://:hunter2@127.0.0.1:%u/0", port);
  g_autofree gchar *shown = g_strdup_printf("127.0.0.1:%u", port);
  g_auto(GStrv) env = cli_environ(url, "fast", NULL);
  g_autoptr(Run) enq = cli_env(env, NULL, "enqueue", "demo.noop", NULL);
  g_autoptr(Run) stats = cli_env(env, NULL, "stats", NULL);
  g_autoptr(Run) worker = cli_env(env, NULL, "worker", "--module", DEMO_MODULE,
                                  "--fail-fast", NULL);

  assert_status(enq, 1);
  assert_one_line_error(enq, shown);
  ck_assert(strstr(enq->err, "hunter2") == NULL);
  assert_status(stats, 1);
  assert_one_line_error(stats, shown);
  /* A worker exits only when asked to fail fast; by default it waits (see
   * test_worker_waits_for_redis_at_start). */
  assert_status(worker, 1);
  assert_one_line_error(worker, shown);
}
END_TEST

START_TEST(test_error_wrong_password)
{
  SluiceTestRedisOptions options = {.requirepass = "right-one"};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(&options);
  g_autofree gchar *wrong = NULL;
  g_autofree gchar *none = NULL;
  g_auto(GStrv) wrong_env = NULL;
  g_auto(GStrv) none_env = NULL;
  g_auto(GStrv) right_env = NULL;
  g_autoptr(Run) refused = NULL;
  g_autoptr(Run) missing = NULL;
  g_autoptr(Run) fine = NULL;

  wrong = g_strdup_printf("redis://:wrong-one@127.0.0.1:%u/0",
                          sluice_test_redis_port(server));
  none =
      g_strdup_printf("redis://127.0.0.1:%u/0", sluice_test_redis_port(server));
  wrong_env = cli_environ(wrong, "fast", "pw");
  none_env = cli_environ(none, "fast", "pw");
  right_env = cli_environ(sluice_test_redis_url(server), "fast", "pw");

  refused = cli_env(wrong_env, NULL, "stats", NULL);
  assert_status(refused, 1);
  assert_one_line_error(refused, "password");
  ck_assert(strstr(refused->err, "wrong-one") == NULL);
  missing = cli_env(none_env, NULL, "enqueue", "demo.noop", NULL);
  assert_status(missing, 1);
  assert_one_line_error(missing, "requires a password");
  fine = cli_env(right_env, NULL, "stats", NULL);
  assert_status(fine, 0);
}
END_TEST

START_TEST(test_error_usage)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  struct {
    const gchar *argv[8];
    int status;
    const gchar *needle;
  } cases[] = {
      {{"frobnicate", NULL}, 2, "unknown command “frobnicate”"},
      {{"--frob", NULL}, 2, "unknown option --frob"},
      {{"enqueue", "demo.noop", "--frob", NULL}, 2, "Unknown option --frob"},
      {{"stats", "--json", "--limit", "3", NULL}, 2, "--limit"},
      {{"enqueue", "demo.echo", "{\"a\": 1,, }", NULL}, 2, "line 1, column "},
      {{"enqueue", "demo.echo", "[1,\n 2", NULL}, 2, "line 2"},
      {{"enqueue", "demo.echo", "{'a': 1}", NULL},
       2,
       "line 1, column 2: unexpected \"'\", expected a key"},
      {{"enqueue", "demo.noop", "--delay", "5x", NULL}, 2, "“5x”"},
      {{"enqueue", "demo.noop", "--delay", "1s", "--at", NULL}, 2, "--at"},
      {{"enqueue", "demo.noop", "--at", "2030-13-01", NULL}, 2, "ISO 8601"},
      {{"enqueue", "demo.noop", "--max-attempts", "0", NULL},
       2,
       "--max-attempts"},
      {{"result", "x", "--wait", "10", NULL}, 2, "--wait"},
      {{"enqueue", NULL}, 2, "which task"},
      {{"enqueue", "no spaces allowed", NULL}, 2, "task"},
      {{"enqueue", "demo.noop", "--queue", "", NULL}, 2, "queue"},
      {{"inspect", "a", "b", NULL}, 2, "too many"},
      {{"worker", NULL}, 2, "--module"},
      {{"worker", "--concurrency", "0", "--module", DEMO_MODULE, NULL},
       2,
       "--concurrency"},
      {{"worker", "--module", DEMO_MODULE, "--rate-limit", "emails", NULL},
       2,
       "--rate-limit: “emails” names no queue"},
      {{"worker", "--module", DEMO_MODULE, "--rate-limit", "emails=10", NULL},
       2,
       "QUEUE=COUNT/PERIOD"},
      {{"worker", "--module", DEMO_MODULE, "--rate-limit", "e=ten/1s", NULL},
       2,
       "--rate-limit"},
      {{"worker", "--module", DEMO_MODULE, "--rate-limit", "e=10/0s", NULL},
       2,
       "rate_limit.period_ms"},
      {{"worker", "--module", DEMO_MODULE, "--concurrency-limit", "r=0", NULL},
       2,
       "--concurrency-limit"},
      {{"worker", "--module", DEMO_MODULE, "--weight", "other=3", NULL},
       2,
       "“other” is not one of the worker's queues"},
      {{"worker", "--module", DEMO_MODULE, "--weight", "default=0", NULL},
       2,
       "--weight"},
      {{"stats", "--mode", "memory", NULL}, 2, "memory"},
      {{"stats", "--mode", "fsat", NULL}, 2, "“fsat” (from --mode)"},
      {{"stats", "--min-replicas-ack", "x", NULL},
       2,
       "“x” (from --min-replicas-ack)"},
      {{"stats", "--url", "sqlite:///nonexistent/x.db", "--min-replicas-ack",
        "1", NULL},
       2,
       "a SQLite database has none"},
      /* The test's Redis has no replica: the write is not confirmed. */
      {{"enqueue", "demo.noop", "--min-replicas-ack", "1", NULL},
       1,
       "not known to be on a replica"},
      {{"dlq", "list", "--reason", "tired", NULL}, 2, "“tired”"},
      {{"dlq", "frob", NULL}, 2, "unknown command “frob”"},
      {{"dlq", "replay", NULL}, 2, "--all"},
      /* -n is --limit wherever it exists, and nothing else anywhere. */
      {{"dlq", "replay", "--all", "-n", NULL}, 2, "-n"},
      {{"dlq", "purge", "-n", NULL}, 2, "-n"},
      {{"dlq", "list", "-n", "0", NULL}, 2, "--limit"},
      {{"ls", "default", "-n", "0", NULL}, 2, "--limit"},
      {{"ls", "default", "--cursor", "nope", NULL}, 2, "cursor"},
      {{"pause", NULL}, 2, "which queue"},
      {{"run-now", NULL}, 2, "task id"},
      {{"run-now", "no-such-task", NULL}, 1, "not on the schedule"},
      {{"periodic", "frob", NULL}, 2, "unknown command “frob”"},
      {{"worker", "--module", "/nonexistent/tasks.so", NULL},
       1,
       "/nonexistent/tasks.so"},
      {{"worker", "--module", NO_INIT_MODULE, NULL}, 1, "sluice_module_init"},
      {{"worker", "--module", DEMO_MODULE, "--module", DEMO_MODULE, NULL},
       1,
       "failed to initialise"},
      {{"inspect", "no-such-task", NULL}, 1, "no task with id no-such-task"},
      {{"result", "no-such-task", NULL}, 1, "no task with id no-such-task"},
      {{"cancel", "no-such-task", NULL}, 1, "no task with id no-such-task"},
      {{"dlq", "show", "1-1", NULL}, 1, "no dead letter with entry id 1-1"},
      {{"dlq", "replay", "1-1", NULL}, 1, "no dead letter with entry id 1-1"},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(Run) run = run_argv(ctx->env, NULL, cases[i].argv);
    assert_status(run, cases[i].status);
    assert_one_line_error(run, cases[i].needle);
    /* No message names a function of the code inside (sluice_x__y). */
    ck_assert_msg(strstr(run->err, "__") == NULL, "%s", run->err);
    if (cases[i].status == 1 && strstr(cases[i].needle, "module") != NULL)
      ck_assert(strstr(run->err, cases[i].argv[2]) != NULL);
  }
}
END_TEST

/* "Too large" is one kind of refusal with one exit status, whether the
 * message is over max_message_bytes or its arguments would take too much
 * memory once unpacked (a long array of small values). */
START_TEST(test_error_too_large_one_status)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autoptr(GString) bytes = g_string_new("\"");
  g_autoptr(GString) values = g_string_new("[0");
  g_autoptr(Run) long_string = NULL;
  g_autoptr(Run) many_values = NULL;

  for (gsize i = 0; i < 2 * 1024 * 1024; i++)
    g_string_append_c(bytes, 'x');
  g_string_append_c(bytes, '"');
  for (gsize i = 1; i < 200000; i++)
    g_string_append(values, ",0");
  g_string_append_c(values, ']');

  long_string =
      cli_env(ctx->env, bytes->str, "enqueue", "demo.echo", "-", NULL);
  assert_status(long_string, 2);
  assert_one_line_error(long_string, "over the limit");
  many_values =
      cli_env(ctx->env, values->str, "enqueue", "demo.echo", "-", NULL);
  assert_status(many_values, 2);
  assert_one_line_error(many_values, "once unpacked");
}
END_TEST

START_TEST(test_error_reliable_unavailable)
{
  g_auto(GStrv) env = cli_environ(
      sluice_test_redis_url(sluice_test_redis_shared()), NULL, "unavailable");
  g_autoptr(Run) run = cli_env(env, NULL, "stats", NULL);

  /* Registered only while this build lacks the reliable mode: the
   * default mode then fails, and says how to get going. */
  assert_status(run, 1);
  assert_one_line_error(run, "--mode fast");
}
END_TEST

/* ---- Help, configuration, stdin, `run` ----------------------------------- */

/* The names of cli/main.c's table of commands, read from its source. */
static GPtrArray *
command_table(void)
{
  g_autofree gchar *path = g_build_filename(TEST_SRCDIR, "cli", "main.c", NULL);
  g_autofree gchar *text = NULL;
  g_autoptr(GRegex) entry = g_regex_new("^\\s*\\{\"([a-z-]+)\", cli_cmd_",
                                        G_REGEX_MULTILINE, 0, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const gchar *table;

  ck_assert(g_file_get_contents(path, &text, NULL, NULL));
  table = strstr(text, "static const Command commands[] = {");
  ck_assert_ptr_nonnull(table);
  g_regex_match_full(entry, table, strstr(table, "};") - table, 0, 0, &match,
                     NULL);
  for (; g_match_info_matches(match); g_match_info_next(match, NULL))
    g_ptr_array_add(names, g_match_info_fetch(match, 1));
  ck_assert_uint_ge(names->len, 10);
  return names;
}

/* Whether @names (a GPtrArray of strings) and @found hold the same names,
 * each once; says which differ in @what. */
static void
assert_same_names(GPtrArray *names, GPtrArray *found, const gchar *what)
{
  for (guint i = 0; i < names->len; i++)
    ck_assert_msg(g_ptr_array_find_with_equal_func(found, names->pdata[i],
                                                   g_str_equal, NULL),
                  "%s lacks the command %s", what,
                  (const gchar *)names->pdata[i]);
  for (guint i = 0; i < found->len; i++)
    ck_assert_msg(g_ptr_array_find_with_equal_func(names, found->pdata[i],
                                                   g_str_equal, NULL),
                  "%s names %s, which is no command", what,
                  (const gchar *)found->pdata[i]);
}

/* sluice(1)'s SYNOPSIS and the unknown-command message name every command
 * of the table, and nothing else. */
START_TEST(test_every_command_is_named)
{
  g_autoptr(GPtrArray) names = command_table();
  g_autofree gchar *man_path =
      g_build_filename(TEST_SRCDIR, "cli", "sluice.1", NULL);
  g_autofree gchar *man = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GPtrArray) synopsis = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) listed = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  g_autoptr(Run) unknown = cli_env(env, NULL, "frobnicate", NULL);
  gboolean in_synopsis = FALSE;
  const gchar *list, *end;

  ck_assert(g_file_get_contents(man_path, &man, NULL, NULL));
  lines = g_strsplit(man, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    if (g_str_has_prefix(lines[i], ".SH "))
      in_synopsis = strcmp(lines[i], ".SH SYNOPSIS") == 0;
    else if (in_synopsis && g_str_has_prefix(lines[i], ".B sluice ")) {
      g_autoptr(GString) name = g_string_new(NULL);

      /* The first word, unescaped: run\-now is run-now. */
      for (const gchar *p = lines[i] + strlen(".B sluice ");
           *p != '\0' && *p != ' '; p++)
        if (*p != '\\')
          g_string_append_c(name, *p);
      if (!g_ptr_array_find_with_equal_func(synopsis, name->str, g_str_equal,
                                            NULL))
        g_ptr_array_add(synopsis, g_strdup(name->str));
    }
  }
  assert_same_names(names, synopsis, "sluice(1)'s SYNOPSIS");

  assert_status(unknown, 2);
  list = strstr(unknown->err, "the commands are ");
  end = list != NULL ? strstr(list, " (see") : NULL;
  ck_assert_msg(list != NULL && end != NULL, "%s", unknown->err);
  list += strlen("the commands are ");
  {
    g_autofree gchar *text = g_strndup(list, (gsize)(end - list));
    g_auto(GStrv) parts = NULL;
    gchar *and = strstr(text, " and ");

    ck_assert_msg(and != NULL, "%s", unknown->err);
    memcpy(and, ", ", 2);
    memmove(and+2, and+5, strlen(and+5) + 1);
    parts = g_strsplit(text, ", ", -1);
    for (guint i = 0; parts[i] != NULL; i++)
      g_ptr_array_add(listed, g_strdup(parts[i]));
  }
  assert_same_names(names, listed, "the unknown-command message");

  /* `sluice --help` lists the table's commands, one a line, and no other. */
  {
    g_autoptr(Run) help = cli_env(env, NULL, "--help", NULL);
    g_autoptr(GPtrArray) in_help = g_ptr_array_new_with_free_func(g_free);
    g_auto(GStrv) help_lines = NULL;
    gboolean in_commands = FALSE;

    assert_status(help, 0);
    help_lines = g_strsplit(help->out, "\n", -1);
    for (guint i = 0; help_lines[i] != NULL; i++) {
      if (strcmp(help_lines[i], "Commands:") == 0) {
        in_commands = TRUE;
        continue;
      }
      if (in_commands && help_lines[i][0] == '\0')
        break;
      if (in_commands) {
        g_auto(GStrv) words = g_strsplit_set(g_strstrip(help_lines[i]), " ", 2);
        g_ptr_array_add(in_help, g_strdup(words[0]));
      }
    }
    assert_same_names(names, in_help, "sluice --help");
  }

  /* The systemd unit's comment points at sections that exist. */
  {
    g_autofree gchar *unit_path = g_build_filename(
        TEST_SRCDIR, "contrib", "sluice-worker@.service.in", NULL);
    g_autofree gchar *unit = NULL;
    g_autofree gchar *refs = NULL;
    g_auto(GStrv) sections = NULL;
    const gchar *at;

    ck_assert(g_file_get_contents(unit_path, &unit, NULL, NULL));
    at = strstr(unit, "sluice(1), ");
    ck_assert_ptr_nonnull(at);
    at += strlen("sluice(1), ");
    refs = g_strndup(at, strcspn(at, ")"));
    g_strdelimit(refs, "\n#", ' ');
    sections = g_regex_split_simple(" *(?:and|,) +", refs, 0, 0);
    for (guint i = 0; sections[i] != NULL; i++) {
      g_autofree gchar *name = g_strstrip(g_strdup(sections[i]));
      g_autofree gchar *heading = g_strdup_printf("\n.SH %s\n", name);

      if (name[0] == '\0')
        continue;
      ck_assert_msg(strstr(man, heading) != NULL,
                    "the unit points at sluice(1), %s, which it lacks", name);
    }
  }
}
END_TEST

START_TEST(test_help_everywhere)
{
  const gchar *commands[][3] = {
      {"worker", NULL},        {"enqueue", NULL},      {"result", NULL},
      {"inspect", NULL},       {"cancel", NULL},       {"stats", NULL},
      {"run", NULL},           {"dlq", "list", NULL},  {"dlq", "show", NULL},
      {"dlq", "replay", NULL}, {"dlq", "purge", NULL}, {"ls", NULL},
      {"pause", NULL},         {"resume", NULL},       {"purge", NULL},
      {"delete", NULL},        {"run-now", NULL},      {"periodic", "ls", NULL},
      {"exporter", NULL},      {"web", NULL},          {"migrate", NULL},
  };
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  g_autoptr(Run) top = cli_env(env, NULL, "--help", NULL);
  g_autoptr(Run) dlq = cli_env(env, NULL, "dlq", "--help", NULL);
  g_autoptr(Run) version = cli_env(env, NULL, "--version", NULL);

  assert_status(top, 0);
  for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
    ck_assert_msg(strstr(top->out, commands[i][0]) != NULL, "%s", top->out);
  assert_status(dlq, 0);
  ck_assert(strstr(dlq->out, "replay") != NULL);
  assert_status(version, 0);
  ck_assert(g_str_has_prefix(version->out, "sluice "));

  for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
    const gchar *argv[4] = {commands[i][0], commands[i][1], NULL, NULL};
    g_autofree gchar *usage = NULL;
    g_autoptr(Run) run = NULL;

    /* Configured --disable-web, they refuse to run, --help included. */
    if (g_strcmp0(g_getenv("SLUICE_WITH_WEB"), "no") == 0 &&
        (g_str_equal(commands[i][0], "exporter") ||
         g_str_equal(commands[i][0], "web")))
      continue;
    argv[commands[i][1] != NULL ? 2 : 1] = "--help";
    run = run_argv(env, NULL, argv);
    assert_status(run, 0);
    usage = g_strdup_printf("sluice %s%s%s", commands[i][0],
                            commands[i][1] != NULL ? " " : "",
                            commands[i][1] != NULL ? commands[i][1] : "");
    ck_assert_msg(g_str_has_prefix(run->out, "Usage:") &&
                      strstr(run->out, usage) != NULL,
                  "%s", run->out);
  }
}
END_TEST

START_TEST(test_config_file_and_environment)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *path = g_build_filename(ctx->dir, "sluice.conf", NULL);
  g_autofree gchar *bad = g_build_filename(ctx->dir, "bad.conf", NULL);
  g_autofree gchar *config = g_strdup_printf(
      "[connection]\nurl=%s\nmode=fast\nnamespace=%s-file\n\n"
      "[worker]\nmodules=%s\nqueues=cfg;\nworker-id=w-config\n",
      sluice_test_redis_url(sluice_test_redis_shared()), ctx->ns, DEMO_MODULE);
  g_autofree gchar *file_ns = g_strdup_printf("%s-file", ctx->ns);
  g_autofree gchar *env_ns = g_strdup_printf("%s-env", ctx->ns);
  g_autofree gchar *flag_ns = g_strdup_printf("%s-flag", ctx->ns);
  g_auto(GStrv) bare = cli_environ(NULL, NULL, NULL);
  g_auto(GStrv) with_ns = cli_environ(NULL, NULL, env_ns);
  g_auto(GStrv) with_config = NULL;
  g_autoptr(Run) from_file = NULL;
  g_autoptr(Run) from_env = NULL;
  g_autoptr(Run) from_flag = NULL;
  g_autoptr(Run) unknown = NULL;
  g_autoptr(Run) stats = NULL;
  g_autoptr(JsonNode) a = NULL;
  g_autoptr(JsonNode) b = NULL;
  g_autoptr(JsonNode) c = NULL;
  g_autoptr(JsonNode) s = NULL;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) worker = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *worker_log_path = g_build_filename(ctx->dir, "w.log", NULL);

  ck_assert(g_file_set_contents(path, config, -1, NULL));
  ck_assert(g_file_set_contents(bad, "[connection]\nurll=x\n", -1, NULL));

  /* Flag over environment over file. */
  from_file = cli_env(bare, NULL, "stats", "--json", "--config", path, NULL);
  assert_status(from_file, 0);
  a = parse_json(from_file->out);
  ck_assert_str_eq(member_string(object_of(a), "namespace"), file_ns);
  ck_assert_str_eq(member_string(object_of(a), "mode"), "fast");
  from_env = cli_env(with_ns, NULL, "stats", "--json", "--config", path, NULL);
  assert_status(from_env, 0);
  b = parse_json(from_env->out);
  ck_assert_str_eq(member_string(object_of(b), "namespace"), env_ns);
  from_flag = cli_env(with_ns, NULL, "stats", "--json", "--config", path,
                      "--namespace", flag_ns, NULL);
  assert_status(from_flag, 0);
  c = parse_json(from_flag->out);
  ck_assert_str_eq(member_string(object_of(c), "namespace"), flag_ns);

  unknown = cli_env(bare, NULL, "stats", "--config", bad, NULL);
  assert_status(unknown, 2);
  assert_one_line_error(unknown, "unknown key “urll”");

  /* A worker configured by the file alone, found through SLUICE_CONFIG. */
  with_config = cli_environ(NULL, NULL, NULL);
  with_config = g_environ_setenv(with_config, "SLUICE_CONFIG", path, TRUE);
  launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_subprocess_launcher_set_environ(launcher, with_config);
  g_subprocess_launcher_set_stderr_file_path(launcher, worker_log_path);
  g_subprocess_launcher_set_child_setup(launcher, child_setup, NULL, NULL);
  worker =
      g_subprocess_launcher_spawn(launcher, &error, SLUICE_BIN, "worker", NULL);
  ck_assert(worker != NULL);
  for (gint64 deadline = g_get_monotonic_time() + PATIENCE_US;;) {
    g_autofree gchar *log = NULL;
    g_file_get_contents(worker_log_path, &log, NULL, NULL);
    if (log != NULL && strstr(log, " ready: ") != NULL) {
      ck_assert_msg(strstr(log, "queues cfg") != NULL, "%s", log);
      break;
    }
    ck_assert_msg(g_get_monotonic_time() < deadline &&
                      g_subprocess_get_identifier(worker) != NULL,
                  "%s", log);
    g_usleep(20 * 1000);
  }
  stats = cli_env(with_config, NULL, "stats", "--json", NULL);
  assert_status(stats, 0);
  s = parse_json(stats->out);
  ck_assert(strstr(stats->out, "w-config") != NULL);
  g_subprocess_send_signal(worker, SIGTERM);
  ck_assert(g_subprocess_wait(worker, NULL, NULL));
  ck_assert(g_subprocess_get_if_exited(worker) &&
            g_subprocess_get_exit_status(worker) == 0);
}
END_TEST

START_TEST(test_args_from_stdin_and_dash)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autoptr(Run) from_stdin = cli_env(ctx->env, "{\"from\": \"stdin\"}",
                                      "enqueue", "demo.echo", "-", NULL);
  g_autoptr(Run) dash = cli(ctx, "enqueue", "demo.echo", "--", "-5", NULL);
  g_autoptr(Run) bad_stdin =
      cli_env(ctx->env, "{", "enqueue", "demo.echo", "-", NULL);

  assert_status(from_stdin, 0);
  assert_status(dash, 0);
  assert_status(bad_stdin, 2);
  assert_one_line_error(bad_stdin, "line 1");
}
END_TEST

START_TEST(test_run_in_process)
{
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  g_autoptr(Run) echo = cli_env(env, NULL, "run", "demo.echo", "[1, \"a\"]",
                                "--module", DEMO_MODULE, "--json", NULL);
  g_autoptr(Run) flaky =
      cli_env(env, NULL, "run", "demo.flaky", "{\"fail_times\": 1}", "--module",
              DEMO_MODULE, "--backoff", "10ms", NULL);
  g_autoptr(Run) fatal =
      cli_env(env, NULL, "run", "demo.fatal", "--module", DEMO_MODULE, NULL);
  g_autoptr(Run) unknown =
      cli_env(env, NULL, "run", "demo.nope", "--module", DEMO_MODULE, NULL);
  g_autoptr(JsonNode) record = NULL;
  JsonArray *value;

  assert_status(echo, 0);
  record = parse_json(echo->out);
  value = json_object_get_array_member(object_of(record), "result");
  ck_assert_int_eq(json_array_get_int_element(value, 0), 1);
  ck_assert_str_eq(json_array_get_string_element(value, 1), "a");
  assert_status(flaky, 0);
  ck_assert(strstr(flaky->out, "{\"attempt\":2}") != NULL);
  assert_status(fatal, 3);
  ck_assert(strstr(fatal->out, "non_retryable") != NULL);
  assert_status(unknown, 1);
  assert_one_line_error(unknown, "demo.echo");
}
END_TEST

/* --module finds a module by bare name: in the current directory, where
 * dlopen() alone would not look, then on $SLUICE_MODULE_PATH (and the
 * installed module directory, where `make install` puts demo.so). */
START_TEST(test_module_found_by_name)
{
  g_autofree gchar *dir = g_dir_make_tmp("sluice-modules-XXXXXX", NULL);
  g_autofree gchar *copy = g_build_filename(dir, "mytasks.so", NULL);
  g_autofree gchar *module_dir = g_path_get_dirname(DEMO_MODULE);
  g_autofree gchar *contents = NULL;
  gsize len = 0;
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  g_auto(GStrv) env_path = NULL;
  const gchar *here[] = {"run", "demo.noop", "--module", "mytasks.so", NULL};
  const gchar *named[] = {"run", "demo.noop", "--module", "demo", NULL};
  const gchar *nothing[] = {"run", "demo.noop", "--module", "nosuch", NULL};
  g_autoptr(Run) from_cwd = NULL;
  g_autoptr(Run) from_path = NULL;
  g_autoptr(Run) missing = NULL;

  ck_assert(g_file_get_contents(DEMO_MODULE, &contents, &len, NULL));
  ck_assert(g_file_set_contents(copy, contents, (gssize)len, NULL));
  from_cwd = run_argv_in(env, dir, NULL, here);
  assert_status(from_cwd, 0);
  env_path =
      g_environ_setenv(g_strdupv(env), "SLUICE_MODULE_PATH", module_dir, TRUE);
  from_path = run_argv_in(env_path, dir, NULL, named);
  assert_status(from_path, 0);
  missing = run_argv_in(env, dir, NULL, nothing);
  assert_status(missing, 1);
  assert_one_line_error(missing, "installed in");
  g_unlink(copy);
  g_rmdir(dir);
}
END_TEST

/* ---- Hostile input (issue 21) -------------------------------------------- */

/* No raw control character, and no byte that is not UTF-8. */
static void
assert_terminal_safe(const gchar *what, const gchar *text)
{
  ck_assert_msg(g_utf8_validate(text, -1, NULL), "%s: not UTF-8: %s", what,
                text);
  for (const gchar *p = text; *p != '\0'; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    ck_assert_msg(c == '\n' || (c >= 0x20 && !(c >= 0x7f && c <= 0x9f)),
                  "%s: control character U+%04X in:\n%s", what, c, text);
  }
}

#define EVIL_TASK "evil\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
#define EVIL_PLACEHOLDER "evilXXXXXXXXXXXXXXXX"
G_STATIC_ASSERT(sizeof(EVIL_TASK) == sizeof(EVIL_PLACEHOLDER));

/* @payload (consumed) with the first @from replaced by @to of equal length. */
static GBytes *
with_name_replaced(GBytes *payload, const gchar *from, const gchar *to)
{
  gsize len;
  const guint8 *data = g_bytes_get_data(payload, &len);
  guint8 *copy = g_memdup2(data, len);
  gsize n = strlen(from), i;

  for (i = 0; i + n <= len && memcmp(copy + i, from, n) != 0; i++)
    ;
  ck_assert(i + n <= len);
  memcpy(copy + i, to, n);
  g_bytes_unref(payload);
  return g_bytes_new_take(copy, len);
}

/* A message may name any task: ESC, BEL and CSI in its name reached text
 * logs and the dlq tables as they were (terminal escape injection). */
START_TEST(test_text_output_escapes_control_characters)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autoptr(SluiceEnvelope) env = sluice_envelope_new();
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(Worker) w = NULL;
  g_autoptr(Run) list = NULL;
  g_autoptr(Run) show = NULL;
  g_autofree gchar *log = NULL;
  g_autofree gchar *entry = NULL;
  redisReply *r;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  /* The worker, with text logs, meets a message of that task. */
  w = worker_start(ctx, "--log-format=text", NULL);
  env->id = g_strdup("evil-1");
  env->task = g_strdup(EVIL_PLACEHOLDER);
  env->queue = g_strdup("default");
  payload = sluice_envelope_encode(NULL, env, &error);
  ck_assert_msg(payload != NULL, "%s", error != NULL ? error->message : "");
  /* Our encoder refuses such a name, so write it as a foreign producer
   * would: the placeholder has the same length, the framing stays valid. */
  payload = with_name_replaced(payload, EVIL_PLACEHOLDER, EVIL_TASK);
  if (strcmp(ctx->mode, "fast") == 0)
    r = sluice_test_redis_command(
        sluice_test_redis_shared(), "LPUSH {%s}:q:default %b", ctx->ns,
        g_bytes_get_data(payload, NULL), g_bytes_get_size(payload));
  else
    r = sluice_test_redis_command(
        sluice_test_redis_shared(), "XADD {%s}:s:default * p %b", ctx->ns,
        g_bytes_get_data(payload, NULL), g_bytes_get_size(payload));
  ck_assert(r != NULL && r->type != REDIS_REPLY_ERROR);
  freeReplyObject(r);
  for (;;) {
    g_free(log);
    log = worker_log(w);
    if (strstr(log, "dead-lettered (malformed)") != NULL)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the worker never reported the message:\n%s", log);
    g_usleep(20 * 1000);
  }
  g_free(log);
  log = worker_stop(w);
  assert_terminal_safe("text log", log);
  ck_assert_msg(strstr(log, "evil\\x1b]0;pwned\\x07") != NULL, "%s", log);

  /* A dead letter of that task, and a detail with escapes of its own. */
  r = sluice_test_redis_command(
      sluice_test_redis_shared(),
      "XADD {%s}:dlq * payload x reason unknown_task source default "
      "deliveries 1 at 1900000000000 task_id evil-2 task %s detail %s",
      ctx->ns, EVIL_TASK, "boom\x1b[31m\x07 red\xff");
  ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
  entry = g_strdup(r->str);
  freeReplyObject(r);
  list = cli(ctx, "dlq", "list", NULL);
  assert_status(list, 0);
  assert_terminal_safe("dlq list", list->out);
  ck_assert_msg(strstr(list->out, "evil\\x1b]0;pwned\\x07") != NULL, "%s",
                list->out);
  show = cli(ctx, "dlq", "show", entry, NULL);
  assert_status(show, 0);
  assert_terminal_safe("dlq show", show->out);
  ck_assert_msg(strstr(show->out, "boom\\x1b[31m\\x07 red\\xff") != NULL, "%s",
                show->out);
}
END_TEST

/* `sluice run demo.sleep` with args nested 33 deep dead-lettered
 * (msgpack_unpack()'s stack is 32, and the task saw nil); every depth up to
 * 63 runs, and 64 is refused up front. demo.sleep reads its args unpacked;
 * the map around "deep" is the first level. */
static gchar *
deep_sleep_args(guint depth)
{
  GString *json = g_string_new("{\"ms\": 0, \"deep\": ");

  for (guint d = 1; d < depth; d++)
    g_string_append_c(json, '[');
  g_string_append(json, "1");
  for (guint d = 1; d < depth; d++)
    g_string_append_c(json, ']');
  g_string_append_c(json, '}');
  return g_string_free(json, FALSE);
}

START_TEST(test_run_args_depth)
{
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  static const guint depths[] = {32, 33, 63};

  for (gsize i = 0; i < G_N_ELEMENTS(depths); i++) {
    g_autofree gchar *args = deep_sleep_args(depths[i]);
    g_autoptr(Run) run = cli_env(env, NULL, "run", "demo.sleep", args,
                                 "--module", DEMO_MODULE, "--json", NULL);

    assert_status(run, 0);
    ck_assert_msg(strstr(run->out, "\"slept_ms\":0") != NULL, "depth %u: %s",
                  depths[i], run->out);
  }
  {
    g_autofree gchar *args = deep_sleep_args(64);
    g_autoptr(Run) run = cli_env(env, NULL, "run", "demo.sleep", args,
                                 "--module", DEMO_MODULE, NULL);

    assert_status(run, 2);
    assert_one_line_error(run, "limit of 63");
  }
}
END_TEST

/* A CA, a server certificate it signed for 127.0.0.1 and localhost
 * (server.crt, server.key) and a client certificate (client.crt,
 * client.key), in @dir, made by the openssl command. */
static void
make_redis_pki(const gchar *dir)
{
  static const gchar script[] =
      "set -e\n"
      "key() { openssl genpkey -algorithm EC -pkeyopt "
      "ec_paramgen_curve:P-256 -out $1.key 2>/dev/null; chmod 600 $1.key; }\n"
      "key ca\n"
      "openssl req -x509 -new -key ca.key -out ca.crt -days 2 -subj "
      "/CN=sluice-cli-ca -addext basicConstraints=critical,CA:TRUE "
      "-addext keyUsage=critical,keyCertSign,cRLSign\n"
      "sign() { key $1; openssl req -new -key $1.key -out $1.csr -subj "
      "/CN=$1; printf \"$2\" > $1.ext; openssl x509 -req -in $1.csr -CA "
      "ca.crt -CAkey ca.key -set_serial $3 -days 2 -extfile $1.ext -out "
      "$1.crt 2>/dev/null; }\n"
      "sign server 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
      "extendedKeyUsage=serverAuth\\n' 0x51\n"
      "sign client 'extendedKeyUsage=clientAuth\\n' 0x52\n";
  const gchar *argv[] = {"/bin/sh", "-c", script, NULL};
  g_autoptr(GError) error = NULL;
  g_autofree gchar *err = NULL;
  gint status = 0;

  ck_assert_msg(g_spawn_sync(dir, (gchar **)argv, NULL, G_SPAWN_SEARCH_PATH,
                             NULL, NULL, NULL, &err, &status, &error),
                "%s", error != NULL ? error->message : "");
  ck_assert_msg(g_spawn_check_wait_status(status, NULL), "openssl: %s", err);
}

/* TLS to Redis from --redis-tls-*, SLUICE_REDIS_TLS_* or redis_tls_* in
 * [connection], against a redis-server that asks for a client
 * certificate: each connects, and what each leaves out (the client
 * certificate) or gets wrong (the server's name) fails. Given with a
 * plain URL, twice, empty, or with a value the URL's parameter refuses,
 * it is one line naming the setting. */
START_TEST(test_redis_tls_settings)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  const gchar *d = ctx->dir;
  g_autofree gchar *ca = g_build_filename(d, "ca.crt", NULL);
  /* A path is a value of the URL's query: escaped there, whatever it holds. */
  g_autofree gchar *odd_ca = g_build_filename(d, "c a&b@c%25d+=?#.crt", NULL);
  g_autofree gchar *server_crt = g_build_filename(d, "server.crt", NULL);
  g_autofree gchar *server_key = g_build_filename(d, "server.key", NULL);
  g_autofree gchar *cert = g_build_filename(d, "client.crt", NULL);
  g_autofree gchar *key = g_build_filename(d, "client.key", NULL);
  g_autofree gchar *config = g_build_filename(d, "tls.conf", NULL);
  g_autofree gchar *empty_config = g_build_filename(d, "empty.conf", NULL);
  g_autofree gchar *url = NULL;
  g_autofree gchar *url_with_ca = NULL;
  g_autofree gchar *text = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestRedis) server = NULL;
  g_auto(GStrv) env = NULL;
  g_auto(GStrv) env_tls = NULL;
  g_auto(GStrv) env_none = cli_environ(NULL, "fast", "tls");
  g_auto(GStrv) env_plain = NULL;

  make_redis_pki(d);
  ck_assert(g_file_get_contents(ca, &text, NULL, NULL));
  ck_assert(g_file_set_contents(odd_ca, text, -1, NULL));
  g_clear_pointer(&text, g_free);
  {
    SluiceTestRedisOptions options = {.tls_cert_file = server_crt,
                                      .tls_key_file = server_key,
                                      .tls_ca_cert_file = ca,
                                      .tls_auth_clients = "yes"};
    server = sluice_test_redis_start(&options, &error);
  }
  ck_assert_msg(server != NULL, "%s", error != NULL ? error->message : "");
  url = g_strdup_printf("rediss://127.0.0.1:%u/0",
                        sluice_test_redis_port(server));
  url_with_ca = g_strdup_printf("%s?tls_ca_file=%s", url, ca);
  env = cli_environ(url, "fast", "tls");
  env_tls = g_environ_setenv(g_strdupv(env), "SLUICE_REDIS_TLS_CA", ca, TRUE);
  env_tls = g_environ_setenv(env_tls, "SLUICE_REDIS_TLS_CERT", cert, TRUE);
  env_tls = g_environ_setenv(env_tls, "SLUICE_REDIS_TLS_KEY", key, TRUE);
  env_plain = cli_environ("redis://127.0.0.1:6379/0", "fast", "tls");
  env_plain =
      g_environ_setenv(env_plain, "SLUICE_REDIS_TLS_INSECURE", "1", TRUE);
  text = g_strdup_printf("[connection]\nurl=%s\nredis_tls_ca=%s\n"
                         "redis_tls_cert=%s\nredis_tls_key=%s\n",
                         url, ca, cert, key);
  ck_assert(g_file_set_contents(config, text, -1, NULL));
  g_free(text);
  text = g_strdup_printf("[connection]\nurl=%s\nredis_tls_ca=\n", url);
  ck_assert(g_file_set_contents(empty_config, text, -1, NULL));

  {
    g_autoptr(Run) flags = cli_env(env, NULL, "stats", "--redis-tls-ca", odd_ca,
                                   "--redis-tls-cert", cert, "--redis-tls-key",
                                   key, "--redis-tls-server-name", "localhost",
                                   "--redis-tls-min-version", "1.3", NULL);
    g_autoptr(Run) from_env = cli_env(env_tls, NULL, "stats", NULL);
    g_autoptr(Run) from_config =
        cli_env(env_none, NULL, "stats", "--config", config, NULL);
    /* Not verified: the system's CAs do not know this one. */
    g_autoptr(Run) insecure =
        cli_env(env, NULL, "stats", "--redis-tls-insecure", "--redis-tls-cert",
                cert, "--redis-tls-key", key, NULL);
    /* The URL's own parameters and the flags, each said once. */
    g_autoptr(Run) mixed =
        cli_env(env, NULL, "stats", "--url", url_with_ca, "--redis-tls-cert",
                cert, "--redis-tls-key", key, NULL);

    assert_status(flags, 0);
    assert_status(from_env, 0);
    assert_status(from_config, 0);
    assert_status(insecure, 0);
    assert_status(mixed, 0);
  }
  {
    g_autoptr(Run) no_client_cert =
        cli_env(env, NULL, "stats", "--redis-tls-ca", ca, NULL);
    g_autoptr(Run) no_ca = cli_env(env, NULL, "stats", "--redis-tls-cert", cert,
                                   "--redis-tls-key", key, NULL);
    g_autoptr(Run) wrong_name = cli_env(
        env_tls, NULL, "stats", "--redis-tls-server-name", "other.test", NULL);

    assert_status(no_client_cert, 1);
    assert_one_line_error(no_client_cert, NULL);
    assert_status(no_ca, 1);
    assert_one_line_error(no_ca, NULL);
    assert_status(wrong_name, 1);
    assert_one_line_error(wrong_name, NULL);
  }
  {
    g_autoptr(Run) plain_url =
        cli_env(env, NULL, "stats", "--url", "redis://127.0.0.1:6379/0",
                "--redis-tls-ca", ca, NULL);
    g_autoptr(Run) plain_env = cli_env(env_plain, NULL, "stats", NULL);
    g_autoptr(Run) default_url =
        cli_env(env_none, NULL, "stats", "--redis-tls-cert", cert, NULL);
    g_autoptr(Run) twice = cli_env(env, NULL, "stats", "--url", url_with_ca,
                                   "--redis-tls-ca", ca, NULL);
    g_autoptr(Run) empty =
        cli_env(env_none, NULL, "stats", "--config", empty_config, NULL);
    g_autoptr(Run) version =
        cli_env(env_tls, NULL, "stats", "--redis-tls-min-version", "1.1", NULL);
    g_autoptr(Run) name =
        cli_env(env_tls, NULL, "stats", "--redis-tls-server-name", "a b", NULL);

    assert_status(plain_url, 2);
    assert_one_line_error(plain_url, "--redis-tls-ca is a setting of TLS");
    assert_one_line_error(plain_url, "rediss://");
    assert_status(plain_env, 2);
    assert_one_line_error(plain_env, "SLUICE_REDIS_TLS_INSECURE");
    assert_status(default_url, 2);
    assert_one_line_error(default_url, "from the default");
    assert_status(twice, 2);
    assert_one_line_error(twice, "one place");
    assert_status(empty, 2);
    assert_one_line_error(empty, "redis_tls_ca is empty");
    assert_status(version, 2);
    assert_one_line_error(version, "1.3");
    assert_status(name, 2);
    assert_one_line_error(name, "host name");
  }
}
END_TEST

#define NASTY_PASSWORD "p@ss/w?rd:x#y%z"

/* A password off the command line: from a file named by --password-file,
 * SLUICE_PASSWORD_FILE or password_file in [connection]; or raw in the URL
 * with its '@', '/', '?' and '#'. No message shows it. */
START_TEST(test_password_file)
{
  SluiceTestRedisOptions options = {.requirepass = NASTY_PASSWORD};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_start(&options, &error);
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *bare = NULL;
  g_autofree gchar *raw = NULL;
  g_autofree gchar *with_user = NULL;
  g_autofree gchar *file = g_build_filename(ctx->dir, "pw", NULL);
  g_autofree gchar *wrong = g_build_filename(ctx->dir, "wrong", NULL);
  g_autofree gchar *empty = g_build_filename(ctx->dir, "empty", NULL);
  g_autofree gchar *config = g_build_filename(ctx->dir, "c.conf", NULL);
  g_autofree gchar *config_text = NULL;
  g_auto(GStrv) env = NULL;
  g_auto(GStrv) env_file = NULL;
  g_auto(GStrv) env_raw = NULL;
  g_auto(GStrv) env_user = NULL;
  g_auto(GStrv) env_config = cli_environ(NULL, "fast", "pw");

  ck_assert_msg(server != NULL, "%s", error != NULL ? error->message : "");
  bare =
      g_strdup_printf("redis://127.0.0.1:%u/0", sluice_test_redis_port(server));
  /* Raw, but for '%', which starts an escape in a URL. */
  raw = g_strdup_printf("redis://:p@ss/w?rd:x#y%%25z@127.0.0.1:%u/0",
                        sluice_test_redis_port(server));
  with_user = g_strdup_printf("redis://default@127.0.0.1:%u/0",
                              sluice_test_redis_port(server));
  ck_assert(
      g_file_set_contents(file, NASTY_PASSWORD "\r\nnot this\n", -1, NULL));
  ck_assert(g_file_set_contents(wrong, "wrong-" NASTY_PASSWORD "\n", -1, NULL));
  ck_assert(g_file_set_contents(empty, "\n" NASTY_PASSWORD "\n", -1, NULL));
  /* Secrets are the owner's alone (test_secret_file_permissions). */
  g_chmod(file, 0600);
  g_chmod(wrong, 0600);
  g_chmod(empty, 0600);
  config_text =
      g_strdup_printf("[connection]\nurl=%s\npassword_file=%s\n", bare, file);
  ck_assert(g_file_set_contents(config, config_text, -1, NULL));
  env = cli_environ(bare, "fast", "pw");
  env_file =
      g_environ_setenv(g_strdupv(env), "SLUICE_PASSWORD_FILE", file, TRUE);
  env_raw = cli_environ(raw, "fast", "pw");
  env_user = cli_environ(with_user, "fast", "pw");

  {
    g_autoptr(Run) flag =
        cli_env(env, NULL, "stats", "--password-file", file, NULL);
    g_autoptr(Run) from_env = cli_env(env_file, NULL, "stats", NULL);
    g_autoptr(Run) from_config =
        cli_env(env_config, NULL, "stats", "--config", config, NULL);
    g_autoptr(Run) in_url = cli_env(env_raw, NULL, "stats", NULL);
    g_autoptr(Run) acl_user =
        cli_env(env_user, NULL, "stats", "--password-file", file, NULL);

    assert_status(flag, 0);
    assert_status(from_env, 0);
    assert_status(from_config, 0);
    assert_status(in_url, 0);
    assert_status(acl_user, 0);
  }
  {
    g_autoptr(Run) refused =
        cli_env(env, NULL, "stats", "--password-file", wrong, NULL);
    g_autoptr(Run) blank =
        cli_env(env, NULL, "stats", "--password-file", empty, NULL);
    g_autoptr(Run) missing =
        cli_env(env, NULL, "stats", "--password-file", "/nonexistent/pw", NULL);
    g_autoptr(Run) twice =
        cli_env(env_raw, NULL, "stats", "--password-file", file, NULL);
    g_autoptr(Run) unix_url = cli(ctx, "stats", "--url", "unix:///tmp/x.sock",
                                  "--password-file", file, NULL);
    /* A sentinel URL takes the password file too (the master's password):
     * it gets as far as asking the sentinels. */
    g_autofree gchar *sentinel_url = g_strdup_printf(
        "redis+sentinel://127.0.0.1:%u/mymaster", sluice_test_closed_port());
    g_autoptr(Run) sentinel =
        cli(ctx, "stats", "--url", sentinel_url, "--password-file", file, NULL);
    Run *all[] = {refused, blank, missing, twice, unix_url, sentinel};

    assert_status(refused, 1);
    assert_one_line_error(refused, "password");
    assert_status(blank, 2);
    assert_one_line_error(blank, "empty first line");
    assert_status(missing, 2);
    assert_one_line_error(missing, "/nonexistent/pw");
    assert_status(twice, 2);
    assert_one_line_error(twice, "one place");
    assert_status(unix_url, 2);
    assert_one_line_error(unix_url, "unix://");
    assert_status(sentinel, 1);
    assert_one_line_error(sentinel, "no sentinel");
    for (gsize i = 0; i < G_N_ELEMENTS(all); i++) {
      ck_assert_msg(strstr(all[i]->err, "ss/w?rd") == NULL, "%s", all[i]->err);
      ck_assert_msg(strstr(all[i]->out, "ss/w?rd") == NULL, "%s", all[i]->out);
    }
  }
}
END_TEST

/* A secret other users can read is refused with its path and the fix,
 * before anything is sent: a password file, a configuration file whose URL
 * holds the password, a web token file; unless systemd handed it over under
 * $CREDENTIALS_DIRECTORY. A configuration file without a secret may be
 * world-readable, as /etc files are. */
START_TEST(test_secret_file_permissions)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *creds = g_build_filename(ctx->dir, "credentials", NULL);
  g_autofree gchar *open_pw = g_build_filename(ctx->dir, "pw", NULL);
  g_autofree gchar *given = g_build_filename(creds, "redis-password", NULL);
  g_autofree gchar *secret_conf = g_build_filename(ctx->dir, "s.conf", NULL);
  g_autofree gchar *plain_conf = g_build_filename(ctx->dir, "p.conf", NULL);
  g_autofree gchar *token = g_build_filename(ctx->dir, "token", NULL);
  g_autofree gchar *closed =
      g_strdup_printf("redis://127.0.0.1:%u/0", sluice_test_closed_port());
  g_autofree gchar *with_pw =
      g_strdup_printf("[connection]\nurl=redis://:hunter2@127.0.0.1:%u/0\n",
                      sluice_test_closed_port());
  g_autofree gchar *without_pw =
      g_strdup_printf("[connection]\nurl=%s\n", closed);
  g_auto(GStrv) env = cli_environ(closed, "fast", "pw");
  /* No SLUICE_URL: the URL is the configuration file's. */
  g_auto(GStrv) env_config = cli_environ(NULL, "fast", "pw");
  g_auto(GStrv) env_creds = NULL;

  ck_assert(g_mkdir_with_parents(creds, 0700) == 0);
  ck_assert(g_file_set_contents(open_pw, "hunter2\n", -1, NULL));
  ck_assert(g_file_set_contents(given, "hunter2\n", -1, NULL));
  ck_assert(g_file_set_contents(secret_conf, with_pw, -1, NULL));
  ck_assert(g_file_set_contents(plain_conf, without_pw, -1, NULL));
  ck_assert(g_file_set_contents(token, "0123456789abcdef0123456789abcdef\n", -1,
                                NULL));
  g_chmod(open_pw, 0644);
  g_chmod(given, 0644);
  g_chmod(secret_conf, 0640);
  g_chmod(plain_conf, 0644);
  g_chmod(token, 0604);
  env_creds =
      g_environ_setenv(g_strdupv(env), "CREDENTIALS_DIRECTORY", creds, TRUE);
  {
    g_autoptr(Run) pw =
        cli_env(env, NULL, "stats", "--password-file", open_pw, NULL);
    g_autoptr(Run) conf =
        cli_env(env_config, NULL, "stats", "--config", secret_conf, NULL);
    g_autoptr(Run) web = cli_env(env, NULL, "web", "--listen", "127.0.0.1:0",
                                 "--token-file", token, NULL);

    assert_status(pw, 2);
    assert_one_line_error(pw, "can be read by other users (mode 0644)");
    ck_assert_msg(strstr(pw->err, "chmod 600") != NULL &&
                      strstr(pw->err, open_pw) != NULL,
                  "%s", pw->err);
    assert_status(conf, 2);
    assert_one_line_error(conf, "whose url holds a password");
    ck_assert_msg(strstr(conf->err, "hunter2") == NULL, "%s", conf->err);
    assert_status(web, 2);
    assert_one_line_error(web, "the token file");
  }
  {
    /* Past the permission check, these reach the (closed) Redis port: the
     * failure is the connection's, exit 1, not the file's. */
    g_autoptr(Run) handed_over =
        cli_env(env_creds, NULL, "stats", "--password-file", given, NULL);
    g_autoptr(Run) plain =
        cli_env(env_config, NULL, "stats", "--config", plain_conf, NULL);

    assert_status(handed_over, 1);
    ck_assert_msg(strstr(handed_over->err, "other users") == NULL, "%s",
                  handed_over->err);
    assert_status(plain, 1);
    ck_assert_msg(strstr(plain->err, "other users") == NULL, "%s", plain->err);
  }
}
END_TEST

/* A value with a backslash that starts no escape made GLib warn from inside
 * g_key_file_get_string(); it is a usage error naming the key, and text
 * from the file is quoted escaped. */
START_TEST(test_config_file_bad_values)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *path = g_build_filename(ctx->dir, "bad.conf", NULL);
  g_autofree gchar *typo = g_build_filename(ctx->dir, "typo.conf", NULL);
  g_autoptr(Run) escape = NULL;
  g_autoptr(Run) key = NULL;

  ck_assert(g_file_set_contents(
      path, "[connection]\nnamespace=a\\Kb\nurl=redis://h/0\\\n", -1, NULL));
  ck_assert(
      g_file_set_contents(typo, "[connection]\nur\x1b[2Jl=x\n", -1, NULL));
  escape = cli(ctx, "stats", "--config", path, NULL);
  assert_status(escape, 2);
  assert_one_line_error(escape, "backslash");
  ck_assert_msg(strstr(escape->err, "GLib") == NULL, "%s", escape->err);
  key = cli(ctx, "stats", "--config", typo, NULL);
  assert_status(key, 2);
  assert_one_line_error(key, "ur\\x1b[2Jl");
}
END_TEST

/* The command pings Redis before anything else with the log held back, so
 * that a failed ping is one error; what the library says once per pool on
 * a ping that works (here: that CONFIG GET is denied, so maxmemory-policy
 * could not be checked) was muted with it, and never said again. */
START_TEST(test_worker_logs_what_the_ping_found)
{
  g_autoptr(Ctx) ctx = ctx_new(1);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *rules =
      g_strdup_printf("cliw%d on >pw ~{%s}:* &{%s}:* +@all -config",
                      (int)getpid(), ctx->ns, ctx->ns);
  g_autofree gchar *url =
      g_strdup_printf("redis://cliw%d:pw@127.0.0.1:%u/0", (int)getpid(),
                      sluice_test_redis_port(sluice_test_redis_shared()));
  g_autoptr(Worker) w = NULL;
  g_autofree gchar *log = NULL;
  const gchar *needle = "could not check maxmemory-policy";

  ck_assert_msg(
      sluice_test_redis_acl_setuser(sluice_test_redis_shared(), rules, &error),
      "%s", error != NULL ? error->message : "");
  ctx->env = g_environ_setenv(ctx->env, "SLUICE_URL", url, TRUE);
  w = worker_start(ctx, NULL);
  log = worker_stop(w);
  ck_assert_msg(strstr(log, needle) != NULL, "%s", log);
  ck_assert_msg(strstr(strstr(log, needle) + 1, needle) == NULL, "%s", log);
}
END_TEST

/* ---- Delete and purge take queued tasks out (issue 26) -------------------- */

/* Whether `sluice ls` of @queue lists task @id. */
static gboolean
listed_in(Ctx *ctx, const gchar *queue, const gchar *id)
{
  g_autoptr(JsonNode) page = ls_json(ctx, NULL, queue, NULL);

  for (guint i = 0; i < n_listed(page); i++)
    if (g_strcmp0(member_string(listed(page, i), "id"), id) == 0)
      return TRUE;
  return FALSE;
}

/* `sluice delete` of a queued task takes it out of its queue: not listed,
 * not counted, its record says cancelled at once; `sluice purge` marks the
 * records of what it took; an id that is nowhere is an error for delete
 * as for cancel, with the same exit status. */
START_TEST(test_delete_and_purge_take_queued_tasks_out)
{
  g_autoptr(Ctx) ctx = ctx_new(_i);
  g_autofree gchar *doomed =
      enqueue(ctx, "demo.noop", "--queue", "q-del", NULL);
  g_autofree gchar *purged =
      enqueue(ctx, "demo.noop", "--queue", "q-del", NULL);
  g_autofree gchar *also = enqueue(ctx, "demo.noop", "--queue", "q-del", NULL);
  g_autoptr(Run) del = cli(ctx, "delete", doomed, "--json", NULL);
  g_autoptr(Run) again = NULL;
  g_autoptr(Run) purge = NULL;
  g_autoptr(JsonNode) j = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autoptr(JsonNode) stats = NULL;
  g_autoptr(JsonNode) after_purge = NULL;
  JsonArray *queues;
  gint64 ready = -1;

  assert_status(del, 0);
  j = parse_json(del->out);
  ck_assert_str_eq(member_string(object_of(j), "outcome"), "removed");
  ck_assert(!listed_in(ctx, "q-del", doomed));
  ck_assert(listed_in(ctx, "q-del", purged));
  record = inspect(ctx, doomed);
  ck_assert_str_eq(member_string(object_of(record), "state"), "cancelled");
  ck_assert_str_eq(member_string(object_of(record), "task"), "demo.noop");
  ck_assert_str_eq(member_string(object_of(record), "queue"), "q-del");
  stats = stats_json(ctx);
  queues = json_object_get_array_member(object_of(stats), "queues");
  for (guint i = 0; i < json_array_get_length(queues); i++) {
    JsonObject *q = json_array_get_object_element(queues, i);
    if (g_strcmp0(member_string(q, "name"), "q-del") == 0)
      ready = member_int(q, "ready");
  }
  ck_assert_int_eq(ready, 2);

  /* Deleted already: nothing to delete. */
  again = cli(ctx, "delete", doomed, NULL);
  assert_status(again, 1);
  assert_one_line_error(again, "already finished (cancelled)");

  purge = cli(ctx, "purge", "q-del", "--yes", NULL);
  assert_status(purge, 0);
  ck_assert_str_eq(purge->out, "purged 2 ready tasks of queue q-del\n");
  after_purge = inspect(ctx, purged);
  ck_assert_str_eq(member_string(object_of(after_purge), "state"), "cancelled");
  ck_assert_msg(
      strstr(member_string(object_of(after_purge), "error"), "purged") != NULL,
      "%s", member_string(object_of(after_purge), "error"));
  g_free(wait_for_state(ctx, also, "cancelled", NULL));
}
END_TEST

/* The operator tests run on both Redis modes and on SQLite: a loop index
 * of 2 is a SQLite file in the test's directory. */
static Ctx *
ctx_any(int i)
{
  Ctx *ctx = ctx_new(i < 2 ? i : 0);

  if (i >= 2) {
    g_autofree gchar *url = g_strdup_printf("sqlite://%s/tasks.db", ctx->dir);
    ctx->env = g_environ_setenv(ctx->env, "SLUICE_URL", url, TRUE);
    ctx->env = g_environ_unsetenv(ctx->env, "SLUICE_MODE");
    ctx->mode = "sqlite";
  }
  return ctx;
}

/* The ready count of @queue in `sluice stats --json` (0 when not listed). */
static gint64
ready_in(Ctx *ctx, const gchar *queue)
{
  g_autoptr(JsonNode) stats = stats_json(ctx);
  JsonArray *queues = json_object_get_array_member(object_of(stats), "queues");

  for (guint i = 0; i < json_array_get_length(queues); i++) {
    JsonObject *q = json_array_get_object_element(queues, i);
    if (g_strcmp0(member_string(q, "name"), queue) == 0)
      return member_int(q, "ready");
  }
  return 0;
}

static void
wait_ready(Ctx *ctx, const gchar *queue, gint64 n)
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  while (ready_in(ctx, queue) != n) {
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "queue %s never had %" G_GINT64_FORMAT " ready tasks (%s)",
                  queue, n, ctx->mode);
    g_usleep(20 * 1000);
  }
}

/* Once `sluice pause` returned, no worker takes a task of the queue: what
 * it had fetched and not started goes back to the queue, and what is
 * enqueued after the pause waits too, while the worker's other queue runs
 * on; `sluice resume` runs them all. One executor and the paused queue
 * first in the worker's order: had the worker held them, they would run
 * before the other queue's task. */
START_TEST(test_pause_holds_what_was_fetched_and_what_comes_after)
{
  g_autoptr(Ctx) ctx = ctx_any(_i);
  g_autoptr(Worker) w =
      worker_start(ctx, "--queue", "default", "--queue", "other",
                   "--concurrency", "1", "--prefetch", "4", NULL);
  g_autofree gchar *sleeper =
      enqueue(ctx, "demo.sleep", "{\"ms\": 600000}", NULL);
  g_autofree gchar *fetched = NULL;
  g_autofree gchar *later = NULL;
  g_autofree gchar *marker = NULL;
  g_autoptr(Run) paused = NULL;
  g_autoptr(Run) cancel = NULL;
  g_autoptr(Run) resumed = NULL;
  g_autoptr(Run) done = NULL;

  g_free(wait_for_state(ctx, sleeper, "running", NULL));
  fetched = enqueue(ctx, "demo.noop", NULL);
  wait_ready(ctx, "default", 0); /* the worker holds it, behind the sleeper */
  paused = cli(ctx, "pause", "default", NULL);
  assert_status(paused, 0);
  later = enqueue(ctx, "demo.noop", NULL);
  wait_for_log(w, "queue “default” is paused");
  wait_ready(ctx, "default", 2);

  /* The executor is free again: the other queue runs, the paused one
   * does not. */
  cancel = cli(ctx, "cancel", sleeper, NULL);
  assert_status(cancel, 0);
  g_free(wait_for_state(ctx, sleeper, "cancelled", NULL));
  marker = enqueue(ctx, "demo.noop", "--queue", "other", NULL);
  done = cli(ctx, "result", marker, "--wait", "60s", NULL);
  assert_status(done, 0);
  g_free(wait_for_state(ctx, fetched, "queued", NULL));
  g_free(wait_for_state(ctx, later, "queued", NULL));
  ck_assert_int_eq(ready_in(ctx, "default"), 2);

  resumed = cli(ctx, "resume", "default", NULL);
  assert_status(resumed, 0);
  g_free(wait_for_state(ctx, fetched, "succeeded", NULL));
  g_free(wait_for_state(ctx, later, "succeeded", NULL));
  g_free(worker_stop(w));
}
END_TEST

/* How many lines of @text hold @needle. */
static guint
lines_with(const gchar *text, const gchar *needle)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint n = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    n += strstr(lines[i], needle) != NULL ? 1 : 0;
  return n;
}

/* `sluice enqueue --events` (or SLUICE_EVENTS, or events in [enqueue] of
 * the key file) writes the task's "enqueued" event; without, none. */
START_TEST(test_enqueue_writes_its_enqueued_event)
{
  g_autoptr(Ctx) ctx = ctx_any(_i);
  g_autofree gchar *conf = g_build_filename(ctx->dir, "sluice.conf", NULL);
  g_autofree gchar *flag = enqueue(ctx, "demo.noop", "--events", NULL);
  g_autofree gchar *quiet = enqueue(ctx, "demo.noop", NULL);
  g_autofree gchar *by_env = NULL;
  g_autofree gchar *by_file = NULL;
  g_autoptr(Run) events = NULL;
  g_autoptr(Run) bad = NULL;
  gchar **env = g_strdupv(ctx->env);

  ctx->env = g_environ_setenv(ctx->env, "SLUICE_EVENTS", "1", TRUE);
  by_env = enqueue(ctx, "demo.noop", NULL);
  g_strfreev(ctx->env);
  ctx->env = env;
  ck_assert(g_file_set_contents(conf, "[enqueue]\nevents=true\n", -1, NULL));
  by_file = enqueue(ctx, "demo.noop", "--config", conf, NULL);
  events = cli(ctx, "events", NULL);
  assert_status(events, 0);
  ck_assert_msg(lines_with(events->out, "  enqueued ") == 3, "%s", events->out);
  ck_assert(strstr(events->out, flag) != NULL);
  ck_assert(strstr(events->out, by_env) != NULL);
  ck_assert(strstr(events->out, by_file) != NULL);
  ck_assert(strstr(events->out, quiet) == NULL);

  ctx->env = g_environ_setenv(ctx->env, "SLUICE_EVENTS", "maybe", TRUE);
  bad = cli(ctx, "enqueue", "demo.noop", NULL);
  assert_status(bad, 2);
  assert_one_line_error(bad, "SLUICE_EVENTS");
}
END_TEST

/* A command running in the background, its output in files. */
typedef struct {
  GSubprocess *proc;
  gchar *out;
  gchar *err;
} Background;

static void
background_free(Background *b)
{
  if (b->proc != NULL) {
    g_subprocess_force_exit(b->proc);
    g_subprocess_wait(b->proc, NULL, NULL);
    g_object_unref(b->proc);
  }
  g_free(b->out);
  g_free(b->err);
  g_free(b);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Background, background_free)

static Background *background_start(Ctx *ctx, const gchar *first,
                                    ...) G_GNUC_NULL_TERMINATED;
static Background *
background_start(Ctx *ctx, const gchar *first, ...)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(0);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(GError) error = NULL;
  Background *b = g_new0(Background, 1);
  guint n = ctx->n_workers++;
  va_list ap;

  b->out = g_strdup_printf("%s/background-%u.out", ctx->dir, n);
  b->err = g_strdup_printf("%s/background-%u.err", ctx->dir, n);
  g_ptr_array_add(argv, (gpointer)SLUICE_BIN);
  va_start(ap, first);
  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  va_end(ap);
  g_ptr_array_add(argv, NULL);
  g_subprocess_launcher_set_environ(launcher, ctx->env);
  g_subprocess_launcher_set_stdout_file_path(launcher, b->out);
  g_subprocess_launcher_set_stderr_file_path(launcher, b->err);
  g_subprocess_launcher_set_child_setup(launcher, child_setup, NULL, NULL);
  b->proc = g_subprocess_launcher_spawnv(
      launcher, (const gchar *const *)argv->pdata, &error);
  ck_assert_msg(b->proc != NULL, "spawn: %s", error->message);
  return b;
}

static gchar *
file_text(const gchar *path)
{
  gchar *text = NULL;

  if (!g_file_get_contents(path, &text, NULL, NULL))
    return g_strdup("");
  return text;
}

/* `sluice events --follow` starts from now: what was written before it
 * started is not printed (it once replayed up to a day), only what comes
 * after; -n N prints the last N, --since what came from a time on; and
 * with no live worker writing events it says so, once, on stderr. */
START_TEST(test_events_follow_starts_now)
{
  g_autoptr(Ctx) ctx = ctx_any(_i);
  g_autoptr(Background) lonely = background_start(ctx, "events", "-f", NULL);
  g_autoptr(Background) follow = NULL;
  g_autoptr(Worker) w = NULL;
  g_autoptr(Run) done = NULL;
  g_autoptr(Run) last = NULL;
  g_autoptr(Run) all = NULL;
  g_autoptr(Run) since_old = NULL;
  g_autoptr(Run) since_later = NULL;
  g_autoptr(Run) bad_since = NULL;
  g_autoptr(GPtrArray) probes = g_ptr_array_new_with_free_func(g_free);
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;
  g_autofree gchar *old = NULL;
  g_autofree gchar *later = NULL;
  gchar *out = NULL;
  gchar *err = NULL;

  /* Nobody writes events yet: said once. */
  for (;;) {
    g_free(err);
    err = file_text(lonely->err);
    if (strstr(err, "no worker of namespace") != NULL)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "a follow with no worker said nothing: [%s]", err);
    g_usleep(20 * 1000);
  }
  ck_assert_uint_eq(lines_with(err, "no worker of namespace"), 1);
  g_clear_pointer(&err, g_free);
  g_clear_pointer(&lonely, background_free);

  w = worker_start(ctx, "--events", NULL);
  old = enqueue(ctx, "demo.noop", NULL);
  done = cli(ctx, "result", old, "--wait", "60s", NULL);
  assert_status(done, 0);

  /* Probes until the follower prints one: those written before it had
   * reached the end of the stream are skipped with the old events. */
  follow = background_start(ctx, "events", "--follow", NULL);
  deadline = g_get_monotonic_time() + PATIENCE_US;
  for (;;) {
    gboolean seen = FALSE;

    g_ptr_array_add(probes, enqueue(ctx, "demo.noop", NULL));
    g_free(out);
    out = file_text(follow->out);
    for (guint i = 0; i < probes->len && !seen; i++)
      seen = strstr(out, probes->pdata[i]) != NULL;
    if (seen)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the follower printed none of %u probes: %s", probes->len,
                  out);
    g_usleep(50 * 1000);
  }
  ck_assert_msg(strstr(out, old) == NULL,
                "events from before the follow began: %s", out);
  g_clear_pointer(&out, g_free);
  err = file_text(follow->err);
  ck_assert_msg(strstr(err, "writes events") == NULL &&
                    strstr(err, "no worker") == NULL,
                "%s", err);
  g_clear_pointer(&err, g_free);

  /* -n 2: the last two of all; --since: from a time on. */
  g_free(
      wait_for_state(ctx, probes->pdata[probes->len - 1], "succeeded", NULL));
  last = cli(ctx, "events", "-n", "2", NULL);
  all = cli(ctx, "events", NULL);
  assert_status(last, 0);
  assert_status(all, 0);
  ck_assert_msg(lines_with(last->out, " attempt ") == 2, "%s", last->out);
  ck_assert_msg(g_str_has_suffix(all->out, last->out), "%s\nnot the end of\n%s",
                last->out, all->out);
  since_old = cli(ctx, "events", "--since", "1h", NULL);
  assert_status(since_old, 0);
  ck_assert(strstr(since_old->out, old) != NULL);
  {
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autoptr(GDateTime) hour = g_date_time_add_hours(now, 1);
    later = g_date_time_format_iso8601(hour);
  }
  since_later = cli(ctx, "events", "--since", later, NULL);
  assert_status(since_later, 0);
  ck_assert_str_eq(since_later->out, "");
  bad_since = cli(ctx, "events", "--since", "yesterday", NULL);
  assert_status(bad_since, 2);
  assert_one_line_error(bad_since, "--since");
  g_free(worker_stop(w));
}
END_TEST

/* An id that is nowhere is an error for delete as for cancel: exit 1 and
 * one line that says so. */
START_TEST(test_delete_of_an_unknown_id_is_an_error)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autoptr(Run) del = cli(ctx, "delete", "not-an-id", NULL);
  g_autoptr(Run) cancel = cli(ctx, "cancel", "not-an-id", NULL);

  assert_status(del, 1);
  assert_one_line_error(del, "nothing deleted: no task not-an-id");
  ck_assert_str_eq(del->out, "");
  assert_status(cancel, 1);
  assert_one_line_error(cancel, "nothing cancelled");
}
END_TEST

/* ---- sluice worker's settings: one table (issue 27) ----------------------- */

/* @text with troff's font changes dropped, \- as -, runs of white space as
 * one space, in lower case: what a reader of sluice(1) sees. */
static gchar *
man_plain(const gchar *text)
{
  g_autoptr(GString) out = g_string_new(NULL);

  for (const gchar *p = text; *p != '\0'; p++) {
    if (p[0] == '\\' && p[1] == 'f' && p[2] != '\0') {
      p += 2;
      continue;
    }
    if (p[0] == '\\' && p[1] == '-') {
      g_string_append_c(out, '-');
      p++;
      continue;
    }
    if (g_ascii_isspace(*p)) {
      if (out->len > 0 && out->str[out->len - 1] != ' ')
        g_string_append_c(out, ' ');
      continue;
    }
    g_string_append_c(out, g_ascii_tolower(*p));
  }
  return g_string_free(g_steal_pointer(&out), FALSE);
}

/* The long options of `sluice worker --help` (its own, not the
 * connection's), each to the default it shows ("" for none). */
static GHashTable *
worker_help_options(gchar **env)
{
  static const gchar *const connection[] = {"url",
                                            "mode",
                                            "namespace",
                                            "config",
                                            "password-file",
                                            "min-replicas-ack",
                                            "keyring",
                                            "redis-tls-ca",
                                            "redis-tls-ca-dir",
                                            "redis-tls-cert",
                                            "redis-tls-key",
                                            "redis-tls-server-name",
                                            "redis-tls-min-version",
                                            "redis-tls-insecure",
                                            "help",
                                            NULL};
  g_autoptr(Run) help = cli_env(env, NULL, "worker", "--help", NULL);
  g_autoptr(GRegex) line = g_regex_new(
      "^\\s+(?:-\\w, )?--([a-z-]+)(?:=\\S+)?\\s+(.*?)(?: \\(default "
      "([^()]*)\\))?$",
      G_REGEX_MULTILINE, 0, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  GHashTable *options =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);

  assert_status(help, 0);
  g_regex_match(line, help->out, 0, &match);
  for (; g_match_info_matches(match); g_match_info_next(match, NULL)) {
    g_autofree gchar *name = g_match_info_fetch(match, 1);
    gchar *def = g_match_info_fetch(match, 3);

    if (g_strv_contains(connection, name)) {
      g_free(def);
      continue;
    }
    g_hash_table_insert(options, g_steal_pointer(&name),
                        def != NULL ? def : g_strdup(""));
  }
  ck_assert_uint_ge(g_hash_table_size(options), 25);
  return options;
}

/* sluice(1)'s entries of `sluice worker` (.TP, then the option's line,
 * then its text), each long option to its text, plain. */
static GHashTable *
man_worker_entries(const gchar *man)
{
  const gchar *start = strstr(man, "\n.SS \"sluice worker\"\n");
  const gchar *end = start != NULL ? strstr(start + 1, "\n.SS ") : NULL;
  g_autofree gchar *section = NULL;
  g_auto(GStrv) entries = NULL;
  g_autoptr(GRegex) option =
      g_regex_new("\\\\-\\\\-((?:[a-z]|\\\\-)+)", 0, 0, NULL);
  GHashTable *found =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);

  ck_assert_ptr_nonnull(end);
  section = g_strndup(start, (gsize)(end - start));
  entries = g_strsplit(section, "\n.TP\n", -1);
  for (guint i = 1; entries[i] != NULL; i++) {
    g_autoptr(GMatchInfo) match = NULL;
    const gchar *nl = strchr(entries[i], '\n');
    g_autofree gchar *head =
        g_strndup(entries[i], nl != NULL ? (gsize)(nl - entries[i]) : 0);

    if (!g_regex_match(option, head, 0, &match))
      continue;
    {
      g_autofree gchar *raw = g_match_info_fetch(match, 1);
      g_autofree gchar *name = man_plain(raw);
      g_hash_table_insert(found, g_steal_pointer(&name),
                          man_plain(nl != NULL ? nl : ""));
    }
  }
  return found;
}

/* The keys of [worker] as sluice(1)'s CONFIGURATION FILE lists them. */
static GPtrArray *
man_worker_keys(const gchar *man)
{
  const gchar *start = strstr(man, "\n.B [worker]\n(read by");
  const gchar *end = start != NULL ? strstr(start + 1, "\n.TP\n") : NULL;
  g_autofree gchar *paragraph = NULL;
  g_autoptr(GRegex) key =
      g_regex_new("\\\\fB((?:[a-z]|\\\\-)+)\\\\fR", 0, 0, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
  const gchar *last = strstr(man, "turned the other");

  ck_assert_ptr_nonnull(end);
  /* The keys come before the sentence that maps the off flags. */
  paragraph = g_strndup(
      start, (gsize)((last != NULL && last < end ? last : end) - start));
  g_regex_match(key, paragraph, 0, &match);
  for (; g_match_info_matches(match); g_match_info_next(match, NULL)) {
    g_autofree gchar *raw = g_match_info_fetch(match, 1);
    gchar *name = man_plain(raw);

    if (g_str_has_prefix(name, "--") ||
        g_ptr_array_find_with_equal_func(keys, name, g_str_equal, NULL))
      g_free(name);
    else
      g_ptr_array_add(keys, name);
  }
  return keys;
}

/* `sluice worker`'s options, its keys of [worker] and their defaults come
 * from one table (cli/cmd-worker.c): --help lists every option with the
 * library's default; sluice(1) documents each option, and no other, saying
 * the same default; the keys the command knows (the unknown-key message
 * lists them) are those sluice(1) lists, each an option's. task-log was
 * once read from the file and refused as unknown. */
START_TEST(test_worker_settings_are_one_table)
{
  g_auto(GStrv) env = cli_environ(NULL, NULL, NULL);
  g_autoptr(GHashTable) options = worker_help_options(env);
  g_autofree gchar *man = NULL;
  g_autoptr(GHashTable) entries = NULL;
  g_autoptr(GPtrArray) man_keys = NULL;
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func(g_free);
  /* Its directory, removed with it. */
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *conf = g_build_filename(ctx->dir, "w.conf", NULL);
  g_autofree gchar *url = g_strdup_printf("sqlite://%s/q.db", ctx->dir);
  g_autoptr(Run) unknown = NULL;
  GHashTableIter it;
  gpointer name, value;

  ck_assert(g_file_get_contents(TEST_SRCDIR "/cli/sluice.1", &man, NULL, NULL));
  entries = man_worker_entries(man);
  man_keys = man_worker_keys(man);
  g_hash_table_iter_init(&it, options);
  while (g_hash_table_iter_next(&it, &name, &value)) {
    const gchar *text = g_hash_table_lookup(entries, name);
    g_autofree gchar *want = g_ascii_strdown(value, -1);
    g_autofree gchar *said = g_strdup_printf("default %s", want);
    g_autofree gchar *said_colon = g_strdup_printf("default: %s", want);

    ck_assert_msg(text != NULL, "sluice(1) does not document --%s",
                  (const gchar *)name);
    if (*want != '\0')
      ck_assert_msg(strstr(text, said) != NULL ||
                        strstr(text, said_colon) != NULL,
                    "sluice(1) does not say --%s is by default %s, as --help "
                    "does: %s",
                    (const gchar *)name, want, text);
  }
  g_hash_table_iter_init(&it, entries);
  while (g_hash_table_iter_next(&it, &name, NULL))
    ck_assert_msg(g_hash_table_contains(options, name),
                  "sluice(1) documents --%s, which sluice worker lacks",
                  (const gchar *)name);

  /* The keys the command knows, from its message for one it does not. */
  ck_assert(g_file_set_contents(conf, "[worker]\nnot-a-key=1\n", -1, NULL));
  unknown = cli_env(env, NULL, "worker", "--config", conf, "--url", url, NULL);
  assert_status(unknown, 2);
  {
    const gchar *list = strstr(unknown->err, "the keys of [worker] are: ");
    g_autofree gchar *names = NULL;
    g_auto(GStrv) parts = NULL;

    ck_assert_msg(list != NULL, "%s", unknown->err);
    names = g_strstrip(g_strdup(list + strlen("the keys of [worker] are: ")));
    parts = g_strsplit(names, ", ", -1);
    for (guint i = 0; parts[i] != NULL; i++)
      g_ptr_array_add(keys, g_strdup(parts[i]));
    g_strfreev(g_steal_pointer(&parts));
  }
  for (guint i = 0; i < keys->len; i++) {
    const gchar *key = keys->pdata[i];
    g_autofree gchar *off = g_strconcat("no-", key, NULL);
    g_autofree gchar *one = g_strndup(key, strlen(key) - 1);

    ck_assert_msg(
        g_ptr_array_find_with_equal_func(man_keys, key, g_str_equal, NULL),
        "sluice(1) does not list the key %s of [worker]", key);
    ck_assert_msg(
        g_hash_table_contains(options, key) ||
            g_hash_table_contains(options, off) ||
            (g_str_has_suffix(key, "s") && g_hash_table_contains(options, one)),
        "the key %s of [worker] is no option's", key);
  }
  for (guint i = 0; i < man_keys->len; i++)
    ck_assert_msg(g_ptr_array_find_with_equal_func(keys, man_keys->pdata[i],
                                                   g_str_equal, NULL),
                  "sluice(1) lists the key %s, which [worker] does not take",
                  (const gchar *)man_keys->pdata[i]);
  /* Every option but --verbose is a key. */
  g_hash_table_iter_init(&it, options);
  while (g_hash_table_iter_next(&it, &name, NULL)) {
    const gchar *n = name;
    g_autofree gchar *plural = g_strconcat(n, "s", NULL);

    if (strcmp(n, "verbose") == 0)
      continue;
    ck_assert_msg(
        g_ptr_array_find_with_equal_func(keys, n, g_str_equal, NULL) ||
            (g_str_has_prefix(n, "no-") &&
             g_ptr_array_find_with_equal_func(keys, n + 3, g_str_equal,
                                              NULL)) ||
            g_ptr_array_find_with_equal_func(keys, plural, g_str_equal, NULL),
        "--%s has no key in [worker]", n);
  }

  /* Each off flag's key is read (task-log once was not). */
  {
    g_autofree gchar *text = g_strdup_printf(
        "[worker]\nmodules=%s;\ntask-log=false\ntrack-state=false\n"
        "jitter=false\nconcurrency=0\n",
        DEMO_MODULE);
    g_autoptr(Run) run = NULL;

    ck_assert(g_file_set_contents(conf, text, -1, NULL));
    run = cli_env(env, NULL, "worker", "--config", conf, "--url", url, NULL);
    assert_status(run, 2);
    ck_assert_msg(strstr(run->err, "[worker] concurrency") != NULL, "%s",
                  run->err);
  }

  /* A value that is not UTF-8 is the file's mistake, named with its key,
   * not a setting left out (the key-file fuzzer found it read as absent,
   * and a message then quoting nothing). */
  {
    g_autoptr(Run) run = NULL;

    ck_assert(g_file_set_contents(conf, "[worker]\nqueues=a\xff\n", -1, NULL));
    run = cli_env(env, NULL, "worker", "--config", conf, "--url", url, NULL);
    assert_status(run, 2);
    ck_assert_msg(strstr(run->err, "[worker] queues") != NULL &&
                      strstr(run->err, "UTF-8") != NULL,
                  "%s", run->err);
  }
}
END_TEST

/* ---- Every dead-letter reason, everywhere (issue 26) ---------------------- */

/* Each reason of the library's one list is taken by every --reason of the
 * dlq commands and is in sluice(1) and docs/semantics.md; an unknown one is
 * refused naming them all. (The dashboard's is test-web's; the clients'
 * copies are compared with it through tests/c-oracle.) */
START_TEST(test_every_dead_letter_reason_is_taken)
{
  g_autoptr(Ctx) ctx = ctx_new(0);
  g_autofree gchar *man = NULL;
  g_autoptr(Run) unknown = cli(ctx, "dlq", "list", "--reason", "nope", NULL);

  g_autofree gchar *semantics = NULL;

  ck_assert(g_file_get_contents(TEST_SRCDIR "/cli/sluice.1", &man, NULL, NULL));
  ck_assert(g_file_get_contents(TEST_SRCDIR "/docs/semantics.md", &semantics,
                                NULL, NULL));
  assert_status(unknown, 2);
  assert_one_line_error(unknown, "“nope”");
  for (const gchar *const *r = sluice_dead_letter_reasons(); *r != NULL; r++) {
    g_autofree gchar *in_man = g_strdup_printf("\n.B %s\n", *r);
    g_autofree gchar *in_docs = g_strdup_printf("\n| `%s` |", *r);
    g_autoptr(Run) list = cli(ctx, "dlq", "list", "--reason", *r, NULL);
    g_autoptr(Run) replay =
        cli(ctx, "dlq", "replay", "--all", "--reason", *r, "--dry-run", NULL);
    g_autoptr(Run) purge =
        cli(ctx, "dlq", "purge", "--reason", *r, "--dry-run", NULL);

    assert_status(list, 0);
    assert_status(replay, 0);
    assert_status(purge, 0);
    ck_assert_msg(strstr(unknown->err, *r) != NULL, "%s not named: %s", *r,
                  unknown->err);
    ck_assert_msg(strstr(man, in_man) != NULL,
                  "cli/sluice.1 does not list the dead-letter reason %s "
                  "(under \"Dead-letter reasons\")",
                  *r);
    ck_assert_msg(strstr(semantics, in_docs) != NULL,
                  "docs/semantics.md does not list the dead-letter reason %s "
                  "in its table of reasons",
                  *r);
  }
}
END_TEST

/* ---- The suite ----------------------------------------------------------- */

static gboolean
reliable_mode_available(void)
{
  SluiceRedisOptions options;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;

  sluice_redis_options_init(&options);
  options.mode = SLUICE_REDIS_RELIABLE;
  broker = sluice_redis_broker_new(&options, NULL, &error);
  return broker != NULL || !g_error_matches(error, SLUICE_BROKER_ERROR,
                                            SLUICE_BROKER_ERROR_UNSUPPORTED);
}

static Suite *
cli_suite(gboolean reliable)
{
  Suite *s = suite_create("cli");
  TCase *e2e = tcase_create("end-to-end");
  TCase *errors = tcase_create("errors");
  TCase *misc = tcase_create("misc");
  TCase *operator= tcase_create("operator");
  int n_modes = reliable ? 2 : 1;

  tcase_add_unchecked_fixture(e2e, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(e2e, 300);
  tcase_add_loop_test(e2e, test_enqueue_worker_result, 0, n_modes);
  tcase_add_loop_test(e2e, test_keyring_seals_from_enqueue_to_result, 0,
                      n_modes);
  tcase_add_loop_test(e2e, test_result_follow_prints_progress, 0, n_modes);
  tcase_add_loop_test(e2e, test_events_of_a_task, 0, n_modes);
  tcase_add_loop_test(e2e, test_workflow_show_draws_the_tree, 0, n_modes);
  tcase_add_loop_test(e2e, test_worker_runs_under_queue_limits, 0, n_modes);
  tcase_add_test(e2e, test_default_broker_is_sqlite_in_the_state_directory);
  tcase_add_loop_test(e2e, test_flaky_retries_then_succeeds, 0, n_modes);
  tcase_add_loop_test(e2e, test_no_task_log, 0, n_modes);
  tcase_add_loop_test(e2e, test_fail_dead_letter_replay_runs_again, 0, n_modes);
  tcase_add_loop_test(e2e, test_cancel_delayed_is_certain, 0, n_modes);
  tcase_add_loop_test(e2e, test_cancel_queued_records_revocation, 0, n_modes);
  tcase_add_loop_test(e2e, test_stats_and_inspect_json_fields, 0, n_modes);
  tcase_add_loop_test(e2e, test_sigterm_stops_gracefully, 0, n_modes);
  tcase_add_loop_test(e2e, test_sigterm_lets_short_task_finish, 0, n_modes);
  tcase_add_loop_test(e2e, test_enqueue_options, 0, n_modes);
  tcase_add_loop_test(e2e, test_enqueue_unique, 0, n_modes);
  if (reliable)
    tcase_add_test(e2e, test_poison_message_buried);
  tcase_add_loop_test(e2e, test_second_signal_stops_at_once, 0, n_modes);
  tcase_add_loop_test(e2e, test_unserved_task_names_are_reported, 0, n_modes);
  tcase_add_loop_test(e2e, test_stats_show_a_killed_worker_as_dead, 0, n_modes);
  tcase_add_loop_test(e2e, test_mode_mismatch_is_refused, 0, n_modes);
  tcase_add_loop_test(e2e, test_eviction_policy_warning_reaches_the_worker_log,
                      0, n_modes);
  tcase_add_loop_test(e2e, test_outage_is_one_line_each_way, 0, n_modes);
  tcase_add_loop_test(e2e, test_process_isolation_survives_a_crash, 0, n_modes);
  tcase_add_test(e2e, test_systemd_notify);
  tcase_add_loop_test(e2e, test_ls_lists_each_state, 0, n_modes);
  tcase_add_loop_test(e2e, test_pause_and_resume_a_queue, 0, n_modes);
  tcase_add_loop_test(e2e, test_purge_needs_yes, 0, n_modes);
  tcase_add_loop_test(e2e, test_run_now_and_delete, 0, n_modes);
  tcase_add_loop_test(e2e, test_dlq_bulk_commands_need_yes, 0, n_modes);
  tcase_add_loop_test(e2e, test_periodic_from_the_key_file, 0, n_modes);
  if (reliable) {
    tcase_add_test(e2e, test_poison_batch_mates_survive);
    tcase_add_test(e2e, test_worker_waits_for_redis_at_start);
    tcase_add_test(e2e, test_ready_waits_for_redis);
  }
  tcase_add_loop_test(e2e, test_text_output_escapes_control_characters, 0,
                      n_modes);
  suite_add_tcase(s, e2e);

  tcase_add_unchecked_fixture(errors, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(errors, 300);
  tcase_add_test(errors, test_error_unreachable_redis);
  tcase_add_test(errors, test_error_wrong_password);
  tcase_add_test(errors, test_error_usage);
  tcase_add_test(errors, test_error_too_large_one_status);
  if (!reliable)
    tcase_add_test(errors, test_error_reliable_unavailable);
  suite_add_tcase(s, errors);

  /* What operators do to queues and tasks (issue 26). */
  tcase_add_unchecked_fixture(operator, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(operator, 300);
  tcase_add_test(operator, test_every_dead_letter_reason_is_taken);
  tcase_add_test(operator, test_delete_of_an_unknown_id_is_an_error);
  tcase_add_loop_test(operator, test_keys_reseal_lets_the_old_key_go, 0,
                      n_modes);
  tcase_add_loop_test(operator, test_delete_and_purge_take_queued_tasks_out, 0,
                      n_modes);
  tcase_add_loop_test(operator,
                      test_pause_holds_what_was_fetched_and_what_comes_after,
                      reliable ? 0 : 2, 3);
  tcase_add_loop_test(operator, test_enqueue_writes_its_enqueued_event,
                      reliable ? 0 : 2, 3);
  tcase_add_loop_test(operator, test_events_follow_starts_now, reliable ? 0 : 2,
                      3);
  suite_add_tcase(s, operator);

  tcase_add_unchecked_fixture(misc, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(misc, 300);
  tcase_add_test(misc, test_help_everywhere);
  tcase_add_test(misc, test_every_command_is_named);
  tcase_add_test(misc, test_worker_settings_are_one_table);
  tcase_add_test(misc, test_config_file_and_environment);
  tcase_add_test(misc, test_args_from_stdin_and_dash);
  tcase_add_test(misc, test_run_in_process);
  tcase_add_test(misc, test_module_found_by_name);
  tcase_add_test(misc, test_run_args_depth);
  tcase_add_test(misc, test_password_file);
  tcase_add_test(misc, test_redis_tls_settings);
  tcase_add_test(misc, test_secret_file_permissions);
  tcase_add_test(misc, test_config_file_bad_values);
  tcase_add_test(misc, test_sqlite_read_only_for_this_user);
  tcase_add_test(misc, test_migrate_a_sqlite_file);
  if (reliable)
    tcase_add_test(misc, test_worker_logs_what_the_ping_found);
  suite_add_tcase(s, misc);
  return s;
}

int
main(void)
{
  g_autofree gchar *server = sluice_test_redis_require();
  gboolean reliable = reliable_mode_available();
  SRunner *runner;
  int failed;

  if (!reliable)
    fprintf(stderr,
            "test-cli: this build has no reliable Redis mode yet: the "
            "reliable-mode iterations and the poison-message test are not "
            "run (they are registered once it exists)\n");
  runner = srunner_create(cli_suite(reliable));
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

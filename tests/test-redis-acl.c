/* test-redis-acl.c - every role under its least-privilege Redis user.
 *
 * The users are not written here: they are read from docs/security.md
 * ("Least privilege on Redis", the block after <!-- acl-users -->), with
 * the namespace and the password replaced, so the documentation cannot
 * drift from what was tested. Then, in both modes:
 *   - a worker process (tests/helpers/worker-proc) serves under the worker
 *     user, and the producer user enqueues (now, later, idempotently),
 *     cancels and awaits the results;
 *   - after a kill -9 of a reliable worker, a second one under the same
 *     user reclaims and finishes what the first held;
 *   - a user of one namespace gets, on another, an AUTH error naming the
 *     key patterns to grant; a user without a command, one naming it;
 *   - the reader can show stats, records and dead letters, not enqueue;
 *   - without CONFIG GET, the eviction-policy and persistence checks say
 *     once that they could not be made.
 * After each scenario ACL LOG must show nothing refused but CONFIG GET,
 * which the documented users do not have.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <sluice/sys/broker.h>
#include <sluice/sluice-redis.h>
#include <sluice/sluice.h>

#include "tests/helpers/redis-server.h"

#define PATIENCE_MS 60000

static SluiceTestRedis *shared;

static void
shared_setup(void)
{
  g_autoptr(GError) error = NULL;

  shared = sluice_test_redis_start(NULL, &error);
  if (shared == NULL) {
    fprintf(stderr, "cannot start redis-server: %s\n", error->message);
    exit(1);
  }
}

static void
shared_teardown(void)
{
  g_clear_pointer(&shared, sluice_test_redis_stop);
}

static const gchar *const modes[] = {"fast", "reliable"};

static gboolean
wait_for(gboolean (*done)(gpointer), gpointer data, gint64 timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  while (!done(data)) {
    if (g_get_monotonic_time() >= deadline)
      return FALSE;
    g_usleep(20 * 1000);
  }
  return TRUE;
}

/* ---- The users of docs/security.md --------------------------------------- */

/* The rules docs/security.md gives @role ("worker-fast", "reader", ...), for
 * namespace @ns and password @password. */
static gchar *
documented_rules(const gchar *role, const gchar *ns, const gchar *password)
{
  g_autofree gchar *page = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *prefix = g_strdup_printf("ACL SETUSER sluice-%s ", role);
  g_autofree gchar *tag = g_strdup_printf("{%s}", ns);
  g_autofree gchar *secret = g_strdup_printf(">%s", password);
  g_auto(GStrv) lines = NULL;
  const gchar *block;

  ck_assert_msg(
      g_file_get_contents(TEST_SRCDIR "/docs/security.md", &page, NULL, &error),
      "%s", error != NULL ? error->message : "");
  block = strstr(page, "<!-- acl-users -->");
  ck_assert_msg(block != NULL,
                "docs/security.md has no <!-- acl-users --> block");
  lines = g_strsplit(block, "\n", -1);
  /* The marker, the opening fence, the users, the closing fence. */
  for (guint i = 2; lines[i] != NULL && !g_str_has_prefix(lines[i], "```");
       i++) {
    if (g_str_has_prefix(lines[i], prefix)) {
      GString *rules = g_string_new(lines[i] + strlen("ACL SETUSER "));

      g_string_replace(rules, "{sluice}", tag, 0);
      g_string_replace(rules, ">change-me", secret, 0);
      return g_string_free(rules, FALSE);
    }
  }
  ck_abort_msg("docs/security.md documents no user for the role %s", role);
  return NULL;
}

/* Creates the documented user of @role for @ns; returns its URL. */
static gchar *
role_url(const gchar *role, const gchar *ns)
{
  g_autofree gchar *password = g_strdup_printf("pw-%s-%s", role, ns);
  g_autofree gchar *rules = documented_rules(role, ns, password);
  g_autoptr(GError) error = NULL;

  ck_assert_msg(sluice_test_redis_acl_setuser(shared, rules, &error), "%s",
                error != NULL ? error->message : "");
  return g_strdup_printf("redis://sluice-%s:%s@127.0.0.1:%u/0", role, password,
                         sluice_test_redis_port(shared));
}

static SluiceBroker *
broker_as(const gchar *url, const gchar *mode, const gchar *ns)
{
  SluiceRedisOptions options;
  g_autoptr(GError) error = NULL;
  SluiceBroker *broker;

  sluice_redis_options_init(&options);
  options.url = url;
  options.mode =
      strcmp(mode, "fast") == 0 ? SLUICE_REDIS_FAST : SLUICE_REDIS_RELIABLE;
  options.ns = ns;
  broker = sluice_redis_broker_new(&options, NULL, &error);
  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  return broker;
}

static SluiceClient *
client_of(SluiceBroker *broker, gboolean track_state)
{
  SluiceClientOptions options;
  g_autoptr(GError) error = NULL;
  SluiceClient *client;

  sluice_client_options_init(&options);
  options.track_state = track_state;
  client = sluice_client_new(broker, &options, &error);
  ck_assert_msg(client != NULL, "%s", error != NULL ? error->message : "");
  return client;
}

/* Nothing refused since the last look but CONFIG GET, which the documented
 * users do not have (it is optional). */
static void
assert_nothing_else_refused(void)
{
  g_autoptr(GPtrArray) refused = sluice_test_redis_acl_log(shared);

  for (guint i = 0; i < refused->len; i++)
    ck_assert_msg(strcmp(refused->pdata[i], "command config|get") == 0,
                  "ACL LOG: %s was refused", (const gchar *)refused->pdata[i]);
}

static GBytes *
args_ms(gint64 ms)
{
  g_autofree gchar *json =
      g_strdup_printf("{\"ms\": %" G_GINT64_FORMAT "}", ms);

  return sluice_args_from_json(json, -1, NULL);
}

/* ---- Worker processes ---------------------------------------------------- */

typedef struct {
  GPid pid;
  gchar *err_path;
  gboolean reaped;
  gint status;
} Proc;

static void
proc_child_setup(gpointer data)
{
  prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static Proc *
proc_start(const gchar *dir, const gchar *id, const gchar *url,
           const gchar *mode, const gchar *ns, const gchar *log_path)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *url_arg = g_strdup_printf("--url=%s", url);
  g_autofree gchar *mode_arg = g_strdup_printf("--mode=%s", mode);
  g_autofree gchar *ns_arg = g_strdup_printf("--namespace=%s", ns);
  g_autofree gchar *id_arg = g_strdup_printf("--worker-id=%s", id);
  g_autofree gchar *log_arg = g_strdup_printf("--log=%s", log_path);
  const gchar *argv[] = {TEST_BUILDDIR "/tests/helpers/worker-proc",
                         url_arg,
                         mode_arg,
                         ns_arg,
                         id_arg,
                         log_arg,
                         "--visibility-timeout=1000",
                         "--concurrency=2",
                         NULL};
  Proc *p = g_new0(Proc, 1);
  int fd;

  p->err_path = g_strdup_printf("%s/%s.err", dir, id);
  fd = open(p->err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ck_assert_int_ge(fd, 0);
  ck_assert_msg(g_spawn_async_with_fds(
                    NULL, (gchar **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                    proc_child_setup, NULL, &p->pid, -1, fd, fd, &error),
                "spawn worker-proc: %s", error != NULL ? error->message : "");
  close(fd);
  return p;
}

static gboolean
proc_wait(Proc *p, gint64 timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  while (!p->reaped) {
    pid_t r = waitpid(p->pid, &p->status, WNOHANG);
    if (r == p->pid)
      p->reaped = TRUE;
    else if (r < 0 && errno != EINTR)
      return FALSE;
    else if (g_get_monotonic_time() >= deadline)
      return FALSE;
    else
      g_usleep(10 * 1000);
  }
  return TRUE;
}

static gchar *
proc_output(Proc *p)
{
  gchar *text = NULL;

  if (!g_file_get_contents(p->err_path, &text, NULL, NULL))
    return g_strdup("");
  return text;
}

/* SIGTERM; a graceful stop exits 0. */
static void
proc_stop(Proc *p)
{
  kill(p->pid, SIGTERM);
  ck_assert_msg(proc_wait(p, PATIENCE_MS), "the worker did not stop");
  if (!WIFEXITED(p->status) || WEXITSTATUS(p->status) != 0) {
    g_autofree gchar *out = proc_output(p);
    ck_abort_msg("the worker exited with status 0x%x:\n%s", (unsigned)p->status,
                 out);
  }
}

static void
proc_free(Proc *p)
{
  if (p == NULL)
    return;
  if (!p->reaped) {
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &p->status, 0);
  }
  g_spawn_close_pid(p->pid);
  g_free(p->err_path);
  g_free(p);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Proc, proc_free)

static guint
count_of(const gchar *text, const gchar *needle)
{
  guint n = 0;

  for (const gchar *p = strstr(text, needle); p != NULL;
       p = strstr(p + 1, needle))
    n++;
  return n;
}

/* One test's namespace and scratch directory. */
typedef struct {
  gchar *ns;
  gchar *dir;
  gchar *log_path; /* the workers' execution log */
} World;

static World *
world_new(const gchar *name)
{
  World *w = g_new0(World, 1);
  g_autoptr(GError) error = NULL;

  w->ns = g_strdup_printf("%s%d", name, (int)getpid());
  w->dir = g_dir_make_tmp("sluice-acl-XXXXXX", &error);
  ck_assert_msg(w->dir != NULL, "%s", error != NULL ? error->message : "");
  w->log_path = g_build_filename(w->dir, "executions.log", NULL);
  /* Nothing refused before this test is this test's business. */
  g_ptr_array_unref(sluice_test_redis_acl_log(shared));
  return w;
}

static void
world_free(World *w)
{
  g_autoptr(GDir) d = g_dir_open(w->dir, 0, NULL);
  const gchar *name;

  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree gchar *path = g_build_filename(w->dir, name, NULL);
    g_unlink(path);
  }
  g_rmdir(w->dir);
  g_free(w->log_path);
  g_free(w->dir);
  g_free(w->ns);
  g_free(w);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(World, world_free)

typedef struct {
  const gchar *path;
  const gchar *needle;
  guint at_least;
} FileCheck;

static gboolean
file_mentions(gpointer data)
{
  FileCheck *c = data;
  g_autofree gchar *text = NULL;

  return g_file_get_contents(c->path, &text, NULL, NULL) &&
         count_of(text, c->needle) >= c->at_least;
}

static void
assert_succeeded(SluiceClient *client, const gchar *id)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) r =
      sluice_client_get_result(client, id, PATIENCE_MS, NULL, &error);

  ck_assert_msg(r != NULL, "%s: %s", id, error != NULL ? error->message : "");
  ck_assert_msg(sluice_result_get_state(r) == SLUICE_STATE_SUCCEEDED,
                "%s is %s: %s", id,
                sluice_task_state_to_string(sluice_result_get_state(r)),
                sluice_result_get_error(r));
}

/* ---- Tests --------------------------------------------------------------- */

/* The worker serves under its user; the producer enqueues (now, later,
 * with its own id, twice), cancels and awaits under its own. */
START_TEST(test_worker_and_producer_under_their_users)
{
  const gchar *mode = modes[_i];
  g_autoptr(World) w = world_new("serve");
  g_autofree gchar *worker_role = g_strdup_printf("worker-%s", mode);
  g_autofree gchar *producer_role = g_strdup_printf("producer-%s", mode);
  g_autofree gchar *worker_url = role_url(worker_role, w->ns);
  g_autofree gchar *producer_url = role_url(producer_role, w->ns);
  g_autoptr(SluiceBroker) broker = broker_as(producer_url, mode, w->ns);
  g_autoptr(SluiceClient) client = client_of(broker, TRUE);
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  g_autoptr(Proc) p = NULL;
  g_autofree gchar *later = NULL;
  g_autofree gchar *output = NULL;
  SluiceEnqueueOptions options;
  gboolean existed = TRUE;

  p = proc_start(w->dir, "w1", worker_url, mode, w->ns, w->log_path);
  for (guint i = 0; i < 5; i++)
    g_ptr_array_add(ids,
                    sluice_client_enqueue(client, "t.log", NULL, NULL, &error));
  sluice_enqueue_options_init(&options);
  options.delay_ms = 300;
  g_ptr_array_add(
      ids, sluice_client_enqueue(client, "t.log", NULL, &options, &error));
  {
    g_autoptr(GBytes) args = args_ms(50);
    g_ptr_array_add(
        ids, sluice_client_enqueue(client, "t.sleep", args, NULL, &error));
  }
  sluice_enqueue_options_init(&options);
  options.id = "acl-fixed";
  g_ptr_array_add(ids, sluice_client_enqueue_full(client, "t.log", NULL,
                                                  &options, &existed, &error));
  ck_assert(!existed);
  g_free(sluice_client_enqueue_full(client, "t.log", NULL, &options, &existed,
                                    &error));
  ck_assert(existed);
  sluice_enqueue_options_init(&options);
  options.delay_ms = 600000;
  later = sluice_client_enqueue(client, "t.log", NULL, &options, &error);
  ck_assert_msg(error == NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_client_cancel(client, later, &error),
                   SLUICE_CANCEL_REMOVED);

  for (guint i = 0; i < ids->len; i++)
    assert_succeeded(client, ids->pdata[i]);
  proc_stop(p);
  output = proc_output(p);
  /* CONFIG GET is denied: each check says so, once. */
  ck_assert_msg(count_of(output, "could not check maxmemory-policy") == 1, "%s",
                output);
  if (strcmp(mode, "reliable") == 0)
    ck_assert_msg(count_of(output, "could not check the persistence") == 1,
                  "%s", output);
  ck_assert_msg(strstr(output, "refused") == NULL, "%s", output);
  assert_nothing_else_refused();
}
END_TEST

/* A reliable worker killed with -9 while it holds a task; a second worker
 * under the same user reclaims it once the lease lapses and finishes it. */
START_TEST(test_reclaim_after_kill_under_worker_user)
{
  g_autoptr(World) w = world_new("reclaim");
  g_autofree gchar *worker_url = role_url("worker-reliable", w->ns);
  g_autofree gchar *producer_url = role_url("producer-reliable", w->ns);
  g_autoptr(SluiceBroker) broker = broker_as(producer_url, "reliable", w->ns);
  g_autoptr(SluiceClient) client = client_of(broker, FALSE);
  g_autoptr(GBytes) args = args_ms(2000);
  g_autoptr(GError) error = NULL;
  g_autoptr(Proc) first = NULL;
  g_autoptr(Proc) second = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *log = NULL;
  FileCheck ran_once = {w->log_path, NULL, 1};

  first = proc_start(w->dir, "a", worker_url, "reliable", w->ns, w->log_path);
  id = sluice_client_enqueue(client, "t.sleep", args, NULL, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  ran_once.needle = id;
  ck_assert_msg(wait_for(file_mentions, &ran_once, PATIENCE_MS),
                "the first worker never started the task");
  kill(first->pid, SIGKILL);
  ck_assert(proc_wait(first, PATIENCE_MS));

  second = proc_start(w->dir, "b", worker_url, "reliable", w->ns, w->log_path);
  assert_succeeded(client, id);
  ck_assert(g_file_get_contents(w->log_path, &log, NULL, NULL));
  /* Ran by the first worker, then again by the second (delivery 2). */
  ck_assert_msg(count_of(log, id) == 2, "%s", log);
  {
    g_autofree gchar *again = g_strdup_printf("%s 2 ", id);
    ck_assert_msg(strstr(log, again) != NULL, "%s", log);
  }
  proc_stop(second);
  assert_nothing_else_refused();
}
END_TEST

/* The operator's steering (`sluice pause`, `resume`, `run-now`, `delete`,
 * `purge`) needs a worker's rights, as docs/security.md says, and no
 * more. */
START_TEST(test_operator_steers_under_worker_user)
{
  const gchar *mode = modes[_i];
  g_autoptr(World) w = world_new("steer");
  g_autofree gchar *role = g_strdup_printf("worker-%s", mode);
  g_autofree gchar *worker_url = role_url(role, w->ns);
  g_autoptr(SluiceBroker) admin =
      broker_as(sluice_test_redis_url(shared), mode, w->ns);
  g_autoptr(SluiceClient) producer = client_of(admin, TRUE);
  g_autoptr(SluiceBroker) operator_broker = broker_as(worker_url, mode, w->ns);
  g_autoptr(SluiceClient) operator_ = client_of(operator_broker, TRUE);
  g_auto(GStrv) paused = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *soon = NULL;
  g_autofree gchar *later = NULL;
  g_autofree gchar *queued = NULL;
  SluiceEnqueueOptions options;
  guint64 removed = 0;

  sluice_enqueue_options_init(&options);
  options.delay_ms = 600000;
  soon = sluice_client_enqueue(producer, "t.log", NULL, &options, &error);
  later = sluice_client_enqueue(producer, "t.log", NULL, &options, &error);
  queued = sluice_client_enqueue(producer, "t.log", NULL, NULL, &error);
  ck_assert_msg(error == NULL, "%s", error != NULL ? error->message : "");

  ck_assert_msg(sluice_client_pause(operator_, "default", &error), "%s",
                error != NULL ? error->message : "");
  paused = sluice_client_list_paused(operator_, &error);
  ck_assert_msg(paused != NULL && g_strv_length(paused) == 1, "%s",
                error != NULL ? error->message : "");
  ck_assert_msg(sluice_client_resume(operator_, "default", &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_msg(sluice_client_run_now(operator_, soon, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_client_delete(operator_, later, &error),
                   SLUICE_DELETE_UNSCHEDULED);
  ck_assert_msg(sluice_client_delete(operator_, queued, &error) ==
                    SLUICE_DELETE_REMOVED,
                "%s", error != NULL ? error->message : "");
  ck_assert_msg(sluice_client_purge(operator_, "default", &removed, &error),
                "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(removed, 1);
  assert_nothing_else_refused();
}
END_TEST

/* The worker user of one namespace on another: refused, with the patterns
 * to grant named; a user without a command: refused, with the command. */
START_TEST(test_other_namespace_and_missing_command)
{
  const gchar *mode = modes[_i];
  g_autoptr(World) w = world_new("perm");
  g_autofree gchar *worker_role = g_strdup_printf("worker-%s", mode);
  g_autofree gchar *worker_url = role_url(worker_role, w->ns);
  g_autofree gchar *reader_url = role_url("reader", w->ns);
  g_autofree gchar *other = g_strdup_printf("%sx", w->ns);
  g_autofree gchar *pattern = g_strdup_printf("~{%s}:*", other);
  g_autoptr(SluiceBroker) elsewhere = broker_as(worker_url, mode, other);
  g_autoptr(SluiceClient) intruder = client_of(elsewhere, FALSE);
  g_autoptr(SluiceBroker) read_only = broker_as(reader_url, mode, w->ns);
  g_autoptr(SluiceClient) reader = client_of(read_only, FALSE);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GRegex) names_command =
      g_regex_new("may not run [A-Z]+", 0, 0, NULL);
  const gchar *const queues[] = {"default", NULL};
  gchar *id;

  /* A script touching the other namespace's keys. */
  id = sluice_client_enqueue(intruder, "t.log", NULL, NULL, &error);
  ck_assert_ptr_null(id);
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert_msg(strstr(error->message, pattern) != NULL, "%s", error->message);
  g_clear_error(&error);
  /* A plain command on them (the fetch). */
  got = g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
  ck_assert(
      !sluice_broker_fetch(elsewhere, "intruder", queues, 1, 0, got, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert_msg(strstr(error->message, pattern) != NULL, "%s", error->message);
  g_clear_error(&error);

  /* The reader may not enqueue: the error names a command to grant. */
  id = sluice_client_enqueue(reader, "t.log", NULL, NULL, &error);
  ck_assert_ptr_null(id);
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert_msg(g_regex_match(names_command, error->message, 0, NULL), "%s",
                error->message);
  ck_assert_msg(strstr(error->message, "+@all") == NULL, "%s", error->message);
  g_ptr_array_unref(sluice_test_redis_acl_log(shared));
}
END_TEST

/* The reader sees stats, records and dead letters. */
START_TEST(test_reader_reads_and_cannot_write)
{
  const gchar *mode = modes[_i];
  g_autoptr(World) w = world_new("read");
  g_autofree gchar *reader_url = role_url("reader", w->ns);
  g_autoptr(SluiceBroker) admin =
      broker_as(sluice_test_redis_url(shared), mode, w->ns);
  g_autoptr(SluiceClient) producer = client_of(admin, TRUE);
  g_autoptr(SluiceBroker) read_only = broker_as(reader_url, mode, w->ns);
  g_autoptr(SluiceClient) reader = client_of(read_only, FALSE);
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats stats;
  g_autoptr(SluiceResult) record = NULL;
  g_autoptr(SluiceResult) waited = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  g_autofree gchar *id = NULL;
  redisReply *r;

  id = sluice_client_enqueue(producer, "t.log", NULL, NULL, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  r = sluice_test_redis_command(
      shared,
      "XADD {%s}:dlq * payload x reason expired source default "
      "deliveries 1 at 1 task_id gone task t.log detail late",
      w->ns);
  ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
  freeReplyObject(r);

  ck_assert_msg(sluice_client_get_stats(reader, NULL, &stats, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_uint_eq(stats.queues->len, 1);
  ck_assert_int_eq(stats.dead_letters, 1);
  sluice_broker_stats_clear(&stats);
  record = sluice_client_inspect(reader, id, &error);
  ck_assert_msg(record != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_result_get_state(record), SLUICE_STATE_QUEUED);
  /* Waiting subscribes to the task's channel. */
  waited = sluice_client_get_result(reader, id, 200, NULL, &error);
  ck_assert(waited == NULL && g_error_matches(error, SLUICE_CLIENT_ERROR,
                                              SLUICE_CLIENT_ERROR_TIMEOUT));
  g_clear_error(&error);
  dead = sluice_client_dlq_list(reader, NULL, 10, NULL, NULL, &error);
  ck_assert_msg(dead != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(dead->len, 1);
  /* The operator's listings (`sluice ls`, `stats` showing pauses). */
  {
    static const SluiceTaskState states[] = {
        SLUICE_STATE_QUEUED, SLUICE_STATE_SCHEDULED, SLUICE_STATE_RETRYING,
        SLUICE_STATE_RUNNING, SLUICE_STATE_DEAD_LETTERED};
    SluiceEnqueueOptions later;

    sluice_enqueue_options_init(&later);
    later.delay_ms = 600000;
    g_free(sluice_client_enqueue(producer, "t.log", NULL, &later, &error));
    ck_assert_msg(error == NULL, "%s", error != NULL ? error->message : "");
    for (gsize i = 0; i < G_N_ELEMENTS(states); i++) {
      g_autoptr(GPtrArray) page = NULL;
      SluiceListOptions lo;

      sluice_list_options_init(&lo);
      lo.state = states[i];
      lo.queue = "default";
      page = sluice_client_list(reader, &lo, NULL, &error);
      ck_assert_msg(page != NULL, "state %d: %s", states[i],
                    error != NULL ? error->message : "");
      if (states[i] == SLUICE_STATE_QUEUED ||
          states[i] == SLUICE_STATE_SCHEDULED ||
          states[i] == SLUICE_STATE_DEAD_LETTERED)
        ck_assert_uint_eq(page->len, 1);
    }
    g_strfreev(sluice_client_list_paused(reader, &error));
    ck_assert_msg(error == NULL, "%s", error != NULL ? error->message : "");
  }
  assert_nothing_else_refused();

  ck_assert_ptr_null(
      sluice_client_enqueue(reader, "t.log", NULL, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  g_ptr_array_unref(sluice_test_redis_acl_log(shared));
}
END_TEST

/* ---- The CONFIG GET notices, in this process ----------------------------- */

static gint policy_notices;
static gint persistence_notices;

static GLogWriterOutput
count_notices(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
              gpointer data)
{
  for (gsize i = 0; i < n_fields; i++) {
    if (strcmp(fields[i].key, "MESSAGE") != 0)
      continue;
    if (strstr(fields[i].value, "could not check maxmemory-policy") != NULL &&
        strstr(fields[i].value, "CONFIG GET is not permitted") != NULL)
      g_atomic_int_inc(&policy_notices);
    if (strstr(fields[i].value, "could not check the persistence") != NULL &&
        strstr(fields[i].value, "CONFIG GET is not permitted") != NULL)
      g_atomic_int_inc(&persistence_notices);
  }
  return G_LOG_WRITER_HANDLED;
}

typedef struct {
  SluiceBroker *broker;
  GPtrArray *got;
} FetchJob;

static gpointer
blocked_fetch(gpointer data)
{
  FetchJob *job = data;
  const gchar *const queues[] = {"default", NULL};

  job->got =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
  sluice_broker_fetch(job->broker, "c2", queues, 1, 3000, job->got, NULL);
  return NULL;
}

START_TEST(test_config_get_denied_is_said_once)
{
  const gchar *mode = modes[_i];
  g_autoptr(World) w = world_new("notice");
  g_autofree gchar *worker_role = g_strdup_printf("worker-%s", mode);
  g_autofree gchar *worker_url = role_url(worker_role, w->ns);
  g_autoptr(SluiceBroker) broker = broker_as(worker_url, mode, w->ns);
  g_autoptr(GError) error = NULL;
  const gchar *const queues[] = {"default", NULL};
  FetchJob job = {broker, NULL};
  GThread *thread;

  g_log_set_writer_func(count_notices, NULL, NULL);
  ck_assert_msg(sluice_redis_broker_ping(broker, &error), "%s",
                error != NULL ? error->message : "");
  /* A second connection, blocked in a fetch, while this one fetches. */
  thread = g_thread_new("fetch", blocked_fetch, &job);
  for (guint i = 0; i < 3; i++) {
    g_autoptr(GPtrArray) got =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
    ck_assert_msg(sluice_broker_fetch(broker, "c1", queues, 1, 0, got, &error),
                  "%s", error != NULL ? error->message : "");
  }
  g_thread_join(thread);
  g_ptr_array_unref(job.got);
  ck_assert_int_eq(g_atomic_int_get(&policy_notices), 1);
  ck_assert_int_eq(g_atomic_int_get(&persistence_notices),
                   strcmp(mode, "reliable") == 0 ? 1 : 0);
}
END_TEST

/* The man page shows the same users as docs/security.md (troff escapes
 * its hyphens). */
START_TEST(test_man_page_has_the_same_users)
{
  g_autofree gchar *page = NULL;
  g_autofree gchar *man = NULL;
  g_auto(GStrv) lines = NULL;
  const gchar *block;
  guint n = 0;

  ck_assert(
      g_file_get_contents(TEST_SRCDIR "/docs/security.md", &page, NULL, NULL));
  ck_assert(g_file_get_contents(TEST_SRCDIR "/cli/sluice.1", &man, NULL, NULL));
  block = strstr(page, "<!-- acl-users -->");
  ck_assert_ptr_nonnull(block);
  lines = g_strsplit(block, "\n", -1);
  for (guint i = 2; lines[i] != NULL && !g_str_has_prefix(lines[i], "```");
       i++) {
    g_autoptr(GString) troff = g_string_new(lines[i]);

    g_string_replace(troff, "-", "\\-", 0);
    g_string_prepend_c(troff, '\n');
    g_string_append_c(troff, '\n');
    ck_assert_msg(strstr(man, troff->str) != NULL,
                  "cli/sluice.1 lacks the user line of docs/security.md: %s",
                  lines[i]);
    n++;
  }
  ck_assert_uint_eq(n, 5);
}
END_TEST

static Suite *
acl_suite(void)
{
  Suite *s = suite_create("redis-acl");
  TCase *tc = tcase_create("roles");

  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_worker_and_producer_under_their_users, 0, 2);
  tcase_add_test(tc, test_reclaim_after_kill_under_worker_user);
  tcase_add_loop_test(tc, test_other_namespace_and_missing_command, 0, 2);
  tcase_add_loop_test(tc, test_operator_steers_under_worker_user, 0, 2);
  tcase_add_loop_test(tc, test_reader_reads_and_cannot_write, 0, 2);
  tcase_add_loop_test(tc, test_config_get_denied_is_said_once, 0, 2);
  suite_add_tcase(s, tc);

  tc = tcase_create("documentation");
  tcase_add_test(tc, test_man_page_has_the_same_users);
  suite_add_tcase(s, tc);
  return s;
}

int
main(void)
{
  g_autofree gchar *server = sluice_test_redis_require();
  SRunner *runner = srunner_create(acl_suite());
  int failed;

  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

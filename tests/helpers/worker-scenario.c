/* worker-scenario.c - see worker-scenario.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers/broker-calls.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/worker-scenario.h"

Scenario *
scenario_new(SluiceTestRedis *server, const gchar *name)
{
  Scenario *s = g_new0(Scenario, 1);
  g_autoptr(GError) error = NULL;

  s->server = server;
  s->ns = g_strdup_printf("%s-%d", name, (int)getpid());
  s->dir = g_dir_make_tmp("sluice-reliable-XXXXXX", &error);
  ck_assert_msg(s->dir != NULL, "%s", error != NULL ? error->message : "");
  s->log_path = g_build_filename(s->dir, "executions.log", NULL);
  s->broker = sluice_test_redis_broker(SLUICE_REDIS_RELIABLE,
                                       sluice_test_redis_url(server), s->ns, 0);
  s->client = sluice_client_new(s->broker, NULL, &error);
  ck_assert_msg(s->client != NULL, "%s", error != NULL ? error->message : "");
  return s;
}

void
scenario_free(Scenario *s)
{
  GDir *dir = g_dir_open(s->dir, 0, NULL);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
    g_autofree gchar *path = g_build_filename(s->dir, name, NULL);
    g_unlink(path);
  }
  if (dir != NULL)
    g_dir_close(dir);
  g_rmdir(s->dir);
  sluice_client_unref(s->client);
  sluice_broker_unref(s->broker);
  g_free(s->log_path);
  g_free(s->dir);
  g_free(s->ns);
  g_free(s);
}

static void
proc_child_setup(gpointer data)
{
  /* Dies with the test process, however that ends. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Starts worker @id on @s; the varargs are more options, NULL-terminated.
 */
Proc *
proc_start(Scenario *s, const gchar *id, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  Proc *p = g_new0(Proc, 1);
  const gchar *option;
  va_list ap;
  int fd;

  g_ptr_array_add(argv, g_strdup(TEST_BUILDDIR "/tests/helpers/worker-proc"));
  g_ptr_array_add(
      argv, g_strdup_printf("--url=%s", sluice_test_redis_url(s->server)));
  g_ptr_array_add(argv, g_strdup_printf("--namespace=%s", s->ns));
  g_ptr_array_add(argv, g_strdup_printf("--worker-id=%s", id));
  g_ptr_array_add(argv, g_strdup_printf("--log=%s", s->log_path));
  va_start(ap, id);
  while ((option = va_arg(ap, const gchar *)) != NULL)
    g_ptr_array_add(argv, g_strdup(option));
  va_end(ap);
  g_ptr_array_add(argv, NULL);

  p->s = s;
  p->id = g_strdup(id);
  p->err_path = g_strdup_printf("%s/%s.err", s->dir, id);
  fd = open(p->err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ck_assert_int_ge(fd, 0);
  ck_assert_msg(g_spawn_async_with_fds(NULL, (gchar **)argv->pdata, NULL,
                                       G_SPAWN_DO_NOT_REAP_CHILD,
                                       proc_child_setup, NULL, &p->pid, -1, fd,
                                       fd, &error),
                "spawn worker-proc: %s", error != NULL ? error->message : "");
  close(fd);
  return p;
}

/* Waits up to @timeout_ms for the process to end. */
gboolean
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

void
proc_signal(Proc *p, int signum)
{
  if (!p->reaped)
    kill(p->pid, signum);
}

gboolean
proc_exited_ok(Proc *p)
{
  return p->reaped && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0;
}

/* A graceful stop: SIGTERM once it runs (before, SIGTERM just kills it),
 * then the exit status must be 0. */
void
proc_stop(Proc *p)
{
  if (!p->reaped)
    proc_wait_ready(p->s, p);
  proc_signal(p, SIGTERM);
  ck_assert_msg(proc_wait(p, 60000), "worker %s did not stop", p->id);
  ck_assert_msg(proc_exited_ok(p), "worker %s: status 0x%x", p->id,
                (unsigned)p->status);
}

void
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
  g_free(p->id);
  g_free(p);
}

gboolean
proc_stderr_contains(Proc *p, const gchar *needle)
{
  g_autofree gchar *contents = NULL;

  return g_file_get_contents(p->err_path, &contents, NULL, NULL) &&
         strstr(contents, needle) != NULL;
}

typedef struct {
  Scenario *s;
  const gchar *id;
} AliveCheck;

static gboolean
worker_alive(gpointer data)
{
  AliveCheck *c = data;

  return sluice_test_redis_integer(c->s->server, "EXISTS {%s}:alive:%s",
                                   c->s->ns, c->id) == 1;
}

/* Waits until worker @p holds a lease (it started and heartbeated). */
void
proc_wait_ready(Scenario *s, Proc *p)
{
  AliveCheck c = {s, p->id};

  ck_assert_msg(sluice_test_wait_for(worker_alive, &c, 20000),
                "worker %s never became alive", p->id);
}

/* ---- The execution log (the oracle) -------------------------------------- */

static void
execution_free(Execution *e)
{
  g_free(e->id);
  g_free(e);
}

/* Returns: (transfer full) (element-type Execution): every line so far. */
GPtrArray *
executions(Scenario *s)
{
  GPtrArray *out =
      g_ptr_array_new_with_free_func((GDestroyNotify)execution_free);
  g_autofree gchar *contents = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents(s->log_path, &contents, NULL, NULL))
    return out;
  lines = g_strsplit(contents, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], " ", -1);
    Execution *e;
    if (g_strv_length(f) != 3)
      continue; /* the last, empty line */
    e = g_new0(Execution, 1);
    e->id = g_strdup(f[0]);
    e->count = (guint)g_ascii_strtoull(f[1], NULL, 10);
    e->pid = (gint)g_ascii_strtoll(f[2], NULL, 10);
    g_ptr_array_add(out, e);
  }
  return out;
}

guint
runs_of(GPtrArray *log, const gchar *id)
{
  guint n = 0;

  for (guint i = 0; i < log->len; i++)
    if (strcmp(((Execution *)log->pdata[i])->id, id) == 0)
      n++;
  return n;
}

static gboolean
log_has_lines(gpointer data)
{
  LogCheck *c = data;
  g_autoptr(GPtrArray) log = executions(c->s);

  return log->len >= c->lines;
}

/* TRUE once @id ran with delivery count @count. */
gboolean
log_has_run(gpointer data)
{
  LogCheck *c = data;
  g_autoptr(GPtrArray) log = executions(c->s);

  for (guint i = 0; i < log->len; i++) {
    Execution *e = log->pdata[i];
    if (strcmp(e->id, c->id) == 0 && e->count == c->count)
      return TRUE;
  }
  return FALSE;
}

void
wait_log_lines(Scenario *s, guint n)
{
  LogCheck c = {s, n, NULL, 0};

  ck_assert_msg(sluice_test_wait_for(log_has_lines, &c, 30000),
                "fewer than %u executions logged", n);
}

gchar *
enqueue_task(Scenario *s, const gchar *task, const gchar *json_args)
{
  return sluice_test_client_enqueue(s->client, task, json_args, NULL);
}

/* Enqueues @n tasks "t.log" in batches; returns their ids. */
GPtrArray *
enqueue_logs(Scenario *s, guint n)
{
  GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
  g_autofree SluiceEnqueueRequest *requests =
      g_new0(SluiceEnqueueRequest, 1000);

  for (guint i = 0; i < 1000; i++)
    requests[i].task = "t.log";
  for (guint done = 0; done < n;) {
    g_autoptr(GError) error = NULL;
    guint k = MIN(1000, n - done);
    g_autoptr(GPtrArray) batch =
        sluice_client_enqueue_batch(s->client, requests, k, &error);
    ck_assert_msg(batch != NULL, "enqueue: %s", error->message);
    for (guint i = 0; i < batch->len; i++)
      g_ptr_array_add(ids, g_strdup(batch->pdata[i]));
    done += k;
  }
  return ids;
}

/* Waits for @id's final record and returns it. */
SluiceResult *
final_result(Scenario *s, const gchar *id)
{
  g_autoptr(GError) error = NULL;
  SluiceResult *r =
      sluice_client_get_result(s->client, id, 30000, NULL, &error);

  ck_assert_msg(r != NULL, "task %s: %s", id,
                error != NULL ? error->message : "");
  return r;
}

/* How many of @ids have a final record, counted with pipelined GETs. */
guint
count_final_records(Scenario *s, GPtrArray *ids)
{
  redisContext *c = sluice_test_redis_connect(s->server);
  guint n = 0;

  ck_assert_ptr_nonnull(c);
  for (guint at = 0; at < ids->len; at += 1000) {
    guint k = MIN(1000, ids->len - at);
    for (guint i = 0; i < k; i++)
      redisAppendCommand(c, "GET {%s}:r:%s", s->ns,
                         (const gchar *)ids->pdata[at + i]);
    for (guint i = 0; i < k; i++) {
      redisReply *r = NULL;
      ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
      if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->str[0] == 'F')
        n++;
      freeReplyObject(r);
    }
  }
  redisFree(c);
  return n;
}

typedef struct {
  Scenario *s;
  const gchar *queue;
} DrainCheck;

/* Nothing ready and nothing pending in the queue. */
static gboolean
queue_drained(gpointer data)
{
  DrainCheck *c = data;

  return sluice_test_redis_xlen(c->s->server, c->s->ns, c->queue) == 0 &&
         sluice_test_redis_pending(c->s->server, c->s->ns, c->queue) == 0;
}

/* What is left in a queue's stream, for failure messages. */
static gchar *
stream_dump(SluiceTestRedis *server, const gchar *ns, const gchar *queue)
{
  GString *out = g_string_new(NULL);
  redisReply *r = sluice_test_redis_command(
      server, "XRANGE {%s}:s:%s - + COUNT 10", ns, queue);

  if (r != NULL && r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements; i++)
      g_string_append_printf(out, " %s", r->element[i]->element[0]->str);
  if (r != NULL)
    freeReplyObject(r);
  r = sluice_test_redis_command(server, "XINFO GROUPS {%s}:s:%s", ns, queue);
  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
    redisReply *g = r->element[0];
    for (size_t i = 0; i + 1 < g->elements; i += 2)
      if (g->element[i + 1]->type == REDIS_REPLY_STRING)
        g_string_append_printf(out, "; %s %s", g->element[i]->str,
                               g->element[i + 1]->str);
  }
  if (r != NULL)
    freeReplyObject(r);
  return g_string_free(out, FALSE);
}

void
wait_drained(Scenario *s, gint64 timeout_ms)
{
  DrainCheck c = {s, "default"};
  g_autofree gchar *dump = NULL;

  if (sluice_test_wait_for(queue_drained, &c, timeout_ms))
    return;
  dump = stream_dump(s->server, s->ns, "default");
  ck_abort_msg("queue not drained: %" G_GINT64_FORMAT
               " in the stream, %" G_GINT64_FORMAT " pending:%s",
               sluice_test_redis_xlen(s->server, s->ns, "default"),
               sluice_test_redis_pending(s->server, s->ns, "default"), dump);
}

/* bench-cli.c - measures worker processes from the outside: the real
 * `sluice worker` command (and, for bench/compare.sh, other queues'
 * workers), on one Redis.
 *
 *   bench-cli --op process --url URL --mode reliable --namespace NS \
 *             --tasks 20000 [--queues K] [--workers P] [--results off] \
 *             [--payload-bytes B] -- sluice worker --module demo.so ...
 *
 * Operations:
 *   process  fills the namespace with --tasks demo.noop messages through
 *            sluice_client_enqueue_batch() (not timed), then starts
 *            --workers copies of the command and times them until every
 *            task is done. Also reports the Redis memory the queued
 *            messages took and the drain rate over its first and last
 *            10%.
 *   delayed  fills the schedule with --tasks messages all due at the same
 *            moment (a few seconds after the fill ends), starts the
 *            workers before it, and times how fast the workers' promoter
 *            empties the schedule and the workers run the tasks.
 *   command  runs a command that times itself (bench/peers/bee.js, bullmq.js)
 * and adds Redis's costs over its lifetime to the key=value line it prints.
 *
 * "Done" is read from Redis by this process on a connection of its own,
 * every --poll-ms (5 ms), with the key layout of PROTOCOL.md:
 *   reliable  the streams {ns}:s:<queue> are empty. The settle script
 *             writes the record, acknowledges and removes the entry in one
 *             step, so an empty stream means every task has its final
 *             record.
 *   fast      the lists {ns}:q:<queue> are empty, and then (results on)
 *             the records {ns}:r:<id> of the --tail tasks popped last have
 *             their final flag. Messages are popped in order, so the tasks
 *             still running when the lists empty are among the last ones
 *             popped. Without results nothing of a task is left in Redis
 *             once popped: the run ends when the lists are empty and the
 *             workers' announcements ({ns}:winfo:*, rewritten every 2 s)
 *             count every task succeeded, so a run ends up to 2 s after
 *             its last task (the rate of a short run undercounts; a busy
 *             machine's workers could still hold their prefetch when the
 *             lists emptied, which ended the run too early).
 * Each poll is one pipelined round trip (one LLEN/XLEN per queue, and GETs
 * of the first byte of records still pending); the commands this process
 * sends are counted and taken off Redis's command count. After the run
 * (not timed) every task's record is checked to be final (results on), or
 * the lists to have stayed empty through the workers' stop (results off),
 * so a wrong "done" fails the run instead of giving a wrong figure.
 *
 * Worker CPU time is read with clock_getcpuclockid() (all threads, user
 * and system, nanoseconds) and peak RSS from VmHWM in /proc/PID/status,
 * both just before the workers are stopped (SIGTERM, graceful).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

#include "bench/bench-redis.h"

typedef struct {
  gchar *op;
  gchar *url;
  gchar *mode;
  gchar *ns;
  gint tasks;
  gint queues;
  gint workers;
  gchar *results;
  gint payload_bytes;
  gint poll_ms;
  gint tail;
  gint due_ms;
  gint batch;
  gchar *task;
  gchar *label;
  gchar *log;
  gint timeout_s;
  gboolean breakdown;
} Settings;

static Settings settings = {
    .tasks = 20000,
    .queues = 1,
    .workers = 1,
    .payload_bytes = 0,
    .poll_ms = 5,
    .tail = 8192,
    .due_ms = 0,
    .batch = 1000,
    .timeout_s = 1800,
};

static gboolean
is_fast(void)
{
  return g_strcmp0(settings.mode, "fast") == 0;
}

static gboolean
results_on(void)
{
  return g_strcmp0(settings.results, "off") != 0;
}

static gchar *
queue_name(gint i)
{
  if (settings.queues == 1)
    return g_strdup(SLUICE_DEFAULT_QUEUE);
  return g_strdup_printf("q%d", i);
}

/* ---- Filling, through the public client ---------------------------------- */

/* Per queue, the ids in the order they were enqueued. */
typedef struct {
  GPtrArray **ids; /* settings.queues arrays of gchar* */
} Filled;

static GBytes *
make_payload(void)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  GBytes *out;
  g_autofree gchar *body = NULL;

  if (settings.payload_bytes <= 0)
    return NULL;
  body = g_malloc(settings.payload_bytes);
  memset(body, 'x', settings.payload_bytes);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_bin(&pk, settings.payload_bytes);
  msgpack_pack_bin_body(&pk, body, settings.payload_bytes);
  out = g_bytes_new(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return out;
}

/* Enqueues settings.tasks messages of settings.task, spread evenly over
 * the queues (round robin), all due at @eta_ms (0 = now). */
static gboolean
fill(Filled *out, gint64 eta_ms, GError **error)
{
  SluiceRedisOptions options;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GBytes) payload = make_payload();
  g_autofree SluiceEnqueueOptions *per_queue =
      g_new0(SluiceEnqueueOptions, settings.queues);
  g_autofree gchar **names = g_new0(gchar *, settings.queues);
  g_autofree SluiceEnqueueRequest *requests =
      g_new0(SluiceEnqueueRequest, settings.batch);
  gint next = 0;
  gboolean ok = TRUE;

  sluice_redis_options_init(&options);
  options.url = settings.url;
  options.ns = settings.ns;
  options.mode = is_fast() ? SLUICE_REDIS_FAST : SLUICE_REDIS_RELIABLE;
  broker = sluice_redis_broker_new(&options, NULL, error);
  if (broker == NULL || !sluice_redis_broker_ping(broker, error))
    return FALSE;
  client = sluice_client_new(broker, NULL, error);
  if (client == NULL)
    return FALSE;
  out->ids = g_new0(GPtrArray *, settings.queues);
  for (gint q = 0; q < settings.queues; q++) {
    names[q] = queue_name(q);
    sluice_enqueue_options_init(&per_queue[q]);
    per_queue[q].queue = names[q];
    per_queue[q].eta_ms = eta_ms;
    if (!results_on())
      per_queue[q].options.store_result = SLUICE_OFF;
    out->ids[q] =
        g_ptr_array_new_full(settings.tasks / settings.queues + 1, g_free);
  }
  for (gint done = 0; ok && done < settings.tasks;) {
    guint k = (guint)MIN(settings.batch, settings.tasks - done);
    g_autoptr(GPtrArray) ids = NULL;
    gint first = next;

    for (guint i = 0; i < k; i++) {
      requests[i].task = settings.task;
      requests[i].args = payload;
      requests[i].options = &per_queue[next];
      next = (next + 1) % settings.queues;
    }
    ids = sluice_client_enqueue_batch(client, requests, k, error);
    if (ids == NULL) {
      ok = FALSE;
      break;
    }
    for (guint i = 0; i < k; i++)
      g_ptr_array_add(out->ids[(first + (gint)i) % settings.queues],
                      g_steal_pointer(&ids->pdata[i]));
    done += (gint)k;
  }
  for (gint q = 0; q < settings.queues; q++)
    g_free(names[q]);
  return ok;
}

static void
filled_clear(Filled *f)
{
  if (f->ids == NULL)
    return;
  for (gint q = 0; q < settings.queues; q++)
    g_ptr_array_unref(f->ids[q]);
  g_clear_pointer(&f->ids, g_free);
}

/* ---- Worker processes --------------------------------------------------- */

typedef struct {
  pid_t *pids;
  gint n;
} Workers;

static gboolean
spawn(Workers *w, gchar **argv, gint n, gint stdout_fd, GError **error)
{
  int log_fd = open(settings.log != NULL ? settings.log : "/dev/null",
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

  if (log_fd < 0) {
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "%s: %s",
                settings.log, g_strerror(errno));
    return FALSE;
  }
  w->pids = g_new0(pid_t, n);
  w->n = 0;
  fflush(stdout);
  for (gint i = 0; i < n; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "fork: %s",
                  g_strerror(errno));
      close(log_fd);
      return FALSE;
    }
    if (pid == 0) {
      dup2(stdout_fd >= 0 ? stdout_fd : log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      execvp(argv[0], argv);
      fprintf(stderr, "bench-cli: cannot run %s: %s\n", argv[0],
              g_strerror(errno));
      _exit(127);
    }
    w->pids[w->n++] = pid;
  }
  close(log_fd);
  return TRUE;
}

/* CPU seconds of process @pid so far, all its threads; < 0 if unknown. */
static gdouble
process_cpu_s(pid_t pid)
{
  clockid_t clock;
  struct timespec ts;

  if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &ts) != 0)
    return -1;
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* VmHWM of @pid in MB, or -1. */
static gdouble
process_peak_rss_mb(pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf("/proc/%d/status", (int)pid);
  g_autofree gchar *text = NULL;
  const gchar *hwm;

  if (!g_file_get_contents(path, &text, NULL, NULL) ||
      (hwm = strstr(text, "VmHWM:")) == NULL)
    return -1;
  return g_ascii_strtoull(hwm + 6, NULL, 10) / 1024.0;
}

/* Stops every worker gracefully; FALSE (and @error) if one did not exit
 * with status 0. */
static gboolean
stop_workers(Workers *w, GError **error)
{
  gboolean ok = TRUE;

  for (gint i = 0; i < w->n; i++)
    kill(w->pids[i], SIGTERM);
  for (gint i = 0; i < w->n; i++) {
    int status = 0;
    if (waitpid(w->pids[i], &status, 0) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      if (ok)
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                    "worker %d ended badly (status 0x%x); see %s",
                    (int)w->pids[i], status,
                    settings.log != NULL ? settings.log : "its log (--log)");
      ok = FALSE;
    }
  }
  g_clear_pointer(&w->pids, g_free);
  w->n = 0;
  return ok;
}

/* The workers' CPU seconds (summed) and peak RSS (the largest). */
static void
workers_usage(const Workers *w, gdouble *cpu_s, gdouble *rss_mb)
{
  *cpu_s = 0;
  *rss_mb = 0;
  for (gint i = 0; i < w->n; i++) {
    *cpu_s += MAX(process_cpu_s(w->pids[i]), 0);
    *rss_mb = MAX(*rss_mb, process_peak_rss_mb(w->pids[i]));
  }
}

/* A worker that exited early (a bad option, Redis unreachable) would leave
 * the wait below with nothing to wait for. */
static gboolean
workers_alive(Workers *w, GError **error)
{
  for (gint i = 0; i < w->n; i++) {
    int status;
    if (waitpid(w->pids[i], &status, WNOHANG) == w->pids[i]) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                  "worker %d exited before the run ended (status 0x%x); "
                  "see %s",
                  (int)w->pids[i], status,
                  settings.log != NULL ? settings.log : "its log (--log)");
      w->pids[i] = w->pids[--w->n];
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- Watching Redis ----------------------------------------------------- */

typedef struct {
  redisContext *c;
  gchar *prefix;     /* "{ns}:" */
  guint64 own_calls; /* commands this process sent, to take off */
  GPtrArray *tail;   /* ids whose record must turn final (fast, results) */
} Watch;

/* Sends @n commands already appended and reads their replies into
 * @replies (caller frees each). */
static gboolean
watch_flush(Watch *w, guint n, redisReply **replies, GError **error)
{
  for (guint i = 0; i < n; i++) {
    void *r = NULL;
    if (redisGetReply(w->c, &r) != REDIS_OK || r == NULL) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "redis: %s",
                  w->c->errstr);
      for (guint j = 0; j < i; j++)
        freeReplyObject(replies[j]);
      return FALSE;
    }
    replies[i] = r;
  }
  w->own_calls += n;
  return TRUE;
}

/* Messages still in the queues (fast: not popped; reliable: not settled),
 * and, when @scheduled is not NULL, on the schedule. */
static gboolean
watch_depth(Watch *w, gint64 *depth, gint64 *scheduled, GError **error)
{
  guint n = (guint)settings.queues + (scheduled != NULL ? 1 : 0);
  g_autofree redisReply **replies = g_new0(redisReply *, n);

  for (gint q = 0; q < settings.queues; q++) {
    g_autofree gchar *name = queue_name(q);
    redisAppendCommand(w->c, is_fast() ? "LLEN %sq:%s" : "XLEN %ss:%s",
                       w->prefix, name);
  }
  if (scheduled != NULL)
    redisAppendCommand(w->c, "ZCARD %sschedule", w->prefix);
  if (!watch_flush(w, n, replies, error))
    return FALSE;
  *depth = 0;
  for (guint i = 0; i < n; i++) {
    gint64 v =
        replies[i]->type == REDIS_REPLY_INTEGER ? replies[i]->integer : 0;
    if (scheduled != NULL && i == n - 1)
      *scheduled = v;
    else
      *depth += v;
    freeReplyObject(replies[i]);
  }
  return TRUE;
}

/* The tasks the workers say they finished: the sum of "succeeded" in
 * their announcements ({ns}:winfo:<consumer>, a msgpack map rewritten
 * every 2 s). Fast mode without results has nothing else that counts a
 * task done: its queue empties while the workers still hold what they
 * prefetched. Returns: the sum, or -1 and @error. */
static gint64
announced_succeeded(Watch *w, GError **error)
{
  g_autofree gchar *pattern = g_strdup_printf("%swinfo:*", w->prefix);
  redisReply *keys = redisCommand(w->c, "KEYS %s", pattern);
  gint64 sum = 0;

  if (keys == NULL || keys->type != REDIS_REPLY_ARRAY) {
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "redis: %s",
                keys == NULL ? w->c->errstr : "KEYS failed");
    if (keys != NULL)
      freeReplyObject(keys);
    return -1;
  }
  w->own_calls++;
  for (size_t i = 0; i < keys->elements; i++) {
    redisReply *info = redisCommand(w->c, "GET %s", keys->element[i]->str);
    msgpack_unpacked u;

    w->own_calls++;
    msgpack_unpacked_init(&u);
    if (info != NULL && info->type == REDIS_REPLY_STRING &&
        msgpack_unpack_next(&u, info->str, info->len, NULL) ==
            MSGPACK_UNPACK_SUCCESS &&
        u.data.type == MSGPACK_OBJECT_MAP) {
      for (guint32 k = 0; k < u.data.via.map.size; k++) {
        const msgpack_object_kv *kv = &u.data.via.map.ptr[k];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 9 &&
            memcmp(kv->key.via.str.ptr, "succeeded", 9) == 0 &&
            kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
          sum += (gint64)kv->val.via.u64;
      }
    }
    msgpack_unpacked_destroy(&u);
    if (info != NULL)
      freeReplyObject(info);
  }
  freeReplyObject(keys);
  return sum;
}

/* Drops from @ids (in chunks) the tasks whose record is final; returns how
 * many are left, or -1 and @error. */
static gint64
drop_final(Watch *w, GPtrArray *ids, GError **error)
{
  const guint chunk = 1000;

  for (guint start = 0; start < ids->len;) {
    guint n = MIN(chunk, ids->len - start);
    g_autofree redisReply **replies = g_new0(redisReply *, n);
    guint kept = start;

    for (guint i = 0; i < n; i++)
      redisAppendCommand(w->c, "GETRANGE %sr:%s 0 0", w->prefix,
                         (const gchar *)ids->pdata[start + i]);
    if (!watch_flush(w, n, replies, error))
      return -1;
    for (guint i = 0; i < n; i++) {
      gboolean final = replies[i]->type == REDIS_REPLY_STRING &&
                       replies[i]->len == 1 && replies[i]->str[0] == 'F';
      if (!final)
        ids->pdata[kept++] = ids->pdata[start + i];
      else
        g_free(ids->pdata[start + i]);
      freeReplyObject(replies[i]);
    }
    /* Close the gap left by the final ones. */
    memmove(&ids->pdata[kept], &ids->pdata[start + n],
            (ids->len - start - n) * sizeof(gpointer));
    ids->len -= start + n - kept;
    start = kept;
  }
  return ids->len;
}

/* The order the workers take the tasks in: queue by queue in priority
 * order, each in enqueue order. (Tasks promoted from the schedule at one
 * due time come in the schedule's order instead, which for equal due times
 * is the ids' byte order: the caller sorts them.) */
static GPtrArray *
pop_order(const Filled *f)
{
  GPtrArray *all = g_ptr_array_new_with_free_func(g_free);

  for (gint q = 0; q < settings.queues; q++)
    for (guint i = 0; i < f->ids[q]->len; i++)
      g_ptr_array_add(all, g_strdup(f->ids[q]->pdata[i]));
  return all;
}

static int
compare_ids(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

/* Keeps the last settings.tail ids of @order as the ones to watch. */
static GPtrArray *
tail_of(GPtrArray *order)
{
  GPtrArray *tail = g_ptr_array_new_with_free_func(g_free);
  guint from =
      order->len > (guint)settings.tail ? order->len - (guint)settings.tail : 0;

  for (guint i = from; i < order->len; i++)
    g_ptr_array_add(tail, g_strdup(order->pdata[i]));
  return tail;
}

/* After the run: every task has its final record (results on). */
static gboolean
check_all_final(Watch *w, GPtrArray *order, GError **error)
{
  gint64 left = drop_final(w, order, error);

  if (left < 0)
    return FALSE;
  if (left > 0) {
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                "%" G_GINT64_FORMAT " of %d tasks have no final record after "
                "the run: the end was detected too early (raise --tail "
                "above the workers' concurrency + prefetch)",
                left, settings.tasks);
    return FALSE;
  }
  return TRUE;
}

/* ---- The drain ---------------------------------------------------------- */

typedef struct {
  gint64 t0;            /* workers started (monotonic us) */
  gint64 t_due;         /* delayed: the due time (monotonic us) */
  gint64 t_first_moved; /* delayed: the schedule first shrank */
  gint64 t_sched_empty; /* delayed: the schedule was empty */
  gint64 t90, r90;      /* first poll with <= 90% left, and what was left */
  gint64 t10, r10;      /* first poll with <= 10% left */
  gint64 t_done;
} Marks;

/* Polls until every task is done; fills @m. */
static gboolean
wait_done(Watch *w, Workers *workers, gboolean delayed, Marks *m,
          GError **error)
{
  gint64 n = settings.tasks;
  gint64 deadline =
      g_get_monotonic_time() + settings.timeout_s * G_USEC_PER_SEC;

  for (;;) {
    gint64 depth = 0, scheduled = 0, now;

    if (!watch_depth(w, &depth, delayed ? &scheduled : NULL, error))
      return FALSE;
    now = g_get_monotonic_time();
    if (delayed) {
      if (m->t_first_moved == 0 && scheduled < n)
        m->t_first_moved = now;
      if (m->t_sched_empty == 0 && scheduled == 0)
        m->t_sched_empty = now;
    }
    {
      gint64 left = depth + scheduled;
      if (m->t90 == 0 && left * 10 <= n * 9) {
        m->t90 = now;
        m->r90 = left;
      }
      if (m->t10 == 0 && left * 10 <= n) {
        m->t10 = now;
        m->r10 = left;
      }
      if (left == 0) {
        if (w->tail != NULL) {
          gint64 pending = drop_final(w, w->tail, error);
          if (pending < 0)
            return FALSE;
          if (pending == 0)
            break;
        } else if (is_fast() && !results_on()) {
          gint64 done = announced_succeeded(w, error);
          if (done < 0)
            return FALSE;
          if (done >= n)
            break;
        } else {
          break;
        }
      }
    }
    if (!workers_alive(workers, error))
      return FALSE;
    if (now > deadline) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                  "not done after %d s (--timeout)", settings.timeout_s);
      return FALSE;
    }
    g_usleep((gulong)settings.poll_ms * 1000);
  }
  m->t_done = g_get_monotonic_time();
  return TRUE;
}

static void
print_settings(GString *line)
{
  if (settings.label != NULL)
    g_string_append_printf(line, "%s ", settings.label);
  g_string_append_printf(line,
                         "op=%s mode=%s tasks=%d results=%s queues=%d "
                         "workers=%d payload_bytes=%d",
                         settings.op, settings.mode, settings.tasks,
                         results_on() ? "on" : "off", settings.queues,
                         settings.workers, settings.payload_bytes);
}

/* The worker command line with --queue for every queue when there are
 * several (one queue is the worker's default). */
static gchar **
worker_argv(gchar **command)
{
  GPtrArray *argv = g_ptr_array_new();

  for (gchar **a = command; *a != NULL; a++)
    g_ptr_array_add(argv, g_strdup(*a));
  if (settings.queues > 1)
    for (gint q = 0; q < settings.queues; q++) {
      g_ptr_array_add(argv, g_strdup("--queue"));
      g_ptr_array_add(argv, queue_name(q));
    }
  g_ptr_array_add(argv, NULL);
  return (gchar **)g_ptr_array_free(argv, FALSE);
}

static gboolean
op_drain(gchar **command, gboolean delayed, GError **error)
{
  g_autoptr(GString) line = g_string_new(NULL);
  g_auto(GStrv) argv = worker_argv(command);
  Filled filled = {0};
  Watch w = {0};
  Workers workers = {0};
  Marks m = {0};
  BenchRedisCounters empty, full, before, after;
  gint64 eta_ms = 0, n = settings.tasks;
  guint64 own_calls;
  gint64 fill_us;
  gdouble cpu_s, rss_mb;
  gboolean ok = FALSE;
  g_autoptr(GPtrArray) order = NULL;
  g_autoptr(GHashTable) calls_before = NULL;
  g_autoptr(GHashTable) calls_after = NULL;

  w.c = bench_redis_connect(settings.url, error);
  if (w.c == NULL)
    return FALSE;
  w.prefix = g_strdup_printf("{%s}:", settings.ns);

  empty = bench_redis_counters(w.c);
  if (delayed) {
    /* All due at one moment after the fill: --due-ms from now, or a
     * margin over what filling the schedule costs on a slow machine. */
    gint64 due_ms =
        settings.due_ms > 0 ? settings.due_ms : 5000 + n * 15 / 1000;
    eta_ms = g_get_real_time() / 1000 + due_ms;
  }
  fill_us = g_get_monotonic_time();
  if (!fill(&filled, eta_ms, error))
    goto out;
  fill_us = g_get_monotonic_time() - fill_us;
  full = bench_redis_counters(w.c);
  if (delayed && g_get_real_time() / 1000 > eta_ms - 1000) {
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                "filling the schedule took longer than --due-ms allows "
                "(it must end a second before the due time): raise it");
    goto out;
  }
  order = pop_order(&filled);
  if (delayed)
    g_ptr_array_sort(order, compare_ids);
  filled_clear(&filled);
  if (is_fast() && results_on())
    w.tail = tail_of(order);

  if (settings.breakdown)
    calls_before = bench_redis_command_calls(w.c);
  before = bench_redis_counters(w.c);
  m.t0 = g_get_monotonic_time();
  if (!spawn(&workers, argv, settings.workers, -1, error))
    goto out;
  if (delayed)
    m.t_due = m.t0 + (eta_ms * 1000 - g_get_real_time());
  if (!wait_done(&w, &workers, delayed, &m, error))
    goto out;
  workers_usage(&workers, &cpu_s, &rss_mb);
  after = bench_redis_counters(w.c);
  own_calls = w.own_calls;
  if (settings.breakdown)
    calls_after = bench_redis_command_calls(w.c);
  if (!stop_workers(&workers, error))
    goto out;
  /* Checks, not timed: the end was real. */
  if (results_on()) {
    if (!check_all_final(&w, order, error))
      goto out;
  } else {
    gint64 depth = 0;
    if (!watch_depth(&w, &depth, NULL, error))
      goto out;
    if (depth != 0) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                  "%" G_GINT64_FORMAT " tasks were back in the queues after "
                  "the workers stopped: the end was detected too early",
                  depth);
      goto out;
    }
  }

  print_settings(line);
  {
    gint64 t_start = delayed ? m.t_due : m.t0;
    gdouble span = (m.t_done - t_start) / 1e6;
    g_string_append_printf(line,
                           " rate_per_s=%.0f worker_cpu_us_per_task=%.2f"
                           " rss_mb=%.1f",
                           n / span, cpu_s * 1e6 / n, rss_mb);
  }
  bench_redis_print_costs(line, before, after, own_calls, n);
  bench_redis_print_breakdown(line, calls_before, calls_after, n);
  g_string_append_printf(
      line, " fill_rate_per_s=%.0f redis_bytes_per_%s_task=%.0f",
      n / (fill_us / 1e6), delayed ? "scheduled" : "queued",
      ((gdouble)full.used_memory - (gdouble)empty.used_memory) / n);
  if (delayed) {
    g_string_append_printf(
        line, " promotion_started_ms=%.0f promote_rate_per_s=%.0f",
        (m.t_first_moved - m.t_due) / 1e3,
        m.t_sched_empty > m.t_due ? n / ((m.t_sched_empty - m.t_due) / 1e6)
                                  : 0.0);
  } else if (m.t90 > m.t0 && m.t_done > m.t10 && m.r10 > 0) {
    /* Only when a poll landed inside each tenth: a short run drains
     * between two polls. */
    g_string_append_printf(line,
                           " rate_first10_per_s=%.0f rate_last10_per_s=%.0f",
                           (n - m.r90) / ((m.t90 - m.t0) / 1e6),
                           m.r10 / ((m.t_done - m.t10) / 1e6));
  }
  puts(line->str);
  fflush(stdout);
  ok = TRUE;
out:
  if (workers.n > 0) {
    g_autoptr(GError) ignored = NULL;
    stop_workers(&workers, ok ? error : &ignored);
  }
  filled_clear(&filled);
  if (w.tail != NULL)
    g_ptr_array_unref(w.tail);
  g_free(w.prefix);
  redisFree(w.c);
  return ok;
}

/* ---- Another system's worker -------------------------------------------- */

static gboolean
op_command(gchar **command, GError **error)
{
  g_autoptr(GString) line = g_string_new(NULL);
  g_autoptr(GString) output = g_string_new(NULL);
  redisContext *c = bench_redis_connect(settings.url, error);
  BenchRedisCounters before, after;
  Workers workers = {0};
  int pipefd[2];
  gchar buffer[4096];
  ssize_t got;
  gboolean ok;

  if (c == NULL)
    return FALSE;
  if (pipe(pipefd) != 0) {
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "pipe: %s",
                g_strerror(errno));
    redisFree(c);
    return FALSE;
  }
  before = bench_redis_counters(c);
  ok = spawn(&workers, command, 1, pipefd[1], error);
  close(pipefd[1]);
  while (ok && (got = read(pipefd[0], buffer, sizeof buffer)) > 0)
    g_string_append_len(output, buffer, got);
  close(pipefd[0]);
  if (ok) {
    int status = 0;
    waitpid(workers.pids[0], &status, 0);
    g_clear_pointer(&workers.pids, g_free);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                  "%s ended badly (status 0x%x); see %s", command[0], status,
                  settings.log != NULL ? settings.log : "its log (--log)");
      ok = FALSE;
    }
  }
  after = bench_redis_counters(c);
  redisFree(c);
  if (!ok)
    return FALSE;
  g_strchomp(output->str);
  if (settings.label != NULL)
    g_string_append_printf(line, "%s ", settings.label);
  g_string_append_printf(line, "tasks=%d %s", settings.tasks, output->str);
  bench_redis_print_costs(line, before, after, 0, settings.tasks);
  puts(line->str);
  fflush(stdout);
  return TRUE;
}

static GLogWriterOutput
quiet_writer(GLogLevelFlags level, const GLogField *fields, gsize n,
             gpointer data)
{
  /* The client warns about Redis without persistence, which the benchmark
   * chooses on purpose; that would break the one-line output. */
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
    return g_log_writer_default(level, fields, n, data);
  return G_LOG_WRITER_HANDLED;
}

int
main(int argc, char **argv)
{
  GOptionEntry entries[] = {
      {"op", 'o', 0, G_OPTION_ARG_STRING, &settings.op,
       "process, delayed or command (default process)", "OP"},
      {"url", 'u', 0, G_OPTION_ARG_STRING, &settings.url,
       "Redis URL (default redis://127.0.0.1:6379/0)", "URL"},
      {"mode", 0, 0, G_OPTION_ARG_STRING, &settings.mode,
       "fast or reliable (default reliable); the worker's --mode must match",
       "MODE"},
      {"namespace", 'n', 0, G_OPTION_ARG_STRING, &settings.ns,
       "Sluice namespace; the worker's --namespace must match (default "
       "sluice)",
       "NS"},
      {"tasks", 't', 0, G_OPTION_ARG_INT, &settings.tasks,
       "tasks (default 20000)", "N"},
      {"queues", 0, 0, G_OPTION_ARG_INT, &settings.queues,
       "queues, tasks spread evenly; the worker is given --queue for each "
       "(default 1)",
       "K"},
      {"workers", 0, 0, G_OPTION_ARG_INT, &settings.workers,
       "worker processes sharing the queues (default 1)", "P"},
      {"results", 'r', 0, G_OPTION_ARG_STRING, &settings.results,
       "on (the task's default) or off (a message option)", "on|off"},
      {"payload-bytes", 0, 0, G_OPTION_ARG_INT, &settings.payload_bytes,
       "arguments of each task: a msgpack bin of B bytes (default none)", "B"},
      {"task", 0, 0, G_OPTION_ARG_STRING, &settings.task,
       "task name (default demo.noop)", "NAME"},
      {"poll-ms", 0, 0, G_OPTION_ARG_INT, &settings.poll_ms,
       "how often Redis is read for the end (default 5)", "MS"},
      {"tail", 0, 0, G_OPTION_ARG_INT, &settings.tail,
       "fast mode with results: the last tasks whose records are awaited "
       "once the lists are empty (default 8192)",
       "N"},
      {"due-ms", 0, 0, G_OPTION_ARG_INT, &settings.due_ms,
       "delayed: due this long after the fill starts (default 5 s + 15 us "
       "per task)",
       "MS"},
      {"timeout", 0, 0, G_OPTION_ARG_INT, &settings.timeout_s,
       "give up after this many seconds (default 1800)", "S"},
      {"breakdown", 0, 0, G_OPTION_ARG_NONE, &settings.breakdown,
       "also print each command's calls per task (cmds=NAME:N,...; this "
       "process's own polls, LLEN/XLEN/ZCARD/GETRANGE, included)",
       NULL},
      {"label", 'l', 0, G_OPTION_ARG_STRING, &settings.label,
       "words to start the output line with", "TEXT"},
      {"log", 0, 0, G_OPTION_ARG_FILENAME, &settings.log,
       "append the workers' output to this file (default: discard)", "FILE"},
      {NULL},
  };
  g_autoptr(GOptionContext) context =
      g_option_context_new("-- COMMAND [ARG...] - time worker processes");
  g_autoptr(GError) error = NULL;
  gchar **command;
  gboolean ok;

  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    fprintf(stderr, "bench-cli: %s\n", error->message);
    return 2;
  }
  g_log_set_writer_func(quiet_writer, NULL, NULL);
  if (settings.op == NULL)
    settings.op = g_strdup("process");
  if (settings.url == NULL)
    settings.url = g_strdup(SLUICE_REDIS_DEFAULT_URL);
  if (settings.mode == NULL)
    settings.mode = g_strdup("reliable");
  if (settings.ns == NULL)
    settings.ns = g_strdup("sluice");
  if (settings.task == NULL)
    settings.task = g_strdup("demo.noop");
  if (settings.results == NULL)
    settings.results = g_strdup("on");
  /* GOption leaves "--" in place when it stops at it. */
  command = argv + 1;
  if (*command != NULL && g_strcmp0(*command, "--") == 0)
    command++;
  if (*command == NULL || settings.tasks < 1 || settings.queues < 1 ||
      settings.workers < 1 || settings.batch < 1 || settings.poll_ms < 1 ||
      (!is_fast() && g_strcmp0(settings.mode, "reliable") != 0) ||
      (results_on() && g_strcmp0(settings.results, "on") != 0)) {
    fprintf(stderr, "bench-cli: usage: bench-cli [OPTION...] -- COMMAND "
                    "[ARG...] (see --help)\n");
    return 2;
  }
  if (g_strcmp0(settings.op, "process") == 0)
    ok = op_drain(command, FALSE, &error);
  else if (g_strcmp0(settings.op, "delayed") == 0)
    ok = op_drain(command, TRUE, &error);
  else if (g_strcmp0(settings.op, "command") == 0)
    ok = op_command(command, &error);
  else {
    fprintf(stderr, "bench-cli: unknown --op %s (process, delayed, command)\n",
            settings.op);
    return 2;
  }
  if (!ok) {
    fprintf(stderr, "bench-cli: %s\n", error->message);
    return 1;
  }
  return 0;
}

/* bench.c - throughput, latency and cost per task, per broker.
 *
 * Every figure is printed as one line of key=value pairs with the settings
 * that produced it, for example
 *
 *   bench broker=redis-fast op=process tasks=200000 concurrency=8
 *         results=off rate_per_s=... worker_cpu_us_per_task=... rss_mb=...
 *         redis_cmds_per_task=... redis_cpu_us_per_task=...
 *
 * Operations:
 *   enqueue        single enqueues from one thread, each one timed (p50/p99)
 *   enqueue-batch  sluice_client_enqueue_batch() in batches of --batch
 *   process        no-op tasks through a worker: the queue is filled first
 *                  (not timed), then a worker runs them to the end, each
 *                  one fetched, run, acknowledged and (results=on) its
 *                  record written. For Redis brokers the worker runs in a
 *                  child process, so its CPU time and peak RSS are its own.
 *   latency        enqueue-to-start delay at a fixed --rate, p50/p99
 *   wakeup         delay from a task's return to get_result() returning
 *   chord          --tasks no-op tasks (default 10000) run plainly, then as
 *                  the members of one chord (results on for both): the
 *                  cost per member against the plain task's (Redis CPU,
 *                  worker CPU, Redis commands) and the delay from the end
 *                  of the last member's function to the start of the
 *                  callback's
 *
 * --broker sqlite runs on a fresh database file per operation (in a
 * temporary directory, removed at the end; or the file of a sqlite:// --url)
 * with --synchronous full (the default), normal or off. --worker-process
 * runs the latency operation's worker in a child process on the same
 * database, so its enqueue-to-start delay is a wakeup across processes.
 *
 * Costs per task (CPU microseconds of the worker, Redis commands and Redis
 * CPU microseconds from INFO deltas) hold up on a noisy machine better than
 * rates; docs/performance.md quotes them first. bench/run.sh starts its own
 * redis-server and runs the full set.
 *
 * --rate-limit N puts the process operation's no-op task under a rate limit
 * of N a second (each fetch then asks the broker for admissions): with N
 * above the achievable rate, the difference in Redis CPU per task is what
 * a limit costs.
 *
 * --scrape-interval MS makes the process operation take a metrics snapshot
 * and render it (what a /metrics scrape does) every MS milliseconds from a
 * thread of its own while the worker runs, and report how many it took:
 * the worker CPU per task with and without it is the cost of scraping.
 *
 * --args-bytes N gives the tasks of enqueue, enqueue-batch and process one
 * argument, a bin of N bytes (default: none), and --sealed a keyring to
 * the client and the worker, so that every message is sealed by the
 * producer and opened by the worker (sluice-seal.h): the client CPU per
 * task of enqueue-batch and the worker CPU per task of process, with and
 * without it, are what sealing costs at that size.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include <sluice/sluice.h>

#include "bench/bench-redis.h"

typedef struct {
  gchar *broker;
  gchar *url;
  gchar *ns;
  gchar *op;
  gint tasks;
  gint concurrency;
  gint prefetch;
  gint batch;
  gchar *results;
  gint rate;
  gint samples;
  gchar *isolation;
  gboolean log_each_task;
  gint scrape_interval_ms;
  gchar *synchronous;
  gboolean worker_process;
  gint rate_limit;
  gint args_bytes;
  gboolean sealed;
} Settings;

static Settings settings = {
    .broker = NULL,
    .tasks = 0,
    .concurrency = 8,
    .prefetch = -1,
    .batch = 1000,
    .rate = 1000,
    .samples = 500,
};

/* The tasks' args (--args-bytes; NULL = none) and the keyring of
 * --sealed (NULL = in clear). */
static GBytes *task_args;
static SluiceKeyring *keyring;

static void
make_payload_settings(void)
{
  if (settings.args_bytes > 0) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    g_autofree gchar *body = g_malloc((gsize)settings.args_bytes);

    for (gint i = 0; i < settings.args_bytes; i++)
      body[i] = (gchar)g_random_int();
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_bin(&pk, (size_t)settings.args_bytes);
    msgpack_pack_bin_body(&pk, body, (size_t)settings.args_bytes);
    task_args = g_bytes_new(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
  if (settings.sealed) {
    guint8 key[32];
    g_autofree gchar *b64 = NULL;
    g_autofree gchar *text = NULL;

    for (guint i = 0; i < sizeof key; i++)
      key[i] = (guint8)g_random_int();
    b64 = g_base64_encode(key, sizeof key);
    text = g_strdup_printf("key bench %s\ncurrent bench\n", b64);
    keyring = sluice_keyring_new_from_text(text, -1, "bench", NULL);
    g_assert(keyring != NULL);
  }
}

static SluiceClient *
make_client(SluiceBroker *broker, GError **error)
{
  SluiceClientOptions options;

  sluice_client_options_init(&options);
  options.keyring = keyring;
  return sluice_client_new(broker, &options, error);
}

/* Each operation works in a namespace of its own, so what one leaves in a
 * queue (the enqueue operations do not consume) is not timed by the next. */
static gchar *op_namespace;

static void
begin_op(const gchar *op, const gchar *variant)
{
  g_free(op_namespace);
  op_namespace =
      g_strdup_printf("%s-%s%s%s", settings.ns, op, variant != NULL ? "-" : "",
                      variant != NULL ? variant : "");
}

/* ---- Brokers ------------------------------------------------------------- */

static gboolean
is_redis(void)
{
  return g_str_has_prefix(settings.broker, "redis-");
}

/* Where --broker sqlite puts its databases when --url names none. */
static gchar *sqlite_dir;

static SluiceBroker *
make_sqlite_broker(GError **error)
{
  SluiceSqliteOptions options;
  g_autofree gchar *path = NULL;

  sluice_sqlite_options_init(&options);
  if (sluice_url_is_sqlite(settings.url)) {
    if (!sluice_sqlite_url_parse(settings.url, &options, &path, error))
      return NULL;
  } else {
    if (sqlite_dir == NULL)
      sqlite_dir = g_dir_make_tmp("sluice-bench-XXXXXX", error);
    if (sqlite_dir == NULL)
      return NULL;
    path = g_strdup_printf("%s/%s.db", sqlite_dir,
                           op_namespace != NULL ? op_namespace : settings.ns);
    options.path = path;
  }
  if (g_strcmp0(settings.synchronous, "normal") == 0)
    options.synchronous = SLUICE_SQLITE_SYNC_NORMAL;
  else if (g_strcmp0(settings.synchronous, "off") == 0)
    options.synchronous = SLUICE_SQLITE_SYNC_OFF;
  else if (settings.synchronous != NULL &&
           g_strcmp0(settings.synchronous, "full") != 0) {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "unknown --synchronous “%s” (full, normal, off)",
                settings.synchronous);
    return NULL;
  }
  return sluice_sqlite_broker_new(&options, NULL, error);
}

static void
remove_sqlite_dir(void)
{
  GDir *dir;
  const gchar *name;

  if (sqlite_dir == NULL || (dir = g_dir_open(sqlite_dir, 0, NULL)) == NULL)
    return;
  while ((name = g_dir_read_name(dir)) != NULL) {
    g_autofree gchar *path = g_build_filename(sqlite_dir, name, NULL);
    g_remove(path);
  }
  g_dir_close(dir);
  g_rmdir(sqlite_dir);
}

static SluiceBroker *
make_broker(GError **error)
{
  SluiceRedisOptions options;

  if (g_strcmp0(settings.broker, "memory") == 0)
    return sluice_memory_broker_new(NULL, NULL);
  if (g_strcmp0(settings.broker, "sqlite") == 0)
    return make_sqlite_broker(error);
  sluice_redis_options_init(&options);
  options.url = settings.url;
  options.ns = op_namespace != NULL ? op_namespace : settings.ns;
  if (g_strcmp0(settings.broker, "redis-fast") == 0)
    options.mode = SLUICE_REDIS_FAST;
  else if (g_strcmp0(settings.broker, "redis-reliable") == 0)
    options.mode = SLUICE_REDIS_RELIABLE;
  else {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "unknown broker “%s” (memory, sqlite, redis-fast, "
                "redis-reliable)",
                settings.broker);
    return NULL;
  }
  {
    SluiceBroker *broker = sluice_redis_broker_new(&options, NULL, error);
    if (broker != NULL && !sluice_redis_broker_ping(broker, error))
      g_clear_pointer(&broker, sluice_broker_unref);
    return broker;
  }
}

/* ---- Redis's own counters ----------------------------------------------- */

static redisContext *
redis_stats_connect(void)
{
  if (!is_redis())
    return NULL;
  return bench_redis_connect(settings.url, NULL);
}

/* ---- Process CPU and memory ---------------------------------------------- */

static gdouble
cpu_seconds(void)
{
  struct rusage ru;

  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void counter_wait(void);

/* CPU of the children waited for: with process isolation, the zygote and
 * every child it reaped, once the worker has stopped. */
static gdouble
children_cpu_seconds(void)
{
  struct rusage ru;

  getrusage(RUSAGE_CHILDREN, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static gboolean
process_isolation(void)
{
  return g_strcmp0(settings.isolation, "process") == 0;
}

/* Waits for the tasks of a run. A task in a child process cannot count
 * in this one: then the worker's own idleness says the queue is done. */
static gboolean
wait_for_tasks(SluiceWorker *worker, GError **error)
{
  if (!process_isolation())
    counter_wait();
  /* Settles of the last tasks may still be in flight: wait for them, so
   * the cost includes every acknowledgement and record. */
  return sluice_worker_run_until_idle(worker, 600000, NULL, error);
}

static gdouble
peak_rss_mb(void)
{
  struct rusage ru;

  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

/* ---- Tasks --------------------------------------------------------------- */

typedef struct {
  GMutex lock;
  GCond done;
  gint target;
  gint count;
  gint64 *latencies; /* latency op: µs from enqueue to start */
  gint n_latencies;
  gint64 last_end_us; /* wakeup op; chord op: the last member's end */
  gint64 callback_us; /* chord op: when the callback started; 0 = not yet */
} Counter;

static Counter counter;

static gboolean
task_noop(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  if (g_atomic_int_add(&counter.count, 1) + 1 == counter.target) {
    g_mutex_lock(&counter.lock);
    g_cond_broadcast(&counter.done);
    g_mutex_unlock(&counter.lock);
  }
  return TRUE;
}

static gboolean
task_latency(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);
  gint64 now = g_get_monotonic_time();
  gint i;

  if (args->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    i = g_atomic_int_add(&counter.n_latencies, 1);
    if (i < counter.target)
      counter.latencies[i] = now - (gint64)args->via.u64;
  }
  return task_noop(ctx, data, error);
}

static gboolean
task_stamp(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_mutex_lock(&counter.lock);
  counter.last_end_us = g_get_monotonic_time();
  g_mutex_unlock(&counter.lock);
  return TRUE;
}

/* A chord member: a no-op that notes when it ends. */
static gboolean
task_member(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gint64 now = g_get_monotonic_time();

  g_mutex_lock(&counter.lock);
  counter.last_end_us = MAX(counter.last_end_us, now);
  g_mutex_unlock(&counter.lock);
  return task_noop(ctx, data, error);
}

static gboolean
task_chord_done(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gint64 now = g_get_monotonic_time();

  g_mutex_lock(&counter.lock);
  counter.callback_us = now;
  g_cond_broadcast(&counter.done);
  g_mutex_unlock(&counter.lock);
  return TRUE;
}

static SluiceRegistry *
make_registry(gboolean results)
{
  SluiceRegistry *registry = sluice_registry_new();
  SluiceTaskOptions options;

  SluiceRateLimit limit;

  sluice_task_options_init(&options);
  options.store_result = results ? SLUICE_ON : SLUICE_OFF;
  /* --rate-limit: the no-op task under a limit, with a burst of a tenth
   * of a second's worth, so that a limit above the achievable rate costs
   * only the admission round trips. */
  sluice_rate_limit_init(&limit);
  limit.count = settings.rate_limit;
  limit.period_ms = 1000;
  limit.burst = MAX(settings.rate_limit / 10, 1);
  if (settings.rate_limit > 0)
    options.rate_limit = &limit;
  sluice_registry_add(registry, "bench.noop", task_noop, NULL, NULL, &options,
                      NULL);
  options.rate_limit = NULL;
  sluice_registry_add(registry, "bench.latency", task_latency, NULL, NULL,
                      &options, NULL);
  options.store_result = SLUICE_ON;
  sluice_registry_add(registry, "bench.stamp", task_stamp, NULL, NULL, &options,
                      NULL);
  sluice_registry_add(registry, "bench.member", task_member, NULL, NULL,
                      &options, NULL);
  sluice_registry_add(registry, "bench.chord-done", task_chord_done, NULL, NULL,
                      &options, NULL);
  return registry;
}

static void
counter_reset(gint target)
{
  g_atomic_int_set(&counter.count, 0);
  counter.target = target;
}

static void
counter_wait(void)
{
  g_mutex_lock(&counter.lock);
  while (g_atomic_int_get(&counter.count) < counter.target)
    g_cond_wait(&counter.done, &counter.lock);
  g_mutex_unlock(&counter.lock);
}

/* ---- Scrapes during a run ----------------------------------------------- */

typedef struct {
  SluiceWorker *worker;
  GThread *thread;
  GMutex lock;
  GCond cond;
  gboolean stop;
  guint scrapes;
  gsize bytes;
} Scraper;

static gpointer
scraper_main(gpointer data)
{
  Scraper *s = data;

  g_mutex_lock(&s->lock);
  while (!s->stop) {
    gint64 until =
        g_get_monotonic_time() + (gint64)settings.scrape_interval_ms * 1000;
    SluiceWorkerMetrics m;
    gchar *text;

    g_mutex_unlock(&s->lock);
    sluice_worker_get_metrics(s->worker, &m);
    text = sluice_worker_metrics_to_prometheus(&m);
    sluice_worker_metrics_clear(&m);
    g_mutex_lock(&s->lock);
    s->scrapes++;
    s->bytes = strlen(text);
    g_free(text);
    while (!s->stop && g_cond_wait_until(&s->cond, &s->lock, until))
      ;
  }
  g_mutex_unlock(&s->lock);
  return NULL;
}

/* Starts scraping @worker, if --scrape-interval asks for it. */
static Scraper *
scraper_start(SluiceWorker *worker)
{
  Scraper *s;

  if (settings.scrape_interval_ms <= 0)
    return NULL;
  s = g_new0(Scraper, 1);
  s->worker = worker;
  g_mutex_init(&s->lock);
  g_cond_init(&s->cond);
  s->thread = g_thread_new("bench-scrape", scraper_main, s);
  return s;
}

/* Stops it and appends what it did to @line. */
static void
scraper_stop(Scraper *s, GString *line)
{
  if (s == NULL)
    return;
  g_mutex_lock(&s->lock);
  s->stop = TRUE;
  g_cond_signal(&s->cond);
  g_mutex_unlock(&s->lock);
  g_thread_join(s->thread);
  g_string_append_printf(
      line, " scrape_interval_ms=%d scrapes=%u scrape_bytes=%" G_GSIZE_FORMAT,
      settings.scrape_interval_ms, s->scrapes, s->bytes);
  g_mutex_clear(&s->lock);
  g_cond_clear(&s->cond);
  g_free(s);
}

static SluiceWorker *
make_worker(SluiceBroker *broker, SluiceRegistry *registry, GError **error)
{
  SluiceWorkerOptions options;

  sluice_worker_options_init(&options);
  options.concurrency = (guint)settings.concurrency;
  options.prefetch = settings.prefetch >= 0 ? (guint)settings.prefetch
                                            : (guint)settings.concurrency * 32;
  options.settle_batch = 256;
  if (process_isolation())
    options.isolation = SLUICE_ISOLATION_PROCESS;
  options.log_each_task = settings.log_each_task;
  options.keyring = keyring;
  return sluice_worker_new(broker, registry, &options, error);
}

/* Fills the queue with @n messages of @task, in batches. */
static gboolean
fill(SluiceClient *client, const gchar *task, gint n, GError **error)
{
  g_autofree SluiceEnqueueRequest *requests =
      g_new0(SluiceEnqueueRequest, settings.batch);

  for (gint i = 0; i < settings.batch; i++) {
    requests[i].task = task;
    requests[i].args = task_args;
  }
  for (gint done = 0; done < n;) {
    guint k = (guint)MIN(settings.batch, n - done);
    g_autoptr(GPtrArray) ids =
        sluice_client_enqueue_batch(client, requests, k, error);
    if (ids == NULL)
      return FALSE;
    done += (gint)k;
  }
  return TRUE;
}

/* ---- Operations ---------------------------------------------------------- */

static int
compare_gint64(gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
  return x < y ? -1 : x > y;
}

static gboolean
op_enqueue(gboolean batched, GError **error)
{
  g_autoptr(SluiceBroker) broker = make_broker(error);
  g_autoptr(SluiceClient) client = NULL;
  redisContext *rc = redis_stats_connect();
  BenchRedisCounters before, after;
  gint n = settings.tasks > 0 ? settings.tasks : (batched ? 200000 : 20000);
  g_autoptr(GString) line = g_string_new(NULL);
  g_autofree gint64 *latencies = NULL;
  gint64 t0, t1;
  gdouble cpu0;

  if (broker == NULL)
    return FALSE;
  client = make_client(broker, error);
  before = bench_redis_counters(rc);
  cpu0 = cpu_seconds();
  t0 = g_get_monotonic_time();
  if (batched) {
    if (!fill(client, "bench.noop", n, error))
      return FALSE;
  } else {
    /* Each call timed on its own: a single enqueue is a round trip, and
     * its latency (not only the rate) is what a producer waits for. */
    latencies = g_new(gint64, n);
    for (gint i = 0; i < n; i++) {
      gint64 s0 = g_get_monotonic_time();
      g_autofree gchar *id =
          sluice_client_enqueue(client, "bench.noop", task_args, NULL, error);
      if (id == NULL)
        return FALSE;
      latencies[i] = g_get_monotonic_time() - s0;
    }
  }
  t1 = g_get_monotonic_time();
  after = bench_redis_counters(rc);
  g_string_printf(line,
                  "bench broker=%s op=%s tasks=%d batch=%d args_bytes=%d "
                  "sealed=%s rate_per_s=%.0f client_cpu_us_per_task=%.2f",
                  settings.broker, batched ? "enqueue-batch" : "enqueue", n,
                  batched ? settings.batch : 1, settings.args_bytes,
                  settings.sealed ? "yes" : "no", n / ((t1 - t0) / 1e6),
                  (cpu_seconds() - cpu0) * 1e6 / n);
  if (latencies != NULL) {
    qsort(latencies, n, sizeof(gint64), compare_gint64);
    g_string_append_printf(
        line, " p50_us=%" G_GINT64_FORMAT " p99_us=%" G_GINT64_FORMAT,
        latencies[n / 2], latencies[(gint64)n * 99 / 100]);
  }
  bench_redis_print_costs(line, before, after, 0, n);
  puts(line->str);
  if (rc != NULL)
    redisFree(rc);
  return TRUE;
}

/* Runs the worker over a pre-filled queue of @n tasks and prints its line.
 * Runs in the calling process. */
static gboolean
run_worker_phase(gint n, gboolean results, BenchRedisCounters *before,
                 redisContext *rc, GString *line, GError **error)
{
  g_autoptr(SluiceBroker) broker = make_broker(error);
  g_autoptr(SluiceRegistry) registry = make_registry(results);
  g_autoptr(SluiceWorker) worker = NULL;
  BenchRedisCounters after;
  gint64 t0, t1;
  gdouble cpu0, cpu1, children0;
  Scraper *scraper;

  if (broker == NULL)
    return FALSE;
  worker = make_worker(broker, registry, error);
  if (worker == NULL)
    return FALSE;
  counter_reset(n);
  *before = bench_redis_counters(rc);
  cpu0 = cpu_seconds();
  children0 = children_cpu_seconds();
  t0 = g_get_monotonic_time();
  if (!sluice_worker_start(worker, error))
    return FALSE;
  scraper = scraper_start(worker);
  if (!wait_for_tasks(worker, error))
    return FALSE;
  t1 = g_get_monotonic_time();
  cpu1 = cpu_seconds();
  after = bench_redis_counters(rc);
  scraper_stop(scraper, line);
  sluice_worker_stop(worker);
  g_string_append_printf(
      line, " rate_per_s=%.0f worker_cpu_us_per_task=%.2f rss_mb=%.1f",
      n / ((t1 - t0) / 1e6), (cpu1 - cpu0) * 1e6 / n, peak_rss_mb());
  if (process_isolation())
    g_string_append_printf(line, " child_cpu_us_per_task=%.2f",
                           (children_cpu_seconds() - children0) * 1e6 / n);
  bench_redis_print_costs(line, *before, after, 0, n);
  return TRUE;
}

/* One run of the chord operation: plain tasks (@chord FALSE) or one chord
 * of as many members; appends its figures to @line with @prefix. */
static gboolean
chord_phase(gboolean chord, gint n, GString *line, gdouble *out_redis_us,
            GError **error)
{
  g_autoptr(SluiceBroker) broker = make_broker(error);
  g_autoptr(SluiceRegistry) registry = make_registry(TRUE);
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  redisContext *rc = redis_stats_connect();
  BenchRedisCounters before, after;
  g_autoptr(GHashTable) calls_before = NULL, calls_after = NULL;
  const gchar *prefix = chord ? "member" : "plain";
  gint64 t0, t1;
  gdouble cpu0, cpu1;

  if (broker == NULL)
    return FALSE;
  client = make_client(broker, error);
  worker = make_worker(broker, registry, error);
  if (client == NULL || worker == NULL)
    return FALSE;
  counter_reset(n);
  counter.last_end_us = 0;
  counter.callback_us = 0;
  if (chord) {
    SluiceWorkflow *group = sluice_workflow_group();
    g_autoptr(SluiceWorkflow) wf = NULL;
    g_autofree gchar *id = NULL;

    for (gint i = 0; i < n; i++)
      sluice_workflow_add(group,
                          sluice_workflow_task("bench.member", NULL, NULL));
    wf = sluice_workflow_chord(
        group, sluice_workflow_task("bench.chord-done", NULL, NULL),
        SLUICE_CHORD_WAIT_ALL);
    id = sluice_client_enqueue_workflow(client, wf, error);
    if (id == NULL)
      return FALSE;
  } else if (!fill(client, "bench.noop", n, error)) {
    return FALSE;
  }
  calls_before = rc != NULL ? bench_redis_command_calls(rc) : NULL;
  before = bench_redis_counters(rc);
  cpu0 = cpu_seconds();
  t0 = g_get_monotonic_time();
  if (!sluice_worker_start(worker, error))
    return FALSE;
  counter_wait();
  if (chord) {
    g_mutex_lock(&counter.lock);
    while (counter.callback_us == 0)
      g_cond_wait(&counter.done, &counter.lock);
    g_mutex_unlock(&counter.lock);
  }
  if (!sluice_worker_run_until_idle(worker, 600000, NULL, error))
    return FALSE;
  t1 = g_get_monotonic_time();
  cpu1 = cpu_seconds();
  after = bench_redis_counters(rc);
  calls_after = rc != NULL ? bench_redis_command_calls(rc) : NULL;
  sluice_worker_stop(worker);
  g_string_append_printf(line, " %s_rate_per_s=%.0f %s_cpu_us_per_task=%.2f",
                         prefix, n / ((t1 - t0) / 1e6), prefix,
                         (cpu1 - cpu0) * 1e6 / n);
  if (rc != NULL && before.ok && after.ok) {
    *out_redis_us = (after.cpu_s - before.cpu_s) * 1e6 / n;
    g_string_append_printf(
        line, " %s_redis_cpu_us_per_task=%.2f %s_redis_cmds_per_task=%.3f",
        prefix, *out_redis_us, prefix,
        (gdouble)(after.calls - before.calls - 1) / n);
  }
  if (calls_before != NULL && calls_after != NULL) {
    g_string_append_printf(line, " %s_", prefix);
    bench_redis_print_breakdown(line, calls_before, calls_after, n);
  }
  if (chord)
    g_string_append_printf(line, " callback_delay_us=%" G_GINT64_FORMAT,
                           counter.callback_us - counter.last_end_us);
  if (rc != NULL)
    redisFree(rc);
  return TRUE;
}

static gboolean
op_chord(GError **error)
{
  gint n = settings.tasks > 0 ? settings.tasks : 10000;
  g_autoptr(GString) line = g_string_new(NULL);
  gdouble plain = 0, member = 0;

  g_string_printf(line,
                  "bench broker=%s op=chord tasks=%d concurrency=%d "
                  "results=on",
                  settings.broker, n, settings.concurrency);
  begin_op("chord", "plain");
  if (!chord_phase(FALSE, n, line, &plain, error))
    return FALSE;
  begin_op("chord", "chord");
  if (!chord_phase(TRUE, n, line, &member, error))
    return FALSE;
  if (plain > 0)
    g_string_append_printf(line, " redis_cpu_ratio=%.2f", member / plain);
  puts(line->str);
  return TRUE;
}

static gboolean
op_process(gboolean results, GError **error)
{
  gint n = settings.tasks > 0 ? settings.tasks : 200000;
  g_autoptr(GString) line = g_string_new(NULL);
  BenchRedisCounters before;

  g_string_printf(line,
                  "bench broker=%s op=process isolation=%s tasks=%d "
                  "concurrency=%d prefetch=%d results=%s rate_limit=%d "
                  "args_bytes=%d sealed=%s",
                  settings.broker, process_isolation() ? "process" : "thread",
                  n, settings.concurrency,
                  settings.prefetch >= 0 ? settings.prefetch
                                         : settings.concurrency * 32,
                  results ? "on" : "off", settings.rate_limit,
                  settings.args_bytes, settings.sealed ? "yes" : "no");

  if (!is_redis()) {
    /* In process: the queue lives in this process's memory, so rss_mb
     * includes the queued messages. */
    g_autoptr(SluiceBroker) broker = make_broker(error);
    g_autoptr(SluiceRegistry) registry = make_registry(results);
    g_autoptr(SluiceWorker) worker = make_worker(broker, registry, error);
    g_autoptr(SluiceClient) client = make_client(broker, error);
    gint64 t0, t1;
    gdouble cpu0, cpu1, children0;
    Scraper *scraper;

    if (!fill(client, "bench.noop", n, error))
      return FALSE;
    counter_reset(n);
    cpu0 = cpu_seconds();
    children0 = children_cpu_seconds();
    t0 = g_get_monotonic_time();
    if (!sluice_worker_start(worker, error))
      return FALSE;
    scraper = scraper_start(worker);
    if (!wait_for_tasks(worker, error))
      return FALSE;
    t1 = g_get_monotonic_time();
    cpu1 = cpu_seconds();
    scraper_stop(scraper, line);
    sluice_worker_stop(worker);
    g_string_append_printf(
        line, " rate_per_s=%.0f worker_cpu_us_per_task=%.2f rss_mb=%.1f",
        n / ((t1 - t0) / 1e6), (cpu1 - cpu0) * 1e6 / n, peak_rss_mb());
    if (process_isolation())
      g_string_append_printf(line, " child_cpu_us_per_task=%.2f",
                             (children_cpu_seconds() - children0) * 1e6 / n);
    puts(line->str);
    return TRUE;
  }

  /* Redis: fill from this process, then run the worker in a child, so the
   * worker's CPU time and peak RSS are measured alone. */
  {
    g_autoptr(SluiceBroker) broker = make_broker(error);
    g_autoptr(SluiceClient) client = NULL;
    int pipefd[2];
    pid_t pid;
    int status;
    gchar buffer[512] = {0};
    ssize_t got;

    if (broker == NULL)
      return FALSE;
    client = make_client(broker, error);
    if (!fill(client, "bench.noop", n, error))
      return FALSE;
    g_clear_pointer(&client, sluice_client_unref);
    g_clear_pointer(&broker, sluice_broker_unref);

    if (pipe(pipefd) != 0) {
      g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "pipe: %s",
                  g_strerror(errno));
      return FALSE;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
      g_autoptr(GString) child = g_string_new(NULL);
      g_autoptr(GError) child_error = NULL;
      redisContext *rc = redis_stats_connect();
      close(pipefd[0]);
      if (!run_worker_phase(n, results, &before, rc, child, &child_error))
        g_string_printf(child, " error=\"%s\"", child_error->message);
      if (write(pipefd[1], child->str, child->len) < 0)
        _exit(1);
      _exit(0);
    }
    close(pipefd[1]);
    got = read(pipefd[0], buffer, sizeof buffer - 1);
    close(pipefd[0]);
    waitpid(pid, &status, 0);
    if (got > 0)
      g_string_append_len(line, buffer, got);
    puts(line->str);
    return TRUE;
  }
}

static gboolean
op_latency(GError **error)
{
  gint n = settings.tasks > 0 ? settings.tasks : 3000;
  g_autoptr(SluiceBroker) broker = make_broker(error);
  g_autoptr(SluiceRegistry) registry = make_registry(FALSE);
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  gint64 interval_us = G_USEC_PER_SEC / MAX(settings.rate, 1);
  gint64 next;
  gint m;

  pid_t child = -1;

  if (broker == NULL)
    return FALSE;
  counter.latencies = g_new0(gint64, n);
  counter.n_latencies = 0;
  counter_reset(n);
  if (settings.worker_process) {
    /* The worker in a child on the same store: each start is woken across
     * processes (CLOCK_MONOTONIC is the same clock in both). */
    fflush(stdout);
    child = fork();
    if (child == 0) {
      g_autoptr(GError) child_error = NULL;
      g_autoptr(SluiceBroker) own = make_broker(&child_error);
      g_autoptr(SluiceWorker) w =
          own != NULL ? make_worker(own, registry, &child_error) : NULL;

      if (w == NULL || !sluice_worker_start(w, &child_error)) {
        fprintf(stderr, "bench: %s\n", child_error->message);
        _exit(1);
      }
      counter_wait();
      sluice_worker_stop(w);
      m = MIN(counter.n_latencies, n);
      qsort(counter.latencies, m, sizeof(gint64), compare_gint64);
      printf("bench broker=%s op=latency rate=%d tasks=%d concurrency=%d "
             "worker=process p50_us=%" G_GINT64_FORMAT
             " p99_us=%" G_GINT64_FORMAT "\n",
             settings.broker, settings.rate, n, settings.concurrency,
             counter.latencies[m / 2], counter.latencies[m * 99 / 100]);
      fflush(stdout);
      _exit(0);
    }
    /* Let the child's worker start before the first send. */
    g_usleep(500 * 1000);
  } else {
    worker = make_worker(broker, registry, error);
    if (!sluice_worker_start(worker, error))
      return FALSE;
  }
  client = make_client(broker, error);
  next = g_get_monotonic_time();
  for (gint i = 0; i < n; i++) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    g_autoptr(GBytes) args = NULL;
    g_autofree gchar *id = NULL;
    gint64 now = g_get_monotonic_time();

    /* Paced sends: sleep to the next slot (the benchmark may sleep; the
     * library never polls). */
    if (next > now)
      g_usleep((gulong)(next - now));
    next += interval_us;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_uint64(&pk, (uint64_t)g_get_monotonic_time());
    args = g_bytes_new(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    id = sluice_client_enqueue(client, "bench.latency", args, NULL, error);
    if (id == NULL)
      return FALSE;
  }
  if (child > 0) {
    int status;
    waitpid(child, &status, 0);
    g_free(counter.latencies);
    return TRUE;
  }
  counter_wait();
  sluice_worker_stop(worker);
  m = MIN(counter.n_latencies, n);
  qsort(counter.latencies, m, sizeof(gint64), compare_gint64);
  printf("bench broker=%s op=latency rate=%d tasks=%d concurrency=%d "
         "p50_us=%" G_GINT64_FORMAT " p99_us=%" G_GINT64_FORMAT "\n",
         settings.broker, settings.rate, n, settings.concurrency,
         counter.latencies[m / 2], counter.latencies[m * 99 / 100]);
  g_free(counter.latencies);
  return TRUE;
}

static gboolean
op_wakeup(GError **error)
{
  gint n = settings.samples;
  g_autoptr(SluiceBroker) broker = make_broker(error);
  g_autoptr(SluiceRegistry) registry = make_registry(TRUE);
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree gint64 *samples = g_new0(gint64, n);

  if (broker == NULL)
    return FALSE;
  worker = make_worker(broker, registry, error);
  client = make_client(broker, error);
  if (!sluice_worker_start(worker, error))
    return FALSE;
  for (gint i = 0; i < n; i++) {
    g_autofree gchar *id =
        sluice_client_enqueue(client, "bench.stamp", NULL, NULL, error);
    g_autoptr(SluiceResult) result = NULL;
    gint64 returned;

    if (id == NULL)
      return FALSE;
    result = sluice_client_get_result(client, id, 10000, NULL, error);
    returned = g_get_monotonic_time();
    if (result == NULL)
      return FALSE;
    g_mutex_lock(&counter.lock);
    samples[i] = returned - counter.last_end_us;
    g_mutex_unlock(&counter.lock);
  }
  sluice_worker_stop(worker);
  qsort(samples, n, sizeof(gint64), compare_gint64);
  printf("bench broker=%s op=wakeup samples=%d p50_us=%" G_GINT64_FORMAT
         " p99_us=%" G_GINT64_FORMAT "\n",
         settings.broker, n, samples[n / 2], samples[n * 99 / 100]);
  return TRUE;
}

static GLogWriterOutput
quiet_writer(GLogLevelFlags level, const GLogField *fields, gsize n,
             gpointer data)
{
  /* Warnings (Redis without persistence, which run.sh chooses on purpose)
   * would break the one-line-per-figure output. */
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
    return g_log_writer_default(level, fields, n, data);
  return G_LOG_WRITER_HANDLED;
}

int
main(int argc, char **argv)
{
  GOptionEntry entries[] = {
      {"broker", 'b', 0, G_OPTION_ARG_STRING, &settings.broker,
       "memory, sqlite, redis-fast or redis-reliable (default memory)", "NAME"},
      {"url", 'u', 0, G_OPTION_ARG_STRING, &settings.url,
       "Redis URL (default redis://127.0.0.1:6379/0), or sqlite:///FILE for "
       "--broker sqlite (default: a fresh file per operation)",
       "URL"},
      {"synchronous", 0, 0, G_OPTION_ARG_STRING, &settings.synchronous,
       "--broker sqlite: full (default), normal or off", "HOW"},
      {"worker-process", 0, 0, G_OPTION_ARG_NONE, &settings.worker_process,
       "latency: run the worker in a child process on the same store", NULL},
      {"namespace", 'n', 0, G_OPTION_ARG_STRING, &settings.ns,
       "Redis namespace (default: a fresh one per run)", "NS"},
      {"op", 'o', 0, G_OPTION_ARG_STRING, &settings.op,
       "all, enqueue, enqueue-batch, process, latency, wakeup or chord", "OP"},
      {"tasks", 't', 0, G_OPTION_ARG_INT, &settings.tasks,
       "tasks per operation (default: per operation)", "N"},
      {"concurrency", 'c', 0, G_OPTION_ARG_INT, &settings.concurrency,
       "worker concurrency (default 8)", "N"},
      {"prefetch", 'p', 0, G_OPTION_ARG_INT, &settings.prefetch,
       "worker prefetch (default 32 x concurrency)", "N"},
      {"batch", 0, 0, G_OPTION_ARG_INT, &settings.batch,
       "enqueue batch size (default 1000)", "N"},
      {"results", 'r', 0, G_OPTION_ARG_STRING, &settings.results,
       "on, off or both (default both)", "WHICH"},
      {"rate", 0, 0, G_OPTION_ARG_INT, &settings.rate,
       "tasks per second of the latency operation (default 1000)", "N"},
      {"samples", 0, 0, G_OPTION_ARG_INT, &settings.samples,
       "samples of the wakeup operation (default 500)", "N"},
      {"isolation", 0, 0, G_OPTION_ARG_STRING, &settings.isolation,
       "the process operation's worker: thread (default) or process", "HOW"},
      {"log-each-task", 0, 0, G_OPTION_ARG_NONE, &settings.log_each_task,
       "the worker logs a line per task (to a writer that drops it)", NULL},
      {"rate-limit", 0, 0, G_OPTION_ARG_INT, &settings.rate_limit,
       "process: the no-op task under a rate limit of N a second (burst "
       "N/10; at most 1000000; default 0: none)",
       "N"},
      {"args-bytes", 0, 0, G_OPTION_ARG_INT, &settings.args_bytes,
       "Give each task one argument, a bin of N bytes (default: none)", "N"},
      {"sealed", 0, 0, G_OPTION_ARG_NONE, &settings.sealed,
       "Seal every message with a keyring (client and worker)", NULL},
      {"scrape-interval", 0, 0, G_OPTION_ARG_INT, &settings.scrape_interval_ms,
       "process: snapshot and render the worker's metrics every MS ms "
       "(default 0: never)",
       "MS"},
      {NULL},
  };
  g_autoptr(GOptionContext) context =
      g_option_context_new("- benchmark a Sluice broker");
  g_autoptr(GError) error = NULL;
  gboolean all;
  gboolean ok = TRUE;

  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    fprintf(stderr, "bench: %s\n", error->message);
    return 2;
  }
  if (settings.rate_limit < 0 || settings.rate_limit > 1000000) {
    fprintf(stderr, "bench: --rate-limit must be between 0 (none) and "
                    "1000000 a second\n");
    return 2;
  }
  g_log_set_writer_func(quiet_writer, NULL, NULL);
  g_mutex_init(&counter.lock);
  g_cond_init(&counter.done);
  if (settings.broker == NULL)
    settings.broker = g_strdup("memory");
  if (settings.url == NULL)
    settings.url = g_strdup(SLUICE_REDIS_DEFAULT_URL);
  if (settings.ns == NULL)
    settings.ns = g_strdup_printf("bench-%d-%" G_GINT64_FORMAT, (int)getpid(),
                                  g_get_real_time());
  if (settings.op == NULL)
    settings.op = g_strdup("all");
  if (settings.results == NULL)
    settings.results = g_strdup("both");
  make_payload_settings();
  all = g_strcmp0(settings.op, "all") == 0;

  if (ok && (all || g_strcmp0(settings.op, "enqueue") == 0)) {
    begin_op("enqueue", NULL);
    ok = op_enqueue(FALSE, &error);
  }
  if (ok && (all || g_strcmp0(settings.op, "enqueue-batch") == 0)) {
    begin_op("enqueue-batch", NULL);
    ok = op_enqueue(TRUE, &error);
  }
  if (ok && (all || g_strcmp0(settings.op, "latency") == 0)) {
    begin_op("latency", NULL);
    ok = op_latency(&error);
  }
  if (ok && (all || g_strcmp0(settings.op, "wakeup") == 0)) {
    begin_op("wakeup", NULL);
    ok = op_wakeup(&error);
  }
  if (ok && (all || g_strcmp0(settings.op, "chord") == 0))
    ok = op_chord(&error);
  /* Last: the process runs leave the biggest heaps behind, which would
   * show in the latency tails of whatever ran after them. */
  if (ok && (all || g_strcmp0(settings.op, "process") == 0)) {
    if (g_strcmp0(settings.results, "on") != 0) {
      begin_op("process", "off");
      ok = op_process(FALSE, &error);
    }
    if (ok && g_strcmp0(settings.results, "off") != 0) {
      begin_op("process", "on");
      ok = op_process(TRUE, &error);
    }
  }
  remove_sqlite_dir();
  if (!ok) {
    fprintf(stderr, "bench: %s\n", error->message);
    return 1;
  }
  return 0;
}

/* metrics.c - what a worker counts per task and queue, and its snapshot
 * (sluice-metrics.h).
 *
 * Three threads write, none of them with a lock of its own per task:
 *   - the fetcher resolves each delivery's series (a lookup it alone
 *     writes to, so it reads without the lock and inserts under it);
 *   - an executor counts the start in the section under worker->lock
 *     where it already counts the worker's `started`;
 *   - the settler counts outcomes and observes the histograms, for a whole
 *     batch of settlements under metrics_lock at once.
 * A snapshot takes worker->lock, then metrics_lock, copies the series and
 * builds the public structs after letting both go.
 */
#include "config.h"

#include <string.h>

#include "lib/worker/worker-private.h"

/* Durations from 100 us (a small task) to an hour; latencies, measured
 * in whole milliseconds, from 1 ms. */
static const gdouble duration_bounds[METRICS_DURATION_BOUNDS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5,    1,       2.5,    5,     10,     30,    60,   300,   900,  3600};
static const gdouble latency_bounds[METRICS_LATENCY_BOUNDS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1,     2.5,    5,     10,   30,    60,   300, 900,  3600};
/* The same bounds in the units the series count in: whole milliseconds
 * below 2.5 ms are at most 2. */
static const guint64 duration_bounds_us[METRICS_DURATION_BOUNDS] = {
    100,     250,      500,      1000,     2500,      5000,      10000,
    25000,   50000,    100000,   250000,   500000,    1000000,   2500000,
    5000000, 10000000, 30000000, 60000000, 300000000, 900000000, 3600000000};
static const guint64 latency_bounds_ms[METRICS_LATENCY_BOUNDS] = {
    1,    2,    5,    10,    25,    50,    100,    250,    500,
    1000, 2500, 5000, 10000, 30000, 60000, 300000, 900000, 3600000};

/* The keys of the series of messages without a registered task. */
static const gchar unregistered_key[] = SLUICE_METRICS_TASK_UNREGISTERED;
static const gchar undecodable_key[] = SLUICE_METRICS_TASK_UNDECODABLE;

void
sluice_metrics__init(SluiceWorker *worker)
{
  g_mutex_init(&worker->metrics_lock);
  worker->metrics_by_task = g_hash_table_new_full(NULL, NULL, NULL, g_free);
  worker->metrics_series = g_ptr_array_new_with_free_func(g_free);
  worker->queue_index = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; worker->queues[i] != NULL; i++)
    g_hash_table_insert(worker->queue_index, worker->queues[i],
                        GUINT_TO_POINTER(i + 1));
}

void
sluice_metrics__clear(SluiceWorker *worker)
{
  g_hash_table_unref(worker->queue_index);
  g_ptr_array_unref(worker->metrics_series);
  g_hash_table_unref(worker->metrics_by_task);
  g_mutex_clear(&worker->metrics_lock);
}

MetricsSeries *
sluice_metrics__series(SluiceWorker *worker, Job *job)
{
  guint n_queues = g_strv_length(worker->queues);
  gconstpointer key = job->entry != NULL ? (gconstpointer)job->entry
                      : job->env != NULL ? (gconstpointer)unregistered_key
                                         : (gconstpointer)undecodable_key;
  guint queue = GPOINTER_TO_UINT(
      g_hash_table_lookup(worker->queue_index, job->delivery->queue));
  MetricsSeries **per_queue;
  MetricsSeries *series;

  /* Not a queue of ours (a broker that strays): one series for all. */
  queue = queue > 0 ? queue - 1 : n_queues;
  per_queue = g_hash_table_lookup(worker->metrics_by_task, key);
  if (per_queue != NULL && per_queue[queue] != NULL)
    return per_queue[queue];

  series = g_new0(MetricsSeries, 1);
  series->task = job->entry != NULL ? job->entry->name : (const gchar *)key;
  series->queue = queue;
  g_mutex_lock(&worker->metrics_lock);
  if (per_queue == NULL) {
    per_queue = g_new0(MetricsSeries *, n_queues + 1);
    g_hash_table_insert(worker->metrics_by_task, (gpointer)key, per_queue);
  }
  per_queue[queue] = series;
  g_ptr_array_add(worker->metrics_series, series);
  g_mutex_unlock(&worker->metrics_lock);
  return series;
}

static void
observe(MetricsHistogram *h, const guint64 *bounds, guint n_bounds,
        guint64 value)
{
  guint i = 0;

  while (i < n_bounds && value > bounds[i])
    i++;
  h->buckets[i]++;
  h->count++;
  h->sum += value;
}

static void
count_dead_letter(MetricsSeries *s, const SluiceDeadLetter *dl)
{
  s->dead_lettered++;
  for (guint i = 0; dl != NULL && i < METRICS_REASONS; i++)
    if (g_strcmp0(dl->reason, sluice_dead_letter_reasons()[i]) == 0) {
      s->dead_by_reason[i]++;
      return;
    }
}

void
sluice_metrics__settled(SluiceWorker *worker, Pending *const *batch,
                        const guint *settled, const SluiceSettlement *items,
                        const gint64 *started_at, guint n)
{
  gint64 now = sluice_clock_now_ms(worker->clock);

  g_mutex_lock(&worker->metrics_lock);
  for (guint i = 0; i < n; i++) {
    Pending *p = batch[settled[i]];
    Job *job = p->job;
    MetricsSeries *s = job->series;
    gint64 run_us;

    if (items[i].status != SLUICE_SETTLE_DONE || s == NULL)
      continue;
    switch (p->kind) {
    case KIND_SUCCEEDED:
      s->succeeded++;
      break;
    case KIND_RETRIED:
      s->retried++;
      break;
    case KIND_DEAD_LETTERED:
      count_dead_letter(s, p->dead_letter);
      break;
    case KIND_CANCELLED:
      s->cancelled++;
      break;
    case KIND_DEFERRED:
    case KIND_DEFERRED_NEWER:
      s->deferred++;
      break;
    case KIND_RELEASED:
      s->released++;
      break;
    case KIND_FAILED:
    case KIND_RUNNING:
    case KIND_EVENT:
    case KIND_SNOOZED:
    case KIND_RATE_WAIT:
    case KIND_SLOT_WAIT:
      break;
    }
    if (p->failed_attempt)
      s->failed++;
    if (started_at[i] <= 0)
      continue;
    if (job->env != NULL) {
      gint64 ready = job->env->eta > 0 ? job->env->eta : job->env->enqueued_at;
      observe(&s->latency, latency_bounds_ms, METRICS_LATENCY_BOUNDS,
              (guint64)MAX(started_at[i] - ready, 0));
    }
    /* A task settled before it returned (its timeout) ran until now; one
     * given back by a stop was cut short and runs again: not a run. */
    run_us = __atomic_load_n(&job->run_us, __ATOMIC_RELAXED);
    if (run_us < 0 && p->kind != KIND_RELEASED)
      run_us = MAX(now - started_at[i], 0) * 1000;
    if (run_us >= 0)
      observe(&s->duration, duration_bounds_us, METRICS_DURATION_BOUNDS,
              (guint64)run_us);
  }
  g_mutex_unlock(&worker->metrics_lock);
}

/* ---- The snapshot -------------------------------------------------------- */

static void
histogram_init(SluiceHistogram *h, const gdouble *bounds, guint n_bounds)
{
  h->n_bounds = n_bounds;
  h->bounds = bounds;
  h->buckets = g_new0(guint64, n_bounds + 1);
  h->count = 0;
  h->sum = 0;
}

static void
histogram_fill(SluiceHistogram *h, const MetricsHistogram *from, gdouble unit)
{
  memcpy(h->buckets, from->buckets, (h->n_bounds + 1) * sizeof(guint64));
  h->count = from->count;
  h->sum = (gdouble)from->sum / unit;
}

static void
task_metrics_free(gpointer data)
{
  SluiceTaskMetrics *t = data;

  g_free(t->task);
  g_free(t->queue);
  g_hash_table_unref(t->dead_lettered_by_reason);
  g_free(t->duration.buckets);
  g_free(t->latency.buckets);
  g_free(t);
}

void
sluice_worker_metrics_init(SluiceWorkerMetrics *metrics)
{
  g_return_if_fail(metrics != NULL);
  memset(metrics, 0, sizeof *metrics);
  metrics->broker_reachable = TRUE;
  metrics->tasks = g_ptr_array_new_with_free_func(task_metrics_free);
}

void
sluice_worker_metrics_clear(SluiceWorkerMetrics *metrics)
{
  g_return_if_fail(metrics != NULL);
  g_clear_pointer(&metrics->worker_id, g_free);
  g_clear_pointer(&metrics->broker, g_free);
  g_clear_pointer(&metrics->tasks, g_ptr_array_unref);
}

SluiceTaskMetrics *
sluice_worker_metrics_add_task(SluiceWorkerMetrics *metrics, const gchar *task,
                               const gchar *queue)
{
  SluiceTaskMetrics *t;

  g_return_val_if_fail(metrics != NULL && metrics->tasks != NULL, NULL);
  g_return_val_if_fail(task != NULL && queue != NULL, NULL);
  t = g_new0(SluiceTaskMetrics, 1);
  t->task = g_strdup(task);
  t->queue = g_strdup(queue);
  t->dead_lettered_by_reason =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  histogram_init(&t->duration, duration_bounds, METRICS_DURATION_BOUNDS);
  histogram_init(&t->latency, latency_bounds, METRICS_LATENCY_BOUNDS);
  g_ptr_array_add(metrics->tasks, t);
  return t;
}

static int
compare_series(const void *a, const void *b)
{
  const MetricsSeries *x = a, *y = b;
  gint c = strcmp(x->task, y->task);

  return c != 0 ? c : (gint)x->queue - (gint)y->queue;
}

void
sluice_worker_get_metrics(SluiceWorker *worker, SluiceWorkerMetrics *out)
{
  g_autofree MetricsSeries *copies = NULL;
  guint n = 0;
  guint prefetched;

  g_return_if_fail(worker != NULL && out != NULL);
  sluice_worker_metrics_init(out);
  out->worker_id = g_strdup(worker->id);
  out->broker = g_strdup(sluice_broker_get_name(worker->broker));
  out->concurrency = worker->options.concurrency;

  g_mutex_lock(&worker->exec_lock);
  prefetched = g_queue_get_length(&worker->ready);
  g_mutex_unlock(&worker->exec_lock);

  g_mutex_lock(&worker->lock);
  out->started_at_ms = worker->state != WORKER_NEW ? worker->started_at : 0;
  out->running = worker->running;
  out->held = worker->held;
  out->prefetched = prefetched + g_queue_get_length(&worker->quarantined);
  out->stats = worker->stats;
  g_mutex_lock(&worker->metrics_lock);
  n = worker->metrics_series->len;
  copies = g_new(MetricsSeries, MAX(n, 1));
  for (guint i = 0; i < n; i++)
    copies[i] = *(MetricsSeries *)worker->metrics_series->pdata[i];
  g_mutex_unlock(&worker->metrics_lock);
  g_mutex_unlock(&worker->lock);

  g_mutex_lock(&worker->outage_lock);
  out->broker_reachable = !g_atomic_int_get(&worker->outage);
  out->broker_errors = worker->broker_errors;
  out->broker_outages = worker->broker_outages;
  g_mutex_unlock(&worker->outage_lock);

  qsort(copies, n, sizeof *copies, compare_series);
  for (guint i = 0; i < n; i++) {
    const MetricsSeries *s = &copies[i];
    const gchar *queue =
        worker->queues[s->queue] != NULL ? worker->queues[s->queue] : "(other)";
    SluiceTaskMetrics *t = sluice_worker_metrics_add_task(out, s->task, queue);

    t->started = s->started;
    t->succeeded = s->succeeded;
    t->failed = s->failed;
    t->retried = s->retried;
    t->dead_lettered = s->dead_lettered;
    for (guint r = 0; r < METRICS_REASONS; r++)
      if (s->dead_by_reason[r] > 0) {
        guint64 *count = g_new(guint64, 1);
        *count = s->dead_by_reason[r];
        g_hash_table_insert(t->dead_lettered_by_reason,
                            g_strdup(sluice_dead_letter_reasons()[r]), count);
      }
    t->cancelled = s->cancelled;
    t->released = s->released;
    t->deferred = s->deferred;
    histogram_fill(&t->duration, &s->duration, 1e6);
    histogram_fill(&t->latency, &s->latency, 1e3);
  }
}

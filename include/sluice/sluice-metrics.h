/* sluice-metrics.h - what a worker did and holds, for a metrics system.
 *
 * A worker counts, per task name and queue, the tasks it started and how
 * their deliveries were settled, and keeps two histograms: how long the
 * task functions ran and how long tasks waited to start. With the gauges
 * of the moment (running, held, prefetched, executor slots, whether the
 * broker is reachable) and its other counters, sluice_worker_get_metrics()
 * copies them into a snapshot:
 *
 *     SluiceWorkerMetrics m;
 *     sluice_worker_get_metrics (worker, &m);
 *     g_autofree gchar *text = sluice_worker_metrics_to_prometheus (&m);
 *     sluice_worker_metrics_clear (&m);
 *
 * `sluice worker --metrics-listen` serves that text on /metrics; a program
 * with its own HTTP server serves it the same way, and one that exports
 * elsewhere (OpenTelemetry, StatsD) reads the snapshot's fields.
 *
 * Collecting adds no lock and no allocation to a task's path: the start is
 * counted in the critical section the executor already enters for the
 * worker's own counters, and everything else by the settler thread, once
 * per batch of settlements, under a lock that only a snapshot also takes.
 *
 * Cardinality is bounded: a series exists per (task, queue) pair that
 * received a delivery, where the task is a registered name, or
 * SLUICE_METRICS_TASK_UNREGISTERED for every name no task is registered
 * under (deferred, then buried unknown_task), or
 * SLUICE_METRICS_TASK_UNDECODABLE for messages that did not decode; the
 * queue is one the worker takes from. Task ids never become labels.
 *
 * Namespace-wide figures (queue depths, the schedule, dead letters,
 * workers alive) are the broker's: sluice_broker_stats_to_prometheus()
 * renders a sluice_client_get_stats() snapshot (`sluice exporter`).
 */
#pragma once

#include <sluice/sluice-brokers.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-worker.h>

G_BEGIN_DECLS

#define SLUICE_METRICS_TASK_UNREGISTERED "(unregistered)"
#define SLUICE_METRICS_TASK_UNDECODABLE "(undecodable)"

/**
 * SluiceHistogram:
 * @n_bounds: how many upper bounds
 * @bounds: (array length=n_bounds): the buckets' upper bounds in seconds,
 *   ascending; static, shared by every histogram of one kind
 * @buckets: (array length=n_bounds+1): observations per bucket, not
 *   cumulative: buckets[i] counts those in (bounds[i-1], bounds[i]],
 *   buckets[n_bounds] those above the last bound
 * @count: observations in all
 * @sum: their sum, in seconds
 */
typedef struct {
  guint n_bounds;
  const gdouble *bounds;
  guint64 *buckets;
  guint64 count;
  gdouble sum;
} SluiceHistogram;

/**
 * SluiceTaskMetrics:
 * @task: the task name (see the top of this file for the two names that
 *   are not registered ones)
 * @queue: the queue the deliveries came from
 * @started: task functions started
 * @succeeded: settled as succeeded
 * @failed: attempts that failed (an error, a timeout, a lost child
 *   process), whether they were retried, buried or recorded failed
 * @retried: failed attempts put back on the schedule for another one
 * @dead_lettered: buried in the dead-letter queue, for any reason
 * @dead_lettered_by_reason: (element-type utf8 guint64): the same by
 *   reason (SLUICE_DLQ_*); values are guint64 pointers
 * @cancelled: revoked, before or while running
 * @released: given back by a stop, for another worker to run
 * @deferred: deferred because no task of that name was registered
 * @duration: how long the task functions ran (from their start to their
 *   return; a task settled by its timeout counts until then)
 * @latency: from when the task was ready (enqueued, or due when it was
 *   delayed or retried) to its start, by the clocks of the producer and of
 *   the worker (millisecond resolution)
 *
 * Only settlements the broker accepted are counted; those it refused are
 * SluiceWorkerStats.stale_settles. Owned by the SluiceWorkerMetrics that
 * holds it.
 */
typedef struct {
  gchar *task;
  gchar *queue;
  guint64 started;
  guint64 succeeded;
  guint64 failed;
  guint64 retried;
  guint64 dead_lettered;
  GHashTable *dead_lettered_by_reason;
  guint64 cancelled;
  guint64 released;
  guint64 deferred;
  SluiceHistogram duration;
  SluiceHistogram latency;
} SluiceTaskMetrics;

/**
 * SluiceWorkerMetrics:
 * @worker_id: the worker's id
 * @broker: the broker's name ("memory", "redis-reliable", ...)
 * @started_at_ms: when the worker started (ms since epoch); 0 before
 * @concurrency: executor slots
 * @running: task functions running now
 * @held: deliveries fetched and not yet settled (running ones included)
 * @prefetched: deliveries fetched and waiting for an executor
 * @broker_reachable: FALSE during an outage (from the first failed call
 *   that found the broker unreachable to the next call that succeeded)
 * @broker_errors: broker calls that failed, of any kind
 * @broker_outages: outages begun
 * @stats: the worker's counters (sluice_worker_get_stats())
 * @tasks: (element-type SluiceTaskMetrics): per task and queue, by task
 *   name, then in the worker's queue order
 *
 * Fill with sluice_worker_get_metrics(), or sluice_worker_metrics_init()
 * and by hand; free what it holds with sluice_worker_metrics_clear().
 */
typedef struct {
  gchar *worker_id;
  gchar *broker;
  gint64 started_at_ms;
  guint concurrency;
  guint running;
  guint held;
  guint prefetched;
  gboolean broker_reachable;
  guint64 broker_errors;
  guint64 broker_outages;
  SluiceWorkerStats stats;
  GPtrArray *tasks;
} SluiceWorkerMetrics;

/** sluice_worker_metrics_init: all zero, an empty @tasks, reachable. */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_metrics_init(SluiceWorkerMetrics *metrics);

/** sluice_worker_metrics_clear: frees what @metrics holds (not @metrics). */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_metrics_clear(SluiceWorkerMetrics *metrics);

/**
 * sluice_worker_metrics_add_task:
 * @task, @queue: copied
 * Appends an all-zero series with the worker's histogram buckets (for
 * tests, and for programs that merge snapshots).
 * Returns: (transfer none): the series, owned by @metrics.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceTaskMetrics *sluice_worker_metrics_add_task(SluiceWorkerMetrics *metrics,
                                                  const gchar *task,
                                                  const gchar *queue);

/**
 * sluice_worker_get_metrics:
 * @out: (out caller-allocates): clear with sluice_worker_metrics_clear()
 *
 * Copies the worker's metrics. Thread-safe, and cheap enough for every
 * scrape: a copy of the counters under the locks that guard them.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_get_metrics(SluiceWorker *worker, SluiceWorkerMetrics *out);

/**
 * sluice_worker_metrics_to_prometheus:
 * Returns: (transfer full): @metrics in the Prometheus text exposition
 * format (version 0.0.4; serve it as "text/plain; version=0.0.4"), every
 * family with its HELP and TYPE lines. The names are listed in
 * docs/observability.md.
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_worker_metrics_to_prometheus(const SluiceWorkerMetrics *metrics);

/**
 * sluice_broker_stats_to_prometheus:
 * @stats: what sluice_client_get_stats() returned
 * Returns: (transfer full): the namespace's gauges in the Prometheus text
 * exposition format: ready messages per queue, scheduled, in flight (left
 * out when the broker cannot tell), dead letters by reason, dead letters
 * dropped by the cap, workers alive and seen, stale settles.
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_broker_stats_to_prometheus(const SluiceBrokerStats *stats);

G_END_DECLS

/* sluice-worker.h - the consumer: runs registered tasks from a broker.
 *
 * A worker has threads with one job each:
 *   - a fetcher takes messages from the broker, never more than free
 *     executor slots plus the prefetch allowance;
 *   - an executor pool of @concurrency threads runs task functions;
 *   - a settler hands finished deliveries back to the broker in batches;
 *   - a housekeeping thread (its own GMainContext) promotes due scheduled
 * messages, syncs revocations, renews leases and reclaims dead workers'
 * messages (brokers with leases), dispatches periodic tasks and enforces task
 *     timeouts.
 * Nothing polls in a loop: each thread blocks on the broker, on a GCond or
 * on its main loop.
 *
 * The worker is the same for every broker; only what the broker's
 * capabilities allow differs (lease renewal and reclaim need
 * SLUICE_BROKER_CAP_LEASES).
 *
 * Stopping is graceful: sluice_worker_stop() (or SIGTERM/SIGINT after
 * sluice_worker_handle_signals()) stops fetching, gives back every message
 * not started yet, waits up to @shutdown_timeout_ms for running tasks, then
 * cancels the ones still running and gives their messages back for
 * redelivery. Nothing it fetched is lost by a stop.
 */
#pragma once

#include <sluice/sluice-brokers.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-policy.h>
#include <sluice/sluice-task.h>

G_BEGIN_DECLS

#define SLUICE_WORKER_ERROR (sluice_worker_error_quark())
SLUICE_AVAILABLE_IN_0_1
GQuark sluice_worker_error_quark(void);

/**
 * SluiceWorkerError:
 * @SLUICE_WORKER_ERROR_FAILED: anything else (also any unknown code)
 * @SLUICE_WORKER_ERROR_INVALID: a bad option
 * @SLUICE_WORKER_ERROR_STATE: started twice, or used after stop
 * @SLUICE_WORKER_ERROR_TIMEOUT: run_until_idle gave up waiting
 * @SLUICE_WORKER_ERROR_UNSUPPORTED: the broker cannot do what was asked
 */
typedef enum {
  SLUICE_WORKER_ERROR_FAILED,
  SLUICE_WORKER_ERROR_INVALID,
  SLUICE_WORKER_ERROR_STATE,
  SLUICE_WORKER_ERROR_TIMEOUT,
  SLUICE_WORKER_ERROR_UNSUPPORTED,
} SluiceWorkerError;

#define SLUICE_DEFAULT_MAX_DELIVERIES 5
#define SLUICE_DEFAULT_UNKNOWN_TASK_TIMEOUT_MS (10 * 60 * 1000)
#define SLUICE_DEFAULT_UNKNOWN_TASK_DEFER_MS 5000
#define SLUICE_DEFAULT_VISIBILITY_TIMEOUT_MS 30000
#define SLUICE_DEFAULT_SHUTDOWN_TIMEOUT_MS 30000
#define SLUICE_DEFAULT_REVOCATION_INTERVAL_MS 1000
#define SLUICE_DEFAULT_SCHEDULE_POLL_INTERVAL_MS 500

/**
 * SluiceWorkerOptions:
 * @queues: (nullable) (array zero-terminated=1): queue names, highest
 *   priority first; NULL = { "default" }. Copied.
 * @concurrency: executor threads (>= 1)
 * @prefetch: messages held beyond @concurrency, ready to start (>= 0)
 * @worker_id: (nullable): unique name of this worker (the consumer name on
 *   the broker); NULL = "<hostname>-<pid>-<random>"
 * @retry: the global level of the retry policy
 * @max_deliveries: bury `max_deliveries` past this many deliveries
 *   (brokers with leases)
 * @unknown_task_timeout_ms: bury an unregistered task name after this long
 * @unknown_task_defer_ms: how long an unregistered task is deferred each
 *   time it is met
 * @visibility_timeout_ms: the lease; renewed every third of it
 * @shutdown_timeout_ms: how long a stop waits for running tasks
 * @result_ttl_ms: default lifetime of records
 * @track_state: write running/retrying records
 * @revocation_interval_ms: how often revocations are re-read
 * @schedule_poll_interval_ms: the longest the promoter sleeps
 * @settle_batch: the most settlements sent to the broker at once
 *
 * Initialise with sluice_worker_options_init(), which sets the defaults of
 * DESIGN.md; the worker copies the struct.
 */
typedef struct {
  const gchar *const *queues;
  guint concurrency;
  guint prefetch;
  const gchar *worker_id;
  SluiceRetryPolicy retry;
  guint max_deliveries;
  gint64 unknown_task_timeout_ms;
  gint64 unknown_task_defer_ms;
  gint64 visibility_timeout_ms;
  gint64 shutdown_timeout_ms;
  gint64 result_ttl_ms;
  gboolean track_state;
  gint64 revocation_interval_ms;
  gint64 schedule_poll_interval_ms;
  guint settle_batch;
} SluiceWorkerOptions;

SLUICE_AVAILABLE_IN_0_1
void sluice_worker_options_init(SluiceWorkerOptions *options);

/**
 * SluiceWorkerStats:
 * Counters since the worker started.
 * @started: task functions started
 * @succeeded, @failed_attempts, @retried, @dead_lettered, @cancelled,
 * @deferred, @released: outcomes settled
 * @timed_out: tasks that overran their timeout
 * @stale_settles: settles the broker refused (fencing)
 * @leases_lost: times a lease could not be renewed in time
 * @reclaimed: deliveries taken over from dead workers
 * @peak_running: the most task functions running at once
 * @late_results_discarded: results of tasks that returned after their
 *   timeout or after the stop released them
 */
typedef struct {
  guint64 started;
  guint64 succeeded;
  guint64 failed_attempts;
  guint64 retried;
  guint64 dead_lettered;
  guint64 cancelled;
  guint64 deferred;
  guint64 released;
  guint64 timed_out;
  guint64 stale_settles;
  guint64 leases_lost;
  guint64 reclaimed;
  guint peak_running;
  guint64 late_results_discarded;
} SluiceWorkerStats;

typedef struct _SluiceWorker SluiceWorker;

/**
 * sluice_worker_new:
 * @broker: (transfer none): referenced by the worker
 * @registry: (transfer none): referenced by the worker
 * @options: (nullable): copied; NULL = defaults
 * Returns: (transfer full): a worker, not started; or NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceWorker *sluice_worker_new(SluiceBroker *broker, SluiceRegistry *registry,
                                const SluiceWorkerOptions *options,
                                GError **error);
SLUICE_AVAILABLE_IN_0_1
SluiceWorker *sluice_worker_ref(SluiceWorker *worker);

/**
 * sluice_worker_unref:
 * The last reference stops a running worker (as sluice_worker_stop()).
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_unref(SluiceWorker *worker);

/** sluice_worker_get_id: Returns: (transfer none): the worker's id. */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_worker_get_id(SluiceWorker *worker);

/**
 * sluice_worker_start:
 * Starts the threads and returns. A worker starts once.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_worker_start(SluiceWorker *worker, GError **error);

/**
 * sluice_worker_request_stop:
 * Asks for a graceful stop and returns at once. Thread-safe.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_request_stop(SluiceWorker *worker);

/**
 * sluice_worker_wait:
 * Blocks until the worker has stopped (after a request_stop, a signal, or
 * sluice_worker_stop() from another thread).
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_wait(SluiceWorker *worker);

/**
 * sluice_worker_stop:
 * Graceful stop (see the top of this file); returns when it is complete.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_stop(SluiceWorker *worker);

/**
 * sluice_worker_handle_signals:
 * Makes SIGTERM and SIGINT request a graceful stop of @worker (through
 * g_unix_signal_add() on the worker's housekeeping context). Call before
 * sluice_worker_start(). Only one worker per process should do this.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_worker_handle_signals(SluiceWorker *worker, GError **error);

/**
 * sluice_worker_run_until_idle:
 * @timeout_ms: give up after this much real time (< 0 = never)
 *
 * Starts the worker if needed and returns when it is idle: every listed
 * queue is empty, nothing is running or waiting to be settled, and nothing
 * on the schedule is due by the clock's current time. Work scheduled later
 * (a backoff, a delay) stays scheduled: with a fake clock, advance it and
 * call this again. Meant for tests; the worker keeps running afterwards.
 * Returns: TRUE, or FALSE and SLUICE_WORKER_ERROR_TIMEOUT.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_worker_run_until_idle(SluiceWorker *worker, gint64 timeout_ms,
                                      GError **error);

/** sluice_worker_get_stats: copies the counters into @out. */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_get_stats(SluiceWorker *worker, SluiceWorkerStats *out);

/* ---- Periodic tasks -------------------------------------------------------
 */

/**
 * SluiceMissedPolicy:
 * What a starting scheduler does with occurrences that fell due while no
 * scheduler was running:
 * @SLUICE_MISSED_SKIP: nothing; the next occurrence is the next in future
 * @SLUICE_MISSED_ONCE: dispatch the latest missed occurrence once
 * @SLUICE_MISSED_ALL: dispatch each missed occurrence, up to @missed_max
 */
typedef enum {
  SLUICE_MISSED_SKIP,
  SLUICE_MISSED_ONCE,
  SLUICE_MISSED_ALL,
} SluiceMissedPolicy;

/**
 * SluicePeriodicOptions:
 * @name: the schedule's unique name (the key of its compare-and-set)
 * @task: the task to enqueue
 * @args: (nullable): its arguments (msgpack)
 * @queue: (nullable): NULL = the task's queue or "default"
 * @interval_ms: every this long, aligned to the epoch; or 0 and @cron
 * @cron: (nullable): a five-field cron expression, evaluated in UTC
 *   ("*\/15 9-17 * * 1-5"): minute hour day-of-month month day-of-week
 * @missed: see SluiceMissedPolicy
 * @missed_max: the most occurrences SLUICE_MISSED_ALL dispatches (0 = 100)
 *
 * Each occurrence becomes a task with the deterministic id
 * "periodic:<name>:<due ms>", enqueued through the broker's compare-and-set,
 * so any number of workers running the same schedule dispatch it once.
 */
typedef struct {
  const gchar *name;
  const gchar *task;
  GBytes *args;
  const gchar *queue;
  gint64 interval_ms;
  const gchar *cron;
  SluiceMissedPolicy missed;
  guint missed_max;
} SluicePeriodicOptions;

SLUICE_AVAILABLE_IN_0_1
void sluice_periodic_options_init(SluicePeriodicOptions *options);

/**
 * sluice_worker_add_periodic:
 * @options: copied
 * Adds a schedule. Call before sluice_worker_start().
 * Returns: FALSE with SLUICE_WORKER_ERROR_INVALID for a bad interval/cron,
 * or _UNSUPPORTED when the broker has no compare-and-set for periodic tasks.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_worker_add_periodic(SluiceWorker *worker,
                                    const SluicePeriodicOptions *options,
                                    GError **error);

/**
 * sluice_cron_next:
 * @cron: a five-field expression (see SluicePeriodicOptions)
 * @after_ms: a time, negative (before 1970) or not, from 0001-01-01T00:00Z
 *   minus 1 ms to 9999-12-31T23:59:59.999Z (the years GDateTime can name)
 * @out_next_ms: (out): the first minute strictly after @after_ms that
 *   matches, in ms since the epoch
 * Returns: FALSE with SLUICE_WORKER_ERROR_INVALID for a bad expression, a
 * time outside the range, an expression that matches no date within five
 * years (30 February) or none before 9999-12-31T23:59Z.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_cron_next(const gchar *cron, gint64 after_ms,
                          gint64 *out_next_ms, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceWorker, sluice_worker_unref)

G_END_DECLS

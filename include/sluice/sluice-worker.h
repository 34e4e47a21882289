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
#include <sluice/sluice-flow.h>
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
#define SLUICE_DEFAULT_PREFETCH 256
#define SLUICE_PREFETCH_AHEAD_MS 100
#define SLUICE_DEFAULT_SCHEDULE_POLL_INTERVAL_MS 500

/**
 * SluiceIsolation:
 * @SLUICE_ISOLATION_THREAD: task functions run on the worker's executor
 *   threads (the default): the least overhead, for trusted code; a crash
 *   in a task takes the worker down, and a task that ignores its
 *   cancellable keeps its thread
 * @SLUICE_ISOLATION_PROCESS: each executor slot runs its tasks in a child
 *   process: a task that crashes costs one failed attempt, a hung one is
 *   killed at its hard timeout, and memory is bounded per child; for
 *   untrusted or crash-prone code and native libraries. The children are
 *   forked, at sluice_worker_start(), from a process that holds the
 *   registry's functions (see docs/isolation.md)
 */
typedef enum {
  SLUICE_ISOLATION_THREAD,
  SLUICE_ISOLATION_PROCESS,
} SluiceIsolation;

#define SLUICE_DEFAULT_CANCEL_GRACE_MS 2000

/**
 * SluiceWorkerOptions:
 * @queues: (nullable) (array zero-terminated=1): queue names, highest
 *   priority first; NULL = { "default" }. Copied.
 * @concurrency: executor threads (>= 1)
 * @prefetch: the most messages held beyond @concurrency, ready to start
 *   (>= 0). The worker holds fewer when tasks are slow: about
 *   SLUICE_PREFETCH_AHEAD_MS of work beyond what runs, measured from the
 *   tasks' own durations, so fast tasks are fetched and settled in large
 *   batches and slow ones are left for idle peers
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
 * @log_each_task: log one line (INFO) per finished task: id, task, queue,
 *   attempt, outcome and run time, and for a retry its delay ("demo.fail
 *   failed in 0.010 ms; will retry in 1500 ms"); fields SLUICE_OUTCOME
 *   (one word: succeeded, failed, retry, dead_lettered, cancelled,
 *   deferred, released, snoozed, rate_wait, slot_wait), SLUICE_DURATION_US
 *   and SLUICE_DELAY_MS; default off (a program decides its own logging;
 *   `sluice worker` turns it on)
 * @isolation: where task functions run (see SluiceIsolation)
 * @hard_timeout_ms: process isolation: a child still running a task this
 *   long after it started is killed (SIGKILL) and the attempt fails as
 *   timed out; 0 = none. Tasks (SluiceTaskOptions) may set their own.
 * @cancel_grace_ms: how long a cancelled task (timed out, revoked, or
 *   still running at the shutdown timeout) may take to return: past it,
 *   in process isolation its child is killed, in thread mode the stop
 *   leaves its thread behind; default SLUICE_DEFAULT_CANCEL_GRACE_MS
 * @max_tasks_per_child: process isolation: replace a child after this many
 *   tasks; 0 = never
 * @max_rss_per_child: process isolation: replace a child whose resident
 *   memory is above this many bytes after a task; 0 = never
 * @memory_limit_per_child: process isolation: the most memory a child may
 *   use while it runs a task, in bytes: one above it is killed and its
 *   attempt fails; 0 = no limit
 * @queue_rate_limits: (array length=n_queue_rate_limits) (nullable): rate
 *   limits of queues (copied; checked by sluice_worker_new(), which names
 *   the bad field); a task's own rate_limit replaces its queue's. Every
 *   worker of a queue should be given the same limit: each applies the
 *   one it was given, on buckets the broker shares
 * @n_queue_rate_limits: how many
 * @queue_concurrency_limits: (array length=n_queue_concurrency_limits)
 *   (nullable): concurrency limits of queues, across every worker (copied,
 *   checked as the rate limits are); a task's own replaces its queue's
 * @n_queue_concurrency_limits: how many
 * @queue_weights: (array) (nullable): one weight (>= 1) per queue of
 *   @queues, in its order (copied): fetches are then shared among the
 *   queues in proportion to their weights (weighted fair queues: a queue
 *   of weight 3 comes first in 3 fetches of every 4 against one of weight
 *   1, and a fetch that finds its first queue empty takes from the
 *   others, so none starves and none waits while another is idle); NULL =
 *   strict priority order
 *
 * @events: write the lifecycle events of the tasks it runs
 *   (started, progress, retried and the final ones) to the namespace's
 *   event stream (sluice-events.h); default FALSE
 * @keyring: (nullable): opens sealed args for the task (a message whose
 *   seal does not open is dead-lettered `malformed`, "cannot decrypt: ...",
 *   and never run), seals the result of a sealed message, and seals what
 *   the worker sends itself (periodic occurrences, a retry's new message)
 *   with its current key (sluice-seal.h); the worker takes a reference.
 *   NULL = a sealed message cannot be run
 *
 * Initialise with sluice_worker_options_init(), which sets the defaults
 * listed in docs/configuration.md; the worker copies the struct.
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
  gboolean log_each_task;
  SluiceIsolation isolation;
  gint64 hard_timeout_ms;
  gint64 cancel_grace_ms;
  guint max_tasks_per_child;
  guint64 max_rss_per_child;
  guint64 memory_limit_per_child;
  gboolean events;
  const SluiceQueueRateLimit *queue_rate_limits;
  guint n_queue_rate_limits;
  const SluiceQueueConcurrencyLimit *queue_concurrency_limits;
  guint n_queue_concurrency_limits;
  const guint *queue_weights;
  SluiceKeyring *keyring;
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
 * @children_started: process isolation: child processes started
 * @children_lost: process isolation: children that died or were killed
 *   while running a task
 * @snoozed: runs that snoozed (sluice_task_context_snooze() or
 *   sluice_task_context_rate_limited()) and went back on the schedule
 * @rate_waits: messages fetched over their rate limit and put back on the
 *   schedule until their bucket admits them
 * @slot_waits: messages fetched while every concurrency slot of their key
 *   was taken, put back on the schedule until a slot frees
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
  guint64 children_started;
  guint64 children_lost;
  guint64 snoozed;
  guint64 rate_waits;
  guint64 slot_waits;
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
 * Checks the broker (sluice_broker_check: a namespace used in the other
 * mode, refused credentials fail the start; a broker that is unreachable
 * is waited out, with one log line), starts the threads and returns. A
 * worker starts once.
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
 * sluice_worker_stop_now:
 * Asks for an immediate stop and returns at once: running tasks are
 * cancelled and given back for redelivery without waiting for
 * shutdown_timeout (only one that does not return within cancel_grace_ms
 * of its cancellation is logged as ignoring it), and settling gives up at
 * the first failure. What a second SIGTERM/SIGINT does after
 * sluice_worker_handle_signals(). Thread-safe.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_stop_now(SluiceWorker *worker);

/**
 * sluice_worker_stopped_forcibly:
 * Returns: TRUE when the stop was forced (sluice_worker_stop_now() or a
 * second signal), so a program can exit with a failure status.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_worker_stopped_forcibly(SluiceWorker *worker);

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
 * @cancellable: (nullable): stops the wait at once with
 *   G_IO_ERROR_CANCELLED (the worker keeps running)
 *
 * Starts the worker if needed and returns when it is idle: every listed
 * queue is empty, nothing is running or waiting to be settled, and nothing
 * on the schedule is due by the clock's current time. Every task settled
 * by then is all there: its record in the broker, its outcome in
 * sluice_worker_get_stats() and sluice_worker_get_metrics(), and its line
 * with log_each_task. Work scheduled later
 * (a backoff, a delay) stays scheduled: with a fake clock, advance it and
 * call this again. Meant for tests; the worker keeps running afterwards.
 * Returns: TRUE, or FALSE and SLUICE_WORKER_ERROR_TIMEOUT.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_worker_run_until_idle(SluiceWorker *worker, gint64 timeout_ms,
                                      GCancellable *cancellable,
                                      GError **error);

/**
 * SluiceWorkerTickFunc:
 * Called on the worker's housekeeping thread (see sluice_worker_add_tick()).
 */
typedef void (*SluiceWorkerTickFunc)(SluiceWorker *worker, gpointer user_data);

/**
 * sluice_worker_add_tick:
 * @interval_ms: how often
 * @func: (scope notified): called every @interval_ms on the thread that
 *   renews leases, promotes due work and syncs revocations, from the
 *   worker's start until its stop; keep it short. A service manager's
 *   watchdog pinged from here restarts a worker whose housekeeping is
 *   stuck.
 * @destroy: (nullable): frees @user_data when the worker is freed
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_add_tick(SluiceWorker *worker, guint interval_ms,
                            SluiceWorkerTickFunc func, gpointer user_data,
                            GDestroyNotify destroy);

/** sluice_worker_get_stats: copies the counters into @out. */
SLUICE_AVAILABLE_IN_0_1
void sluice_worker_get_stats(SluiceWorker *worker, SluiceWorkerStats *out);

/* ---- Periodic tasks ------------------------------------------------------ */

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
 * SluiceOverlapPolicy:
 * What a schedule does when an occurrence falls due while its previous
 * one has not finished:
 * @SLUICE_OVERLAP_ALLOW: dispatch it anyway (the default)
 * @SLUICE_OVERLAP_SKIP: skip it while the previous occurrence is queued,
 *   scheduled (waiting for a retry) or running; the next occurrence looks
 *   again. The previous one is known by its id ("periodic:<name>:<ms>"
 *   of the last occurrence the broker recorded) and its record: each
 *   occurrence is enqueued with a `queued` record, which its worker
 *   replaces with the final one, so the task must store its result
 *   (store_result, the default). A record lives result_ttl (24 h): an
 *   occurrence lost with a redis-fast worker holds the schedule back that
 *   long at most.
 */
typedef enum {
  SLUICE_OVERLAP_ALLOW,
  SLUICE_OVERLAP_SKIP,
} SluiceOverlapPolicy;

/**
 * SluicePeriodicOptions:
 * @name: the schedule's unique name (the key of its compare-and-set)
 * @task: the task to enqueue
 * @args: (nullable): its arguments (msgpack)
 * @queue: (nullable): NULL = the task's queue or "default"
 * @interval_ms: every this long, aligned to the epoch; or 0 and @cron
 * @cron: (nullable): a five-field cron expression ("*\/15 9-17 * * 1-5"):
 *   minute hour day-of-month month day-of-week, in @timezone
 * @missed: see SluiceMissedPolicy
 * @missed_max: the most occurrences SLUICE_MISSED_ALL dispatches (0 = 100)
 * @timezone: (nullable): the time zone @cron is read in, an
 *   IANA name ("Europe/Berlin"; the system's tzdata) or an offset
 *   ("+02:00"); NULL = UTC. When the clocks go forward, a time in the
 *   skipped hour runs once, at the first instant after it (02:30 runs at
 *   03:00); when they go back, a time in the repeated hour runs once, at
 *   its first occurrence. Only for @cron: interval schedules are aligned
 *   to the epoch, in no zone.
 * @overlap: see SluiceOverlapPolicy
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
  const gchar *timezone;
  SluiceOverlapPolicy overlap;
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
 *   matches, in UTC, in ms since the epoch (for another zone see
 *   sluice_periodic_next_occurrence())
 * Returns: FALSE with SLUICE_WORKER_ERROR_INVALID for a bad expression, a
 * time outside the range, an expression that matches no date within five
 * years (30 February) or none before 9999-12-31T23:59Z.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_cron_next(const gchar *cron, gint64 after_ms,
                          gint64 *out_next_ms, GError **error);

/**
 * sluice_periodic_next_occurrence:
 * @options: a schedule, as for sluice_worker_add_periodic()
 * @after_ms: a time (ms since epoch)
 * @out_next_ms: (out): the schedule's first occurrence strictly after
 *   @after_ms
 * Returns: FALSE with SLUICE_WORKER_ERROR_INVALID for a bad schedule (the
 * message says what to change), or one that never occurs again.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_periodic_next_occurrence(const SluicePeriodicOptions *options,
                                         gint64 after_ms, gint64 *out_next_ms,
                                         GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceWorker, sluice_worker_unref)

G_END_DECLS

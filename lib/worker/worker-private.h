/* worker-private.h - the worker's types, shared by its files (internal).
 *
 * A worker is a handful of threads, each with one job and one file:
 *
 *   fetcher.c       fetch deliveries, dispatch them (or settle them at
 *                   once: malformed, expired, revoked, unknown, too many
 *                   deliveries), hand them to the executors; quarantine
 *   executor.c      run task functions, `concurrency` threads
 *   settler.c       send settlements to the broker in batches, retrying
 *                   while it is away
 *   housekeeping.c  one GMainContext thread: promotion, revocation sync,
 *                   lease renewal and announcements, the reclaim decision,
 *                   the timeout watchdog, periodic schedules, signals
 *   worker.c        options, lifecycle, the stop sequence, run_until_idle
 *
 * and what they share: job.c (a delivery in the worker), outcome.c (what
 * is decided about a delivery: the settlement it becomes), revocations.c
 * and pause.c (what housekeeping syncs from the broker for the fetcher),
 * trouble.c (what the worker says when the broker fails) and lib/metrics.c
 * (what it counts per task and queue, for sluice-metrics.h).
 *
 * A message's life in a worker:
 *
 *   fetch ──> dispatch ──> executors ──> outcome ──> settler ──> broker
 *               │                                      ^
 *               └── malformed / expired / revoked / ───┘
 *                   unknown task / too many deliveries
 *
 * Every delivery becomes a Job. A job is settled exactly once: whoever wins
 * job->settle_claimed (the executor when the task returns, the watchdog when
 * it overruns its timeout, the stop sequence when it releases it) builds the
 * settlement; the losers only log. The executor and the stop sequence race
 * for a queued job through job->phase (QUEUED -> RUNNING or RELEASED).
 *
 * The fetcher never holds more than concurrency + prefetch jobs (fetched and
 * not yet settled); the executors run at most `concurrency` task functions.
 * Settlements go through one GAsyncQueue to the settler, which sends them
 * to the broker in batches and retries them while the broker is away: a
 * finished task is never forgotten because Redis blinked.
 *
 * Housekeeping runs on its own thread, so task code can never block it.
 * With a fake clock, advancing the clock wakes it.
 *
 * Reference counting: users hold `ref_count`; threads, jobs and pending
 * settlements hold `core_refs`. The last user reference stops the worker; the
 * memory goes with the last core reference, which a task stuck past its
 * timeout may hold for a while (C threads cannot be killed).
 */
#pragma once

#include "lib/sluice-private.h"

G_BEGIN_DECLS

#define FETCH_BLOCK_MS 1000
#define OUTAGE_BACKOFF_MIN_MS 50
#define OUTAGE_BACKOFF_MAX_MS 5000

typedef enum {
  WORKER_NEW,
  WORKER_RUNNING,
  WORKER_STOPPING,
  WORKER_STOPPED,
} WorkerState;

typedef enum {
  JOB_QUEUED,
  JOB_RUNNING,
  JOB_RELEASED,
} JobPhase;

/* What a settlement counts as, for the worker's statistics. */
typedef enum {
  KIND_SUCCEEDED,
  KIND_FAILED,
  KIND_RETRIED,
  KIND_DEAD_LETTERED,
  KIND_CANCELLED,
  KIND_DEFERRED,       /* a task name this worker has not registered */
  KIND_DEFERRED_NEWER, /* an envelope version newer than this build reads */
  KIND_RELEASED,
  KIND_RUNNING,   /* not a settlement: the `running` record, sent in batch */
  KIND_EVENT,     /* not a settlement: an event (started, progress) */
  KIND_SNOOZED,   /* the task asked to run later (snooze, 429) */
  KIND_RATE_WAIT, /* over its rate limit when fetched: waits its turn */
  KIND_SLOT_WAIT, /* every concurrency slot taken: waits for a release */
} SettleKind;

typedef struct _Job Job;

/* ---- Metrics (metrics.c) --------------------------------------------------
 * One series per (task, queue) that received a delivery. The histograms'
 * sums are whole units (durations in us, latencies in ms): exact, and
 * cheaper than floating point. */
#define METRICS_DURATION_BOUNDS 21
#define METRICS_LATENCY_BOUNDS 18
#define METRICS_REASONS SLUICE_DLQ_N_REASONS /* sluice_dead_letter_reasons() */

typedef struct {
  guint64 buckets[METRICS_DURATION_BOUNDS + 1]; /* the larger of the two */
  guint64 count;
  guint64 sum;
} MetricsHistogram;

typedef struct {
  const gchar *task; /* the entry's name (the worker holds the registry),
                        or a label of sluice-metrics.h */
  guint queue;       /* index into worker->queues; n_queues for another */
  guint64 started;   /* under worker->lock: the executor's start section */
  /* Under metrics_lock, written by the settler: */
  guint64 succeeded;
  guint64 failed;
  guint64 retried;
  guint64 dead_lettered;
  guint64 dead_by_reason[METRICS_REASONS];
  guint64 cancelled;
  guint64 released;
  guint64 deferred;
  MetricsHistogram duration; /* us */
  MetricsHistogram latency;  /* ms */
} MetricsSeries;

struct _SluiceWorker {
  gatomicrefcount ref_count;
  gatomicrefcount core_refs;

  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceClock *clock;
  SluiceWorkerOptions options;
  gchar **queues;
  gchar *id;
  guint capacity; /* concurrency + prefetch: the most ever held */
  SluiceDecodeLimits limits;

  GMutex lock; /* guards everything below up to `stats` */
  GCond cond;  /* broadcast on every change of state, held, running */
  WorkerState state;
  gboolean stop_requested;
  gboolean stop_driver;    /* a thread is running the stop sequence */
  gboolean accepting;      /* dispatch still accepts deliveries */
  guint held;              /* fetched, not yet settled */
  guint running;           /* task functions running */
  gboolean running_waited; /* the stop sequence waits for running == 0 */
  GHashTable *jobs;        /* Job* (held) */
  guint64 settle_gen;
  guint64 idle_request_gen;
  guint64 idle_done_gen;
  gint64 earliest_deadline; /* of running jobs, clock ms; 0 = none */
  gdouble task_us;          /* moving average of task run times; 0 = none */
  SluiceWorkerStats stats;
  GRand *rand;

  GThread *fetcher;
  GThread *settler;
  GThread *housekeeper;
  /* The executors' ready queue; guarded by exec_lock, not `lock`, so the
   * hand-over does not contend with settling. */
  GMutex exec_lock;
  GCond exec_cond;
  GQueue ready;    /* Job*, each holding a reference */
  guint exec_idle; /* executors waiting on exec_cond */
  gboolean exec_stop;
  GPtrArray *executors;      /* GThread* */
  gint next_slot;            /* atomic: executors number themselves */
  struct _SluicePool *pool;  /* process isolation; NULL in thread mode */
  GAsyncQueue *settle_queue; /* Pending* */

  GMainContext *context;
  gint housekeeping_quit; /* atomic */
  guint64 sync_done;      /* under lock: housekeeping syncs completed */
  GSource *promote_source;
  GSource *watchdog_source;
  GSource *periodic_source;
  guint clock_watch;
  gboolean handle_signals;

  /* Quarantine (brokers with leases): a delivery that was taken over from
   * a dead or stalled consumer (delivery_count >= 2) runs alone, so that a
   * crash is charged to the one delivery that caused it. Guarded by lock. */
  gboolean reclaim_wanted;  /* housekeeping saw something to reclaim */
  guint64 reclaim_idle_gen; /* run_until_idle request that reclaimed */
  guint suspects_held;      /* held deliveries with delivery_count >= 2 */
  GQueue quarantined;       /* Job* (a reference each): suspects not started */

  /* Outages: one line when the broker becomes unreachable, one (with the
   * duration) when it is back, whatever thread notices. */
  GMutex outage_lock;
  gint outage;          /* atomic: read without the lock on success paths */
  gint64 outage_since;  /* monotonic us */
  GHashTable *repeated; /* what -> gint64* monotonic us of its last line */

  gint signalled;    /* atomic: SIGTERM/SIGINT seen once */
  gint force_stop;   /* atomic: stop at once (a second signal, stop_now) */
  gboolean forced;   /* under lock: the stop was forced */
  gint64 started_at; /* clock ms */

  GMutex revoke_lock;
  GHashTable *revoked;  /* id -> gint64* expires_at */
  gint n_revoked;       /* atomic: size of `revoked`, read without the lock */
  gint64 revoke_cursor; /* the broker's insertion-order cursor */

  GPtrArray *periodics; /* SluicePeriodic* */
  GArray *task_hooks;   /* TaskHook (middleware.c); fixed once started */

  /* Under lock (pause.c): the queues to fetch from, `queues` minus the
   * paused ones, NULL-terminated (len counts the NULL); replaced whole, so
   * a reader keeps a reference to the list it fetches with. pause_gen
   * counts the replacements. */
  GPtrArray *active_queues;
  guint64 pause_gen;
  /* Metrics: the series are made by the fetcher (the only thread that
   * resolves them, so it looks up without the lock and inserts under it)
   * and never freed before the worker. Lock order: lock, then
   * metrics_lock; the settler never holds both. */
  GMutex metrics_lock;
  GHashTable *metrics_by_task; /* entry or label -> MetricsSeries*[] */
  GPtrArray *metrics_series;   /* MetricsSeries*, owned */
  GHashTable *queue_index;     /* queue name -> index + 1; fixed */
  guint64 broker_errors;       /* under outage_lock */
  guint64 broker_outages;      /* under outage_lock */

  /* Under lock: when the lease was last renewed (monotonic us), and until
   * when a worker back from a lost lease takes nothing over. */
  gint64 last_lease_ok_us;
  gint64 reclaim_quiet_until_us;
  /* Under lock: the last time the lease lapsed (a renewal came more than
   * a lease after the one before): when that renewal came (monotonic us;
   * 0 = never) and how long the lease had gone unrenewed (ms). A settle
   * refused as GONE for a job taken before then lost its lease. */
  gint64 last_lapse_end_us;
  gint64 last_lapse_ms;
  /* Housekeeping-thread only: */
  gboolean lease_lost;
  /* Fixed after sluice_worker_new(): queue -> SluiceRateLimit* and queue
   * -> SluiceConcurrencyLimit* (owned). */
  GHashTable *queue_rates;
  GHashTable *queue_slots;
  /* Weighted fair queues: a weight per queue of `queues` (NULL = strict
   * order), and the smooth weighted round-robin's running credit of each
   * (fetcher thread only). */
  guint *weights;
  gint64 *wrr_current;
};

struct _Job {
  gatomicrefcount ref_count;
  SluiceWorker *worker; /* holds a core reference */
  SluiceDelivery *delivery;
  SluiceEnvelope *env; /* NULL when the payload did not decode */
  const SluiceTaskEntry *entry;
  SluiceRetryPolicy policy;
  gint64 timeout_ms;
  gboolean store_result;
  gboolean dead_letter;
  gint64 result_ttl_ms;
  /* Made on first use: most tasks never look at it, and a GObject per
   * message is a measurable share of a no-op task's cost. */
  GMutex cancel_lock;
  GCancellable *cancellable;
  gboolean cancel_requested;
  gint phase;          /* JobPhase, atomic */
  gint settle_claimed; /* atomic */
  gint revoked;        /* atomic */
  gint in_task;        /* atomic: the task function is running now */
  /* Process isolation: called, under cancel_lock, on every cancellation
   * while a child runs the job (isolation-pool.c); NULL otherwise. */
  void (*on_cancel)(gpointer data);
  gpointer on_cancel_data;
  gint64 hard_timeout_ms; /* process isolation; 0 = none */
  gboolean suspect;       /* taken over once at least: runs in quarantine */
  /* The `seal` the args came with (owned), NULL for args in clear: dispatch
   * opens them into env, and what the worker writes of this task (a new
   * message, its result) is sealed again. */
  gchar *seal;
  gint64 taken_us;       /* monotonic: when the worker took the delivery */
  gint64 started_at;     /* clock ms; under worker lock */
  gint64 run_us;         /* how long the task ran; -1 = it never ran (atomic:
                  * a late task sets it after the watchdog settled it) */
  gint64 deadline;       /* clock ms; 0 = none; under worker lock */
  MetricsSeries *series; /* set by dispatch before any settlement */
  /* Process isolation: the envelope a child runs when it differs from the
   * delivered bytes (a workflow step's gathered arguments); NULL if not. */
  GBytes *run_payload;
  gint64 progress_us; /* monotonic: the last progress write; under lock */
  /* Flow control (flow.c), set by dispatch: the rate limit the job runs
   * under (the task's, else its queue's; borrowed from the registry or the
   * worker), its bucket (owned), and when the broker admitted it. */
  const SluiceRateLimit *rate;
  gchar *rate_bucket;
  gint64 admitted_at;
  /* Its concurrency limit (borrowed, like `rate`), the key of its slots
   * and its name as their holder (owned), and whether it holds one
   * (atomic: the fetcher sets it, whoever gives the slot back clears it,
   * housekeeping reads it to renew). */
  const SluiceConcurrencyLimit *slots;
  gchar *slot_key;
  gchar *slot_holder;
  gint slot_held;
  /* Set (atomic) while the job holds its "while running" uniqueness claim
   * as a lease (executor.c takes it, housekeeping renews it, the settler
   * ends it). */
  gint unique_held;
};

typedef struct {
  Job *job;
  SettleKind kind;
  SluiceSettleAction action;
  GBytes *record;
  gboolean record_final;
  GBytes *reschedule_payload;
  gint64 reschedule_at;
  gint64 reschedule_in_ms; /* reschedule_at from the time it was decided */
  SluiceDeadLetter *dead_letter;
  gboolean failed_attempt; /* the settlement follows a failed attempt */
  /* A workflow task's final outcome, for its join (workflow-run.c);
   * wf_join NULL when there is none. */
  gchar *wf_join;
  guint wf_member;
  SluiceJoinStep wf_step;
  GBytes *wf_outcome;
  /* With the events option: the event this pending writes (after its
   * settlement), and what it says. */
  GBytes *event;
  gchar *event_detail;
} Pending;

/* sluice_task_context_progress() of a job running in this process
 * (progress.c): throttled, written to the broker from the task's thread. */
void sluice_job__progress(gpointer job, gdouble fraction, const gchar *message);
/* Runs @job's task through the worker's hooks (middleware.c). */
gboolean sluice_worker__run_task(SluiceWorker *worker, Job *job,
                                 SluiceTaskContext *ctx, GError **error);
void sluice_worker__hooks_clear(SluiceWorker *worker);

/* With the events option: queues event @kind of @job for the settler. */
void sluice_outcome__event(Job *job, SluiceEventKind kind, const gchar *detail,
                           gdouble progress);

/* Pushed onto the settle queue to stop the settler; never dereferenced.
 * Defined once (settler.c), so every file compares the same address. */
extern const gchar sluice_worker__settle_stop[];
#define SETTLE_STOP ((gpointer)sluice_worker__settle_stop)

/* ---- Jobs (job.c) -------------------------------------------------------- */

Job *sluice_job__new(SluiceWorker *worker, SluiceDelivery *delivery);
void sluice_job__unref(Job *job);
/* The job's cancellable, made on first use (the task context's hook). */
GCancellable *sluice_job__cancellable(gpointer job);
void sluice_job__cancel(Job *job);
/* Process isolation: @hook (nullable) is called with @data, under the
 * job's cancel lock, on every cancellation from now on; once this returns
 * with NULL, no call is in progress. Returns whether the job was cancelled
 * already (the hook is not called for that). */
gboolean sluice_job__set_cancel_hook(Job *job, void (*hook)(gpointer data),
                                     gpointer data);

static inline Job *
job_ref(Job *job)
{
  g_atomic_ref_count_inc(&job->ref_count);
  return job;
}

/* TRUE for the one caller that may settle the job. */
static inline gboolean
job_claim(Job *job)
{
  return g_atomic_int_compare_and_exchange(&job->settle_claimed, 0, 1);
}

static inline const gchar *
job_id(Job *job)
{
  return job->env != NULL ? job->env->id : NULL;
}

static inline const gchar *
job_task(Job *job)
{
  return job->env != NULL ? job->env->task : NULL;
}

static inline guint
job_attempt(Job *job)
{
  return job->env != NULL ? job->env->attempt : 0;
}

/* ---- Outcomes (outcome.c) ------------------------------------------------ */

GBytes *sluice_outcome__record(Job *job, SluiceTaskState state, GBytes *value,
                               const gchar *error, const gchar *dlq_reason,
                               gint64 now);
void sluice_outcome__succeeded(Job *job, GBytes *result);
void sluice_outcome__dead_letter(Job *job, const gchar *reason,
                                 const gchar *detail);
void sluice_outcome__cancelled(Job *job, const gchar *why);
void sluice_outcome__release(Job *job);
void sluice_outcome__failed(Job *job, const gchar *message,
                            gint64 requested_delay_ms, gboolean fatal);
void sluice_outcome__defer_unknown(Job *job, gint64 now);
/* The job's envelope holds only what every version keeps (it came from
 * sluice_envelope__decode_header()): the delivery's bytes go back on the
 * schedule untouched, for a worker of a newer Sluice. */
void sluice_outcome__defer_newer(Job *job, gint64 now);
/* Over its rate limit: back on the schedule, due in @wait_ms, attempt and
 * snoozes untouched. */
void sluice_outcome__rate_wait(Job *job, gint64 wait_ms);
/* Every slot of its concurrency limit taken: back on the schedule until a
 * release wakes it, or @fallback_ms at the latest. */
void sluice_outcome__slot_wait(Job *job, gint64 fallback_ms);
/* The task snoozed (or reported a 429, @rate_limited): back on the
 * schedule, due in @delay_ms, same attempt, one snooze more; buried
 * `snoozed_too_often` past the task's max_snoozes. */
void sluice_outcome__snoozed(Job *job, gint64 delay_ms, gboolean rate_limited);
void sluice_pending__free(Pending *p);
/* Queues @job's `running` record for the settler (track_state). */
void sluice_outcome__running(Job *job, gint64 now);

/* ---- Broker trouble (trouble.c) ------------------------------------------ */

void sluice_worker__broker_failed(SluiceWorker *worker, const gchar *what,
                                  const GError *error);
void sluice_worker__broker_ok(SluiceWorker *worker);
gboolean sluice_worker__first_in_a_while(SluiceWorker *worker,
                                         const gchar *key);

/* ---- Metrics (metrics.c) ------------------------------------------------- */

void sluice_metrics__init(SluiceWorker *worker);
void sluice_metrics__clear(SluiceWorker *worker);
/* The series of @job (decoded or not); fetcher thread only. */
MetricsSeries *sluice_metrics__series(SluiceWorker *worker, Job *job);
/* Counts the settlements of one batch that the broker accepted: @n items
 * of @batch (item i is batch[settled[i]]), whose jobs started at
 * @started_at[i] (clock ms; 0 = never). Settler thread only. */
void sluice_metrics__settled(SluiceWorker *worker, Pending *const *batch,
                             const guint *settled,
                             const SluiceSettlement *items,
                             const gint64 *started_at, guint n);

/* ---- Revocations (revocations.c) ----------------------------------------- */

gboolean sluice_worker__is_revoked(SluiceWorker *worker, const gchar *id,
                                   gint64 now);
gboolean sluice_worker__sync_revocations(SluiceWorker *worker, GError **error);

/* ---- Paused queues (pause.c) --------------------------------------------- */

void sluice_worker__init_active_queues(SluiceWorker *worker);
/* Returns: (transfer full): the queues to fetch from now (see
 * active_queues); pdata is a NULL-terminated list. */
GPtrArray *sluice_worker__active_queues(SluiceWorker *worker);
/* Reads the paused queues and updates active_queues, logging and waking a
 * blocked fetch on a change. Returns FALSE on a broker error. */
gboolean sluice_worker__sync_paused(SluiceWorker *worker, GError **error);

/* ---- Threads ------------------------------------------------------------- */

SluiceWorker *sluice_worker__core_ref(SluiceWorker *worker);
void sluice_worker__core_unref(SluiceWorker *worker);
/* executor.c */
void sluice_worker__hand_over(SluiceWorker *worker, Job **jobs, guint n);
gpointer sluice_worker__executor_main(gpointer data);
/* settler.c */
gpointer sluice_worker__settler_main(gpointer data);
/* fetcher.c */
gpointer sluice_worker__fetcher_main(gpointer data);
/* settler.c: gives back the concurrency slots that @n jobs hold. */
void sluice_worker__release_slots(SluiceWorker *worker, Job **jobs, guint n);
/* After their settlement: ends the uniqueness claims of the finished
 * @jobs and puts those of retried running ones back to waiting. */
void sluice_worker__settle_unique(SluiceWorker *worker, Job **jobs,
                                  const SluiceSettlement *items, guint n);
/* housekeeping.c */
gboolean sluice_worker__promote_all_due(SluiceWorker *worker,
                                        gint64 *out_next_due, GError **error);
void sluice_worker__wake_promoter(SluiceWorker *worker);
void sluice_worker__watchdog_arm(SluiceWorker *worker, gint64 deadline);
void sluice_worker__sync_housekeeping(SluiceWorker *worker);
/* Attaches every timer of the housekeeping context, renews the lease once
 * and starts the housekeeping thread. */
void sluice_worker__housekeeping_start(SluiceWorker *worker);
/* Stops the thread (and with it the heartbeat) and drops the timers. */
void sluice_worker__housekeeping_stop(SluiceWorker *worker);

G_END_DECLS

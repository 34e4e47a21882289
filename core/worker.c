/* worker.c - the consumer: fetcher, executor pool, settler, housekeeping.
 *
 * A message's life in a worker:
 *
 *   fetch ──> dispatch ──> executor pool ──> outcome ──> settler ──> broker
 *               │                                          ^
 *               └── malformed / expired / revoked / ───────┘
 *                   unknown task / too many deliveries
 *
 * Every delivery becomes a Job. A job is settled exactly once: whoever wins
 * job->settle_claimed (the executor when the task returns, the watchdog when
 * it overruns its timeout, the stop sequence when it releases it) builds the
 * settlement; the losers only log. The executor and the stop sequence race
 * for a queued job through job->phase (QUEUED -> RUNNING or RELEASED).
 *
 * The fetcher never holds more than concurrency + prefetch jobs (fetched and
 * not yet settled); the pool runs at most `concurrency` task functions.
 * Settlements go through one GAsyncQueue to the settler, which sends them
 * to the broker in batches and retries them while the broker is away: a
 * finished task is never forgotten because Redis blinked.
 *
 * Housekeeping runs on its own GMainContext thread, so task code can never
 * block it: promotion of due scheduled messages, revocation sync, lease
 * renewal and reclaim (brokers with leases), the timeout watchdog and
 * periodic tasks. With a fake clock, advancing the clock wakes it.
 *
 * Reference counting: users hold `ref_count`; threads, jobs and pending
 * settlements hold `core_refs`. The last user reference stops the worker; the
 * memory goes with the last core reference, which a task stuck past its
 * timeout may hold for a while (C threads cannot be killed).
 *
 * NOTE: an earlier version ran tasks on a GThreadPool. It woke a sleeping
 * thread for every task pushed, so a batch of 256 no-op tasks cost 256
 * context switches (measured: one per task, and three times more system
 * than user time), and it could not give queued tasks back at shutdown.
 * The executors now share one ready queue: the fetcher hands over a whole
 * batch under one lock and wakes one thread; a thread that takes a job and
 * sees more waiting wakes one more. Parallelism grows with the backlog,
 * and wake-ups with batches, not tasks.
 */
#include "config.h"

#include <string.h>

#include <unistd.h>

#include <glib-unix.h>

#include "core/sluice-private.h"

G_DEFINE_QUARK(sluice - worker - error - quark, sluice_worker_error)

#define FETCH_BLOCK_MS 1000
#define PROMOTE_BATCH 256
#define OUTAGE_BACKOFF_MIN_MS 50
#define OUTAGE_BACKOFF_MAX_MS 5000
/* After the shutdown timeout, running tasks are cancelled; this is how long
 * they then have to return before the stop calls them stuck. */
#define CANCEL_GRACE_MS 2000
/* A broker error other than "unavailable" is logged at most this often
 * per operation, and an unknown task name at most this often per name. */
#define REPEAT_LOG_MS (60 * 1000)

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
  KIND_DEFERRED,
  KIND_RELEASED,
} SettleKind;

typedef struct _Job Job;

struct _SluiceWorker {
  gatomicrefcount ref_count;
  gatomicrefcount core_refs;

  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceClock *clock;
  SluiceWorkerOptions options;
  gchar **queues;
  gchar *id;
  guint capacity; /* concurrency + prefetch */
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

  /* Under lock: when the lease was last renewed (monotonic us), and until
   * when a worker back from a lost lease takes nothing over. */
  gint64 last_lease_ok_us;
  gint64 reclaim_quiet_until_us;
  /* Housekeeping-thread only: */
  gboolean lease_lost;
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
  gboolean suspect;    /* taken over once at least: runs in quarantine */
  gint64 started_at;   /* clock ms; under worker lock */
  gint64 deadline;     /* clock ms; 0 = none; under worker lock */
};

typedef struct {
  Job *job;
  SettleKind kind;
  SluiceSettleAction action;
  GBytes *record;
  gboolean record_final;
  GBytes *reschedule_payload;
  gint64 reschedule_at;
  SluiceDeadLetter *dead_letter;
} Pending;

/* Pushed onto the settle queue to stop the settler; never dereferenced. */
static const gchar settle_stop_marker[] = "stop";
#define SETTLE_STOP ((gpointer)settle_stop_marker)

static void worker_core_unref(SluiceWorker *worker);
static void drive_stop(SluiceWorker *worker);
static void watchdog_arm(SluiceWorker *worker, gint64 deadline);
static void sync_housekeeping(SluiceWorker *worker);

/* ---- Options --------------------------------------------------------------
 */

void
sluice_worker_options_init(SluiceWorkerOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->concurrency = 4;
  options->prefetch = 4;
  sluice_retry_policy_init_unset(&options->retry);
  options->max_deliveries = SLUICE_DEFAULT_MAX_DELIVERIES;
  options->unknown_task_timeout_ms = SLUICE_DEFAULT_UNKNOWN_TASK_TIMEOUT_MS;
  options->unknown_task_defer_ms = SLUICE_DEFAULT_UNKNOWN_TASK_DEFER_MS;
  options->visibility_timeout_ms = SLUICE_DEFAULT_VISIBILITY_TIMEOUT_MS;
  options->shutdown_timeout_ms = SLUICE_DEFAULT_SHUTDOWN_TIMEOUT_MS;
  options->result_ttl_ms = SLUICE_DEFAULT_RESULT_TTL_MS;
  options->track_state = FALSE;
  options->revocation_interval_ms = SLUICE_DEFAULT_REVOCATION_INTERVAL_MS;
  options->schedule_poll_interval_ms = SLUICE_DEFAULT_SCHEDULE_POLL_INTERVAL_MS;
  options->settle_batch = 128;
}

static gboolean
check_options(const SluiceWorkerOptions *o, GError **error)
{
  const gchar *bad = NULL;

  if (o->concurrency < 1 || o->concurrency > 4096)
    bad = "concurrency must be between 1 and 4096";
  else if (o->prefetch > 65536)
    bad = "prefetch must be at most 65536";
  else if (o->max_deliveries < 1)
    bad = "max_deliveries must be at least 1";
  else if (o->unknown_task_timeout_ms < 0 || o->unknown_task_defer_ms < 1)
    bad = "unknown_task_timeout_ms must be >= 0 and unknown_task_defer_ms "
          ">= 1";
  else if (o->visibility_timeout_ms < 30)
    bad = "visibility_timeout_ms must be at least 30";
  else if (o->shutdown_timeout_ms < 0)
    bad = "shutdown_timeout_ms cannot be negative";
  else if (o->result_ttl_ms < 1)
    bad = "result_ttl_ms must be at least 1";
  else if (o->revocation_interval_ms < 1 || o->schedule_poll_interval_ms < 1)
    bad = "revocation_interval_ms and schedule_poll_interval_ms must be at "
          "least 1";
  else if (o->settle_batch < 1)
    bad = "settle_batch must be at least 1";
  if (bad != NULL) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "invalid worker options: %s", bad);
    return FALSE;
  }
  if (o->queues != NULL) {
    if (o->queues[0] == NULL) {
      g_set_error_literal(error, SLUICE_WORKER_ERROR,
                          SLUICE_WORKER_ERROR_INVALID,
                          "invalid worker options: the queue list is empty; "
                          "pass NULL for the default queue");
      return FALSE;
    }
    for (guint i = 0; o->queues[i] != NULL; i++) {
      GError *local = NULL;
      if (!sluice_client__check_name("queue name", o->queues[i], 200, &local)) {
        g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                    "invalid worker options: %s", local->message);
        g_error_free(local);
        return FALSE;
      }
    }
  }
  return TRUE;
}

static gchar *
default_worker_id(void)
{
  g_autofree gchar *uuid = g_uuid_string_random();

  /* The hostname tells an operator where it runs; the pid and a random
   * suffix keep two workers of one host (or a restart) apart. */
  return g_strdup_printf("%s-%d-%.8s", g_get_host_name(), (int)getpid(), uuid);
}

/* ---- Construction
 * ------------------------------------------------------------
 */

SluiceWorker *
sluice_worker_new(SluiceBroker *broker, SluiceRegistry *registry,
                  const SluiceWorkerOptions *options, GError **error)
{
  SluiceWorker *worker;
  SluiceWorkerOptions defaults;

  g_return_val_if_fail(broker != NULL, NULL);
  g_return_val_if_fail(registry != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (options == NULL) {
    sluice_worker_options_init(&defaults);
    options = &defaults;
  }
  if (!check_options(options, error))
    return NULL;

  worker = g_new0(SluiceWorker, 1);
  g_atomic_ref_count_init(&worker->ref_count);
  g_atomic_ref_count_init(&worker->core_refs);
  worker->broker = sluice_broker_ref(broker);
  worker->registry = sluice_registry_ref(registry);
  worker->clock = sluice_clock_ref(sluice_broker_get_clock(broker));
  worker->options = *options;
  if (options->queues != NULL)
    worker->queues = g_strdupv((gchar **)options->queues);
  else
    worker->queues = g_strsplit(SLUICE_DEFAULT_QUEUE, ",", -1);
  worker->options.queues = (const gchar *const *)worker->queues;
  worker->id = options->worker_id != NULL ? g_strdup(options->worker_id)
                                          : default_worker_id();
  worker->options.worker_id = worker->id;
  worker->capacity = options->concurrency + options->prefetch;
  sluice_decode_limits_init(&worker->limits);

  g_mutex_init(&worker->lock);
  g_cond_init(&worker->cond);
  worker->state = WORKER_NEW;
  worker->jobs = g_hash_table_new(NULL, NULL);
  worker->rand = g_rand_new();
  worker->settle_queue = g_async_queue_new();
  g_mutex_init(&worker->exec_lock);
  g_cond_init(&worker->exec_cond);
  g_queue_init(&worker->ready);
  worker->executors = g_ptr_array_new();
  worker->context = g_main_context_new();
  g_queue_init(&worker->quarantined);
  g_mutex_init(&worker->outage_lock);
  worker->repeated =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_mutex_init(&worker->revoke_lock);
  worker->revoked =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  worker->periodics =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_periodic__free);
  return worker;
}

static SluiceWorker *
worker_core_ref(SluiceWorker *worker)
{
  g_atomic_ref_count_inc(&worker->core_refs);
  return worker;
}

static void
worker_core_unref(SluiceWorker *worker)
{
  if (!g_atomic_ref_count_dec(&worker->core_refs))
    return;
  g_ptr_array_unref(worker->periodics);
  g_hash_table_unref(worker->revoked);
  g_mutex_clear(&worker->revoke_lock);
  g_hash_table_unref(worker->repeated);
  g_mutex_clear(&worker->outage_lock);
  g_main_context_unref(worker->context);
  g_async_queue_unref(worker->settle_queue);
  g_ptr_array_unref(worker->executors);
  g_cond_clear(&worker->exec_cond);
  g_mutex_clear(&worker->exec_lock);
  g_rand_free(worker->rand);
  g_hash_table_unref(worker->jobs);
  g_cond_clear(&worker->cond);
  g_mutex_clear(&worker->lock);
  g_free(worker->id);
  g_strfreev(worker->queues);
  sluice_clock_unref(worker->clock);
  sluice_registry_unref(worker->registry);
  sluice_broker_unref(worker->broker);
  g_free(worker);
}

SluiceWorker *
sluice_worker_ref(SluiceWorker *worker)
{
  g_return_val_if_fail(worker != NULL, NULL);
  g_atomic_ref_count_inc(&worker->ref_count);
  return worker;
}

void
sluice_worker_unref(SluiceWorker *worker)
{
  if (worker == NULL || !g_atomic_ref_count_dec(&worker->ref_count))
    return;
  drive_stop(worker);
  worker_core_unref(worker);
}

const gchar *
sluice_worker_get_id(SluiceWorker *worker)
{
  g_return_val_if_fail(worker != NULL, NULL);
  return worker->id;
}

void
sluice_worker_get_stats(SluiceWorker *worker, SluiceWorkerStats *out)
{
  g_return_if_fail(worker != NULL && out != NULL);
  g_mutex_lock(&worker->lock);
  *out = worker->stats;
  g_mutex_unlock(&worker->lock);
}

/* ---- Jobs ------------------------------------------------------------------
 */

static Job *
job_new(SluiceWorker *worker, SluiceDelivery *delivery)
{
  Job *job = g_new0(Job, 1);

  g_atomic_ref_count_init(&job->ref_count);
  job->worker = worker_core_ref(worker);
  job->delivery = delivery;
  job->phase = JOB_QUEUED;
  g_mutex_init(&job->cancel_lock);
  return job;
}

static Job *
job_ref(Job *job)
{
  g_atomic_ref_count_inc(&job->ref_count);
  return job;
}

static void
job_unref(Job *job)
{
  SluiceWorker *worker;

  if (!g_atomic_ref_count_dec(&job->ref_count))
    return;
  worker = job->worker;
  g_clear_object(&job->cancellable);
  g_mutex_clear(&job->cancel_lock);
  sluice_envelope_free(job->env);
  sluice_delivery_free(job->delivery);
  g_free(job);
  worker_core_unref(worker);
}

/* The job's cancellable, made on first use; if the job was cancelled
 * before, the new cancellable is cancelled at once. */
GCancellable *
sluice_worker__job_cancellable(gpointer data)
{
  Job *job = data;
  gboolean cancel_now = FALSE;

  g_mutex_lock(&job->cancel_lock);
  if (job->cancellable == NULL) {
    job->cancellable = g_cancellable_new();
    cancel_now = job->cancel_requested;
  }
  g_mutex_unlock(&job->cancel_lock);
  /* Outside the lock: cancelling runs the task's handlers. */
  if (cancel_now)
    g_cancellable_cancel(job->cancellable);
  return job->cancellable;
}

static void
job_cancel(Job *job)
{
  GCancellable *cancellable;

  g_mutex_lock(&job->cancel_lock);
  job->cancel_requested = TRUE;
  cancellable =
      job->cancellable != NULL ? g_object_ref(job->cancellable) : NULL;
  g_mutex_unlock(&job->cancel_lock);
  if (cancellable != NULL) {
    g_cancellable_cancel(cancellable);
    g_object_unref(cancellable);
  }
}

static gboolean
job_claim(Job *job)
{
  return g_atomic_int_compare_and_exchange(&job->settle_claimed, 0, 1);
}

static const gchar *
job_id(Job *job)
{
  return job->env != NULL ? job->env->id : NULL;
}

static const gchar *
job_task(Job *job)
{
  return job->env != NULL ? job->env->task : NULL;
}

static guint
job_attempt(Job *job)
{
  return job->env != NULL ? job->env->attempt : 0;
}

/* ---- Broker trouble ------------------------------------------------------
 *
 * Every thread of the worker talks to the broker, and during an outage all
 * of them fail, every tick. The operator wants one line when the broker
 * goes away and one when it is back, with how long it was gone; anything
 * else that goes wrong is logged, but the same operation's failure at most
 * once a minute.
 */

/* Notes a failed broker call of operation @what. */
static void
broker_failed(SluiceWorker *worker, const gchar *what, const GError *error)
{
  gint64 now = g_get_monotonic_time();
  gboolean log_it = FALSE;

  if (g_error_matches(error, SLUICE_BROKER_ERROR,
                      SLUICE_BROKER_ERROR_UNAVAILABLE)) {
    g_mutex_lock(&worker->outage_lock);
    if (!g_atomic_int_get(&worker->outage)) {
      g_atomic_int_set(&worker->outage, 1);
      worker->outage_since = now;
      log_it = TRUE;
    }
    g_mutex_unlock(&worker->outage_lock);
    if (log_it)
      sluice_log__message(G_LOG_LEVEL_WARNING,
                          "the broker is unreachable (%s: %s); waiting for it: "
                          "finished tasks are kept and settled once it is "
                          "back",
                          what, error->message);
    return;
  }
  g_mutex_lock(&worker->outage_lock);
  {
    gint64 *last = g_hash_table_lookup(worker->repeated, what);
    if (last == NULL) {
      last = g_new0(gint64, 1);
      g_hash_table_insert(worker->repeated, g_strdup(what), last);
      log_it = TRUE;
    } else {
      log_it = now - *last >= REPEAT_LOG_MS * 1000;
    }
    if (log_it)
      *last = now;
  }
  g_mutex_unlock(&worker->outage_lock);
  if (log_it)
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "%s failed: %s; will try again (said at most once a "
                        "minute)",
                        what, error->message);
}

/* Notes a successful broker call: ends an outage. */
static void
broker_ok(SluiceWorker *worker)
{
  gint64 since = 0;

  if (G_LIKELY(!g_atomic_int_get(&worker->outage)))
    return;
  g_mutex_lock(&worker->outage_lock);
  if (g_atomic_int_get(&worker->outage)) {
    g_atomic_int_set(&worker->outage, 0);
    since = worker->outage_since;
  }
  g_mutex_unlock(&worker->outage_lock);
  if (since > 0)
    sluice_log__message(G_LOG_LEVEL_MESSAGE,
                        "the broker is reachable again after %.1f s",
                        (g_get_monotonic_time() - since) / 1e6);
}

/* TRUE once per REPEAT_LOG_MS for @key (for notices that would repeat). */
static gboolean
first_in_a_while(SluiceWorker *worker, const gchar *key)
{
  gint64 now = g_get_monotonic_time();
  gboolean yes;
  gint64 *last;

  g_mutex_lock(&worker->outage_lock);
  last = g_hash_table_lookup(worker->repeated, key);
  if (last == NULL) {
    last = g_new0(gint64, 1);
    g_hash_table_insert(worker->repeated, g_strdup(key), last);
    yes = TRUE;
  } else {
    yes = now - *last >= REPEAT_LOG_MS * 1000;
  }
  if (yes)
    *last = now;
  g_mutex_unlock(&worker->outage_lock);
  return yes;
}

/* ---- Building settlements
 * ----------------------------------------------------
 */

static GBytes *
make_record(Job *job, SluiceTaskState state, GBytes *value, const gchar *error,
            const gchar *dlq_reason, gint64 now)
{
  g_autoptr(SluiceResult) r = NULL;
  gint64 started_at;

  if (job->env == NULL)
    return NULL;
  r = sluice_result_new(job->env->id, state);
  sluice_result_set_task(r, job->env->task, job->env->queue);
  sluice_result_set_attempt(r, job->env->attempt);
  if (value != NULL)
    sluice_result_set_value(r, value);
  if (error != NULL)
    sluice_result_set_error(r, error);
  if (dlq_reason != NULL)
    sluice_result_set_dead_letter_reason(r, dlq_reason);
  sluice_result_set_worker(r, job->worker->id);
  g_mutex_lock(&job->worker->lock);
  started_at = job->started_at;
  g_mutex_unlock(&job->worker->lock);
  sluice_result_set_times(r, job->env->enqueued_at, started_at,
                          sluice_task_state_is_final(state) ? now : 0);
  return sluice_result_encode(r);
}

static void
push_pending(SluiceWorker *worker, Pending *pending)
{
  g_async_queue_push(worker->settle_queue, pending);
}

static Pending *
pending_new(Job *job, SettleKind kind, SluiceSettleAction action)
{
  Pending *p = g_new0(Pending, 1);

  p->job = job_ref(job);
  p->kind = kind;
  p->action = action;
  return p;
}

static void
pending_free(Pending *p)
{
  g_clear_pointer(&p->record, g_bytes_unref);
  g_clear_pointer(&p->reschedule_payload, g_bytes_unref);
  g_clear_pointer(&p->dead_letter, sluice_dead_letter_free);
  job_unref(p->job);
  g_free(p);
}

/* Buries the job's delivery, untouched, for @reason. Always dead-letters:
 * the reasons that a task may turn into `failed` are handled by fail_job. */
static void
settle_dead_letter(Job *job, const gchar *reason, const gchar *detail)
{
  SluiceWorker *worker = job->worker;
  gint64 now = sluice_clock_now_ms(worker->clock);
  Pending *p = pending_new(job, KIND_DEAD_LETTERED, SLUICE_SETTLE_DEAD_LETTER);
  SluiceDeadLetter *dl = sluice_dead_letter_new();

  dl->task_id = g_strdup(job_id(job));
  dl->task = g_strdup(job_task(job));
  dl->reason = g_strdup(reason);
  dl->detail = g_strdup(detail);
  dl->source = g_strdup(job->delivery->queue);
  dl->deliveries = job->delivery->delivery_count;
  dl->at = now;
  dl->payload = g_bytes_ref(job->delivery->payload);
  p->dead_letter = dl;
  if (job->env != NULL && job->store_result) {
    p->record =
        make_record(job, SLUICE_STATE_DEAD_LETTERED, NULL, detail, reason, now);
    p->record_final = TRUE;
  }
  sluice_log__task(G_LOG_LEVEL_WARNING, job_id(job), job_task(job),
                   job->delivery->queue, job_attempt(job),
                   "dead-lettered (%s): %s", reason,
                   detail != NULL ? detail : "");
  push_pending(worker, p);
}

static void
settle_cancelled(Job *job, const gchar *why)
{
  Pending *p = pending_new(job, KIND_CANCELLED, SLUICE_SETTLE_ACK);

  if (job->store_result) {
    p->record = make_record(job, SLUICE_STATE_CANCELLED, NULL, why, NULL,
                            sluice_clock_now_ms(job->worker->clock));
    p->record_final = TRUE;
  }
  sluice_log__task(G_LOG_LEVEL_INFO, job_id(job), job_task(job),
                   job->delivery->queue, job_attempt(job), "cancelled: %s",
                   why);
  push_pending(job->worker, p);
}

/* Gives the delivery back for anyone to take at once. With track_state,
 * its record says `queued` again, not `running` on a stopped worker. */
static void
settle_release(Job *job)
{
  Pending *p = pending_new(job, KIND_RELEASED, SLUICE_SETTLE_RELEASE);

  if (job->env != NULL && job->worker->options.track_state &&
      job->store_result) {
    g_autoptr(SluiceResult) r =
        sluice_result_new(job->env->id, SLUICE_STATE_QUEUED);
    sluice_result_set_task(r, job->env->task, job->env->queue);
    sluice_result_set_attempt(r, job->env->attempt);
    sluice_result_set_times(r, job->env->enqueued_at, 0, 0);
    p->record = sluice_result_encode(r);
    p->record_final = FALSE;
  }
  push_pending(job->worker, p);
}

/* Puts a new version of the job's envelope on the schedule. */
static gboolean
settle_reschedule(Job *job, SluiceEnvelope *next, gint64 due_at,
                  SettleKind kind, GBytes *record)
{
  g_autoptr(GError) error = NULL;
  Pending *p;
  GBytes *payload = sluice_envelope_encode(NULL, next, &error);

  if (payload == NULL) {
    /* Only a bug can get here: the envelope decoded a moment ago. Bury the
     * original rather than lose it. */
    g_clear_pointer(&record, g_bytes_unref);
    settle_dead_letter(job, SLUICE_DLQ_MALFORMED, error->message);
    return FALSE;
  }
  p = pending_new(job, kind, SLUICE_SETTLE_RETRY);
  p->reschedule_payload = payload;
  p->reschedule_at = due_at;
  p->record = record;
  p->record_final = FALSE;
  push_pending(job->worker, p);
  return TRUE;
}

/* A failed attempt: retry with backoff (or the task's own delay) while
 * attempts remain; otherwise bury it `max_attempts`, or record it `failed`
 * when the task does not dead-letter. @fatal skips the retries. */
static void
fail_job(Job *job, const gchar *message, gint64 requested_delay_ms,
         gboolean fatal)
{
  SluiceWorker *worker = job->worker;
  SluiceEnvelope *env = job->env;
  gint64 now = sluice_clock_now_ms(worker->clock);
  g_autofree gchar *line =
      g_strdup_printf("attempt %u: %s", env->attempt, message);
  const gchar *reason;

  g_mutex_lock(&worker->lock);
  worker->stats.failed_attempts++;
  g_mutex_unlock(&worker->lock);

  if (!fatal && env->attempt < job->policy.max_attempts) {
    g_autoptr(SluiceEnvelope) next = sluice_envelope_copy(env);
    gint64 delay;
    GBytes *record = NULL;

    if (requested_delay_ms >= 0) {
      delay = requested_delay_ms;
    } else {
      g_mutex_lock(&worker->lock);
      delay = sluice_retry_policy_backoff_ms(&job->policy, env->attempt,
                                             worker->rand);
      g_mutex_unlock(&worker->lock);
    }
    sluice_envelope_add_history(next, line);
    next->attempt = env->attempt + 1;
    next->eta = now + delay;
    if (worker->options.track_state && job->store_result)
      record =
          make_record(job, SLUICE_STATE_RETRYING, NULL, message, NULL, now);
    sluice_log__task(
        G_LOG_LEVEL_INFO, env->id, env->task, env->queue, env->attempt,
        "attempt %u of %u failed: %s; retrying in %" G_GINT64_FORMAT " ms",
        env->attempt, job->policy.max_attempts, message, delay);
    settle_reschedule(job, next, now + delay, KIND_RETRIED, record);
    return;
  }

  reason = fatal ? SLUICE_DLQ_NON_RETRYABLE : SLUICE_DLQ_MAX_ATTEMPTS;
  if (job->dead_letter) {
    g_autofree gchar *detail =
        fatal
            ? g_strdup(message)
            : g_strdup_printf("failed %u of %u attempts; last error: %s",
                              env->attempt, job->policy.max_attempts, message);
    settle_dead_letter(job, reason, detail);
    return;
  }

  {
    Pending *p = pending_new(job, KIND_FAILED, SLUICE_SETTLE_ACK);
    if (job->store_result) {
      p->record =
          make_record(job, SLUICE_STATE_FAILED, NULL, message, NULL, now);
      p->record_final = TRUE;
    }
    sluice_log__task(G_LOG_LEVEL_WARNING, env->id, env->task, env->queue,
                     env->attempt, "failed for good (%s): %s", reason, message);
    push_pending(worker, p);
  }
}

/* ---- Revocations --------------------------------------------------------- */

static gboolean
is_revoked(SluiceWorker *worker, const gchar *id, gint64 now)
{
  gint64 *expires_at;
  gboolean revoked;

  /* Nearly always nothing is revoked: skip the lock per message. */
  if (g_atomic_int_get(&worker->n_revoked) == 0)
    return FALSE;
  g_mutex_lock(&worker->revoke_lock);
  expires_at = g_hash_table_lookup(worker->revoked, id);
  revoked = expires_at != NULL && *expires_at > now;
  g_mutex_unlock(&worker->revoke_lock);
  return revoked;
}

/* Reads revocations newer than the cursor, forgets lapsed ones and cancels
 * running jobs that are now revoked. Returns FALSE on a broker error. */
static gboolean
sync_revocations(SluiceWorker *worker, GError **error)
{
  g_autoptr(GPtrArray) fresh =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_revocation_free);
  g_autoptr(GPtrArray) to_cancel = g_ptr_array_new();
  gint64 now = sluice_clock_now_ms(worker->clock);
  GHashTableIter iter;
  gpointer key, value;
  gint64 cursor;

  g_mutex_lock(&worker->revoke_lock);
  cursor = worker->revoke_cursor;
  g_mutex_unlock(&worker->revoke_lock);

  /* The cursor is the broker's order of insertion, never an expiry:
   * clients may revoke with different TTLs, and two revocations may share
   * a millisecond. */
  if (!sluice_broker_list_revocations_since(worker->broker, &cursor, now, fresh,
                                            error))
    return FALSE;

  g_mutex_lock(&worker->revoke_lock);
  worker->revoke_cursor = cursor;
  for (guint i = 0; i < fresh->len; i++) {
    SluiceRevocation *r = fresh->pdata[i];
    gint64 *expires_at = g_new(gint64, 1);
    *expires_at = r->expires_at;
    g_hash_table_replace(worker->revoked, g_strdup(r->id), expires_at);
  }
  g_hash_table_iter_init(&iter, worker->revoked);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (*(gint64 *)value <= now)
      g_hash_table_iter_remove(&iter);
  g_atomic_int_set(&worker->n_revoked,
                   (gint)g_hash_table_size(worker->revoked));
  g_mutex_unlock(&worker->revoke_lock);

  if (fresh->len == 0)
    return TRUE;
  g_mutex_lock(&worker->lock);
  g_hash_table_iter_init(&iter, worker->jobs);
  while (g_hash_table_iter_next(&iter, &key, NULL)) {
    Job *job = key;
    if (g_atomic_int_get(&job->phase) == JOB_RUNNING && job->env != NULL)
      g_ptr_array_add(to_cancel, job_ref(job));
  }
  g_mutex_unlock(&worker->lock);
  for (guint i = 0; i < to_cancel->len; i++) {
    Job *job = to_cancel->pdata[i];
    /* A broker without an insertion-order cursor lists every live
     * revocation at each sync: cancel each job once. */
    if (is_revoked(worker, job->env->id, now) &&
        g_atomic_int_compare_and_exchange(&job->revoked, 0, 1)) {
      sluice_log__task(G_LOG_LEVEL_MESSAGE, job->env->id, job->env->task,
                       job->env->queue, job->env->attempt,
                       "revoked while running; cancelling it");
      job_cancel(job);
    }
    job_unref(job);
  }
  return TRUE;
}

/* ---- Dispatch ---------------------------------------------------------------
 */

static void
resolve_job_options(Job *job)
{
  SluiceWorker *worker = job->worker;
  const SluiceMessageOptions *m = &job->env->opts;
  const SluiceTaskOptions *t = job->entry != NULL ? &job->entry->options : NULL;

  sluice_retry_policy_resolve(&job->policy, &worker->options.retry,
                              t != NULL ? &t->retry : NULL, &m->retry);
  job->timeout_ms = m->timeout_ms > 0                ? m->timeout_ms
                    : t != NULL && t->timeout_ms > 0 ? t->timeout_ms
                                                     : 0;
  job->store_result = m->store_result != SLUICE_UNSET
                          ? m->store_result == SLUICE_ON
                          : (t == NULL || t->store_result != SLUICE_OFF);
  job->dead_letter = m->dead_letter != SLUICE_UNSET
                         ? m->dead_letter == SLUICE_ON
                         : (t == NULL || t->dead_letter != SLUICE_OFF);
  job->result_ttl_ms = m->result_ttl_ms > 0 ? m->result_ttl_ms
                       : t != NULL && t->result_ttl_ms > 0
                           ? t->result_ttl_ms
                           : worker->options.result_ttl_ms;
}

/* An unregistered name is a rollout in progress, not a failure: defer the
 * message with its attempt untouched, and bury it only once it has been
 * unknown for unknown_task_timeout_ms of clock time, however often it came
 * back in between. */
static void
defer_unknown(Job *job, gint64 now)
{
  SluiceWorker *worker = job->worker;
  SluiceEnvelope *env = job->env;
  /* A time taken from a message is clamped to our clock: a message that
   * says it became unknown in the future would be deferred forever. */
  gint64 since = env->unknown_since > 0 ? MIN(env->unknown_since, now) : now;
  g_autoptr(SluiceEnvelope) next = NULL;
  g_autofree gchar *log_key = NULL;
  GBytes *record = NULL;

  if (now - since >= worker->options.unknown_task_timeout_ms) {
    g_autofree gchar *detail = g_strdup_printf(
        "no worker had a task named “%s” registered for %" G_GINT64_FORMAT
        " ms",
        env->task, now - since);
    settle_dead_letter(job, SLUICE_DLQ_UNKNOWN_TASK, detail);
    return;
  }
  next = sluice_envelope_copy(env);
  next->unknown_since = since;
  next->eta = now + worker->options.unknown_task_defer_ms;
  /* Once per name per minute: the same message comes back every few
   * seconds for ten minutes, and a rollout may bring many of them. */
  if (worker->options.track_state && job->store_result) {
    g_autoptr(SluiceResult) r =
        sluice_result_new(env->id, SLUICE_STATE_SCHEDULED);
    g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(since / 1000);
    g_autofree gchar *when = t != NULL ? g_date_time_format_iso8601(t) : NULL;
    g_autofree gchar *note = g_strdup_printf(
        "deferred: no worker knows a task named “%s” (since %s); it is "
        "buried unknown_task if none does by unknown_task_timeout",
        env->task, when != NULL ? when : "an unknown time");
    sluice_result_set_task(r, env->task, env->queue);
    sluice_result_set_attempt(r, env->attempt);
    sluice_result_set_times(r, env->enqueued_at, 0, 0);
    sluice_result_set_error(r, note);
    record = sluice_result_encode(r);
  }
  log_key = g_strconcat("unknown-task:", env->task, NULL);
  if (first_in_a_while(worker, log_key))
    sluice_log__task(
        G_LOG_LEVEL_MESSAGE, env->id, env->task, env->queue, env->attempt,
        "no task named “%s” is registered here; deferring messages of it "
        "(this one by %" G_GINT64_FORMAT " ms) and burying them once it has "
        "been unknown for %" G_GINT64_FORMAT " ms; said once a minute",
        env->task, worker->options.unknown_task_defer_ms,
        worker->options.unknown_task_timeout_ms);
  settle_reschedule(job, next, next->eta, KIND_DEFERRED, record);
}

/* Takes ownership of @delivery. Called by the fetcher and the reclaimer.
 * Returns: (transfer full) (nullable): a job to hand to the executors, or
 * NULL when the delivery was settled at once (malformed, expired, ...). */
static Job *
dispatch(SluiceWorker *worker, SluiceDelivery *delivery)
{
  g_autoptr(GError) error = NULL;
  Job *job;
  gint64 now;

  g_mutex_lock(&worker->lock);
  if (!worker->accepting) {
    g_mutex_unlock(&worker->lock);
    /* Too late to settle anything: leave it unacknowledged. With leases
     * it is reclaimed by a peer; without, the broker never handed out
     * anything after the stop began, so this does not happen. */
    sluice_delivery_free(delivery);
    return NULL;
  }
  job = job_new(worker, delivery);
  /* Taken over from a consumer that died or stalled holding it: it may be
   * the one that crashed it (see the quarantine in the fetcher). */
  job->suspect =
      (sluice_broker_get_caps(worker->broker) & SLUICE_BROKER_CAP_LEASES) &&
      delivery->delivery_count >= 2;
  worker->held++;
  if (job->suspect)
    worker->suspects_held++;
  g_hash_table_add(worker->jobs, job);
  g_mutex_unlock(&worker->lock);

  job->env = sluice_envelope_decode(delivery->payload, &worker->limits, &error);
  if (job->env == NULL) {
    g_autofree gchar *detail =
        g_strdup_printf("cannot decode the message: %s", error->message);
    job->store_result = FALSE;
    job_claim(job);
    settle_dead_letter(job, SLUICE_DLQ_MALFORMED, detail);
    return NULL;
  }
  job->entry = sluice_registry__lookup(worker->registry, job->env->task);
  resolve_job_options(job);
  now = sluice_clock_now_ms(worker->clock);

  if ((sluice_broker_get_caps(worker->broker) & SLUICE_BROKER_CAP_LEASES) &&
      delivery->delivery_count > worker->options.max_deliveries) {
    g_autofree gchar *detail = g_strdup_printf(
        "delivered %u times, over max_deliveries (%u): each consumer it was "
        "given to died before finishing it",
        delivery->delivery_count, worker->options.max_deliveries);
    job_claim(job);
    settle_dead_letter(job, SLUICE_DLQ_MAX_DELIVERIES, detail);
    return NULL;
  }
  if (job->env->opts.expires_at > 0 && now >= job->env->opts.expires_at) {
    g_autofree gchar *detail =
        g_strdup_printf("expired at %" G_GINT64_FORMAT
                        " before it could start (now %" G_GINT64_FORMAT ")",
                        job->env->opts.expires_at, now);
    job_claim(job);
    settle_dead_letter(job, SLUICE_DLQ_EXPIRED, detail);
    return NULL;
  }
  if (is_revoked(worker, job->env->id, now)) {
    job_claim(job);
    settle_cancelled(job, "revoked before it started");
    return NULL;
  }
  if (job->entry == NULL) {
    job_claim(job);
    defer_unknown(job, now);
    return NULL;
  }
  return job_ref(job);
}

/* ---- Executor ---------------------------------------------------------------
 */

static void
execute(Job *job)
{
  SluiceWorker *worker = job->worker;
  SluiceEnvelope *env = job->env;
  SluiceTaskContext ctx;
  g_autoptr(GError) error = NULL;
  gboolean ok;
  gboolean claimed;
  gint64 now;

  if (!g_atomic_int_compare_and_exchange(&job->phase, JOB_QUEUED,
                                         JOB_RUNNING)) {
    job_unref(job); /* released by the stop sequence meanwhile */
    return;
  }
  now = sluice_clock_now_ms(worker->clock);
  /* The revocation may have arrived while the job waited for a thread. */
  if (is_revoked(worker, env->id, now)) {
    if (job_claim(job))
      settle_cancelled(job, "revoked before it started");
    job_unref(job);
    return;
  }

  g_mutex_lock(&worker->lock);
  worker->running++;
  worker->stats.started++;
  worker->stats.peak_running = MAX(worker->stats.peak_running, worker->running);
  job->started_at = now;
  if (job->timeout_ms > 0)
    job->deadline = now + job->timeout_ms;
  g_mutex_unlock(&worker->lock);
  if (job->timeout_ms > 0)
    watchdog_arm(worker, job->deadline);

  if (worker->options.track_state && job->store_result) {
    g_autoptr(GBytes) record =
        make_record(job, SLUICE_STATE_RUNNING, NULL, NULL, NULL, now);
    g_autoptr(GError) record_error = NULL;
    if (!sluice_broker_put_record(worker->broker, env->id, record, FALSE,
                                  job->result_ttl_ms, &record_error))
      sluice_log__task(G_LOG_LEVEL_WARNING, env->id, env->task, env->queue,
                       env->attempt, "could not record the running state: %s",
                       record_error->message);
  }

  sluice_task_context__init(&ctx, env, job->delivery->delivery_count,
                            job->policy.max_attempts, job);
  g_atomic_int_set(&job->in_task, 1);
  ok = job->entry->func(&ctx, job->entry->user_data, &error);
  g_atomic_int_set(&job->in_task, 0);

  /* Claim before leaving `running`: the stop sequence releases running
   * jobs it can claim once `running` drops to zero, and must not release a
   * task that has in fact finished. */
  claimed = job_claim(job);
  g_mutex_lock(&worker->lock);
  worker->running--;
  /* A broadcast is a system call: make it only when the stop sequence
   * waits for running tasks. */
  if (worker->running_waited)
    g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);

  if (!claimed) {
    /* The watchdog (timeout) or the stop sequence settled it already. The
     * line first: whoever sees the count must find the line written. */
    sluice_log__task(G_LOG_LEVEL_WARNING, env->id, env->task, env->queue,
                     env->attempt,
                     "task returned after it was timed out or released; its "
                     "late %s is discarded",
                     ok ? "result" : "error");
    g_mutex_lock(&worker->lock);
    worker->stats.late_results_discarded++;
    g_mutex_unlock(&worker->lock);
    sluice_task_context__clear(&ctx);
    job_unref(job);
    return;
  }

  now = sluice_clock_now_ms(worker->clock);
  if (ok) {
    Pending *p = pending_new(job, KIND_SUCCEEDED, SLUICE_SETTLE_ACK);
    if (job->store_result) {
      p->record =
          make_record(job, SLUICE_STATE_SUCCEEDED, ctx.result, NULL, NULL, now);
      p->record_final = TRUE;
    }
    push_pending(worker, p);
  } else if (g_atomic_int_get(&job->revoked) &&
             (error == NULL ||
              g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))) {
    settle_cancelled(job, "revoked while running");
  } else {
    const gchar *message =
        error != NULL ? error->message
                      : "the task returned FALSE without setting an error";
    gboolean fatal =
        g_error_matches(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL);
    gint64 delay =
        g_error_matches(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_RETRY)
            ? ctx.retry_delay_ms
            : -1;
    if (error == NULL)
      g_critical("task “%s” returned FALSE without setting its GError",
                 env->task);
    fail_job(job, message, delay, fatal);
  }
  sluice_task_context__clear(&ctx);
  job_unref(job);
}

/* Hands @n jobs (references included) to the executors. */
static void
hand_over(SluiceWorker *worker, Job **jobs, guint n)
{
  if (n == 0)
    return;
  g_mutex_lock(&worker->exec_lock);
  for (guint i = 0; i < n; i++)
    g_queue_push_tail(&worker->ready, jobs[i]);
  if (worker->exec_idle > 0)
    g_cond_signal(&worker->exec_cond);
  g_mutex_unlock(&worker->exec_lock);
}

static gpointer
executor_main(gpointer data)
{
  SluiceWorker *worker = data;

  for (;;) {
    Job *job;

    g_mutex_lock(&worker->exec_lock);
    while (g_queue_is_empty(&worker->ready) && !worker->exec_stop) {
      worker->exec_idle++;
      g_cond_wait(&worker->exec_cond, &worker->exec_lock);
      worker->exec_idle--;
    }
    job = g_queue_pop_head(&worker->ready);
    /* Wake chaining: more work is waiting and a thread sleeps. */
    if (job != NULL && !g_queue_is_empty(&worker->ready) &&
        worker->exec_idle > 0)
      g_cond_signal(&worker->exec_cond);
    g_mutex_unlock(&worker->exec_lock);
    if (job == NULL)
      break; /* stopping, and nothing left */
    execute(job);
  }
  worker_core_unref(worker);
  return NULL;
}

/* ---- Settler ---------------------------------------------------------------
 */

static void
count_settled(SluiceWorker *worker, SettleKind kind)
{
  switch (kind) {
  case KIND_SUCCEEDED:
    worker->stats.succeeded++;
    break;
  case KIND_FAILED:
    break;
  case KIND_RETRIED:
    worker->stats.retried++;
    break;
  case KIND_DEAD_LETTERED:
    worker->stats.dead_lettered++;
    break;
  case KIND_CANCELLED:
    worker->stats.cancelled++;
    break;
  case KIND_DEFERRED:
    worker->stats.deferred++;
    break;
  case KIND_RELEASED:
    worker->stats.released++;
    break;
  }
}

static void
wake_promoter(SluiceWorker *worker)
{
  if (worker->promote_source != NULL)
    g_source_set_ready_time(worker->promote_source, 0);
}

/* Sends one batch, retrying while the broker is unreachable. Returns FALSE
 * if the batch was given up (only while stopping, after the shutdown
 * timeout): those deliveries are then left to the broker's redelivery. */
static gboolean
send_batch(SluiceWorker *worker, SluiceSettlement *items, guint n,
           gint64 give_up_at_us)
{
  gint64 backoff_ms = OUTAGE_BACKOFF_MIN_MS;

  for (;;) {
    g_autoptr(GError) error = NULL;
    gboolean stopping;

    if (sluice_broker_settle(worker->broker, worker->id, items, n, &error)) {
      broker_ok(worker);
      return TRUE;
    }
    broker_failed(worker, "settling", error);

    g_mutex_lock(&worker->lock);
    stopping = worker->state == WORKER_STOPPING;
    if (stopping &&
        (g_atomic_int_get(&worker->force_stop) ||
         (give_up_at_us > 0 && g_get_monotonic_time() >= give_up_at_us))) {
      g_mutex_unlock(&worker->lock);
      sluice_log__message(G_LOG_LEVEL_CRITICAL,
                          "giving up settling %u deliveries at shutdown: %s. "
                          "Unacknowledged deliveries are redelivered by "
                          "brokers with leases; finished results are lost",
                          n, error->message);
      return FALSE;
    }
    g_cond_wait_until(&worker->cond, &worker->lock,
                      g_get_monotonic_time() + backoff_ms * 1000);
    g_mutex_unlock(&worker->lock);
    backoff_ms = MIN(backoff_ms * 2, OUTAGE_BACKOFF_MAX_MS);
  }
}

static gpointer
settler_main(gpointer data)
{
  SluiceWorker *worker = data;
  guint max = worker->options.settle_batch;
  g_autofree Pending **batch = g_new0(Pending *, max);
  g_autofree SluiceSettlement *items = g_new0(SluiceSettlement, max);
  gboolean stop = FALSE;

  while (!stop) {
    guint n = 0;
    gpointer item = g_async_queue_pop(worker->settle_queue);
    gboolean retries = FALSE;
    gint64 give_up_at_us;

    /* Take what else is waiting, up to a batch: under load one broker
     * call settles many deliveries. */
    while (item != NULL) {
      if (item == SETTLE_STOP) {
        stop = TRUE;
        break;
      }
      batch[n++] = item;
      if (n == max)
        break;
      item = g_async_queue_try_pop(worker->settle_queue);
    }
    if (n == 0)
      continue;

    for (guint i = 0; i < n; i++) {
      Pending *p = batch[i];
      SluiceSettlement *s = &items[i];
      memset(s, 0, sizeof *s);
      s->delivery = p->job->delivery;
      s->action = p->action;
      s->id = job_id(p->job);
      s->record = p->record;
      s->record_final = p->record_final;
      s->record_ttl_ms = p->job->result_ttl_ms;
      s->reschedule_payload = p->reschedule_payload;
      s->reschedule_at = p->reschedule_at;
      s->dead_letter = p->dead_letter;
      if (p->action == SLUICE_SETTLE_RETRY)
        retries = TRUE;
    }

    g_mutex_lock(&worker->lock);
    give_up_at_us = worker->state == WORKER_STOPPING
                        ? g_get_monotonic_time() +
                              worker->options.shutdown_timeout_ms * 1000
                        : 0;
    g_mutex_unlock(&worker->lock);
    if (send_batch(worker, items, n, give_up_at_us)) {
      for (guint i = 0; i < n; i++) {
        Job *job = batch[i]->job;
        if (items[i].status == SLUICE_SETTLE_STALE)
          sluice_log__task(G_LOG_LEVEL_WARNING, job_id(job), job_task(job),
                           job->delivery->queue, job_attempt(job),
                           "settle refused: another worker owns this delivery "
                           "now (lease lost); the task may run again");
        else if (items[i].status == SLUICE_SETTLE_GONE)
          sluice_log__task(
              G_LOG_LEVEL_WARNING, job_id(job), job_task(job),
              job->delivery->queue, job_attempt(job),
              "settle refused: no worker holds this delivery any more: it "
              "was settled already, or the broker lost it (a Redis "
              "restarted without its latest writes, or an entry deleted by "
              "hand); its record was written, nothing else");
      }
    }

    g_mutex_lock(&worker->lock);
    for (guint i = 0; i < n; i++) {
      Pending *p = batch[i];
      if (items[i].status == SLUICE_SETTLE_STALE ||
          items[i].status == SLUICE_SETTLE_GONE)
        worker->stats.stale_settles++;
      else
        count_settled(worker, p->kind);
      if (g_hash_table_remove(worker->jobs, p->job)) {
        worker->held--;
        if (p->job->suspect)
          worker->suspects_held--;
        job_unref(p->job); /* the reference of the jobs table */
      }
    }
    worker->settle_gen++;
    g_cond_broadcast(&worker->cond);
    g_mutex_unlock(&worker->lock);

    for (guint i = 0; i < n; i++)
      pending_free(batch[i]);
    if (retries)
      wake_promoter(worker);
  }
  worker_core_unref(worker);
  return NULL;
}

/* ---- Fetcher ---------------------------------------------------------------
 */

/* Promotes every due scheduled message. Returns FALSE on a broker error. */
static gboolean
promote_all_due(SluiceWorker *worker, gint64 *out_next_due, GError **error)
{
  guint promoted;
  gint64 next_due = 0;
  /* A bounded number of rounds keeps one call short when a flood of
   * messages falls due at once; the next call continues. */
  for (guint round = 0; round < 64; round++) {
    if (!sluice_broker_promote_due(worker->broker,
                                   sluice_clock_now_ms(worker->clock),
                                   PROMOTE_BATCH, &promoted, &next_due, error))
      return FALSE;
    if (promoted < PROMOTE_BATCH)
      break;
  }
  if (out_next_due != NULL)
    *out_next_due = next_due;
  return TRUE;
}

/* Whether the fetcher is in quarantine: something may be reclaimed, or a
 * suspect is held. Called with the lock held. */
static gboolean
quarantine_active(SluiceWorker *worker)
{
  return worker->reclaim_wanted || worker->suspects_held > 0;
}

/* Dispatches what a fetch returned. A suspect (taken over before, and so
 * possibly the delivery that crashed its last consumer) is set aside to
 * run alone; a second one is given back at once (it keeps its delivery
 * count), so that a crash of this worker is never charged to a suspect
 * that was only waiting beside another. */
static void
dispatch_fetched(SluiceWorker *worker, GPtrArray *got)
{
  guint n = 0;

  for (guint i = 0; i < got->len; i++) {
    Job *job = dispatch(worker, got->pdata[i]);
    gboolean keep = TRUE;

    if (job == NULL)
      continue;
    if (job->suspect) {
      g_mutex_lock(&worker->lock);
      if (g_queue_is_empty(&worker->quarantined) && worker->suspects_held == 1)
        g_queue_push_tail(&worker->quarantined, job);
      else {
        if (job_claim(job))
          settle_release(job);
        job_unref(job);
      }
      g_cond_broadcast(&worker->cond);
      g_mutex_unlock(&worker->lock);
      keep = FALSE;
    }
    if (keep)
      got->pdata[n++] = job;
  }
  hand_over(worker, (Job **)got->pdata, n);
}

/* Quarantine, one step, with nothing else held: takes over one delivery of
 * a dead or stalled consumer and runs it alone. Clears reclaim_wanted when
 * there is nothing left to take. */
static gboolean
reclaim_one(SluiceWorker *worker, gboolean *out_contacted, GError **error)
{
  g_autoptr(GPtrArray) got = g_ptr_array_new();
  gint64 now_us = g_get_monotonic_time();
  gboolean may;

  /* Only with a lease of our own that is not fresh from a stall (see
   * heartbeat_tick): a worker that has not renewed for two thirds of a
   * lease may be the one that stalls, and the peers it would judge dead may
   * just not have renewed yet. The housekeeping tick asks again. */
  g_mutex_lock(&worker->lock);
  may = now_us - worker->last_lease_ok_us <=
            worker->options.visibility_timeout_ms * 1000 * 2 / 3 &&
        now_us >= worker->reclaim_quiet_until_us;
  if (!may) {
    worker->reclaim_wanted = FALSE;
    g_cond_broadcast(&worker->cond);
  }
  g_mutex_unlock(&worker->lock);
  *out_contacted = may;
  if (!may)
    return TRUE;
  if (!sluice_broker_reclaim(worker->broker, worker->id,
                             (const gchar *const *)worker->queues, 1,
                             worker->options.visibility_timeout_ms, got, error))
    return FALSE;
  if (got->len == 0) {
    g_mutex_lock(&worker->lock);
    worker->reclaim_wanted = FALSE;
    g_cond_broadcast(&worker->cond);
    g_mutex_unlock(&worker->lock);
    return TRUE;
  }
  g_mutex_lock(&worker->lock);
  worker->stats.reclaimed += got->len;
  g_mutex_unlock(&worker->lock);
  for (guint i = 0; i < got->len; i++) {
    SluiceDelivery *d = got->pdata[i];
    Job *job;

    sluice_log__message(G_LOG_LEVEL_MESSAGE,
                        "reclaimed %u deliveries from dead or stalled workers "
                        "(queue “%s”, delivery %u); running it alone",
                        got->len, d->queue, d->delivery_count);
    job = dispatch(worker, d);
    if (job != NULL)
      hand_over(worker, &job, 1);
  }
  return TRUE;
}

static gpointer
fetcher_main(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GPtrArray) got = g_ptr_array_new();
  gint64 backoff_ms = OUTAGE_BACKOFF_MIN_MS;
  gboolean leases =
      (sluice_broker_get_caps(worker->broker) & SLUICE_BROKER_CAP_LEASES) != 0;

  for (;;) {
    g_autoptr(GError) error = NULL;
    guint want = 0;
    guint64 idle_gen;
    guint64 settle_gen_before;
    guint held_before;
    gboolean quarantine;
    Job *next = NULL;
    gboolean ok;

    g_mutex_lock(&worker->lock);
    for (;;) {
      if (worker->stop_requested)
        break;
      if (quarantine_active(worker)) {
        /* Drain: nothing may run beside a suspect. */
        if (worker->held <= g_queue_get_length(&worker->quarantined))
          break;
      } else if (worker->held < worker->capacity) {
        break;
      }
      g_cond_wait(&worker->cond, &worker->lock);
    }
    if (worker->stop_requested) {
      g_mutex_unlock(&worker->lock);
      break;
    }
    quarantine = quarantine_active(worker);
    if (quarantine)
      next = g_queue_pop_head(&worker->quarantined);
    else
      want = worker->capacity - worker->held;
    held_before = worker->held;
    settle_gen_before = worker->settle_gen;
    idle_gen = worker->idle_request_gen > worker->idle_done_gen
                   ? worker->idle_request_gen
                   : 0;
    /* run_until_idle: what a dead consumer left pending is work too; look
     * once per request (quarantine then takes it all, one by one). */
    if (!quarantine && idle_gen > 0 && leases &&
        worker->reclaim_idle_gen < idle_gen) {
      worker->reclaim_idle_gen = idle_gen;
      worker->reclaim_wanted = TRUE;
      g_mutex_unlock(&worker->lock);
      continue;
    }
    g_mutex_unlock(&worker->lock);

    if (quarantine) {
      if (next != NULL) {
        hand_over(worker, &next, 1);
        continue;
      }
      gboolean contacted = FALSE;

      if (reclaim_one(worker, &contacted, &error)) {
        if (contacted)
          broker_ok(worker);
        continue;
      }
      broker_failed(worker, "reclaiming deliveries of dead workers", error);
      goto backoff;
    }

    /* run_until_idle: make due work visible before looking, and do not
     * block, so an empty answer means "nothing to do now". */
    ok = TRUE;
    if (idle_gen > 0) {
      sync_housekeeping(worker);
      ok = promote_all_due(worker, NULL, &error);
    }
    if (ok)
      ok = sluice_broker_fetch(worker->broker, worker->id,
                               (const gchar *const *)worker->queues, want,
                               idle_gen > 0 ? 0 : FETCH_BLOCK_MS, got, &error);
    if (!ok) {
      broker_failed(worker, "fetching", error);
      goto backoff;
    }
    broker_ok(worker);
    backoff_ms = OUTAGE_BACKOFF_MIN_MS;
    dispatch_fetched(worker, got);

    if (got->len == 0 && idle_gen > 0) {
      g_mutex_lock(&worker->lock);
      if (held_before == 0) {
        /* Nothing was held when we looked, nothing was due, nothing was
         * ready: idle, as of a look that began after the request. */
        worker->idle_done_gen = MAX(worker->idle_done_gen, idle_gen);
        g_cond_broadcast(&worker->cond);
      } else {
        /* Work is in flight; wait for a settle instead of spinning. The
         * generation was read with held_before, so a settle that landed
         * during the fetch is not waited for twice. */
        while (!worker->stop_requested &&
               worker->settle_gen == settle_gen_before)
          g_cond_wait(&worker->cond, &worker->lock);
      }
      g_mutex_unlock(&worker->lock);
    }
    g_ptr_array_set_size(got, 0);
    continue;

  backoff:
    g_ptr_array_set_size(got, 0);
    g_mutex_lock(&worker->lock);
    if (!worker->stop_requested)
      g_cond_wait_until(&worker->cond, &worker->lock,
                        g_get_monotonic_time() + backoff_ms * 1000);
    g_mutex_unlock(&worker->lock);
    backoff_ms = MIN(backoff_ms * 2, OUTAGE_BACKOFF_MAX_MS);
  }
  worker_core_unref(worker);
  return NULL;
}

/* ---- Housekeeping
 * ------------------------------------------------------------ */

/* A GSource that fires at a ready time set from any thread. */
static gboolean
timer_dispatch(GSource *source, GSourceFunc callback, gpointer user_data)
{
  g_source_set_ready_time(source, -1);
  return callback(user_data);
}

static GSourceFuncs timer_source_funcs = {
    .dispatch = timer_dispatch,
};

static GSource *
add_timer(SluiceWorker *worker, GSourceFunc func, const gchar *name)
{
  GSource *source = g_source_new(&timer_source_funcs, sizeof(GSource));

  g_source_set_callback(source, func, worker, NULL);
  g_source_set_name(source, name);
  g_source_set_ready_time(source, -1);
  g_source_attach(source, worker->context);
  return source;
}

static void
destroy_source(GSource *source)
{
  g_source_destroy(source);
  g_source_unref(source);
}

/* Maps a clock time to a monotonic ready time, capped so a fake clock (which
 * real time never moves) is re-read regularly. */
static gint64
ready_time_for(SluiceWorker *worker, gint64 due_ms, gint64 cap_ms)
{
  gint64 delay_ms = due_ms - sluice_clock_now_ms(worker->clock);

  delay_ms = CLAMP(delay_ms, 0, cap_ms);
  return g_get_monotonic_time() + delay_ms * 1000;
}

static gboolean
worker_is_running(SluiceWorker *worker)
{
  gboolean running;

  g_mutex_lock(&worker->lock);
  running = worker->state == WORKER_RUNNING;
  g_mutex_unlock(&worker->lock);
  return running;
}

static gboolean
promote_tick(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GError) error = NULL;
  gint64 next_due = 0;
  gint64 poll = worker->options.schedule_poll_interval_ms;

  if (!worker_is_running(worker))
    return G_SOURCE_CONTINUE;
  if (!promote_all_due(worker, &next_due, &error)) {
    broker_failed(worker, "promoting scheduled messages", error);
    g_source_set_ready_time(worker->promote_source,
                            g_get_monotonic_time() + poll * 1000);
    return G_SOURCE_CONTINUE;
  }
  broker_ok(worker);
  /* Sleep until the earliest known due time, never longer than the poll
   * interval: other processes may schedule earlier work meanwhile. */
  g_source_set_ready_time(worker->promote_source,
                          next_due > 0 ? ready_time_for(worker, next_due, poll)
                                       : g_get_monotonic_time() + poll * 1000);
  return G_SOURCE_CONTINUE;
}

static gboolean
revocation_tick(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GError) error = NULL;

  if (!worker_is_running(worker))
    return G_SOURCE_CONTINUE;
  if (sync_revocations(worker, &error))
    broker_ok(worker);
  else
    broker_failed(worker, "reading revocations", error);
  return G_SOURCE_CONTINUE;
}

static void
watchdog_arm(SluiceWorker *worker, gint64 deadline)
{
  gboolean earlier;

  g_mutex_lock(&worker->lock);
  earlier =
      worker->earliest_deadline == 0 || deadline < worker->earliest_deadline;
  if (earlier)
    worker->earliest_deadline = deadline;
  g_mutex_unlock(&worker->lock);
  if (earlier && worker->watchdog_source != NULL)
    g_source_set_ready_time(worker->watchdog_source,
                            ready_time_for(worker, deadline, 1000));
}

/* Times out running jobs past their deadline: cancel the cancellable, and
 * settle the attempt as failed now (the thread may keep running; its late
 * result is discarded), so a hung task cannot hold its message forever. */
static gboolean
watchdog_tick(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GPtrArray) overdue = g_ptr_array_new();
  gint64 now = sluice_clock_now_ms(worker->clock);
  gint64 earliest = 0;
  GHashTableIter iter;
  gpointer key;

  g_mutex_lock(&worker->lock);
  g_hash_table_iter_init(&iter, worker->jobs);
  while (g_hash_table_iter_next(&iter, &key, NULL)) {
    Job *job = key;
    if (job->deadline == 0 || g_atomic_int_get(&job->phase) != JOB_RUNNING ||
        g_atomic_int_get(&job->settle_claimed))
      continue;
    if (job->deadline <= now)
      g_ptr_array_add(overdue, job_ref(job));
    else if (earliest == 0 || job->deadline < earliest)
      earliest = job->deadline;
  }
  worker->earliest_deadline = earliest;
  g_mutex_unlock(&worker->lock);

  for (guint i = 0; i < overdue->len; i++) {
    Job *job = overdue->pdata[i];
    if (job_claim(job)) {
      g_autofree gchar *message = g_strdup_printf(
          "timed out after %" G_GINT64_FORMAT " ms", job->timeout_ms);
      g_mutex_lock(&worker->lock);
      worker->stats.timed_out++;
      g_mutex_unlock(&worker->lock);
      job_cancel(job);
      sluice_log__task(G_LOG_LEVEL_WARNING, job->env->id, job->env->task,
                       job->env->queue, job->env->attempt,
                       "%s; its cancellable is cancelled", message);
      fail_job(job, message, -1, FALSE);
    }
    job_unref(job);
  }
  if (earliest > 0)
    g_source_set_ready_time(worker->watchdog_source,
                            ready_time_for(worker, earliest, 1000));
  return G_SOURCE_CONTINUE;
}

/* Tells the broker who this worker is and what it serves, for as long as
 * its lease: stats show it (dead once this lapses), and producers can tell
 * whether anyone serves a task name. */
static void
announce(SluiceWorker *worker)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_auto(GStrv) tasks = sluice_registry_list(worker->registry);
  SluiceWorkerInfo info = {0};

  info.host = (gchar *)g_get_host_name();
  info.pid = (gint)getpid();
  info.queues = worker->queues;
  info.tasks = tasks;
  info.concurrency = worker->options.concurrency;
  info.started_at_ms = worker->started_at;
  g_mutex_lock(&worker->lock);
  info.running = worker->running;
  info.succeeded = worker->stats.succeeded;
  info.failed = worker->stats.failed_attempts;
  info.retried = worker->stats.retried;
  info.dead_lettered = worker->stats.dead_lettered;
  g_mutex_unlock(&worker->lock);
  bytes = sluice_worker_info__encode(&info);
  if (!sluice_broker_announce(worker->broker, worker->id, bytes,
                              worker->options.visibility_timeout_ms, &error))
    broker_failed(worker, "announcing the worker", error);
}

/* Renews the worker's liveness and the leases of what it holds. Runs on the
 * housekeeping thread, which task code never blocks. */
static gboolean
heartbeat_tick(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GPtrArray) jobs =
      g_ptr_array_new_with_free_func((GDestroyNotify)job_unref);
  g_autofree SluiceDelivery **held = NULL;
  g_autoptr(GError) error = NULL;
  GHashTableIter iter;
  gpointer key;
  gint64 now_us = g_get_monotonic_time();
  gint64 lease = worker->options.visibility_timeout_ms;
  gint64 last_ok_us;
  gboolean ok;

  g_mutex_lock(&worker->lock);
  g_hash_table_iter_init(&iter, worker->jobs);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    g_ptr_array_add(jobs, job_ref(key));
  g_mutex_unlock(&worker->lock);
  held = g_new0(SluiceDelivery *, MAX(jobs->len, 1));
  for (guint i = 0; i < jobs->len; i++)
    held[i] = ((Job *)jobs->pdata[i])->delivery;

  ok = sluice_broker_heartbeat(worker->broker, worker->id, lease, held,
                               jobs->len, &error);
  g_mutex_lock(&worker->lock);
  last_ok_us = worker->last_lease_ok_us;
  g_mutex_unlock(&worker->lock);
  /* Lost if it could not be renewed for a whole lease, whether this
   * attempt failed or came too late (the process was stopped, or the
   * housekeeping thread starved): a peer may have taken our work. */
  if ((sluice_broker_get_caps(worker->broker) & SLUICE_BROKER_CAP_LEASES) &&
      !worker->lease_lost && now_us - last_ok_us > lease * 1000) {
    worker->lease_lost = TRUE;
    g_mutex_lock(&worker->lock);
    worker->stats.leases_lost++;
    g_mutex_unlock(&worker->lock);
    /* Holding nothing, nothing can run twice: the outage line says it. */
    if (jobs->len > 0)
      sluice_log__message(G_LOG_LEVEL_WARNING,
                          "lease lost; message may be executed again (%u held; "
                          "not renewed for %" G_GINT64_FORMAT " ms%s%s)",
                          jobs->len, (now_us - last_ok_us) / 1000,
                          ok ? "" : ": ", ok ? "" : error->message);
  }
  if (ok) {
    gint64 renewed_us = g_get_monotonic_time();

    g_mutex_lock(&worker->lock);
    /* Renewals come every third of a lease. A longer gap is a stall (ours,
     * or the broker's, which lets every lease lapse at once): peers that
     * stalled with us may not have renewed yet, and would look dead. Take
     * nothing over for half a lease. */
    if (renewed_us - worker->last_lease_ok_us > lease * 1000 * 2 / 3)
      worker->reclaim_quiet_until_us = renewed_us + lease * 1000 / 2;
    worker->last_lease_ok_us = renewed_us;
    g_mutex_unlock(&worker->lock);
    worker->lease_lost = FALSE;
    broker_ok(worker);
    announce(worker);
  } else {
    broker_failed(worker, "renewing the worker's lease", error);
  }
  return G_SOURCE_CONTINUE;
}

/* Decides whether the fetcher should go into quarantine to reclaim: at
 * once when the worker is idle; when it is busy, only if the broker says
 * there is something to take (draining is not free). The reclaiming itself
 * is the fetcher's, one delivery at a time. */
static gboolean
reclaim_tick(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GError) error = NULL;
  gboolean wanted;
  guint held;
  guint n = 0;

  g_mutex_lock(&worker->lock);
  wanted = worker->reclaim_wanted;
  held = worker->held;
  g_mutex_unlock(&worker->lock);
  if (!worker_is_running(worker) || wanted)
    return G_SOURCE_CONTINUE;
  if (held > 0) {
    if (!sluice_broker_count_reclaimable(
            worker->broker, worker->id, (const gchar *const *)worker->queues, 1,
            worker->options.visibility_timeout_ms, &n, &error)) {
      if (!g_error_matches(error, SLUICE_BROKER_ERROR,
                           SLUICE_BROKER_ERROR_UNSUPPORTED))
        broker_failed(worker, "looking for deliveries of dead workers", error);
      return G_SOURCE_CONTINUE;
    }
    broker_ok(worker);
    if (n == 0)
      return G_SOURCE_CONTINUE;
  }
  /* The fetcher sees it when its fetch returns, within a second: waking
   * it would cost this thread a round trip, which a stalled broker
   * answers late, delaying the heartbeat. */
  g_mutex_lock(&worker->lock);
  worker->reclaim_wanted = TRUE;
  g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);
  return G_SOURCE_CONTINUE;
}

static gboolean
periodic_tick(gpointer data)
{
  SluiceWorker *worker = data;
  gint64 now = sluice_clock_now_ms(worker->clock);
  gint64 next = 0;

  if (!worker_is_running(worker))
    return G_SOURCE_CONTINUE;
  for (guint i = 0; i < worker->periodics->len; i++) {
    SluicePeriodic *periodic = worker->periodics->pdata[i];
    g_autoptr(GError) error = NULL;
    gint64 due;

    if (!sluice_periodic__tick(periodic, worker->broker, now, &error)) {
      g_autofree gchar *what = g_strdup_printf(
          "periodic schedule “%s”", sluice_periodic__get_name(periodic));
      broker_failed(worker, what, error);
    }
    due = sluice_periodic__get_next_due(periodic);
    if (due > 0 && (next == 0 || due < next))
      next = due;
  }
  g_source_set_ready_time(worker->periodic_source,
                          next > 0 ? ready_time_for(worker, next, 1000)
                                   : g_get_monotonic_time() + 1000000);
  return G_SOURCE_CONTINUE;
}

static gboolean
signal_stop(gpointer data)
{
  SluiceWorker *worker = data;

  if (g_atomic_int_compare_and_exchange(&worker->signalled, 0, 1)) {
    sluice_log__message(
        G_LOG_LEVEL_MESSAGE,
        "signal received: stopping gracefully (waiting up to %" G_GINT64_FORMAT
        " ms for running tasks); send it again to stop at once",
        worker->options.shutdown_timeout_ms);
    sluice_worker_request_stop(worker);
  } else {
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "second signal: stopping at once; running tasks are "
                        "cancelled and given back for redelivery");
    sluice_worker_stop_now(worker);
  }
  return G_SOURCE_CONTINUE;
}

/* A fake clock moved: re-evaluate everything that waits for a time. */
static gboolean
clock_moved_idle(gpointer data)
{
  SluiceWorker *worker = data;

  g_source_set_ready_time(worker->promote_source, 0);
  g_source_set_ready_time(worker->watchdog_source, 0);
  if (worker->periodic_source != NULL)
    g_source_set_ready_time(worker->periodic_source, 0);
  return G_SOURCE_REMOVE;
}

static void
clock_moved(SluiceClock *clock, gint64 now_ms, gpointer data)
{
  SluiceWorker *worker = data;

  g_main_context_invoke_full(worker->context, G_PRIORITY_HIGH, clock_moved_idle,
                             worker_core_ref(worker),
                             (GDestroyNotify)worker_core_unref);
}

static gpointer
housekeeper_main(gpointer data)
{
  SluiceWorker *worker = data;

  /* Not a GMainLoop: g_main_loop_quit() before g_main_loop_run() is lost,
   * and a worker may be stopped before this thread gets going. A flag plus
   * g_main_context_wakeup() cannot miss. */
  g_main_context_push_thread_default(worker->context);
  while (!g_atomic_int_get(&worker->housekeeping_quit))
    g_main_context_iteration(worker->context, TRUE);
  g_main_context_pop_thread_default(worker->context);
  worker_core_unref(worker);
  return NULL;
}

static void
add_interval(SluiceWorker *worker, guint interval_ms, GSourceFunc func)
{
  GSource *source = g_timeout_source_new(MAX(interval_ms, 1));

  g_source_set_callback(source, func, worker, NULL);
  g_source_attach(source, worker->context);
  g_source_unref(source);
}

/* run_until_idle: periodic occurrences due now must be enqueued, and
 * revocations made before the call must be known, before the fetcher
 * looks. That state belongs to the housekeeping thread, so the fetcher asks
 * that thread to tick and waits for it. */
static gboolean
sync_tick(gpointer data)
{
  SluiceWorker *worker = data;

  revocation_tick(worker);
  if (worker->periodic_source != NULL)
    periodic_tick(worker);
  g_mutex_lock(&worker->lock);
  worker->sync_done++;
  g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);
  return G_SOURCE_REMOVE;
}

static void
sync_housekeeping(SluiceWorker *worker)
{
  guint64 target;

  g_mutex_lock(&worker->lock);
  target = worker->sync_done + 1;
  g_mutex_unlock(&worker->lock);
  g_main_context_invoke_full(worker->context, G_PRIORITY_HIGH, sync_tick,
                             worker_core_ref(worker),
                             (GDestroyNotify)worker_core_unref);
  g_mutex_lock(&worker->lock);
  while (worker->sync_done < target && !worker->stop_requested)
    g_cond_wait(&worker->cond, &worker->lock);
  g_mutex_unlock(&worker->lock);
}

/* ---- Start, stop, idle -----------------------------------------------------
 */

gboolean
sluice_worker_handle_signals(SluiceWorker *worker, GError **error)
{
  g_return_val_if_fail(worker != NULL, FALSE);
  g_mutex_lock(&worker->lock);
  if (worker->state != WORKER_NEW) {
    g_mutex_unlock(&worker->lock);
    g_set_error_literal(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_STATE,
                        "sluice_worker_handle_signals() must be called before "
                        "sluice_worker_start()");
    return FALSE;
  }
  worker->handle_signals = TRUE;
  g_mutex_unlock(&worker->lock);
  return TRUE;
}

gboolean
sluice_worker_start(SluiceWorker *worker, GError **error)
{
  g_autoptr(GError) local = NULL;
  guint64 caps;

  g_return_val_if_fail(worker != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  g_mutex_lock(&worker->lock);
  if (worker->state != WORKER_NEW) {
    g_mutex_unlock(&worker->lock);
    g_set_error_literal(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_STATE,
                        "a worker can be started only once; make a new one");
    return FALSE;
  }
  g_mutex_unlock(&worker->lock);

  /* A broker that is down is waited out like any outage (under systemd,
   * Redis often starts after its workers); one that answers no (a
   * namespace used in the other mode, bad credentials) fails the start. */
  if (!sluice_broker_check(worker->broker, &local)) {
    if (!g_error_matches(local, SLUICE_BROKER_ERROR,
                         SLUICE_BROKER_ERROR_UNAVAILABLE)) {
      g_propagate_error(error, g_steal_pointer(&local));
      return FALSE;
    }
    broker_failed(worker, "connecting", local);
    g_clear_error(&local);
  }

  g_mutex_lock(&worker->lock);
  worker->state = WORKER_RUNNING;
  worker->accepting = TRUE;
  worker->started_at = sluice_clock_now_ms(worker->clock);
  g_mutex_unlock(&worker->lock);

  /* Revocations are loaded before the first fetch, so a task cancelled
   * while no worker ran is skipped. A broker that is down now is waited
   * out by the periodic sync instead. */
  if (!sync_revocations(worker, &local))
    broker_failed(worker, "reading revocations", local);
  for (guint i = 0; i < worker->periodics->len; i++) {
    g_autoptr(GError) perror = NULL;
    if (!sluice_periodic__start(worker->periodics->pdata[i], worker->broker,
                                sluice_clock_now_ms(worker->clock), &perror))
      sluice_log__message(
          G_LOG_LEVEL_WARNING,
          "periodic schedule “%s” could not start: %s; will "
          "retry",
          sluice_periodic__get_name(worker->periodics->pdata[i]),
          perror->message);
  }

  for (guint i = 0; i < worker->options.concurrency; i++)
    g_ptr_array_add(
        worker->executors,
        g_thread_new("sluice-exec", executor_main, worker_core_ref(worker)));

  caps = sluice_broker_get_caps(worker->broker);
  worker->promote_source = add_timer(worker, promote_tick, "sluice-promote");
  g_source_set_ready_time(worker->promote_source, 0);
  worker->watchdog_source = add_timer(worker, watchdog_tick, "sluice-watchdog");
  if (worker->periodics->len > 0) {
    worker->periodic_source =
        add_timer(worker, periodic_tick, "sluice-periodic");
    g_source_set_ready_time(worker->periodic_source, 0);
  }
  add_interval(worker, (guint)worker->options.revocation_interval_ms,
               revocation_tick);
  g_mutex_lock(&worker->lock);
  worker->last_lease_ok_us = g_get_monotonic_time();
  g_mutex_unlock(&worker->lock);
  add_interval(worker, (guint)MAX(worker->options.visibility_timeout_ms / 3, 1),
               heartbeat_tick);
  if (caps & SLUICE_BROKER_CAP_LEASES)
    add_interval(worker,
                 (guint)MAX(worker->options.visibility_timeout_ms / 2, 1),
                 reclaim_tick);
  if (worker->handle_signals) {
    GSource *s = g_unix_signal_source_new(SIGTERM);
    g_source_set_callback(s, signal_stop, worker, NULL);
    g_source_attach(s, worker->context);
    g_source_unref(s);
    s = g_unix_signal_source_new(SIGINT);
    g_source_set_callback(s, signal_stop, worker, NULL);
    g_source_attach(s, worker->context);
    g_source_unref(s);
  }
  if (sluice_clock_is_fake(worker->clock))
    worker->clock_watch =
        sluice_clock_add_watch(worker->clock, clock_moved, worker);
  /* First heartbeat before the first fetch, so stats show the worker and a
   * lease exists before anything is held. */
  heartbeat_tick(worker);

  worker->housekeeper = g_thread_new("sluice-housekeep", housekeeper_main,
                                     worker_core_ref(worker));
  worker->settler =
      g_thread_new("sluice-settle", settler_main, worker_core_ref(worker));
  worker->fetcher =
      g_thread_new("sluice-fetch", fetcher_main, worker_core_ref(worker));
  sluice_log__message(G_LOG_LEVEL_INFO,
                      "worker %s started on broker %s: concurrency %u, "
                      "prefetch %u",
                      worker->id, sluice_broker_get_name(worker->broker),
                      worker->options.concurrency, worker->options.prefetch);
  return TRUE;
}

void
sluice_worker_request_stop(SluiceWorker *worker)
{
  g_return_if_fail(worker != NULL);
  g_mutex_lock(&worker->lock);
  worker->stop_requested = TRUE;
  g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);
  sluice_broker_wakeup(worker->broker);
}

void
sluice_worker_stop_now(SluiceWorker *worker)
{
  g_return_if_fail(worker != NULL);
  g_atomic_int_set(&worker->force_stop, 1);
  g_mutex_lock(&worker->lock);
  worker->forced = TRUE;
  g_mutex_unlock(&worker->lock);
  sluice_worker_request_stop(worker);
}

gboolean
sluice_worker_stopped_forcibly(SluiceWorker *worker)
{
  gboolean forced;

  g_return_val_if_fail(worker != NULL, FALSE);
  g_mutex_lock(&worker->lock);
  forced = worker->forced;
  g_mutex_unlock(&worker->lock);
  return forced;
}

static void
release_queued_jobs(SluiceWorker *worker)
{
  GHashTableIter iter;
  gpointer key;
  GQueue waiting = G_QUEUE_INIT;
  GQueue quarantined = G_QUEUE_INIT;

  /* Take the ready queue away from the executors; the phase CAS below
   * decides each job, so a job an executor took meanwhile is left to it. */
  g_mutex_lock(&worker->exec_lock);
  waiting = worker->ready;
  g_queue_init(&worker->ready);
  g_mutex_unlock(&worker->exec_lock);

  g_mutex_lock(&worker->lock);
  quarantined = worker->quarantined;
  g_queue_init(&worker->quarantined);
  g_hash_table_iter_init(&iter, worker->jobs);
  while (g_hash_table_iter_next(&iter, &key, NULL)) {
    Job *job = key;
    if (g_atomic_int_compare_and_exchange(&job->phase, JOB_QUEUED,
                                          JOB_RELEASED) &&
        job_claim(job))
      settle_release(job);
  }
  g_mutex_unlock(&worker->lock);
  g_queue_clear_full(&waiting, (GDestroyNotify)job_unref);
  g_queue_clear_full(&quarantined, (GDestroyNotify)job_unref);
}

/* Waits for running tasks up to the shutdown timeout (not at all when the
 * stop is forced); cancels what still runs and gives it back; then lets
 * the cancelled tasks return for a short grace. Returns how many still run
 * after it: those ignored their cancellable, and each is logged by id. */
static guint
wait_for_running(SluiceWorker *worker)
{
  gint64 deadline =
      g_get_monotonic_time() + worker->options.shutdown_timeout_ms * 1000;
  g_autoptr(GPtrArray) cancelled =
      g_ptr_array_new_with_free_func((GDestroyNotify)job_unref);
  GHashTableIter iter;
  gpointer key;
  guint stuck = 0;

  g_mutex_lock(&worker->lock);
  worker->running_waited = TRUE;
  while (worker->running > 0 && !g_atomic_int_get(&worker->force_stop) &&
         g_cond_wait_until(&worker->cond, &worker->lock, deadline))
    ;
  g_hash_table_iter_init(&iter, worker->jobs);
  while (g_hash_table_iter_next(&iter, &key, NULL)) {
    Job *job = key;
    if (g_atomic_int_get(&job->phase) == JOB_RUNNING && job_claim(job)) {
      if (job->env != NULL)
        sluice_log__task(
            G_LOG_LEVEL_WARNING, job->env->id, job->env->task, job->env->queue,
            job->env->attempt,
            "still running %s: cancelled and released for redelivery; a "
            "late result will be discarded",
            g_atomic_int_get(&worker->force_stop)
                ? "when the stop was forced"
                : "after the shutdown timeout");
      job_cancel(job);
      settle_release(job);
      g_ptr_array_add(cancelled, job_ref(job));
    }
  }
  if (cancelled->len > 0 && !g_atomic_int_get(&worker->force_stop)) {
    /* Most tasks return promptly once cancelled; only the ones that do
     * not are stuck. */
    deadline = g_get_monotonic_time() + CANCEL_GRACE_MS * 1000;
    while (worker->running > 0 &&
           g_cond_wait_until(&worker->cond, &worker->lock, deadline))
      ;
  }
  g_mutex_unlock(&worker->lock);
  for (guint i = 0; i < cancelled->len; i++) {
    Job *job = cancelled->pdata[i];
    if (!g_atomic_int_get(&job->in_task))
      continue;
    stuck++;
    sluice_log__task(G_LOG_LEVEL_WARNING, job_id(job), job_task(job),
                     job->delivery->queue, job_attempt(job),
                     "task %s ignored its cancellable: still running %s after "
                     "it was cancelled; its thread is left behind",
                     job_id(job) != NULL ? job_id(job) : "(unknown)",
                     g_atomic_int_get(&worker->force_stop) ? "when the stop "
                                                             "was forced"
                                                           : "2 s");
  }
  return stuck;
}

/* The stop sequence. Exactly one thread runs it; others wait for it. */
static void
drive_stop(SluiceWorker *worker)
{
  guint left;
  g_autoptr(GError) error = NULL;

  g_mutex_lock(&worker->lock);
  if (worker->state == WORKER_NEW) {
    worker->state = WORKER_STOPPED;
    g_cond_broadcast(&worker->cond);
    g_mutex_unlock(&worker->lock);
    return;
  }
  if (worker->state != WORKER_RUNNING || worker->stop_driver) {
    while (worker->state != WORKER_STOPPED)
      g_cond_wait(&worker->cond, &worker->lock);
    g_mutex_unlock(&worker->lock);
    return;
  }
  worker->stop_driver = TRUE;
  worker->stop_requested = TRUE;
  worker->state = WORKER_STOPPING;
  g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);

  /* 1. Stop fetching. */
  sluice_broker_wakeup(worker->broker);
  g_thread_join(worker->fetcher);
  worker->fetcher = NULL;

  /* 2. Give back what has not started; 3. wait for what runs. */
  release_queued_jobs(worker);
  left = wait_for_running(worker);

  /* 4. Let the settler flush every settlement (the housekeeping thread
   * keeps renewing leases meanwhile). */
  g_mutex_lock(&worker->lock);
  while (worker->held > 0)
    g_cond_wait(&worker->cond, &worker->lock);
  worker->accepting = FALSE;
  g_mutex_unlock(&worker->lock);
  g_async_queue_push(worker->settle_queue, SETTLE_STOP);
  g_thread_join(worker->settler);
  worker->settler = NULL;

  /* 5. Stop housekeeping, and with it the heartbeat: one that ran after
   * `leave` would renew the liveness key, and peers would wait a whole
   * lease for what this worker released. */
  if (worker->clock_watch != 0)
    sluice_clock_remove_watch(worker->clock, worker->clock_watch);
  g_atomic_int_set(&worker->housekeeping_quit, 1);
  g_main_context_wakeup(worker->context);
  g_thread_join(worker->housekeeper);
  worker->housekeeper = NULL;
  g_clear_pointer(&worker->promote_source, destroy_source);
  g_clear_pointer(&worker->watchdog_source, destroy_source);
  g_clear_pointer(&worker->periodic_source, destroy_source);

  /* 6. Leave, so a broker with leases lets peers take what we released. */
  if (!sluice_broker_leave(worker->broker, worker->id, &error))
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "could not unregister from the broker: %s; peers "
                        "reclaim what this worker released once its lease "
                        "lapses",
                        error->message);

  /* Executors leave once the ready queue is empty. Tasks stuck past the
   * timeout keep their threads: those are not waited for, and each holds a
   * reference to the worker until its task returns. */
  g_mutex_lock(&worker->exec_lock);
  worker->exec_stop = TRUE;
  g_cond_broadcast(&worker->exec_cond);
  g_mutex_unlock(&worker->exec_lock);
  for (guint i = 0; i < worker->executors->len; i++) {
    if (left == 0)
      g_thread_join(worker->executors->pdata[i]);
    else
      g_thread_unref(worker->executors->pdata[i]);
  }
  g_ptr_array_set_size(worker->executors, 0);

  if (left > 0)
    sluice_log__message(G_LOG_LEVEL_INFO,
                        "worker %s stopped; %u tasks ignored their "
                        "cancellable (logged above by id)",
                        worker->id, left);
  else
    sluice_log__message(G_LOG_LEVEL_INFO, "worker %s stopped", worker->id);
  g_mutex_lock(&worker->lock);
  worker->state = WORKER_STOPPED;
  g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);
}

void
sluice_worker_wait(SluiceWorker *worker)
{
  g_return_if_fail(worker != NULL);
  g_mutex_lock(&worker->lock);
  while (!worker->stop_requested && worker->state == WORKER_RUNNING)
    g_cond_wait(&worker->cond, &worker->lock);
  g_mutex_unlock(&worker->lock);
  drive_stop(worker);
}

void
sluice_worker_stop(SluiceWorker *worker)
{
  g_return_if_fail(worker != NULL);
  sluice_worker_request_stop(worker);
  drive_stop(worker);
}

gboolean
sluice_worker_run_until_idle(SluiceWorker *worker, gint64 timeout_ms,
                             GError **error)
{
  guint64 gen;
  gint64 deadline;
  gboolean idle;

  g_return_val_if_fail(worker != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  g_mutex_lock(&worker->lock);
  if (worker->state == WORKER_NEW) {
    g_mutex_unlock(&worker->lock);
    if (!sluice_worker_start(worker, error))
      return FALSE;
    g_mutex_lock(&worker->lock);
  }
  if (worker->state != WORKER_RUNNING || worker->stop_requested) {
    g_mutex_unlock(&worker->lock);
    g_set_error_literal(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_STATE,
                        "the worker is stopping or stopped");
    return FALSE;
  }
  gen = ++worker->idle_request_gen;
  g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);
  /* The fetcher may be blocked in a fetch that began before the request. */
  sluice_broker_wakeup(worker->broker);

  deadline =
      timeout_ms < 0 ? G_MAXINT64 : g_get_monotonic_time() + timeout_ms * 1000;
  g_mutex_lock(&worker->lock);
  while (worker->idle_done_gen < gen && !worker->stop_requested) {
    if (!g_cond_wait_until(&worker->cond, &worker->lock, deadline))
      break;
  }
  idle = worker->idle_done_gen >= gen;
  g_mutex_unlock(&worker->lock);
  if (!idle)
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_TIMEOUT,
                "the worker was not idle after %" G_GINT64_FORMAT
                " ms: a task may be stuck or the queues keep filling",
                timeout_ms);
  return idle;
}

/* ---- Periodic tasks
 * ---------------------------------------------------------- */

gboolean
sluice_worker_add_periodic(SluiceWorker *worker,
                           const SluicePeriodicOptions *options, GError **error)
{
  SluicePeriodic *periodic;

  g_return_val_if_fail(worker != NULL, FALSE);
  g_return_val_if_fail(options != NULL, FALSE);

  if (sluice_broker__get_class(worker->broker)->claim_periodic == NULL) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_UNSUPPORTED,
                "the “%s” broker cannot dispatch periodic tasks (it has no "
                "claim_periodic slot)",
                sluice_broker_get_name(worker->broker));
    return FALSE;
  }
  g_mutex_lock(&worker->lock);
  if (worker->state != WORKER_NEW) {
    g_mutex_unlock(&worker->lock);
    g_set_error_literal(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_STATE,
                        "add periodic schedules before starting the worker");
    return FALSE;
  }
  g_mutex_unlock(&worker->lock);
  periodic = sluice_periodic__new(options, worker->registry, error);
  if (periodic == NULL)
    return FALSE;
  g_ptr_array_add(worker->periodics, periodic);
  return TRUE;
}

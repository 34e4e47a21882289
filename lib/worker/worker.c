/* worker.c - the worker: options, lifecycle, the stop sequence and
 * run_until_idle. See worker-private.h for how its threads divide the work.
 */
#include "config.h"

#include <glib-unix.h>
#include <signal.h>
#include <string.h>

#include <unistd.h>

#include "lib/isolation-private.h"
#include "serializers/codec-private.h"

/* The first argument is the quark's name, not an expression. */
/* clang-format off */
G_DEFINE_QUARK(sluice-worker-error-quark, sluice_worker_error)
/* clang-format on */

/* After the shutdown timeout, running tasks are cancelled; this is how long
 * they then have to return before the stop calls them stuck. */
/* Process isolation: how long past a child's grace the stop waits for its
 * kill to be seen (the zygote reaps it, and reports). */
#define PROCESS_REAP_MARGIN_MS 15000

static void drive_stop(SluiceWorker *worker);

void
sluice_worker_options_init(SluiceWorkerOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->concurrency = 4;
  options->prefetch = SLUICE_DEFAULT_PREFETCH;
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
  options->isolation = SLUICE_ISOLATION_THREAD;
  options->cancel_grace_ms = SLUICE_DEFAULT_CANCEL_GRACE_MS;
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
  else if (o->isolation != SLUICE_ISOLATION_THREAD &&
           o->isolation != SLUICE_ISOLATION_PROCESS)
    bad = "isolation must be SLUICE_ISOLATION_THREAD or "
          "SLUICE_ISOLATION_PROCESS";
  else if (o->hard_timeout_ms < 0 || o->cancel_grace_ms < 0)
    bad = "hard_timeout_ms and cancel_grace_ms cannot be negative";
  else if (o->isolation == SLUICE_ISOLATION_THREAD &&
           (o->hard_timeout_ms > 0 || o->max_tasks_per_child > 0 ||
            o->max_rss_per_child > 0 || o->memory_limit_per_child > 0))
    bad = "hard_timeout_ms, max_tasks_per_child, max_rss_per_child and "
          "memory_limit_per_child need process isolation (isolation = "
          "SLUICE_ISOLATION_PROCESS, or sluice worker --isolation process): "
          "a thread cannot be killed, nor its memory counted";
  else if (o->memory_limit_per_child > 0 &&
           o->memory_limit_per_child < ((guint64)16 << 20))
    bad = "memory_limit_per_child must be 0 (none) or at least 16 MiB";
  if (bad == NULL)
    bad = sluice_retry_policy__problem(&o->retry);
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
      if (!sluice_client__check_name(SLUICE_NAME_QUEUE, o->queues[i], &local)) {
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
  for (guint i = 0; i < options->n_queue_rate_limits; i++) {
    const SluiceQueueRateLimit *q = &options->queue_rate_limits[i];
    g_autofree gchar *field = g_strdup_printf("queue_rate_limits[%u].rate", i);
    g_autofree gchar *problem =
        q->queue == NULL ? g_strdup_printf("queue_rate_limits[%u].queue: name "
                                           "the queue the limit is for",
                                           i)
                         : sluice_rate_limit__problem(&q->rate, field);
    if (problem != NULL) {
      g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                  "invalid worker options: %s", problem);
      return NULL;
    }
  }
  for (guint i = 0; i < options->n_queue_concurrency_limits; i++) {
    const SluiceQueueConcurrencyLimit *q =
        &options->queue_concurrency_limits[i];
    g_autofree gchar *field =
        g_strdup_printf("queue_concurrency_limits[%u].limit", i);
    g_autofree gchar *problem =
        q->queue == NULL
            ? g_strdup_printf("queue_concurrency_limits[%u].queue: name the "
                              "queue the limit is for",
                              i)
            : sluice_concurrency_limit__problem(&q->limit, field);
    if (problem != NULL) {
      g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                  "invalid worker options: %s", problem);
      return NULL;
    }
  }
  if (options->n_queue_concurrency_limits > 0 &&
      !sluice_broker_supports(broker, SLUICE_BROKER_FEATURE_SLOTS)) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_UNSUPPORTED,
                "the “%s” broker cannot keep concurrency limits (it has no "
                "slots table): remove queue_concurrency_limits, or use a "
                "broker that has it",
                sluice_broker_get_name(broker));
    return NULL;
  }
  if (options->queue_weights != NULL) {
    guint n = options->queues != NULL ? g_strv_length((gchar **)options->queues)
                                      : 1; /* the default queue */
    for (guint i = 0; i < n; i++)
      if (options->queue_weights[i] < 1 ||
          options->queue_weights[i] > 1000000) {
        g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                    "invalid worker options: queue_weights[%u]: must be "
                    "between 1 and 1000000 (one weight per queue), found %u",
                    i, options->queue_weights[i]);
        return NULL;
      }
  }
  if (options->n_queue_rate_limits > 0 &&
      !sluice_broker_supports(broker, SLUICE_BROKER_FEATURE_RATES)) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_UNSUPPORTED,
                "the “%s” broker cannot keep rate limits (it has no rates "
                "table): remove queue_rate_limits, or use a broker that has "
                "it",
                sluice_broker_get_name(broker));
    return NULL;
  }

  worker = g_new0(SluiceWorker, 1);
  g_atomic_ref_count_init(&worker->ref_count);
  g_atomic_ref_count_init(&worker->core_refs);
  worker->broker = sluice_broker_ref(broker);
  worker->registry = sluice_registry_ref(registry);
  worker->clock = sluice_clock_ref(sluice_broker_get_clock(broker));
  worker->options = *options;
  if (options->keyring != NULL)
    sluice_keyring_ref(options->keyring);
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
  worker->queue_rates = g_hash_table_new_full(
      g_str_hash, g_str_equal, g_free, (GDestroyNotify)sluice_rate_limit__free);
  for (guint i = 0; i < options->n_queue_rate_limits; i++)
    g_hash_table_replace(
        worker->queue_rates, g_strdup(options->queue_rate_limits[i].queue),
        sluice_rate_limit__copy(&options->queue_rate_limits[i].rate));
  worker->options.queue_rate_limits = NULL;
  worker->options.n_queue_rate_limits = 0;
  worker->queue_slots =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                            (GDestroyNotify)sluice_concurrency_limit__free);
  for (guint i = 0; i < options->n_queue_concurrency_limits; i++)
    g_hash_table_replace(worker->queue_slots,
                         g_strdup(options->queue_concurrency_limits[i].queue),
                         sluice_concurrency_limit__copy(
                             &options->queue_concurrency_limits[i].limit));
  worker->options.queue_concurrency_limits = NULL;
  worker->options.n_queue_concurrency_limits = 0;
  if (options->queue_weights != NULL) {
    guint n = g_strv_length(worker->queues);
    worker->weights = g_memdup2(options->queue_weights, n * sizeof(guint));
    worker->wrr_current = g_new0(gint64, n);
  }
  worker->options.queue_weights = NULL;

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
  sluice_worker__init_active_queues(worker);
  sluice_metrics__init(worker);
  return worker;
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
  sluice_worker__core_unref(worker);
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

/* SIGTERM and SIGINT, on the housekeeping context: the first asks for a
 * graceful stop, the second for one at once. */
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
    /* What the operator asked for: a notice, not a warning. */
    sluice_log__message(G_LOG_LEVEL_MESSAGE,
                        "second signal: stopping at once; running tasks are "
                        "cancelled and given back for redelivery");
    sluice_worker_stop_now(worker);
  }
  return G_SOURCE_CONTINUE;
}

static void
watch_signals(SluiceWorker *worker)
{
  static const int signals[] = {SIGTERM, SIGINT};

  for (gsize i = 0; i < G_N_ELEMENTS(signals); i++) {
    GSource *s = g_unix_signal_source_new(signals[i]);
    g_source_set_callback(s, signal_stop, worker, NULL);
    g_source_attach(s, worker->context);
    g_source_unref(s);
  }
}

gboolean
sluice_worker_start(SluiceWorker *worker, GError **error)
{
  g_autoptr(GError) local = NULL;

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

  {
    g_auto(GStrv) names = sluice_registry_list(worker->registry);
    for (guint i = 0; names[i] != NULL; i++) {
      SluiceTaskOptions o;
      const gchar *missing = NULL;

      if (!sluice_registry_get_options(worker->registry, names[i], &o))
        continue;
      if (o.rate_limit != NULL &&
          !sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_RATES))
        missing = "a rate limit";
      else if (o.concurrency_limit != NULL &&
               !sluice_broker_supports(worker->broker,
                                       SLUICE_BROKER_FEATURE_SLOTS))
        missing = "a concurrency limit";
      if (missing != NULL) {
        g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_UNSUPPORTED,
                    "task “%s” has %s, but the “%s” broker cannot keep one "
                    "(it has no table for it): remove the limit, or use a "
                    "broker that has it",
                    names[i], missing, sluice_broker_get_name(worker->broker));
        return FALSE;
      }
    }
  }

  /* First of all: the zygote must be forked while this process runs as
   * few threads as it can, and before the worker starts any. */
  if (worker->options.isolation == SLUICE_ISOLATION_PROCESS) {
    worker->pool = sluice_pool__new(worker, error);
    if (worker->pool == NULL)
      return FALSE;
  }

  /* A broker that is down is waited out like any outage (under systemd,
   * Redis often starts after its workers); one that answers no (a
   * namespace used in the other mode, bad credentials) fails the start. */
  if (!sluice_broker_check(worker->broker, &local)) {
    if (!g_error_matches(local, SLUICE_BROKER_ERROR,
                         SLUICE_BROKER_ERROR_UNAVAILABLE)) {
      g_clear_pointer(&worker->pool, sluice_pool__free);
      g_propagate_error(error, g_steal_pointer(&local));
      return FALSE;
    }
    sluice_worker__broker_failed(worker, "connecting", local);
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
  if (!sluice_worker__sync_revocations(worker, &local))
    sluice_worker__broker_failed(worker, "reading revocations", local);
  g_clear_error(&local);
  if (!sluice_worker__sync_paused(worker, &local))
    sluice_worker__broker_failed(worker, "reading the paused queues", local);
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
    g_ptr_array_add(worker->executors,
                    g_thread_new("sluice-exec", sluice_worker__executor_main,
                                 sluice_worker__core_ref(worker)));

  if (worker->handle_signals)
    watch_signals(worker);
  sluice_worker__housekeeping_start(worker);
  worker->settler = g_thread_new("sluice-settle", sluice_worker__settler_main,
                                 sluice_worker__core_ref(worker));
  worker->fetcher = g_thread_new("sluice-fetch", sluice_worker__fetcher_main,
                                 sluice_worker__core_ref(worker));
  sluice_log__message(G_LOG_LEVEL_INFO,
                      "worker %s started on broker %s: concurrency %u, "
                      "prefetch %u, %s isolation",
                      worker->id, sluice_broker_get_name(worker->broker),
                      worker->options.concurrency, worker->options.prefetch,
                      worker->pool != NULL ? "process" : "thread");
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
      sluice_outcome__release(job);
  }
  g_mutex_unlock(&worker->lock);
  g_queue_clear_full(&waiting, (GDestroyNotify)sluice_job__unref);
  g_queue_clear_full(&quarantined, (GDestroyNotify)sluice_job__unref);
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
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_job__unref);
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
      /* A forced stop does what it was asked to; a shutdown timeout that
       * cuts tasks short may want raising. */
      if (job->env != NULL)
        sluice_log__envelope(
            g_atomic_int_get(&worker->force_stop) ? G_LOG_LEVEL_MESSAGE
                                                  : G_LOG_LEVEL_WARNING,
            job->env, job->env->queue,
            "still running %s: cancelled and released for redelivery; a "
            "late result will be discarded",
            g_atomic_int_get(&worker->force_stop)
                ? "when the stop was forced"
                : "after the shutdown timeout");
      sluice_job__cancel(job);
      sluice_outcome__release(job);
      g_ptr_array_add(cancelled, job_ref(job));
    }
  }
  if (cancelled->len > 0) {
    /* Most tasks return promptly once cancelled; only the ones that do
     * not are stuck. A forced stop waits for them too: it skips the
     * shutdown timeout, but a task that returns a millisecond after its
     * cancellable fired did not ignore it, and is not called stuck. A
     * child is killed at the end of its grace (at once when the stop is
     * forced), so in process isolation nothing is stuck for long: the
     * margin covers the kill and its reaping. */
    deadline = g_get_monotonic_time() +
               (worker->options.cancel_grace_ms +
                (worker->pool != NULL ? PROCESS_REAP_MARGIN_MS : 0)) *
                   1000;
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
    sluice_log__envelope(
        G_LOG_LEVEL_WARNING, job->env, job->delivery->queue,
        "task %s ignored its cancellable: still running %" G_GINT64_FORMAT
        " ms after it was cancelled%s; its thread is left behind",
        job_id(job) != NULL ? job_id(job) : "(unknown)",
        worker->options.cancel_grace_ms,
        g_atomic_int_get(&worker->force_stop) ? " (the stop was forced)" : "");
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
  sluice_worker__housekeeping_stop(worker);

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
  /* With tasks left behind an executor may still use its child's slot. */
  if (left == 0)
    g_clear_pointer(&worker->pool, sluice_pool__free);

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

/* A cancellation wakes run_until_idle's wait. */
static void
on_idle_wait_cancelled(GCancellable *cancellable, gpointer data)
{
  SluiceWorker *worker = data;

  g_mutex_lock(&worker->lock);
  g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);
}

gboolean
sluice_worker_run_until_idle(SluiceWorker *worker, gint64 timeout_ms,
                             GCancellable *cancellable, GError **error)
{
  guint64 gen;
  gint64 deadline;
  gboolean idle;
  gulong handler = 0;

  g_return_val_if_fail(worker != NULL, FALSE);
  g_return_val_if_fail(cancellable == NULL || G_IS_CANCELLABLE(cancellable),
                       FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  if (g_cancellable_set_error_if_cancelled(cancellable, error))
    return FALSE;
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

  if (cancellable != NULL)
    handler = g_cancellable_connect(
        cancellable, G_CALLBACK(on_idle_wait_cancelled), worker, NULL);
  deadline =
      timeout_ms < 0 ? G_MAXINT64 : g_get_monotonic_time() + timeout_ms * 1000;
  g_mutex_lock(&worker->lock);
  while (worker->idle_done_gen < gen && !worker->stop_requested &&
         !g_cancellable_is_cancelled(cancellable)) {
    if (!g_cond_wait_until(&worker->cond, &worker->lock, deadline))
      break;
  }
  idle = worker->idle_done_gen >= gen;
  g_mutex_unlock(&worker->lock);
  if (cancellable != NULL)
    g_cancellable_disconnect(cancellable, handler);
  if (!idle && g_cancellable_set_error_if_cancelled(cancellable, error))
    return FALSE;
  if (!idle)
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_TIMEOUT,
                "the worker was not idle after %" G_GINT64_FORMAT
                " ms: a task may be stuck or the queues keep filling",
                timeout_ms);
  return idle;
}

gboolean
sluice_worker_add_periodic(SluiceWorker *worker,
                           const SluicePeriodicOptions *options, GError **error)
{
  SluicePeriodic *periodic;

  g_return_val_if_fail(worker != NULL, FALSE);
  g_return_val_if_fail(options != NULL, FALSE);

  if (!sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_PERIODIC)) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_UNSUPPORTED,
                "the “%s” broker cannot dispatch periodic tasks (it has no "
                "periodic table): run them with a broker that has one",
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
  sluice_periodic__set_keyring(periodic, worker->options.keyring);
  g_ptr_array_add(worker->periodics, periodic);
  return TRUE;
}

/* housekeeping.c - the worker's timers, on a GMainContext thread of their
 * own that task code can never block.
 *
 * Promotion of due scheduled messages (asleep until the earliest known due
 * time, never longer than schedule_poll_interval), revocation and pause
 * sync, lease renewal, the worker's announcement, the decision to reclaim
 * (the fetcher does it), the timeout watchdog, periodic schedules and the
 * signals. A fake clock that moves wakes the timers that wait for a time.
 */
#include "config.h"

#include <unistd.h>

#include "lib/worker/worker-private.h"

#define PROMOTE_BATCH 256
/* How often a worker announces itself (its running tasks go stale by at
 * most this much), unless a third of its lease is shorter. */
#define ANNOUNCE_INTERVAL_MS 2000

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

/* Promotes every due scheduled message. Returns FALSE on a broker error. */
gboolean
sluice_worker__promote_all_due(SluiceWorker *worker, gint64 *out_next_due,
                               GError **error)
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

void
sluice_worker__wake_promoter(SluiceWorker *worker)
{
  if (worker->promote_source != NULL)
    g_source_set_ready_time(worker->promote_source, 0);
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
  if (!sluice_worker__promote_all_due(worker, &next_due, &error)) {
    sluice_worker__broker_failed(worker, "promoting scheduled messages", error);
    g_source_set_ready_time(worker->promote_source,
                            g_get_monotonic_time() + poll * 1000);
    return G_SOURCE_CONTINUE;
  }
  sluice_worker__broker_ok(worker);
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
  if (sluice_worker__sync_revocations(worker, &error))
    sluice_worker__broker_ok(worker);
  else
    sluice_worker__broker_failed(worker, "reading revocations", error);
  g_clear_error(&error);
  /* Pauses ride on the same tick: both are "what operators changed". */
  if (sluice_worker__sync_paused(worker, &error))
    sluice_worker__broker_ok(worker);
  else
    sluice_worker__broker_failed(worker, "reading the paused queues", error);
  return G_SOURCE_CONTINUE;
}

void
sluice_worker__watchdog_arm(SluiceWorker *worker, gint64 deadline)
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
      sluice_job__cancel(job);
      /* A timeout is a failed attempt like any other: expected, not a
       * warning. */
      sluice_log__envelope(G_LOG_LEVEL_MESSAGE, job->env, job->env->queue,
                           "%s; its cancellable is cancelled", message);
      sluice_outcome__failed(job, message, -1, FALSE);
    }
    sluice_job__unref(job);
  }
  if (earliest > 0)
    g_source_set_ready_time(worker->watchdog_source,
                            ready_time_for(worker, earliest, 1000));
  return G_SOURCE_CONTINUE;
}

static gint
by_start(gconstpointer a, gconstpointer b)
{
  const SluiceRunningTask *x = *(SluiceRunningTask *const *)a;
  const SluiceRunningTask *y = *(SluiceRunningTask *const *)b;

  if (x->started_at_ms != y->started_at_ms)
    return x->started_at_ms < y->started_at_ms ? -1 : 1;
  return g_strcmp0(x->id, y->id);
}

/* The tasks running now, oldest first, at most what an announcement
 * carries. Called with the lock held. */
static GPtrArray *
running_tasks(SluiceWorker *worker)
{
  GPtrArray *out = g_ptr_array_new_with_free_func(sluice_running_task__free);
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init(&iter, worker->jobs);
  while (g_hash_table_iter_next(&iter, &key, NULL)) {
    Job *job = key;
    /* The phase first: the fetcher writes env after adding the job here,
     * outside the lock, and only a job an executor took (the atomic phase
     * says so) is sure to have it written. */
    if (g_atomic_int_get(&job->phase) == JOB_RUNNING && job->env != NULL &&
        job->started_at > 0)
      g_ptr_array_add(
          out, sluice_running_task__new(job->env->id, job->env->task,
                                        job->env->queue, job->started_at));
  }
  g_ptr_array_sort(out, by_start);
  if (out->len > SLUICE_ANNOUNCED_RUNNING_MAX)
    g_ptr_array_set_size(out, SLUICE_ANNOUNCED_RUNNING_MAX);
  return out;
}

/* Tells the broker who this worker is, what it serves and what it runs,
 * for as long as its lease: stats show it (dead once this lapses),
 * producers can tell whether anyone serves a task name, and operators list
 * the running tasks. Every ANNOUNCE_INTERVAL_MS, so that list is fresh. */
static gchar **limit_lines(SluiceWorker *worker, gchar **tasks);

static void
announce(SluiceWorker *worker)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_auto(GStrv) tasks = sluice_registry_list(worker->registry);
  g_auto(GStrv) limits = NULL;
  g_autoptr(GPtrArray) running = NULL;
  SluiceWorkerInfo info = {0};

  info.host = (gchar *)g_get_host_name();
  info.pid = (gint)getpid();
  info.queues = worker->queues;
  info.tasks = tasks;
  info.concurrency = worker->options.concurrency;
  info.events = worker->options.events;
  info.started_at_ms = worker->started_at;
  g_mutex_lock(&worker->lock);
  info.running = worker->running;
  info.succeeded = worker->stats.succeeded;
  info.failed = worker->stats.failed_attempts;
  info.retried = worker->stats.retried;
  info.dead_lettered = worker->stats.dead_lettered;
  running = running_tasks(worker);
  g_mutex_unlock(&worker->lock);
  info.running_tasks = running;
  limits = limit_lines(worker, tasks);
  info.limits = limits;
  bytes = sluice_worker_info__encode(&info);
  if (!sluice_broker_announce(worker->broker, worker->id, bytes,
                              worker->options.visibility_timeout_ms, &error))
    sluice_worker__broker_failed(worker, "announcing the worker", error);
}

/* The limits the worker runs with, one line each (queues', then tasks',
 * then the queues' weights), for `sluice stats`. */
static gchar **
limit_lines(SluiceWorker *worker, gchar **tasks)
{
  GPtrArray *out = g_ptr_array_new();

  for (guint i = 0; worker->queues[i] != NULL; i++) {
    const SluiceRateLimit *rate =
        g_hash_table_lookup(worker->queue_rates, worker->queues[i]);
    const SluiceConcurrencyLimit *slots =
        g_hash_table_lookup(worker->queue_slots, worker->queues[i]);
    if (rate != NULL)
      g_ptr_array_add(
          out, sluice_rate_limit__describe(rate, "queue", worker->queues[i]));
    if (slots != NULL)
      g_ptr_array_add(out, sluice_concurrency_limit__describe(
                               slots, "queue", worker->queues[i]));
  }
  for (guint i = 0; tasks != NULL && tasks[i] != NULL; i++) {
    SluiceTaskOptions o;
    if (!sluice_registry_get_options(worker->registry, tasks[i], &o))
      continue;
    if (o.rate_limit != NULL)
      g_ptr_array_add(
          out, sluice_rate_limit__describe(o.rate_limit, "task", tasks[i]));
    if (o.concurrency_limit != NULL)
      g_ptr_array_add(out, sluice_concurrency_limit__describe(
                               o.concurrency_limit, "task", tasks[i]));
  }
  for (guint i = 0; worker->weights != NULL && worker->queues[i] != NULL; i++)
    g_ptr_array_add(out,
                    g_strdup_printf("weight queue %s: %u", worker->queues[i],
                                    worker->weights[i]));
  g_ptr_array_add(out, NULL);
  return (gchar **)g_ptr_array_free(out, FALSE);
}

/* Renews the worker's liveness and the leases of what it holds. Runs on the
 * housekeeping thread, which task code never blocks. */
/* Concurrency slots are leases of their own: renewed with the worker's, so
 * that a live worker's long task keeps its slot and a dead one's lapses. */
static void
renew_slots(SluiceWorker *worker, GPtrArray *jobs)
{
  g_autoptr(GArray) items = g_array_new(FALSE, TRUE, sizeof(SluiceSlotAcquire));
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < jobs->len; i++) {
    Job *job = jobs->pdata[i];
    SluiceSlotAcquire item = {0};

    if (!g_atomic_int_get(&job->slot_held))
      continue;
    item.key = job->slot_key;
    item.max = job->slots->max;
    item.holder = job->slot_holder;
    item.lease_ms = worker->options.visibility_timeout_ms;
    g_array_append_val(items, item);
  }
  if (items->len == 0)
    return;
  if (!sluice_broker_slot_acquire(worker->broker,
                                  (SluiceSlotAcquire *)items->data, items->len,
                                  &error)) {
    sluice_worker__broker_failed(worker, "renewing concurrency slots", error);
    return;
  }
  for (guint i = 0; i < items->len; i++)
    if (!g_array_index(items, SluiceSlotAcquire, i).granted)
      sluice_log__message(G_LOG_LEVEL_WARNING,
                          "a concurrency slot of “%s” lapsed before it was "
                          "renewed (the worker stalled past its lease); its "
                          "task runs on, one over the limit",
                          g_array_index(items, SluiceSlotAcquire, i).holder);
}

/* A "while running" claim is a lease like a slot: renewed here, it lapses
 * one lease after its worker died. */
static void
renew_unique(SluiceWorker *worker, GPtrArray *jobs)
{
  g_autoptr(GArray) items =
      g_array_new(FALSE, TRUE, sizeof(SluiceUniqueUpdate));
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < jobs->len; i++) {
    Job *job = jobs->pdata[i];
    SluiceUniqueUpdate item = {0};
    SluiceUniqueScope scope;

    if (!g_atomic_int_get(&job->unique_held) ||
        !sluice_unique__parse(job->env, &scope, &item.key))
      continue;
    item.id = job->env->id;
    item.action = SLUICE_UNIQUE_RENEW;
    item.ttl_ms = worker->options.visibility_timeout_ms;
    g_array_append_val(items, item);
  }
  if (items->len > 0 && !sluice_broker_unique_update(
                            worker->broker, (SluiceUniqueUpdate *)items->data,
                            items->len, &error))
    sluice_worker__broker_failed(worker, "renewing uniqueness claims", error);
}

static gboolean
heartbeat_tick(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GPtrArray) jobs =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_job__unref);
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
  renew_slots(worker, jobs);
  renew_unique(worker, jobs);
  g_mutex_lock(&worker->lock);
  last_ok_us = worker->last_lease_ok_us;
  g_mutex_unlock(&worker->lock);
  /* Lost if it could not be renewed for a whole lease, whether this
   * attempt failed or came too late (the process was stopped, or the
   * housekeeping thread starved): a peer may have taken our work. */
  if (sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_LEASES) &&
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
    /* A whole lease without a renewal: what was held then may have been
     * taken over, and a settle of it that finds it gone says so. */
    if (renewed_us - worker->last_lease_ok_us > lease * 1000) {
      worker->last_lapse_end_us = renewed_us;
      worker->last_lapse_ms = (renewed_us - worker->last_lease_ok_us) / 1000;
    }
    worker->last_lease_ok_us = renewed_us;
    g_mutex_unlock(&worker->lock);
    worker->lease_lost = FALSE;
    sluice_worker__broker_ok(worker);
  } else {
    sluice_worker__broker_failed(worker, "renewing the worker's lease", error);
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
        sluice_worker__broker_failed(
            worker, "looking for deliveries of dead workers", error);
      return G_SOURCE_CONTINUE;
    }
    sluice_worker__broker_ok(worker);
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
announce_tick(gpointer data)
{
  announce(data);
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
      sluice_worker__broker_failed(worker, what, error);
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
                             sluice_worker__core_ref(worker),
                             (GDestroyNotify)sluice_worker__core_unref);
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
  sluice_worker__core_unref(worker);
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

typedef struct {
  SluiceWorker *worker; /* borrowed: the source dies with the context */
  SluiceWorkerTickFunc func;
  gpointer user_data;
  GDestroyNotify destroy;
} Tick;

static gboolean
tick_run(gpointer data)
{
  Tick *tick = data;

  tick->func(tick->worker, tick->user_data);
  return G_SOURCE_CONTINUE;
}

static void
tick_free(gpointer data)
{
  Tick *tick = data;

  if (tick->destroy != NULL)
    tick->destroy(tick->user_data);
  g_free(tick);
}

void
sluice_worker_add_tick(SluiceWorker *worker, guint interval_ms,
                       SluiceWorkerTickFunc func, gpointer user_data,
                       GDestroyNotify destroy)
{
  GSource *source;
  Tick *tick;

  g_return_if_fail(worker != NULL);
  g_return_if_fail(func != NULL);
  tick = g_new0(Tick, 1);
  tick->worker = worker;
  tick->func = func;
  tick->user_data = user_data;
  tick->destroy = destroy;
  source = g_timeout_source_new(MAX(interval_ms, 1));
  g_source_set_callback(source, tick_run, tick, tick_free);
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

void
sluice_worker__sync_housekeeping(SluiceWorker *worker)
{
  guint64 target;

  g_mutex_lock(&worker->lock);
  target = worker->sync_done + 1;
  g_mutex_unlock(&worker->lock);
  g_main_context_invoke_full(worker->context, G_PRIORITY_HIGH, sync_tick,
                             sluice_worker__core_ref(worker),
                             (GDestroyNotify)sluice_worker__core_unref);
  g_mutex_lock(&worker->lock);
  while (worker->sync_done < target && !worker->stop_requested)
    g_cond_wait(&worker->cond, &worker->lock);
  g_mutex_unlock(&worker->lock);
}

void
sluice_worker__housekeeping_start(SluiceWorker *worker)
{

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
  if (sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_LEASES))
    add_interval(worker,
                 (guint)MAX(worker->options.visibility_timeout_ms / 2, 1),
                 reclaim_tick);
  if (sluice_clock_is_fake(worker->clock))
    worker->clock_watch =
        sluice_clock_add_watch(worker->clock, clock_moved, worker);
  add_interval(worker,
               (guint)MIN(ANNOUNCE_INTERVAL_MS,
                          MAX(worker->options.visibility_timeout_ms / 3, 1)),
               announce_tick);
  /* First heartbeat before the first fetch, so stats show the worker and a
   * lease exists before anything is held. */
  heartbeat_tick(worker);
  announce(worker);
  worker->housekeeper = g_thread_new("sluice-housekeep", housekeeper_main,
                                     sluice_worker__core_ref(worker));
}

void
sluice_worker__housekeeping_stop(SluiceWorker *worker)
{
  if (worker->clock_watch != 0)
    sluice_clock_remove_watch(worker->clock, worker->clock_watch);
  g_atomic_int_set(&worker->housekeeping_quit, 1);
  g_main_context_wakeup(worker->context);
  g_thread_join(worker->housekeeper);
  worker->housekeeper = NULL;
  g_clear_pointer(&worker->promote_source, destroy_source);
  g_clear_pointer(&worker->watchdog_source, destroy_source);
  g_clear_pointer(&worker->periodic_source, destroy_source);
}

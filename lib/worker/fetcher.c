/* fetcher.c - the thread that takes deliveries from the broker.
 *
 * It keeps at most concurrency + prefetch deliveries held (fewer for slow
 * tasks: see prefetch_now()), dispatches each (decoding it, and settling
 * at once what must not run), and hands the rest to the executors. For run_until_idle it also makes due work visible and
 * tells when there is none.
 *
 * Quarantine (brokers with leases): a delivery taken over from a consumer
 * that died or stalled holding it (delivery_count >= 2) may be the one
 * that crashed it. Such deliveries run alone: when the housekeeping thread
 * sees something to reclaim, the fetcher stops fetching, lets what it holds
 * finish, and takes over one delivery at a time; a suspect met in a fetch
 * is set aside to run alone, and a second one is given back. So a crash is
 * charged to the one delivery that caused it, and a message that never
 * crashed a worker is never buried max_deliveries for its neighbour.
 *
 * Paused queues (pause.c) are left out of every fetch and reclaim; with
 * all of them paused the fetcher waits for a change instead of fetching.
 *
 * Rate limits (flow.c): what a fetch brought under a limit (its task's,
 * else its queue's) asks the broker for admissions, one round trip per
 * fetch; a message not admitted goes back on the schedule, due when its
 * bucket can admit it, and holds up nothing else. Then concurrency
 * limits: each such message takes a slot (a lease the broker keeps), or
 * waits on the schedule until a release of its key moves it back.
 */
#include "config.h"

#include "lib/worker/worker-private.h"

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
  job->hard_timeout_ms = m->hard_timeout_ms > 0 ? m->hard_timeout_ms
                         : t != NULL && t->hard_timeout_ms > 0
                             ? t->hard_timeout_ms
                             : worker->options.hard_timeout_ms;
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

/* How many deliveries to hold beyond the executors now: about
 * SLUICE_PREFETCH_AHEAD_MS of work, by the tasks' recent run times, up to
 * options.prefetch. No-op tasks get the whole allowance (one fetch and
 * one settle per hundreds of tasks); tasks of a second get none, so a
 * backlog of slow work is not hoarded while a peer is idle. Before any
 * task has run, as many as the executors. Called with the lock held. */
static guint
prefetch_now(SluiceWorker *worker)
{
  guint most = worker->options.prefetch;
  gdouble ahead;

  if (worker->task_us <= 0)
    return MIN(most, worker->options.concurrency);
  ahead = SLUICE_PREFETCH_AHEAD_MS * 1000.0 / MAX(worker->task_us, 1.0) *
          worker->options.concurrency;
  return ahead >= most ? most : (guint)ahead;
}

/* Replaces the job's sealed args by the args in clear, checked as a
 * decoder checks args in clear. A message this worker cannot open is
 * never run: a missing key is more often a deploy mistake than an attack,
 * so the reason says which key. */
static gboolean
open_args(Job *job, GError **error)
{
  SluiceEnvelope *env = job->env;
  GBytes *plain = sluice_seal__open(job->worker->options.keyring,
                                    SLUICE_SEAL_ARGS, env->seal, env->id,
                                    env->task, env->queue, env->args, error);

  if (plain == NULL)
    return FALSE;
  if (!sluice_envelope__check_opened_args(plain, &job->worker->limits, error)) {
    g_bytes_unref(plain);
    return FALSE;
  }
  g_bytes_unref(env->args);
  env->args = plain;
  job->seal = g_steal_pointer(&env->seal);
  return TRUE;
}

/* Takes ownership of @delivery. Called by the fetcher and the reclaimer.
 * Returns: (transfer full) (nullable): a job to hand to the executors, or
 * NULL when the delivery was settled at once (malformed, expired, ...). */
static Job *
dispatch(SluiceWorker *worker, SluiceDelivery *delivery)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceEnvelope) newer = NULL;
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
  job = sluice_job__new(worker, delivery);
  job->taken_us = g_get_monotonic_time();
  /* Taken over from a consumer that died or stalled holding it: it may be
   * the one that crashed it (see the quarantine in the fetcher). */
  job->suspect =
      sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_LEASES) &&
      delivery->delivery_count >= 2;
  worker->held++;
  if (job->suspect)
    worker->suspects_held++;
  g_hash_table_add(worker->jobs, job);
  g_mutex_unlock(&worker->lock);

  job->env = sluice_envelope_decode(delivery->payload, &worker->limits, &error);
  /* A newer envelope version: its header names the message, to defer it
   * for a worker that reads it (outcome.c). */
  if (job->env == NULL &&
      g_error_matches(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_VERSION) &&
      (newer = sluice_envelope__decode_header(delivery->payload,
                                              &worker->limits, NULL)) != NULL &&
      newer->version > SLUICE_ENVELOPE_VERSION_NEWEST)
    job->env = g_steal_pointer(&newer);
  if (job->env != NULL && job->env->version > SLUICE_ENVELOPE_VERSION_NEWEST) {
    job->series = sluice_metrics__series(worker, job);
    job_claim(job);
    sluice_outcome__defer_newer(job, sluice_clock_now_ms(worker->clock));
    return NULL;
  }
  if (job->env != NULL)
    job->entry = sluice_registry__lookup(worker->registry, job->env->task);
  job->series = sluice_metrics__series(worker, job);
  if (job->env == NULL) {
    g_autofree gchar *detail =
        g_strdup_printf("cannot decode the message: %s", error->message);
    job->store_result = FALSE;
    job_claim(job);
    sluice_outcome__dead_letter(job, SLUICE_DLQ_MALFORMED, detail);
    return NULL;
  }
  /* The options first: a message buried for its seal still gets its
   * record, so that a producer waiting for its result learns why. */
  resolve_job_options(job);
  if (job->env->seal != NULL && !open_args(job, &error)) {
    g_autofree gchar *detail = g_strdup(error->message);

    job_claim(job);
    sluice_outcome__dead_letter(job, SLUICE_DLQ_MALFORMED, detail);
    return NULL;
  }
  now = sluice_clock_now_ms(worker->clock);

  if (sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_LEASES) &&
      delivery->delivery_count > worker->options.max_deliveries) {
    g_autofree gchar *detail = g_strdup_printf(
        "delivered %u times, over max_deliveries (%u): each consumer it was "
        "given to died before finishing it",
        delivery->delivery_count, worker->options.max_deliveries);
    job_claim(job);
    sluice_outcome__dead_letter(job, SLUICE_DLQ_MAX_DELIVERIES, detail);
    return NULL;
  }
  if (job->env->opts.expires_at > 0 && now >= job->env->opts.expires_at) {
    g_autofree gchar *detail =
        g_strdup_printf("expired at %" G_GINT64_FORMAT
                        " before it could start (now %" G_GINT64_FORMAT ")",
                        job->env->opts.expires_at, now);
    job_claim(job);
    sluice_outcome__dead_letter(job, SLUICE_DLQ_EXPIRED, detail);
    return NULL;
  }
  if (sluice_worker__is_revoked(worker, job->env->id, now)) {
    job_claim(job);
    sluice_outcome__cancelled(job, "revoked before it started");
    return NULL;
  }
  if (job->entry == NULL) {
    job_claim(job);
    sluice_outcome__defer_unknown(job, now);
    return NULL;
  }
  if (job->entry->rate_limit != NULL) {
    job->rate = job->entry->rate_limit;
    job->rate_bucket = sluice_flow__bucket(job->rate->key, job->rate->key_name,
                                           "t", job->entry->name, job->env);
  } else if (delivery->queue != NULL &&
             (job->rate = g_hash_table_lookup(worker->queue_rates,
                                              delivery->queue)) != NULL) {
    job->rate_bucket = sluice_flow__bucket(job->rate->key, job->rate->key_name,
                                           "q", delivery->queue, job->env);
  }
  if (job->entry->concurrency_limit != NULL) {
    job->slots = job->entry->concurrency_limit;
    job->slot_key = sluice_flow__bucket(job->slots->key, job->slots->key_name,
                                        "ct", job->entry->name, job->env);
  } else if (delivery->queue != NULL &&
             (job->slots = g_hash_table_lookup(worker->queue_slots,
                                               delivery->queue)) != NULL) {
    job->slot_key = sluice_flow__bucket(job->slots->key, job->slots->key_name,
                                        "cq", delivery->queue, job->env);
  }
  if (job->slots != NULL)
    job->slot_holder = g_strconcat(worker->id, "|", job->env->id, NULL);
  return job_ref(job);
}

/* Asks the broker for a concurrency slot for each of the @n jobs of @jobs
 * that have a limit, in one call. One that got none waits on the schedule,
 * where the next release of its key finds it (the broker put it on the
 * key's waiting list in the same step). Returns how many of @jobs are left
 * to run, compacted at the front. */
static guint
admit_slots(SluiceWorker *worker, Job **jobs, guint n)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) items = g_array_new(FALSE, TRUE, sizeof(SluiceSlotAcquire));
  gboolean ok;
  guint kept = 0;

  for (guint i = 0; i < n; i++) {
    SluiceSlotAcquire item = {0};

    if (jobs[i]->slots == NULL)
      continue;
    item.key = jobs[i]->slot_key;
    item.max = jobs[i]->slots->max;
    item.holder = jobs[i]->slot_holder;
    item.lease_ms = worker->options.visibility_timeout_ms;
    item.waiter = jobs[i]->env->id;
    g_array_append_val(items, item);
  }
  if (items->len == 0)
    return n;
  ok = sluice_broker_slot_acquire(
      worker->broker, (SluiceSlotAcquire *)items->data, items->len, &error);
  if (!ok)
    sluice_worker__broker_failed(worker, "taking concurrency slots", error);
  for (guint i = 0, j = 0; i < n; i++) {
    Job *job = jobs[i];

    if (job->slots == NULL) {
      jobs[kept++] = job;
      continue;
    }
    if (ok && g_array_index(items, SluiceSlotAcquire, j++).granted) {
      g_atomic_int_set(&job->slot_held, 1);
      jobs[kept++] = job;
      continue;
    }
    /* Not asked (the broker failed): a second, as for rate limits. */
    if (job_claim(job))
      sluice_outcome__slot_wait(job, ok ? worker->options.visibility_timeout_ms
                                        : 1000);
    sluice_job__unref(job);
  }
  return kept;
}

/* Asks the broker to admit the @n jobs of @jobs that have a rate limit, in
 * one call, and settles those it did not admit (back on the schedule).
 * Returns how many of @jobs are left to run, compacted at the front. */
static guint
admit_rates(SluiceWorker *worker, Job **jobs, guint n)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) items = g_array_new(FALSE, TRUE, sizeof(SluiceRateAcquire));
  g_autoptr(GArray) which = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(GHashTable) turned_away = NULL;
  gboolean ok;
  guint kept = 0;

  for (guint i = 0; i < n; i++) {
    SluiceRateAcquire item = {0};

    if (jobs[i]->rate == NULL)
      continue;
    item.key = jobs[i]->rate_bucket;
    item.interval_us = sluice_rate_limit__interval_us(jobs[i]->rate);
    item.tolerance_us = sluice_rate_limit__tolerance_us(jobs[i]->rate);
    g_array_append_val(items, item);
    g_array_append_val(which, i);
  }
  if (items->len == 0)
    return n;
  ok = sluice_broker_rate_acquire(
      worker->broker, (SluiceRateAcquire *)items->data, items->len, &error);
  if (!ok)
    sluice_worker__broker_failed(worker, "applying rate limits", error);
  /* Messages of one bucket turned away together would all come back at
   * the same moment and all but one be turned away again: the k-th waits
   * k intervals more, so they return about as the bucket admits. */
  /* Keys copied: a job turned away may be settled, and freed, before the
   * loop is over. */
  turned_away = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0, j = 0; i < n; i++) {
    Job *job = jobs[i];
    SluiceRateAcquire *item;
    guint ahead;

    if (j >= which->len || g_array_index(which, guint, j) != i) {
      jobs[kept++] = job;
      continue;
    }
    item = &g_array_index(items, SluiceRateAcquire, j++);
    if (ok && item->granted) {
      job->admitted_at = item->now_ms;
      jobs[kept++] = job;
      continue;
    }
    ahead = GPOINTER_TO_UINT(g_hash_table_lookup(turned_away, item->key));
    g_hash_table_insert(turned_away, g_strdup(item->key),
                        GUINT_TO_POINTER(ahead + 1));
    /* The broker could not be asked: try again in a second rather than
     * run over the limit. */
    if (job_claim(job))
      sluice_outcome__rate_wait(
          job,
          ok ? item->wait_ms + ahead * MAX(item->interval_us / 1000, 1) : 1000);
    sluice_job__unref(job);
  }
  return kept;
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
  /* The queues as they are now, not as the fetch began: a fetch already on
   * its way when a pause arrived may bring messages of the paused queue. */
  g_autoptr(GPtrArray) active = sluice_worker__active_queues(worker);
  guint n = 0;

  for (guint i = 0; i < got->len; i++) {
    Job *job = dispatch(worker, got->pdata[i]);
    gboolean keep = TRUE;

    if (job == NULL)
      continue;
    if (job->delivery->queue != NULL &&
        !g_strv_contains((const gchar *const *)active->pdata,
                         job->delivery->queue)) {
      /* Given back, uncounted: it waits in its queue for the resume. */
      if (job_claim(job))
        sluice_outcome__release(job);
      sluice_job__unref(job);
      continue;
    }
    if (job->suspect) {
      g_mutex_lock(&worker->lock);
      if (g_queue_is_empty(&worker->quarantined) && worker->suspects_held == 1)
        g_queue_push_tail(&worker->quarantined, job);
      else {
        if (job_claim(job))
          sluice_outcome__release(job);
        sluice_job__unref(job);
      }
      g_cond_broadcast(&worker->cond);
      g_mutex_unlock(&worker->lock);
      keep = FALSE;
    }
    if (keep)
      got->pdata[n++] = job;
  }
  n = admit_rates(worker, (Job **)got->pdata, n);
  n = admit_slots(worker, (Job **)got->pdata, n);
  sluice_worker__hand_over(worker, (Job **)got->pdata, n);
}

/* With queue weights, the queues for this fetch: the one whose turn it is
 * first (smooth weighted round-robin over the active queues: each gains
 * its weight, the richest goes first and pays the sum of the weights),
 * the others after it in their order, so that a fetch that finds the
 * first one empty takes from the rest. Without weights, @active itself.
 * Returns: (transfer full): a NULL-terminated list of @active's names. */
static GPtrArray *
fair_order(SluiceWorker *worker, GPtrArray *active)
{
  GPtrArray *order;
  gint64 total = 0;
  guint best = 0, best_q = 0;

  if (worker->weights == NULL || active->len <= 2)
    return g_ptr_array_ref(active);
  for (guint i = 0; active->pdata[i] != NULL; i++) {
    /* Active queues are the worker's own names: each is in queue_index. */
    guint q = GPOINTER_TO_UINT(
                  g_hash_table_lookup(worker->queue_index, active->pdata[i])) -
              1;

    worker->wrr_current[q] += worker->weights[q];
    total += worker->weights[q];
    if (i == 0 || worker->wrr_current[q] > worker->wrr_current[best_q]) {
      best = i;
      best_q = q;
    }
  }
  worker->wrr_current[best_q] -= total;
  order = g_ptr_array_sized_new(active->len);
  g_ptr_array_add(order, active->pdata[best]);
  for (guint i = 0; active->pdata[i] != NULL; i++)
    if (i != best)
      g_ptr_array_add(order, active->pdata[i]);
  g_ptr_array_add(order, NULL);
  return order;
}

/* Quarantine, one step, with nothing else held: takes over one delivery of
 * a dead or stalled consumer and runs it alone. Clears reclaim_wanted when
 * there is nothing left to take. */
static gboolean
reclaim_one(SluiceWorker *worker, gboolean *out_contacted, GError **error)
{
  g_autoptr(GPtrArray) got = g_ptr_array_new();
  g_autoptr(GPtrArray) active = sluice_worker__active_queues(worker);
  gint64 now_us = g_get_monotonic_time();
  gboolean may;

  /* Only with a lease of our own that is not fresh from a stall (see
   * heartbeat_tick): a worker that has not renewed for two thirds of a
   * lease may be the one that stalls, and the peers it would judge dead may
   * just not have renewed yet. The housekeeping tick asks again. */
  g_mutex_lock(&worker->lock);
  /* A paused queue's work is not taken over either, until it resumes. */
  may = now_us - worker->last_lease_ok_us <=
            worker->options.visibility_timeout_ms * 1000 * 2 / 3 &&
        now_us >= worker->reclaim_quiet_until_us && active->pdata[0] != NULL;
  if (!may) {
    worker->reclaim_wanted = FALSE;
    g_cond_broadcast(&worker->cond);
  }
  g_mutex_unlock(&worker->lock);
  *out_contacted = may;
  if (!may)
    return TRUE;
  if (!sluice_broker_reclaim(worker->broker, worker->id,
                             (const gchar *const *)active->pdata, 1,
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
    /* Its rate was admitted when it was first fetched; a slot is held only
     * while it runs, so it takes one again. */
    if (job != NULL && admit_slots(worker, &job, 1) == 1)
      sluice_worker__hand_over(worker, &job, 1);
  }
  return TRUE;
}

gpointer
sluice_worker__fetcher_main(gpointer data)
{
  SluiceWorker *worker = data;
  g_autoptr(GPtrArray) got = g_ptr_array_new();
  g_autoptr(GPtrArray) active = NULL;
  gint64 backoff_ms = OUTAGE_BACKOFF_MIN_MS;
  guint64 pause_gen;
  gboolean leases =
      sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_LEASES);

  for (;;) {
    g_autoptr(GError) error = NULL;
    guint want = 0, prefetch, room = 0;
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
      } else {
        /* Refill by at least half the allowance at a time: fewer, larger
         * fetches, and a settle wakes this thread only to look. */
        prefetch = prefetch_now(worker);
        room = worker->options.concurrency + prefetch;
        if (worker->held + MAX(prefetch / 2, 1) <= room)
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
      want = room - worker->held;
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
        /* A suspect set aside by a fetch: a slot, as for a reclaim. */
        if (admit_slots(worker, &next, 1) == 1)
          sluice_worker__hand_over(worker, &next, 1);
        continue;
      }
      gboolean contacted = FALSE;

      if (reclaim_one(worker, &contacted, &error)) {
        if (contacted)
          sluice_worker__broker_ok(worker);
        continue;
      }
      sluice_worker__broker_failed(
          worker, "reclaiming deliveries of dead workers", error);
      goto backoff;
    }

    /* run_until_idle: make due work visible before looking, and do not
     * block, so an empty answer means "nothing to do now". */
    ok = TRUE;
    if (idle_gen > 0) {
      sluice_worker__sync_housekeeping(worker);
      ok = sluice_worker__promote_all_due(worker, NULL, &error);
    }
    g_clear_pointer(&active, g_ptr_array_unref);
    active = sluice_worker__active_queues(worker);
    if (ok && active->pdata[0] == NULL) {
      /* Every queue is paused: nothing to fetch until one resumes. */
      if (idle_gen == 0) {
        g_mutex_lock(&worker->lock);
        pause_gen = worker->pause_gen;
        while (
            !worker->stop_requested && worker->pause_gen == pause_gen &&
            worker->idle_request_gen <= worker->idle_done_gen &&
            g_cond_wait_until(&worker->cond, &worker->lock,
                              g_get_monotonic_time() + FETCH_BLOCK_MS * 1000))
          ;
        g_mutex_unlock(&worker->lock);
        continue;
      }
    } else if (ok) {
      g_autoptr(GPtrArray) order = fair_order(worker, active);

      ok = sluice_broker_fetch(worker->broker, worker->id,
                               (const gchar *const *)order->pdata, want,
                               idle_gen > 0 ? 0 : FETCH_BLOCK_MS, got, &error);
    }
    if (!ok) {
      sluice_worker__broker_failed(worker, "fetching", error);
      goto backoff;
    }
    sluice_worker__broker_ok(worker);
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
  sluice_worker__core_unref(worker);
  return NULL;
}

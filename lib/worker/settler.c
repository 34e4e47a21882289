/* settler.c - the thread that sends settlements to the broker.
 *
 * It takes what is waiting, up to settle_batch, and sends it in one broker
 * call; while the broker is away it retries with capped backoff, so a
 * finished task is never forgotten. Only a stop past its timeout gives up,
 * leaving the deliveries to the broker's redelivery.
 */
#include "config.h"

#include <string.h>

#include "lib/worker/worker-private.h"

const gchar sluice_worker__settle_stop[] = "stop";

/* How the line per finished task names each kind of settlement: the
 * SLUICE_OUTCOME field (one word), the words of the message, and what
 * comes next, after the delay of a message put back on the schedule (NULL
 * when nothing does, or when the delay says nothing: a slot's is only a
 * fallback). */
typedef struct {
  const gchar *outcome;
  const gchar *what;
  const gchar *then;
} OutcomeWords;

static OutcomeWords
outcome_words(SettleKind kind)
{
  switch (kind) {
  case KIND_SUCCEEDED:
    return (OutcomeWords){"succeeded", "succeeded", NULL};
  case KIND_FAILED:
    return (OutcomeWords){"failed", "failed", NULL};
  case KIND_RETRIED:
    return (OutcomeWords){"retry", "failed", "will retry"};
  case KIND_DEAD_LETTERED:
    return (OutcomeWords){"dead_lettered", "dead-lettered", NULL};
  case KIND_CANCELLED:
    return (OutcomeWords){"cancelled", "cancelled", NULL};
  case KIND_DEFERRED:
    return (OutcomeWords){"deferred", "deferred (unknown task)",
                          "back on its queue"};
  case KIND_DEFERRED_NEWER:
    return (OutcomeWords){"deferred", "deferred (newer envelope version)",
                          "back on its queue"};
  case KIND_RELEASED:
    return (OutcomeWords){"released", "released", NULL};
  case KIND_EVENT:
    return (OutcomeWords){"event", "event", NULL};
  case KIND_SNOOZED:
    return (OutcomeWords){"snoozed", "snoozed", "back on its queue"};
  case KIND_RATE_WAIT:
    return (OutcomeWords){"rate_wait", "waiting for its rate limit",
                          "back on its queue"};
  case KIND_SLOT_WAIT:
    return (OutcomeWords){"slot_wait", "waiting for a concurrency slot", NULL};
  case KIND_RUNNING:
  default:
    return (OutcomeWords){"running", "running", NULL};
  }
}

/* The line per finished task: "what did this worker do?" */
static void
log_settled(Pending *p)
{
  Job *job = p->job;
  OutcomeWords words = outcome_words(p->kind);

  sluice_log__finished(
      job->env, job->delivery->queue, words.outcome, words.what,
      __atomic_load_n(&job->run_us, __ATOMIC_RELAXED), words.then,
      p->action == SLUICE_SETTLE_RETRY ? p->reschedule_in_ms : -1);
}

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
  case KIND_DEFERRED_NEWER:
    worker->stats.deferred++;
    break;
  case KIND_RELEASED:
    worker->stats.released++;
    break;
  case KIND_SNOOZED:
    worker->stats.snoozed++;
    break;
  case KIND_RATE_WAIT:
    worker->stats.rate_waits++;
    break;
  case KIND_SLOT_WAIT:
    worker->stats.slot_waits++;
    break;
  case KIND_RUNNING:
  case KIND_EVENT:
    break;
  }
}

/* Writes the batch's `running` records. They are state tracking, not a
 * promise: one outage is retried with the settlements that follow them,
 * any other failure is logged and the records are dropped. Returns FALSE
 * while the broker is unreachable. */
static gboolean
send_records(SluiceWorker *worker, SluiceRecordWrite *records, guint n,
             GError **error)
{
  g_autoptr(GError) local = NULL;

  if (n == 0 || sluice_broker_put_records(worker->broker, records, n, &local))
    return TRUE;
  if (g_error_matches(local, SLUICE_BROKER_ERROR,
                      SLUICE_BROKER_ERROR_UNAVAILABLE)) {
    g_propagate_error(error, g_steal_pointer(&local));
    return FALSE;
  }
  sluice_log__message(G_LOG_LEVEL_WARNING,
                      "could not record the running state of %u tasks: %s", n,
                      local->message);
  return TRUE;
}

/* Reports the batch's workflow outcomes to their joins. They go before
 * the settlements: an arrival is idempotent per member, so a crash between
 * the two only makes the redelivered member arrive again, uncounted, while
 * the other order could acknowledge a member whose join never hears of it.
 * A broker without joins cannot run workflows at all: said, and dropped. */
static gboolean
send_arrivals(SluiceWorker *worker, SluiceJoinArrival *arrivals, guint n,
              GError **error)
{
  g_autoptr(GError) local = NULL;

  if (n == 0 || sluice_broker_join_arrive(worker->broker, arrivals, n, &local))
    return TRUE;
  if (g_error_matches(local, SLUICE_BROKER_ERROR,
                      SLUICE_BROKER_ERROR_UNAVAILABLE)) {
    g_propagate_error(error, g_steal_pointer(&local));
    return FALSE;
  }
  sluice_log__message(G_LOG_LEVEL_CRITICAL,
                      "could not report %u workflow outcomes to their joins: "
                      "%s; the workflows they belong to will not complete",
                      n, local->message);
  return TRUE;
}

/* Sends one batch (arrivals, then records: a task's `running` record
 * precedes its settlement), retrying while the broker is unreachable.
 * Returns FALSE if the batch was given up (only while stopping, after the
 * shutdown timeout): those deliveries are then left to the broker's
 * redelivery. */
static gboolean
send_batch(SluiceWorker *worker, SluiceJoinArrival *arrivals, guint n_arrivals,
           SluiceRecordWrite *records, guint n_records, SluiceSettlement *items,
           guint n, gint64 give_up_at_us)
{
  gint64 backoff_ms = OUTAGE_BACKOFF_MIN_MS;

  for (;;) {
    g_autoptr(GError) error = NULL;
    gboolean stopping;

    if (send_arrivals(worker, arrivals, n_arrivals, &error)) {
      if (n_arrivals > 0)
        sluice_wf__after_arrivals(worker->broker,
                                  sluice_clock_now_ms(worker->clock), arrivals,
                                  n_arrivals);
      n_arrivals = 0; /* reported: not again after an outage of the rest */
    }
    if (n_arrivals == 0 && send_records(worker, records, n_records, &error)) {
      n_records = 0; /* written: not again after an outage of the settle */
      if (n == 0 ||
          sluice_broker_settle(worker->broker, worker->id, items, n, &error)) {
        sluice_worker__broker_ok(worker);
        return TRUE;
      }
    }
    sluice_worker__broker_failed(worker, "settling", error);

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

/* After their settlement, not before: a slot given back wakes a waiting
 * message at once, and the settled one must not still be running or
 * waiting to run by then. Best effort: a slot that cannot be given back
 * lapses with its lease. */
void
sluice_worker__release_slots(SluiceWorker *worker, Job **jobs, guint n)
{
  g_autoptr(GArray) items = g_array_new(FALSE, TRUE, sizeof(SluiceSlotRelease));
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < n; i++) {
    SluiceSlotRelease item = {0};

    if (!g_atomic_int_compare_and_exchange(&jobs[i]->slot_held, 1, 0))
      continue;
    item.key = jobs[i]->slot_key;
    item.holder = jobs[i]->slot_holder;
    g_array_append_val(items, item);
  }
  if (items->len > 0 &&
      !sluice_broker_slot_release(
          worker->broker, (SluiceSlotRelease *)items->data, items->len, &error))
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "could not give back %u concurrency slots (they "
                        "lapse with their lease): %s",
                        items->len, error->message);
}

/* Best effort, like the slots: a claim that cannot be ended lapses with
 * its TTL (a running one with its lease). A claim is ended only where the
 * message's id holds it, so one taken over meanwhile is left alone. */
void
sluice_worker__settle_unique(SluiceWorker *worker, Job **jobs,
                             const SluiceSettlement *items, guint n)
{
  g_autoptr(GArray) updates =
      g_array_new(FALSE, TRUE, sizeof(SluiceUniqueUpdate));
  g_autoptr(GError) error = NULL;
  gint64 now = sluice_clock_now_ms(worker->clock);

  for (guint i = 0; i < n; i++) {
    SluiceUniqueUpdate u = {0};
    SluiceUniqueScope scope;
    gboolean held;

    if (!sluice_unique__parse(jobs[i]->env, &scope, &u.key) ||
        scope == SLUICE_UNIQUE_FOR_TTL || items[i].status != SLUICE_SETTLE_DONE)
      continue;
    held = g_atomic_int_compare_and_exchange(&jobs[i]->unique_held, 1, 0);
    u.id = jobs[i]->env->id;
    if (items[i].action == SLUICE_SETTLE_ACK ||
        items[i].action == SLUICE_SETTLE_DEAD_LETTER) {
      u.action = SLUICE_UNIQUE_RELEASE;
    } else if (held) {
      /* A retry, a snooze or a release at shutdown: it waits again. */
      u.action = SLUICE_UNIQUE_WAIT;
      u.ttl_ms =
          SLUICE_DEFAULT_DEDUP_TTL_MS + MAX(0, items[i].reschedule_at - now);
    } else {
      continue;
    }
    g_array_append_val(updates, u);
  }
  if (updates->len > 0 &&
      !sluice_broker_unique_update(worker->broker,
                                   (SluiceUniqueUpdate *)updates->data,
                                   updates->len, &error))
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "could not end %u uniqueness claims (they lapse with "
                        "their TTL or lease): %s",
                        updates->len, error->message);
}

/* Whether @job's lease lapsed while the worker held it: not renewed for a
 * whole lease now (a settle can come before the first renewal after a
 * stop), or a renewal that came too late since the job was taken. A GONE
 * settle is then a lost lease: a peer reclaimed the delivery and finished
 * it. Otherwise the delivery vanished under a lease that held (settled
 * already, or lost by the broker). Sets @out_ms to how long the lease went
 * unrenewed. */
static gboolean
lapsed_while_held(SluiceWorker *worker, Job *job, gint64 *out_ms)
{
  gint64 now_us = g_get_monotonic_time();
  gint64 lease_us = worker->options.visibility_timeout_ms * 1000;
  gboolean lapsed = FALSE;

  if (!sluice_broker_supports(worker->broker, SLUICE_BROKER_FEATURE_LEASES))
    return FALSE;
  g_mutex_lock(&worker->lock);
  if (now_us - worker->last_lease_ok_us > lease_us) {
    lapsed = TRUE;
    *out_ms = (now_us - worker->last_lease_ok_us) / 1000;
  } else if (worker->last_lapse_end_us > job->taken_us) {
    lapsed = TRUE;
    *out_ms = worker->last_lapse_ms;
  }
  g_mutex_unlock(&worker->lock);
  return lapsed;
}

gpointer
sluice_worker__settler_main(gpointer data)
{
  SluiceWorker *worker = data;
  guint max = worker->options.settle_batch;
  g_autofree Pending **batch = g_new0(Pending *, max);
  g_autofree SluiceSettlement *items = g_new0(SluiceSettlement, max);
  g_autofree SluiceRecordWrite *records = g_new0(SluiceRecordWrite, max);
  g_autofree SluiceJoinArrival *arrivals = g_new0(SluiceJoinArrival, max);
  g_autofree GBytes **events = g_new0(GBytes *, max);
  g_autofree guint *settled = g_new0(guint, max); /* batch index of items[i] */
  g_autofree gint64 *started_at = g_new0(gint64, max); /* of items[i] */
  gboolean stop = FALSE;

  while (!stop) {
    guint n = 0, n_items = 0, n_records = 0, n_arrivals = 0, n_events = 0;
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
      SluiceSettlement *s;

      if (p->event != NULL)
        events[n_events++] = p->event;
      if (p->kind == KIND_EVENT)
        continue;
      if (p->kind == KIND_RUNNING) {
        records[n_records].id = job_id(p->job);
        records[n_records].record = p->record;
        records[n_records].ttl_ms = p->job->result_ttl_ms;
        n_records++;
        continue;
      }
      if (p->wf_join != NULL) {
        SluiceJoinArrival *a = &arrivals[n_arrivals++];
        memset(a, 0, sizeof *a);
        a->join_id = p->wf_join;
        a->member = p->wf_member;
        a->outcome = p->wf_outcome;
        a->step = p->wf_step;
      }
      s = &items[n_items];
      settled[n_items++] = i;
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
    if (send_batch(worker, arrivals, n_arrivals, records, n_records, items,
                   n_items, give_up_at_us)) {
      g_autoptr(GError) event_error = NULL;
      gint64 lapse_ms = 0;

      /* Events say what happened: after it, once, best effort. */
      if (n_events > 0 &&
          !sluice_broker_append_events(
              worker->broker, events, n_events, SLUICE_EVENTS_MAX_LEN,
              SLUICE_EVENTS_MAX_AGE_MS, sluice_clock_now_ms(worker->clock),
              &event_error) &&
          sluice_worker__first_in_a_while(worker, "events"))
        sluice_log__message(G_LOG_LEVEL_WARNING,
                            "could not write %u events (said once a "
                            "minute): %s",
                            n_events, event_error->message);
      for (guint i = 0; i < n_items; i++) {
        Job *job = batch[settled[i]]->job;
        if (items[i].status == SLUICE_SETTLE_STALE)
          sluice_log__envelope(
              G_LOG_LEVEL_WARNING, job->env, job->delivery->queue,
              "settle refused: another worker owns this delivery "
              "now (lease lost); the task may run again");
        else if (items[i].status == SLUICE_SETTLE_GONE &&
                 lapsed_while_held(worker, job, &lapse_ms))
          sluice_log__envelope(
              G_LOG_LEVEL_WARNING, job->env, job->delivery->queue,
              "lease lost; message may be executed again: this worker did "
              "not renew its lease for %" G_GINT64_FORMAT
              " ms (it was stopped, or starved), and by the time it settled "
              "no worker held the delivery (most likely a peer took it over "
              "and finished it); its record was written, nothing else",
              lapse_ms);
        else if (items[i].status == SLUICE_SETTLE_GONE)
          sluice_log__envelope(
              G_LOG_LEVEL_WARNING, job->env, job->delivery->queue,
              "settle refused: no worker holds this delivery any more: it "
              "was settled already, or the broker lost it (a Redis "
              "restarted without its latest writes, or an entry deleted by "
              "hand); its record was written, nothing else");
      }
    }

    if (n_items > 0) {
      g_autofree Job **settled_jobs = g_new(Job *, n_items);

      for (guint i = 0; i < n_items; i++)
        settled_jobs[i] = batch[settled[i]]->job;
      sluice_worker__release_slots(worker, settled_jobs, n_items);
      sluice_worker__settle_unique(worker, settled_jobs, items, n_items);
    }

    /* Everything a settlement does is done before it is announced (the
     * job leaves `held`, settle_gen moves): whoever waits for it, as
     * run_until_idle does, then finds its record, its counters, its
     * metrics and its line all there. */
    if (worker->options.log_each_task)
      for (guint i = 0; i < n_items; i++)
        if (items[i].status == SLUICE_SETTLE_DONE)
          log_settled(batch[settled[i]]);

    if (n_items > 0) {
      g_mutex_lock(&worker->lock);
      for (guint i = 0; i < n_items; i++)
        started_at[i] = batch[settled[i]]->job->started_at;
      g_mutex_unlock(&worker->lock);
      sluice_metrics__settled(worker, batch, settled, items, started_at,
                              n_items);

      g_mutex_lock(&worker->lock);
      for (guint i = 0; i < n_items; i++) {
        Pending *p = batch[settled[i]];
        if (items[i].status == SLUICE_SETTLE_STALE ||
            items[i].status == SLUICE_SETTLE_GONE)
          worker->stats.stale_settles++;
        else
          count_settled(worker, p->kind);
        if (g_hash_table_remove(worker->jobs, p->job)) {
          worker->held--;
          if (p->job->suspect)
            worker->suspects_held--;
          sluice_job__unref(p->job); /* the reference of the jobs table */
        }
      }
      worker->settle_gen++;
      g_cond_broadcast(&worker->cond);
      g_mutex_unlock(&worker->lock);
    }

    for (guint i = 0; i < n; i++)
      sluice_pending__free(batch[i]);
    if (retries)
      sluice_worker__wake_promoter(worker);
  }
  sluice_worker__core_unref(worker);
  return NULL;
}

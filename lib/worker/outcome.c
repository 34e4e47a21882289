/* outcome.c - what becomes of a delivery: the settlement it is given.
 *
 * The worker decides; the broker carries it out in one atomic step. Every
 * decision is made here, in one place:
 *
 *   outcome                         action       record (if stored)   reason
 *   ------------------------------  -----------  -------------------  --------------
 *   the task succeeded              ACK          succeeded            -
 *   failed, attempts left           RETRY        retrying (tracked)   -
 *   failed on its last attempt      DEAD_LETTER  dead_lettered        max_attempts
 *     ... and dead_letter is off    ACK          failed               -
 *   failed for good (fatal)         DEAD_LETTER  dead_lettered        non_retryable
 *   ran past its timeout            as "failed": the watchdog settles it
 *   revoked (queued or running)     ACK          cancelled            -
 *   undecodable                     DEAD_LETTER  -                    malformed
 *   past its expires_at             DEAD_LETTER  dead_lettered        expired
 *   delivered too often             DEAD_LETTER  dead_lettered        max_deliveries
 *   task name unknown, within time  RETRY        scheduled (tracked)  - (deferred)
 *   task name unknown, past time    DEAD_LETTER  dead_lettered        unknown_task
 *   envelope version newer          RETRY        scheduled (tracked)  - (deferred,
 *     than this build reads                                             never buried)
 *   given back by a stop            RELEASE      queued (tracked)     -
 *   over its rate limit when met    RETRY        scheduled (tracked)  - (rate wait)
 *   no concurrency slot free        RETRY        scheduled (tracked)  - (slot wait)
 *   snoozed or rate limited (429)   RETRY        scheduled (tracked)  - (snoozed)
 *   ... past max_snoozes            DEAD_LETTER  dead_lettered        snoozed_too_often
 *
 * A task of a workflow (its envelope's `wf`) reports a final outcome
 * (succeeded, failed, dead_lettered, cancelled) to its join as well: the
 * settler sends that arrival just before the settlement (workflow-run.c).
 *
 * "tracked" records are written only with track_state. A retry and a
 * deferral put a new envelope on the schedule in the same step that
 * acknowledges the delivery: never both lost and acknowledged.
 */
#include "config.h"

#include <string.h>

#include "lib/worker/worker-private.h"

GBytes *
sluice_outcome__record(Job *job, SluiceTaskState state, GBytes *value,
                       const gchar *error, const gchar *dlq_reason, gint64 now)
{
  g_autoptr(SluiceResult) r = NULL;
  gint64 started_at;

  if (job->env == NULL)
    return NULL;
  r = sluice_result_new(job->env->id, state);
  sluice_result_set_task(r, job->env->task, job->env->queue);
  sluice_result_set_attempt(r, job->env->attempt);
  if (value != NULL && job->seal != NULL) {
    g_autoptr(GError) local = NULL;
    gchar *label = NULL;
    g_autoptr(GBytes) sealed = sluice_seal__close(
        job->worker->options.keyring, SLUICE_SEAL_RESULT, job->env->id,
        job->env->task, job->env->queue, value, &label, &local);

    /* Never a result in clear for a sealed task: without a seal the
     * record says why instead. */
    if (sealed == NULL) {
      g_autofree gchar *why =
          g_strdup_printf("the result could not be sealed: %s", local->message);
      sluice_result_set_error(r, why);
    } else {
      sluice_result_set_value(r, sealed);
      sluice_result__set_seal(r, label);
    }
    g_free(label);
  } else if (value != NULL)
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

/* A workflow task's final outcome goes to its join with the settlement
 * (the settler sends the arrival first). */
static void
join_outcome(Pending *p, SluiceTaskState state, GBytes *value,
             const gchar *error)
{
  const SluiceEnvelope *env = p->job->env;
  SluiceWfRef ref;

  if (env == NULL || env->wf == NULL)
    return;
  if (!sluice_wf__parse(env->wf, &ref) || ref.to == NULL) {
    sluice_wf__clear(&ref);
    return;
  }
  p->wf_join = g_steal_pointer(&ref.to);
  p->wf_member = ref.index;
  p->wf_step = sluice_wf__step(ref.policy, state != SLUICE_STATE_SUCCEEDED);
  p->wf_outcome = sluice_wf__outcome(
      env->id, sluice_task_state_to_string(state), value, error);
  sluice_wf__clear(&ref);
}

/* The event of a settlement, by what it counts as; none for the kinds
 * that are not a task's news (a deferral, a release). */
static gboolean
event_kind(SettleKind kind, SluiceEventKind *out)
{
  switch (kind) {
  case KIND_SUCCEEDED:
    *out = SLUICE_EVENT_SUCCEEDED;
    return TRUE;
  case KIND_FAILED:
    *out = SLUICE_EVENT_FAILED;
    return TRUE;
  case KIND_RETRIED:
    *out = SLUICE_EVENT_RETRIED;
    return TRUE;
  case KIND_DEAD_LETTERED:
    *out = SLUICE_EVENT_DEAD_LETTERED;
    return TRUE;
  case KIND_CANCELLED:
    *out = SLUICE_EVENT_CANCELLED;
    return TRUE;
  case KIND_DEFERRED:
  case KIND_DEFERRED_NEWER:
  case KIND_RELEASED:
  case KIND_RUNNING:
  case KIND_EVENT:
  case KIND_SNOOZED:
  case KIND_RATE_WAIT:
  case KIND_SLOT_WAIT:
  default:
    return FALSE;
  }
}

static void
push_pending(SluiceWorker *worker, Pending *pending)
{
  SluiceEventKind kind;

  if (worker->options.events && pending->event == NULL &&
      pending->job->env != NULL && event_kind(pending->kind, &kind))
    pending->event = sluice_events__encode(
        kind, pending->job->env, sluice_clock_now_ms(worker->clock),
        pending->event_detail, 0, worker->id);
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

void
sluice_pending__free(Pending *p)
{
  g_clear_pointer(&p->record, g_bytes_unref);
  g_clear_pointer(&p->reschedule_payload, g_bytes_unref);
  g_clear_pointer(&p->dead_letter, sluice_dead_letter_free);
  g_free(p->wf_join);
  g_clear_pointer(&p->wf_outcome, g_bytes_unref);
  g_clear_pointer(&p->event, g_bytes_unref);
  g_free(p->event_detail);
  sluice_job__unref(p->job);
  g_free(p);
}

/* The task returned TRUE: acknowledge, with its final record. */
void
sluice_outcome__succeeded(Job *job, GBytes *result)
{
  Pending *p = pending_new(job, KIND_SUCCEEDED, SLUICE_SETTLE_ACK);

  if (job->store_result) {
    p->record =
        sluice_outcome__record(job, SLUICE_STATE_SUCCEEDED, result, NULL, NULL,
                               sluice_clock_now_ms(job->worker->clock));
    p->record_final = TRUE;
  }
  join_outcome(p, SLUICE_STATE_SUCCEEDED, result, NULL);
  push_pending(job->worker, p);
}

void
sluice_outcome__event(Job *job, SluiceEventKind kind, const gchar *detail,
                      gdouble progress)
{
  SluiceWorker *worker = job->worker;
  Pending *p;

  if (!worker->options.events || job->env == NULL)
    return;
  p = pending_new(job, KIND_EVENT, SLUICE_SETTLE_ACK);
  p->event =
      sluice_events__encode(kind, job->env, sluice_clock_now_ms(worker->clock),
                            detail, progress, worker->id);
  push_pending(worker, p);
}

/* The `running` record goes through the settler, in batches, rather than
 * as one round trip per task on the executor's path; it is queued before
 * the task runs, so it always reaches the broker before the settlement
 * that replaces it. */
void
sluice_outcome__running(Job *job, gint64 now)
{
  Pending *p = pending_new(job, KIND_RUNNING, SLUICE_SETTLE_ACK);

  p->record =
      sluice_outcome__record(job, SLUICE_STATE_RUNNING, NULL, NULL, NULL, now);
  if (p->record == NULL) {
    sluice_pending__free(p);
    return;
  }
  push_pending(job->worker, p);
}

/* Buries the job's delivery, untouched, for @reason; @failed_attempt when
 * an attempt's failure brought it there. */
static void
bury(Job *job, const gchar *reason, const gchar *detail,
     gboolean failed_attempt)
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
  p->failed_attempt = failed_attempt;
  if (job->env != NULL && job->store_result) {
    p->record = sluice_outcome__record(job, SLUICE_STATE_DEAD_LETTERED, NULL,
                                       detail, reason, now);
    p->record_final = TRUE;
  }
  /* An outcome the library expects, not a fault of the program: not a
   * warning (GLib tests make warnings fatal); the count is in the stats. */
  sluice_log__envelope(G_LOG_LEVEL_MESSAGE, job->env, job->delivery->queue,
                       "dead-lettered (%s): %s", reason,
                       detail != NULL ? detail : "");
  join_outcome(p, SLUICE_STATE_DEAD_LETTERED, NULL,
               detail != NULL ? detail : reason);
  p->event_detail =
      g_strdup_printf("%s: %s", reason, detail != NULL ? detail : "");
  push_pending(worker, p);
}

/* Always dead-letters: the reasons that a task may turn into `failed` are
 * handled by sluice_outcome__failed. */
void
sluice_outcome__dead_letter(Job *job, const gchar *reason, const gchar *detail)
{
  bury(job, reason, detail, FALSE);
}

void
sluice_outcome__cancelled(Job *job, const gchar *why)
{
  Pending *p = pending_new(job, KIND_CANCELLED, SLUICE_SETTLE_ACK);

  if (job->store_result) {
    p->record =
        sluice_outcome__record(job, SLUICE_STATE_CANCELLED, NULL, why, NULL,
                               sluice_clock_now_ms(job->worker->clock));
    p->record_final = TRUE;
  }
  sluice_log__envelope(G_LOG_LEVEL_INFO, job->env, job->delivery->queue,
                       "cancelled: %s", why);
  join_outcome(p, SLUICE_STATE_CANCELLED, NULL, why);
  p->event_detail = g_strdup(why);
  push_pending(job->worker, p);
}

/* Gives the delivery back for anyone to take at once. With track_state,
 * its record says `queued` again, not `running` on a stopped worker. */
void
sluice_outcome__release(Job *job)
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

/* Puts a new version of the job's envelope on the schedule, due at
 * @due_at as decided at @now (@why: what its event says). */
static gboolean
settle_reschedule(Job *job, SluiceEnvelope *next, gint64 now, gint64 due_at,
                  SettleKind kind, GBytes *record, const gchar *why)
{
  g_autoptr(GError) error = NULL;
  Pending *p;
  GBytes *payload =
      job->seal == NULL || sluice_client__seal_args(
                               job->worker->options.keyring, next, &error)
          ? sluice_envelope_encode(NULL, next, &error)
          : NULL;

  if (payload == NULL) {
    /* Only a bug (the envelope decoded a moment ago) or a failure of the
     * system's cryptography can get here. Bury the original rather than
     * lose it. */
    g_clear_pointer(&record, g_bytes_unref);
    sluice_outcome__dead_letter(job, SLUICE_DLQ_MALFORMED, error->message);
    return FALSE;
  }
  p = pending_new(job, kind, SLUICE_SETTLE_RETRY);
  p->failed_attempt = kind == KIND_RETRIED;
  p->reschedule_payload = payload;
  p->reschedule_at = due_at;
  /* From the time the delay was decided, not a clock read again: the
   * line says the delay the policy chose. */
  p->reschedule_in_ms = MAX(due_at - now, 0);
  p->record = record;
  p->record_final = FALSE;
  p->event_detail = g_strdup(why);
  push_pending(job->worker, p);
  return TRUE;
}

/* A failed attempt: retry with backoff (or the task's own delay) while
 * attempts remain; otherwise bury it `max_attempts`, or record it `failed`
 * when the task does not dead-letter. @fatal skips the retries. */
void
sluice_outcome__failed(Job *job, const gchar *message,
                       gint64 requested_delay_ms, gboolean fatal)
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

  if (!fatal && env->attempt < (guint)job->policy.max_attempts) {
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
      record = sluice_outcome__record(job, SLUICE_STATE_RETRYING, NULL, message,
                                      NULL, now);
    sluice_log__envelope(
        G_LOG_LEVEL_INFO, env, env->queue,
        "attempt %u of %u failed: %s; retrying in %" G_GINT64_FORMAT " ms",
        env->attempt, job->policy.max_attempts, message, delay);
    settle_reschedule(job, next, now, now + delay, KIND_RETRIED, record,
                      message);
    return;
  }

  reason = fatal ? SLUICE_DLQ_NON_RETRYABLE : SLUICE_DLQ_MAX_ATTEMPTS;
  if (job->dead_letter) {
    g_autofree gchar *detail =
        fatal
            ? g_strdup(message)
            : g_strdup_printf("failed %u of %u attempts; last error: %s",
                              env->attempt, job->policy.max_attempts, message);
    bury(job, reason, detail, TRUE);
    return;
  }

  {
    Pending *p = pending_new(job, KIND_FAILED, SLUICE_SETTLE_ACK);
    p->failed_attempt = TRUE;
    if (job->store_result) {
      p->record = sluice_outcome__record(job, SLUICE_STATE_FAILED, NULL,
                                         message, NULL, now);
      p->record_final = TRUE;
    }
    sluice_log__envelope(G_LOG_LEVEL_MESSAGE, env, env->queue,
                         "failed for good (%s): %s", reason, message);
    join_outcome(p, SLUICE_STATE_FAILED, NULL, message);
    p->event_detail = g_strdup(message);
    push_pending(worker, p);
  }
}

/* An unregistered name is a rollout in progress, not a failure: defer the
 * message with its attempt untouched, and bury it only once it has been
 * unknown for unknown_task_timeout_ms of clock time, however often it came
 * back in between. */
void
sluice_outcome__defer_unknown(Job *job, gint64 now)
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
    sluice_outcome__dead_letter(job, SLUICE_DLQ_UNKNOWN_TASK, detail);
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
  if (sluice_worker__first_in_a_while(worker, log_key))
    sluice_log__envelope(
        G_LOG_LEVEL_MESSAGE, env, env->queue,
        "no task named “%s” is registered here; deferring messages of it "
        "(this one by %" G_GINT64_FORMAT " ms) and burying them once it has "
        "been unknown for %" G_GINT64_FORMAT " ms; said once a minute",
        env->task, worker->options.unknown_task_defer_ms,
        worker->options.unknown_task_timeout_ms);
  settle_reschedule(job, next, now, next->eta, KIND_DEFERRED, record, NULL);
}

/* A newer envelope version is a rollout in progress too, but this worker
 * cannot write the message back (it would drop what it does not read), so
 * the delivery's own bytes go back on the schedule, untouched; and it is
 * never buried, since whether the message can succeed is for a worker
 * that reads it to say. */
void
sluice_outcome__defer_newer(Job *job, gint64 now)
{
  SluiceWorker *worker = job->worker;
  const SluiceEnvelope *env = job->env;
  gint64 defer_ms = worker->options.unknown_task_defer_ms;
  Pending *p = pending_new(job, KIND_DEFERRED_NEWER, SLUICE_SETTLE_RETRY);
  g_autofree gchar *log_key =
      g_strdup_printf("newer-envelope:%u", env->version);

  p->reschedule_payload = g_bytes_ref(job->delivery->payload);
  p->reschedule_at = now + defer_ms;
  p->reschedule_in_ms = defer_ms;
  if (worker->options.track_state) {
    g_autoptr(SluiceResult) r =
        sluice_result_new(env->id, SLUICE_STATE_SCHEDULED);
    g_autofree gchar *note = sluice_envelope__newer_note(env->version);

    sluice_result_set_task(r, env->task, env->queue);
    sluice_result_set_error(r, note);
    p->record = sluice_result_encode(r);
    p->record_final = FALSE;
  }
  if (sluice_worker__first_in_a_while(worker, log_key))
    sluice_log__envelope(
        G_LOG_LEVEL_MESSAGE, env, env->queue,
        "a message in envelope format version %u, newer than this worker "
        "reads (%d), is deferred by %" G_GINT64_FORMAT
        " ms for a worker of a newer Sluice; upgrade this worker; said once "
        "a minute",
        env->version, SLUICE_ENVELOPE_VERSION_NEWEST, defer_ms);
  push_pending(worker, p);
}

/* The `scheduled` record of a message put back on the schedule for flow
 * control (track_state), saying why. */
static GBytes *
waiting_record(Job *job, const gchar *why)
{
  SluiceEnvelope *env = job->env;
  g_autoptr(SluiceResult) r = NULL;

  if (!job->worker->options.track_state || !job->store_result)
    return NULL;
  r = sluice_result_new(env->id, SLUICE_STATE_SCHEDULED);
  sluice_result_set_task(r, env->task, env->queue);
  sluice_result_set_attempt(r, env->attempt);
  sluice_result_set_times(r, env->enqueued_at, 0, 0);
  sluice_result_set_error(r, why);
  return sluice_result_encode(r);
}

/* Over its rate limit: not a failure, and no attempt, no snooze and no
 * delivery used (the copy on the schedule is a new delivery when it comes
 * back). */
void
sluice_outcome__rate_wait(Job *job, gint64 wait_ms)
{
  gint64 now = sluice_clock_now_ms(job->worker->clock);
  g_autoptr(SluiceEnvelope) next = sluice_envelope_copy(job->env);

  next->eta = now + MAX(wait_ms, 1);
  settle_reschedule(job, next, now, next->eta, KIND_RATE_WAIT,
                    waiting_record(job, "waiting for its rate limit"), NULL);
}

void
sluice_outcome__snoozed(Job *job, gint64 delay_ms, gboolean rate_limited)
{
  SluiceEnvelope *env = job->env;
  guint most = job->entry != NULL && job->entry->options.max_snoozes > 0
                   ? job->entry->options.max_snoozes
                   : SLUICE_DEFAULT_MAX_SNOOZES;
  gint64 now = sluice_clock_now_ms(job->worker->clock);
  g_autoptr(SluiceEnvelope) next = NULL;

  if (env->snoozes >= most) {
    g_autofree gchar *detail = g_strdup_printf(
        "snoozed %u times, the most max_snoozes (%u) allows; it asked for "
        "another %s",
        env->snoozes, most, rate_limited ? "wait for a rate limit" : "snooze");
    sluice_outcome__dead_letter(job, SLUICE_DLQ_SNOOZED_TOO_OFTEN, detail);
    return;
  }
  next = sluice_envelope_copy(env);
  next->snoozes = env->snoozes + 1;
  next->eta = now + MAX(delay_ms, 0);
  sluice_log__envelope(G_LOG_LEVEL_INFO, env, env->queue,
                       "%s for %" G_GINT64_FORMAT " ms (snooze %u of %u)",
                       rate_limited ? "rate limited downstream" : "snoozed",
                       MAX(delay_ms, 0), next->snoozes, most);
  settle_reschedule(
      job, next, now, next->eta, KIND_SNOOZED,
      waiting_record(job, rate_limited ? "rate limited downstream" : "snoozed"),
      NULL);
}

void
sluice_outcome__slot_wait(Job *job, gint64 fallback_ms)
{
  gint64 now = sluice_clock_now_ms(job->worker->clock);
  g_autoptr(SluiceEnvelope) next = sluice_envelope_copy(job->env);

  /* The release of a slot moves it to its queue at once; the due time is
   * only for a release that never comes (its holder died). */
  next->eta = now + MAX(fallback_ms, 1);
  settle_reschedule(job, next, now, next->eta, KIND_SLOT_WAIT,
                    waiting_record(job, "waiting for a concurrency slot"),
                    NULL);
}

/* executor.c - the threads that run task functions.
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

#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "lib/isolation-private.h"

/* Runs @job's task function on this thread. */
static void
run_here(Job *job, SluiceChildOutcome *ran)
{
  SluiceTaskContext ctx;

  memset(ran, 0, sizeof *ran);
  sluice_task_context__init(&ctx, job->env, job->delivery->delivery_count,
                            (guint)job->policy.max_attempts,
                            sluice_job__cancellable, job);
  ctx.progress_of = sluice_job__progress;
  ctx.admitted_at = job->admitted_at;
  g_atomic_int_set(&job->in_task, 1);
  ran->ok = sluice_worker__run_task(job->worker, job, &ctx, &ran->error);
  g_atomic_int_set(&job->in_task, 0);
  ran->end = SLUICE_CHILD_RETURNED;
  ran->retry_delay_ms = ctx.retry_delay_ms;
  if (ran->ok) {
    ran->result = g_steal_pointer(&ctx.result);
    g_clear_error(&ran->error);
  }
  sluice_task_context__clear(&ctx);
}

/* A 429 from downstream: no worker starts another message of the job's
 * bucket for @delay_ms. Best effort: if the broker cannot be reached the
 * message still waits its delay, and others of its bucket only learn the
 * downstream's limit by meeting it. */
static void
pause_rate_bucket(Job *job, gint64 delay_ms)
{
  g_autoptr(GError) error = NULL;
  SluiceRateAcquire item = {0};

  if (job->rate == NULL || delay_ms <= 0)
    return;
  item.key = job->rate_bucket;
  item.interval_us = sluice_rate_limit__interval_us(job->rate);
  item.tolerance_us = sluice_rate_limit__tolerance_us(job->rate);
  item.block_ms = delay_ms;
  if (!sluice_broker_rate_acquire(job->worker->broker, &item, 1, &error))
    sluice_log__envelope(G_LOG_LEVEL_WARNING, job->env, job->env->queue,
                         "could not pause its rate limit for %" G_GINT64_FORMAT
                         " ms: %s",
                         delay_ms, error->message);
}

/* Process isolation: the child died under the task, or was killed. */
static void
settle_lost_child(Job *job, SluiceChildOutcome *ran)
{
  SluiceWorker *worker = job->worker;
  SluiceEnvelope *env = job->env;

  /* Killed by the worker (a timeout, a revocation, a memory limit) is an
   * outcome it chose; a child that died by itself is a crash someone
   * must look at. */
  sluice_log__envelope(ran->end == SLUICE_CHILD_KILLED ? G_LOG_LEVEL_MESSAGE
                                                       : G_LOG_LEVEL_WARNING,
                       env, env->queue, "task's child process was lost: %s",
                       ran->death);
  if (ran->timed_out) {
    g_autofree gchar *message = g_strdup_printf("timed out: %s", ran->death);
    g_mutex_lock(&worker->lock);
    worker->stats.timed_out++;
    g_mutex_unlock(&worker->lock);
    sluice_outcome__failed(job, message, -1, FALSE);
  } else if (g_atomic_int_get(&job->revoked)) {
    g_autofree gchar *why = g_strdup_printf(
        "revoked while running; its process was %s", ran->death);
    sluice_outcome__cancelled(job, why);
  } else {
    sluice_outcome__failed(job, ran->death, -1, FALSE);
  }
}

/* At the start of a message with a uniqueness claim: ends a "while
 * queued" claim, takes a "while running" one as a lease. FALSE when a
 * newer message of the key holds it: this one was replaced. If the broker
 * cannot be reached the task runs (as it would have without the claim). */
static gboolean
start_unique(Job *job)
{
  SluiceWorker *worker = job->worker;
  g_autoptr(GError) error = NULL;
  SluiceUniqueUpdate u = {0};
  SluiceUniqueScope scope;

  if (!sluice_unique__parse(job->env, &scope, &u.key))
    return TRUE;
  u.id = job->env->id;
  u.action = scope == SLUICE_UNIQUE_WHILE_QUEUED    ? SLUICE_UNIQUE_START
             : scope == SLUICE_UNIQUE_WHILE_RUNNING ? SLUICE_UNIQUE_HOLD
                                                    : SLUICE_UNIQUE_CHECK;
  u.ttl_ms = worker->options.visibility_timeout_ms;
  if (!sluice_broker_unique_update(worker->broker, &u, 1, &error)) {
    sluice_log__envelope(G_LOG_LEVEL_WARNING, job->env, job->env->queue,
                         "could not update its uniqueness claim; it runs "
                         "anyway: %s",
                         error->message);
    return TRUE;
  }
  if (u.superseded)
    return FALSE;
  if (scope == SLUICE_UNIQUE_WHILE_RUNNING)
    g_atomic_int_set(&job->unique_held, 1);
  return TRUE;
}

static void
execute(Job *job, guint slot)
{
  SluiceWorker *worker = job->worker;
  SluiceEnvelope *env = job->env;
  SluiceChildOutcome ran;
  gboolean claimed;
  gint64 now, start_us;
  gdouble elapsed_us;

  if (!g_atomic_int_compare_and_exchange(&job->phase, JOB_QUEUED,
                                         JOB_RUNNING)) {
    sluice_job__unref(job); /* released by the stop sequence meanwhile */
    return;
  }
  now = sluice_clock_now_ms(worker->clock);
  /* The revocation may have arrived while the job waited for a thread. */
  if (sluice_worker__is_revoked(worker, env->id, now)) {
    if (job_claim(job))
      sluice_outcome__cancelled(job, "revoked before it started");
    sluice_job__unref(job);
    return;
  }

  if (env->unique != NULL && !start_unique(job)) {
    if (job_claim(job))
      sluice_outcome__cancelled(job, "replaced by a newer task of its "
                                     "uniqueness key before it started");
    sluice_job__unref(job);
    return;
  }

  /* A chord's callback or a chain's step runs on what its join gathered.
   * Not reading it is an outage like any other: the attempt fails and is
   * retried. */
  if (env->wf != NULL) {
    g_autoptr(GError) gather_error = NULL;
    gboolean gathered = FALSE;
    if (!sluice_wf__gather_args(worker->broker, env, &gathered,
                                &gather_error)) {
      gboolean cancelled =
          g_error_matches(gather_error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
      gboolean fatal = g_error_matches(gather_error, SLUICE_TASK_ERROR,
                                       SLUICE_TASK_ERROR_FATAL);

      if (job_claim(job)) {
        if (cancelled)
          sluice_outcome__cancelled(job, gather_error->message);
        else
          sluice_outcome__failed(job, gather_error->message, -1, fatal);
      }
      sluice_job__unref(job);
      return;
    }
    if (gathered && worker->pool != NULL)
      job->run_payload = sluice_envelope_encode(NULL, env, NULL);
  }
  /* A child has no keyring: it is handed the args this worker opened,
   * over the pipe between them, never stored. */
  if (job->seal != NULL && worker->pool != NULL && job->run_payload == NULL)
    job->run_payload = sluice_envelope_encode(NULL, env, NULL);

  g_mutex_lock(&worker->lock);
  worker->running++;
  worker->stats.started++;
  job->series->started++;
  worker->stats.peak_running = MAX(worker->stats.peak_running, worker->running);
  job->started_at = now;
  g_mutex_unlock(&worker->lock);
  /* Queued before the deadline exists: the watchdog's settlement, and with
   * it the final record, can then only come after it. */
  if (worker->options.track_state && job->store_result)
    sluice_outcome__running(job, now);
  sluice_outcome__event(job, SLUICE_EVENT_STARTED, NULL, 0);
  if (job->timeout_ms > 0) {
    g_mutex_lock(&worker->lock);
    job->deadline = now + job->timeout_ms;
    g_mutex_unlock(&worker->lock);
    sluice_worker__watchdog_arm(worker, job->deadline);
  }

  start_us = g_get_monotonic_time();
  if (worker->pool != NULL) {
    g_atomic_int_set(&job->in_task, 1);
    sluice_pool__run(worker->pool, slot, job, &ran);
    g_atomic_int_set(&job->in_task, 0);
  } else {
    run_here(job, &ran);
  }

  /* Claim before leaving `running`: the stop sequence releases running
   * jobs it can claim once `running` drops to zero, and must not release a
   * task that has in fact finished. */
  claimed = job_claim(job);
  elapsed_us = (gdouble)(g_get_monotonic_time() - start_us);
  __atomic_store_n(&job->run_us, (gint64)elapsed_us, __ATOMIC_RELAXED);
  g_mutex_lock(&worker->lock);
  worker->running--;
  /* What the fetcher sizes its prefetch by: recent tasks weigh most. */
  worker->task_us = worker->task_us > 0
                        ? worker->task_us * 0.9 + elapsed_us * 0.1
                        : elapsed_us;
  /* A broadcast is a system call: make it only when the stop sequence
   * waits for running tasks. */
  if (worker->running_waited)
    g_cond_broadcast(&worker->cond);
  g_mutex_unlock(&worker->lock);

  if (!claimed) {
    /* The watchdog (timeout) or the stop sequence settled it already. The
     * line first: whoever sees the count must find the line written. What
     * a timeout or a stop implies, so not a warning. */
    if (ran.end != SLUICE_CHILD_RETURNED)
      sluice_log__envelope(G_LOG_LEVEL_MESSAGE, env, env->queue,
                           "task's process ended after it was timed out or "
                           "released: %s",
                           ran.death);
    else
      sluice_log__envelope(G_LOG_LEVEL_MESSAGE, env, env->queue,
                           "task returned after it was timed out or released; "
                           "its late %s is discarded",
                           ran.ok ? "result" : "error");
    g_mutex_lock(&worker->lock);
    worker->stats.late_results_discarded++;
    g_mutex_unlock(&worker->lock);
  } else if (ran.end != SLUICE_CHILD_RETURNED) {
    settle_lost_child(job, &ran);
  } else if (ran.ok) {
    sluice_outcome__succeeded(job, ran.result);
  } else if (g_atomic_int_get(&job->revoked) &&
             (ran.error == NULL ||
              g_error_matches(ran.error, G_IO_ERROR, G_IO_ERROR_CANCELLED))) {
    sluice_outcome__cancelled(job, "revoked while running");
  } else if (g_error_matches(ran.error, SLUICE_TASK_ERROR,
                             SLUICE_TASK_ERROR_SNOOZE)) {
    sluice_outcome__snoozed(job, ran.retry_delay_ms, FALSE);
  } else if (g_error_matches(ran.error, SLUICE_TASK_ERROR,
                             SLUICE_TASK_ERROR_RATE_LIMITED)) {
    pause_rate_bucket(job, ran.retry_delay_ms);
    sluice_outcome__snoozed(job, ran.retry_delay_ms, TRUE);
  } else {
    const gchar *message =
        ran.error != NULL ? ran.error->message
                          : "the task returned FALSE without setting an error";
    gboolean fatal =
        g_error_matches(ran.error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL);
    gint64 delay =
        g_error_matches(ran.error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_RETRY)
            ? ran.retry_delay_ms
            : -1;
    if (ran.error == NULL)
      sluice_log__envelope(G_LOG_LEVEL_CRITICAL, env, env->queue,
                           "task “%s” returned FALSE without setting its "
                           "GError",
                           env->task);
    sluice_outcome__failed(job, message, delay, fatal);
  }
  sluice_child_outcome__clear(&ran);
  sluice_job__unref(job);
}

/* Hands @n jobs (references included) to the executors. */
void
sluice_worker__hand_over(SluiceWorker *worker, Job **jobs, guint n)
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

gpointer
sluice_worker__executor_main(gpointer data)
{
  SluiceWorker *worker = data;
  /* Each executor owns one slot of the pool, and its child. */
  guint slot = (guint)g_atomic_int_add(&worker->next_slot, 1);

  if (worker->pool != NULL) {
    /* A write to a child that died between tasks must fail with EPIPE,
     * not end the worker: SIGPIPE is sent to the writing thread, which
     * keeps it blocked (and pending, harmlessly). */
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, NULL);
  }

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
    execute(job, slot);
  }
  sluice_worker__core_unref(worker);
  return NULL;
}

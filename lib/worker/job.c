/* job.c - a delivery in the worker: reference counting and cancellation.
 *
 * The cancellable is made on first use: most tasks never look at it, and a
 * GObject per message is a measurable share of a no-op task's cost.
 */
#include "config.h"

#include "lib/worker/worker-private.h"

Job *
sluice_job__new(SluiceWorker *worker, SluiceDelivery *delivery)
{
  Job *job = g_new0(Job, 1);

  g_atomic_ref_count_init(&job->ref_count);
  job->worker = sluice_worker__core_ref(worker);
  job->delivery = delivery;
  job->phase = JOB_QUEUED;
  job->run_us = -1;
  g_mutex_init(&job->cancel_lock);
  return job;
}

void
sluice_job__unref(Job *job)
{
  SluiceWorker *worker;

  if (!g_atomic_ref_count_dec(&job->ref_count))
    return;
  worker = job->worker;
  g_clear_object(&job->cancellable);
  g_mutex_clear(&job->cancel_lock);
  sluice_envelope_free(job->env);
  g_clear_pointer(&job->run_payload, g_bytes_unref);
  sluice_delivery_free(job->delivery);
  g_free(job->rate_bucket);
  g_free(job->seal);
  g_free(job->slot_key);
  g_free(job->slot_holder);
  g_free(job);
  sluice_worker__core_unref(worker);
}

/* The job's cancellable, made on first use; if the job was cancelled
 * before, the new cancellable is cancelled at once. */
GCancellable *
sluice_job__cancellable(gpointer data)
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

void
sluice_job__cancel(Job *job)
{
  GCancellable *cancellable;

  g_mutex_lock(&job->cancel_lock);
  job->cancel_requested = TRUE;
  cancellable =
      job->cancellable != NULL ? g_object_ref(job->cancellable) : NULL;
  /* Under the lock, so that the executor, once it has cleared the hook,
   * knows no call is still reaching its child. */
  if (job->on_cancel != NULL)
    job->on_cancel(job->on_cancel_data);
  g_mutex_unlock(&job->cancel_lock);
  if (cancellable != NULL) {
    g_cancellable_cancel(cancellable);
    g_object_unref(cancellable);
  }
}

gboolean
sluice_job__set_cancel_hook(Job *job, void (*hook)(gpointer data),
                            gpointer data)
{
  gboolean requested;

  g_mutex_lock(&job->cancel_lock);
  job->on_cancel = hook;
  job->on_cancel_data = data;
  requested = job->cancel_requested;
  g_mutex_unlock(&job->cancel_lock);
  return requested;
}

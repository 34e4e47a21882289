/* pause.c - the worker's copy of which of its queues are paused.
 *
 * A pause is a flag stored in the broker (`set_paused`), so it reaches
 * every worker of the store and outlives them. Housekeeping reads the
 * paused queues with every revocation sync (about once a second) and
 * keeps `active_queues`, the worker's queues in priority order minus the
 * paused ones, which the fetcher reads before each fetch. A change wakes a
 * fetch blocked on the old list.
 *
 * The pause itself is the broker's to enforce: every broker reads it in
 * the step that takes (`fetch`), so once sluice_client_pause() returned no
 * fetch of any worker takes from the queue. What a worker fetched before
 * and has not started (its prefetch) is given back when it learns of the
 * pause here, within one sync interval; what runs, runs on.
 */
#include "config.h"

#include "lib/worker/worker-private.h"

GPtrArray *
sluice_worker__active_queues(SluiceWorker *worker)
{
  GPtrArray *active;

  g_mutex_lock(&worker->lock);
  active = g_ptr_array_ref(worker->active_queues);
  g_mutex_unlock(&worker->lock);
  return active;
}

/* The worker's queues minus @paused, NULL-terminated; the names are the
 * worker's own (they live as long as it does). */
static GPtrArray *
unpaused(SluiceWorker *worker, GHashTable *paused)
{
  GPtrArray *active = g_ptr_array_new();

  for (guint i = 0; worker->queues[i] != NULL; i++)
    if (paused == NULL || !g_hash_table_contains(paused, worker->queues[i]))
      g_ptr_array_add(active, worker->queues[i]);
  g_ptr_array_add(active, NULL);
  return active;
}

/* Gives back every job of queue @queue fetched and not started yet: the
 * queue was paused after the fetch. An executor that takes one of them
 * meanwhile finds it released (the phase CAS decides). */
static guint
release_unstarted(SluiceWorker *worker, const gchar *queue)
{
  GHashTableIter iter;
  gpointer key;
  guint n = 0;

  g_mutex_lock(&worker->lock);
  g_hash_table_iter_init(&iter, worker->jobs);
  while (g_hash_table_iter_next(&iter, &key, NULL)) {
    Job *job = key;
    if (g_strcmp0(job->delivery->queue, queue) == 0 &&
        g_atomic_int_compare_and_exchange(&job->phase, JOB_QUEUED,
                                          JOB_RELEASED) &&
        job_claim(job)) {
      sluice_outcome__release(job);
      n++;
    }
  }
  g_mutex_unlock(&worker->lock);
  return n;
}

void
sluice_worker__init_active_queues(SluiceWorker *worker)
{
  worker->active_queues = unpaused(worker, NULL);
}

gboolean
sluice_worker__sync_paused(SluiceWorker *worker, GError **error)
{
  g_autoptr(GPtrArray) listed = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GHashTable) paused = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GPtrArray) old = NULL;
  GPtrArray *active;
  gboolean changed;

  if (!sluice_broker_list_paused(worker->broker, listed, error))
    return FALSE;
  for (guint i = 0; i < listed->len; i++)
    g_hash_table_add(paused, listed->pdata[i]);
  active = unpaused(worker, paused);

  g_mutex_lock(&worker->lock);
  old = worker->active_queues;
  changed = old->len != active->len;
  for (guint i = 0; !changed && i < active->len; i++)
    changed = old->pdata[i] != active->pdata[i];
  if (changed) {
    worker->active_queues = active;
    worker->pause_gen++;
    g_cond_broadcast(&worker->cond);
  } else {
    old = active; /* freed below; the list in use stays */
  }
  g_mutex_unlock(&worker->lock);
  if (!changed)
    return TRUE;

  for (guint i = 0; worker->queues[i] != NULL; i++) {
    const gchar *q = worker->queues[i];
    gboolean was = !g_strv_contains((const gchar *const *)old->pdata, q);
    gboolean is = g_hash_table_contains(paused, q);

    if (is && !was) {
      guint back = release_unstarted(worker, q);
      sluice_log__message(G_LOG_LEVEL_MESSAGE,
                          "queue “%s” is paused: worker %s takes nothing more "
                          "from it until it is resumed (it gave back %u "
                          "fetched and not started; what runs still runs)",
                          q, worker->id, back);
    } else if (was && !is)
      sluice_log__message(G_LOG_LEVEL_MESSAGE,
                          "queue “%s” is resumed: worker %s takes from it "
                          "again",
                          q, worker->id);
  }
  /* A fetch blocked on the old list would wait out its block. */
  sluice_broker_wakeup(worker->broker);
  return TRUE;
}

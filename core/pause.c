/* pause.c - the worker's copy of which of its queues are paused.
 *
 * A pause is a flag stored in the broker (`set_paused`), so it reaches
 * every worker of the store and outlives them. Housekeeping reads the
 * paused queues with every revocation sync (about once a second) and
 * keeps `active_queues`, the worker's queues in priority order minus the
 * paused ones, which the fetcher reads before each fetch. A change wakes a
 * fetch blocked on the old list, so a pause takes effect within one sync
 * interval and one round trip; what was fetched before it still runs (at
 * most concurrency + prefetch tasks).
 */
#include "config.h"

#include "core/worker-private.h"

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

    if (is && !was)
      sluice_log__message(G_LOG_LEVEL_MESSAGE,
                          "queue “%s” is paused: worker %s takes nothing more "
                          "from it until it is resumed (what it fetched "
                          "before still runs)",
                          q, worker->id);
    else if (was && !is)
      sluice_log__message(G_LOG_LEVEL_MESSAGE,
                          "queue “%s” is resumed: worker %s takes from it "
                          "again",
                          q, worker->id);
  }
  /* A fetch blocked on the old list would wait out its block. */
  sluice_broker_wakeup(worker->broker);
  return TRUE;
}

/* revocations.c - the worker's copy of the revocations, kept in sync.
 *
 * Synced by the broker's insertion order (a cursor), never by expiry:
 * clients may revoke with different TTLs, and two revocations may share a
 * millisecond. A queued task found revoked is skipped and recorded
 * cancelled; a running one has its cancellable cancelled.
 */
#include "config.h"

#include "lib/worker/worker-private.h"

gboolean
sluice_worker__is_revoked(SluiceWorker *worker, const gchar *id, gint64 now)
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
gboolean
sluice_worker__sync_revocations(SluiceWorker *worker, GError **error)
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
  if (!sluice_broker_list_revocations(worker->broker, &cursor, now, fresh,
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
    if (sluice_worker__is_revoked(worker, job->env->id, now) &&
        g_atomic_int_compare_and_exchange(&job->revoked, 0, 1)) {
      sluice_log__envelope(G_LOG_LEVEL_MESSAGE, job->env, job->env->queue,
                           "revoked while running; cancelling it");
      sluice_job__cancel(job);
    }
    sluice_job__unref(job);
  }
  return TRUE;
}

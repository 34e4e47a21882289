/* memory-stats.c - the memory broker's stats and worker slots: counts of
 * the queues, the schedule, what is held and the dead letters, and the
 * announcements workers make of themselves.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__stats(SluiceBroker *broker, const gchar *const *queues,
                     SluiceBrokerStats *out, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  if (queues != NULL) {
    for (guint i = 0; queues[i] != NULL; i++) {
      GQueue *q = g_hash_table_lookup(self->queues, queues[i]);
      sluice_broker_stats_add_queue(out, queues[i],
                                    q != NULL ? g_queue_get_length(q) : 0);
    }
  } else {
    g_autoptr(GList) names = g_hash_table_get_keys(self->queues);
    names = g_list_sort(names, (GCompareFunc)g_strcmp0);
    for (GList *l = names; l != NULL; l = l->next)
      sluice_broker_stats_add_queue(
          out, l->data,
          g_queue_get_length(g_hash_table_lookup(self->queues, l->data)));
  }
  out->scheduled = g_sequence_get_length(self->schedule);
  out->in_flight = self->in_flight;
  out->dead_letters = g_queue_get_length(self->dead_letters);
  for (GList *l = self->dead_letters->head; l != NULL; l = l->next)
    sluice_broker_stats_add_dead_letters(
        out, ((SluiceDeadLetter *)l->data)->reason, 1);
  out->stale_settles = 0;
  {
    GHashTableIter iter;
    gpointer key, value;
    gint64 now = sluice_memory__now(self);

    g_hash_table_iter_init(&iter, self->dropped);
    while (g_hash_table_iter_next(&iter, &key, &value))
      sluice_broker_stats_add_dropped(out, key, *(gint64 *)value);
    g_hash_table_iter_init(&iter, self->workers);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
      SluiceMemoryAnnounced *a = value;
      gint64 ttl = a->expires_at - a->last_seen;
      /* A lapsed worker is shown dead for two more of its periods. */
      if (now >= a->expires_at + 2 * ttl)
        g_hash_table_iter_remove(&iter);
      else
        sluice_broker_stats_add_worker_info(out, key, a->last_seen,
                                            now < a->expires_at, a->info);
    }
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__announce(SluiceBroker *broker, const gchar *consumer,
                        GBytes *info, gint64 ttl_ms, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  SluiceMemoryAnnounced *a = g_new0(SluiceMemoryAnnounced, 1);

  a->info = g_bytes_ref(info);
  a->last_seen = sluice_memory__now(self);
  a->expires_at = a->last_seen + ttl_ms;
  g_mutex_lock(&self->lock);
  g_hash_table_replace(self->workers, g_strdup(consumer), a);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

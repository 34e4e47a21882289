/* memory-flow.c - the memory broker's flow-control slots: rate-limit
 * buckets and concurrency slots, every item of a call under the one lock,
 * on the broker's clock. The per-item steps are memory-store.c's.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__rate_acquire(SluiceBroker *broker, SluiceRateAcquire *items,
                            guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__rate_acquire_one(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__slot_acquire(SluiceBroker *broker, SluiceSlotAcquire *items,
                            guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__slot_acquire_one(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__list_slots(SluiceBroker *broker, guint limit, GPtrArray *out,
                          GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  g_autoptr(GHashTable) keys = g_hash_table_new(g_str_hash, g_str_equal);
  gint64 now = sluice_memory__now(self);
  GHashTableIter iter, holders_iter;
  gpointer key, value;

  g_mutex_lock(&self->lock);
  g_hash_table_iter_init(&iter, self->slots);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    g_hash_table_add(keys, key);
  g_hash_table_iter_init(&iter, self->waiters);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (!g_queue_is_empty(value))
      g_hash_table_add(keys, key);
  g_hash_table_iter_init(&iter, keys);
  while (out->len < limit && g_hash_table_iter_next(&iter, &key, NULL)) {
    GHashTable *holders = g_hash_table_lookup(self->slots, key);
    GQueue *waiting = g_hash_table_lookup(self->waiters, key);
    SluiceSlotState *s = sluice_slot_state_new(key);

    if (holders != NULL) {
      g_hash_table_iter_init(&holders_iter, holders);
      while (g_hash_table_iter_next(&holders_iter, &key, &value))
        if (*(gint64 *)value > now)
          g_ptr_array_add(s->holders, g_strdup(key));
    }
    s->waiting = waiting != NULL ? g_queue_get_length(waiting) : 0;
    if (s->holders->len > 0 || s->waiting > 0)
      g_ptr_array_add(out, s);
    else
      sluice_slot_state_free(s);
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__slot_release(SluiceBroker *broker, SluiceSlotRelease *items,
                            guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__slot_release_one(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

/* memory-periodic.c - the memory broker's periodic slots: the claim of
 * an occurrence and its enqueue under the one lock, so it is dispatched
 * at most once.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__claim_periodic(SluiceBroker *broker, const gchar *name,
                              gint64 occurrence_at, SluiceSubmit *item,
                              gboolean *out_claimed, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 *last;

  g_mutex_lock(&self->lock);
  last = g_hash_table_lookup(self->periodic, name);
  *out_claimed = last == NULL || *last < occurrence_at;
  if (*out_claimed) {
    g_hash_table_replace(self->periodic, g_strdup(name),
                         sluice_memory__new_time(occurrence_at));
    sluice_memory__submit(self, item, sluice_memory__now(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__last_periodic(SluiceBroker *broker, const gchar *name,
                             gint64 *out_last, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 *last;

  g_mutex_lock(&self->lock);
  last = g_hash_table_lookup(self->periodic, name);
  *out_last = last != NULL ? *last : 0;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

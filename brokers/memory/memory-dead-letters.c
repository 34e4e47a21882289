/* memory-dead-letters.c - the memory broker's dead-letter slots: list,
 * read, replay and delete entries of the capped dead-letter queue.
 * Burying one is memory-store.c's, run inside a settle.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
                        GPtrArray *out, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = self->dead_letters->head;
  /* Entry ids sort in burial order, so "after" works even for an entry
   * that was deleted or dropped meanwhile. */
  if (after != NULL)
    while (l != NULL &&
           g_strcmp0(((SluiceDeadLetter *)l->data)->entry_id, after) <= 0)
      l = l->next;
  for (; l != NULL && out->len < limit; l = l->next)
    g_ptr_array_add(out, sluice_dead_letter_copy(l->data));
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__dlq_get(SluiceBroker *broker, const gchar *entry_id,
                       SluiceDeadLetter **out_entry, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = sluice_memory__find_dead_letter(self, entry_id);
  *out_entry = l != NULL ? sluice_dead_letter_copy(l->data) : NULL;
  g_mutex_unlock(&self->lock);
  if (*out_entry == NULL) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_NOT_FOUND,
                "no dead letter with entry id %s", entry_id);
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_memory__dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                          SluiceSubmit *item, gboolean *out_found,
                          GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = sluice_memory__find_dead_letter(self, entry_id);
  *out_found = l != NULL;
  if (l != NULL) {
    sluice_memory__unbury(self, l);
    sluice_memory__submit(self, item, sluice_memory__now(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                          gboolean *out_found, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = sluice_memory__find_dead_letter(self, entry_id);
  *out_found = l != NULL;
  if (l != NULL)
    sluice_memory__unbury(self, l);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

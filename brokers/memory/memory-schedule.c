/* memory-schedule.c - the memory broker's schedule slots: promoting what
 * is due into its queue, and cancelling a scheduled task. The schedule is
 * a sequence in (due time, insertion number) order (memory-store.h).
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__promote_due(SluiceBroker *broker, gint64 now, guint max,
                           guint *out_promoted, gint64 *out_next_due,
                           GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  guint promoted = 0;
  GSequenceIter *first;

  g_mutex_lock(&self->lock);
  while (promoted < max) {
    SluiceMemoryScheduled *s;
    first = g_sequence_get_begin_iter(self->schedule);
    if (g_sequence_iter_is_end(first))
      break;
    s = g_sequence_get(first);
    if (s->due_at > now)
      break;
    sluice_memory__push_ready(self, s->queue, s->payload);
    g_hash_table_remove(self->scheduled_by_id, s->id);
    g_sequence_remove(first);
    promoted++;
  }
  first = g_sequence_get_begin_iter(self->schedule);
  *out_next_due =
      g_sequence_iter_is_end(first)
          ? 0
          : ((SluiceMemoryScheduled *)g_sequence_get(first))->due_at;
  *out_promoted = promoted;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__cancel_scheduled(SluiceBroker *broker, const gchar *id,
                                GBytes *record, gint64 record_ttl_ms,
                                gboolean *out_removed, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  *out_removed = g_hash_table_contains(self->scheduled_by_id, id);
  if (*out_removed) {
    sluice_memory__unschedule(self, id);
    if (record != NULL)
      sluice_memory__put_record(self, id, record, TRUE, record_ttl_ms,
                                sluice_memory__now(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

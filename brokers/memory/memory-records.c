/* memory-records.c - the memory broker's record slots: result records
 * (and waiting for one) and task lookups. `wait_record` sleeps on
 * `records_changed`, broadcast by every final record; it never polls.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__get_record(SluiceBroker *broker, const gchar *id,
                          GBytes **out_record, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  SluiceMemoryRecord *r;

  g_mutex_lock(&self->lock);
  r = sluice_memory__live_record(self, id, sluice_memory__now(self));
  *out_record = r != NULL ? g_bytes_ref(r->bytes) : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__put_record_slot(SluiceBroker *broker, const gchar *id,
                               GBytes *record, gboolean final, gint64 ttl_ms,
                               GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  sluice_memory__put_record(self, id, record, final, ttl_ms,
                            sluice_memory__now(self));
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__wait_record(SluiceBroker *broker, const gchar *id,
                           gint64 timeout_ms, GBytes **out_record,
                           GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
  SluiceMemoryRecord *r;

  g_mutex_lock(&self->lock);
  for (;;) {
    r = sluice_memory__live_record(self, id, sluice_memory__now(self));
    if (r != NULL && r->final)
      break;
    if (!g_cond_wait_until(&self->records_changed, &self->lock, deadline)) {
      r = sluice_memory__live_record(self, id, sluice_memory__now(self));
      break;
    }
  }
  *out_record = r != NULL ? g_bytes_ref(r->bytes) : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__lookup_task(SluiceBroker *broker, const gchar *id,
                           SluiceTaskLocation *out, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GSequenceIter *iter;
  GList *dead;

  g_mutex_lock(&self->lock);
  iter = g_hash_table_lookup(self->scheduled_by_id, id);
  dead = g_hash_table_lookup(self->dead_by_task, id);
  if (iter != NULL) {
    SluiceMemoryScheduled *s = g_sequence_get(iter);
    out->place = SLUICE_TASK_PLACE_SCHEDULED;
    out->payload = g_bytes_ref(s->payload);
    out->queue = g_strdup(s->queue);
    out->due_at = s->due_at;
  } else if (dead != NULL) {
    out->place = SLUICE_TASK_PLACE_DEAD;
    out->dead_letter = sluice_dead_letter_copy(dead->data);
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

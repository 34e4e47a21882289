/* memory-queue.c - the memory broker's queue slots: enqueue, fetch,
 * settle and wakeup. There are no leases: a delivery belongs to the
 * process that fetched it, so `heartbeat`, `reclaim` and `leave` are not
 * provided and the core skips them. `fetch` sleeps on `ready`, signalled
 * by every push and by `wakeup`; it never polls.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
                       GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__submit(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__fetch(SluiceBroker *broker, const gchar *consumer,
                     const gchar *const *queues, guint max, gint64 block_ms,
                     GPtrArray *out, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 deadline = g_get_monotonic_time() + block_ms * 1000;
  guint64 wakeups;
  guint taken = 0;

  g_mutex_lock(&self->lock);
  wakeups = self->wakeups;
  for (;;) {
    for (guint i = 0; queues[i] != NULL && taken < max; i++) {
      /* A paused queue is looked at under the same lock as its messages:
       * once set_paused returned, nothing of it is taken. */
      GQueue *q = g_hash_table_contains(self->paused, queues[i])
                      ? NULL
                      : g_hash_table_lookup(self->queues, queues[i]);
      while (q != NULL && taken < max && !g_queue_is_empty(q)) {
        SluiceMemoryMessage *m = g_queue_pop_head(q);
        /* A handle per delivery, so that a settle repeated after a lost
         * reply is recognised and does nothing twice. */
        gchar *handle =
            g_strdup_printf("%" G_GUINT64_FORMAT, ++self->delivery_seq);
        m->delivery_count++;
        g_ptr_array_add(out, sluice_delivery_new(queues[i], m->payload, handle,
                                                 m->delivery_count));
        g_hash_table_add(self->out, handle);
        sluice_memory__message_free(m);
        taken++;
      }
    }
    if (taken > 0 || block_ms <= 0 || self->wakeups != wakeups)
      break;
    if (!g_cond_wait_until(&self->ready, &self->lock, deadline))
      break;
  }
  self->in_flight += taken;
  /* Another fetcher may be waiting for what we left. */
  if (taken == max)
    g_cond_signal(&self->ready);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__settle(SluiceBroker *broker, const gchar *consumer,
                      SluiceSettlement *items, guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);
  guint dropped = 0;

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++) {
    SluiceSettlement *s = &items[i];

    /* Settled already (repeated after its reply was lost): only the record
     * is written again; nothing is requeued, scheduled, buried or counted
     * twice. */
    if (s->delivery->handle != NULL &&
        !g_hash_table_remove(self->out, s->delivery->handle)) {
      if (s->record != NULL)
        sluice_memory__put_record(self, s->id, s->record, s->record_final,
                                  s->record_ttl_ms, now);
      s->status = SLUICE_SETTLE_DONE;
      continue;
    }
    switch (s->action) {
    case SLUICE_SETTLE_RELEASE: {
      SluiceMemoryMessage *m = g_new0(SluiceMemoryMessage, 1);
      m->payload = g_bytes_ref(s->delivery->payload);
      /* Not a failed delivery: the next fetch reports the same count. */
      m->delivery_count = s->delivery->delivery_count - 1;
      m->seq = ++self->message_seq;
      g_queue_push_head(sluice_memory__queue(self, s->delivery->queue), m);
      g_cond_signal(&self->ready);
      break;
    }
    case SLUICE_SETTLE_RETRY:
      sluice_memory__schedule(self, s->id, s->delivery->queue,
                              s->reschedule_payload, s->reschedule_at);
      break;
    case SLUICE_SETTLE_DEAD_LETTER:
      dropped += sluice_memory__bury(self, s->dead_letter);
      break;
    case SLUICE_SETTLE_ACK:
      break;
    }
    if (s->record != NULL)
      sluice_memory__put_record(self, s->id, s->record, s->record_final,
                                s->record_ttl_ms, now);
    self->in_flight--;
    s->status = SLUICE_SETTLE_DONE;
  }
  g_mutex_unlock(&self->lock);
  /* The cap doing what it was set to do (a documented way to lose data,
   * counted in the stats): a notice, not a warning, which GLib tests make
   * fatal. */
  if (dropped > 0)
    sluice_broker_log(&self->parent, G_LOG_LEVEL_MESSAGE,
                      "the dead-letter queue is full (dead_letter_max %u): "
                      "dropped the %u oldest dead letters for good",
                      self->dead_letter_max, dropped);
  return TRUE;
}

void
sluice_memory__wakeup(SluiceBroker *broker)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  self->wakeups++;
  g_cond_broadcast(&self->ready);
  g_mutex_unlock(&self->lock);
}

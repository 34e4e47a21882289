/* memory.c - every slot of the broker contract, in one process.
 *
 * OVERVIEW
 *
 * This is the broker users unit-test their task code against, so it must
 * produce exactly the semantics of the Redis brokers, minus what only a
 * shared store can give. Everything sits behind one mutex; each slot takes
 * it once, which makes every slot trivially atomic (the contract's "the ack,
 * the record, the retry or dead-letter write happen together"). The state
 * and the operations on it (queues, schedule, records, revocations,
 * periodic claims, idempotency claims, dead letters, workers) are
 * memory-store.{c,h}; this file is the slots.
 *
 * Waiting: `fetch` sleeps on `ready` (signalled by every push and by
 * `wakeup`); `wait_record` sleeps on `records_changed` (broadcast by every
 * final record). Neither polls.
 *
 * Time: every TTL is measured on the broker's SluiceClock
 * (SLUICE_BROKER_CAP_CLOCK_TTL), so with a fake clock a test sees results,
 * revocations and idempotency claims expire when it advances the clock;
 * rate-limit buckets follow the same clock.
 *
 * What it omits: nothing outlives the process (no DURABLE), other processes
 * see nothing (no SHARED), and there are no leases: a delivery belongs to
 * the process that fetched it, so `heartbeat`, `reclaim` and `leave` are not
 * provided and the core skips them.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

static gint64
now_ms(SluiceMemoryBroker *self)
{
  return sluice_clock_now_ms(sluice_broker_get_clock(&self->parent));
}

/* ---- Slots ------------------------------------------------------------- */

static gboolean
memory_enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
               GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = now_ms(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__submit(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_fetch(SluiceBroker *broker, const gchar *consumer,
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

static gboolean
memory_settle(SluiceBroker *broker, const gchar *consumer,
              SluiceSettlement *items, guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = now_ms(self);
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

static void
memory_wakeup(SluiceBroker *broker)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  self->wakeups++;
  g_cond_broadcast(&self->ready);
  g_mutex_unlock(&self->lock);
}

static gboolean
memory_promote_due(SluiceBroker *broker, gint64 now, guint max,
                   guint *out_promoted, gint64 *out_next_due, GError **error)
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

static gboolean
memory_cancel_scheduled(SluiceBroker *broker, const gchar *id, GBytes *record,
                        gint64 record_ttl_ms, gboolean *out_removed,
                        GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  *out_removed = g_hash_table_contains(self->scheduled_by_id, id);
  if (*out_removed) {
    sluice_memory__unschedule(self, id);
    if (record != NULL)
      sluice_memory__put_record(self, id, record, TRUE, record_ttl_ms,
                                now_ms(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_get_record(SluiceBroker *broker, const gchar *id, GBytes **out_record,
                  GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  SluiceMemoryRecord *r;

  g_mutex_lock(&self->lock);
  r = sluice_memory__live_record(self, id, now_ms(self));
  *out_record = r != NULL ? g_bytes_ref(r->bytes) : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_put_record(SluiceBroker *broker, const gchar *id, GBytes *record,
                  gboolean final, gint64 ttl_ms, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  sluice_memory__put_record(self, id, record, final, ttl_ms, now_ms(self));
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_wait_record(SluiceBroker *broker, const gchar *id, gint64 timeout_ms,
                   GBytes **out_record, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
  SluiceMemoryRecord *r;

  g_mutex_lock(&self->lock);
  for (;;) {
    r = sluice_memory__live_record(self, id, now_ms(self));
    if (r != NULL && r->final)
      break;
    if (!g_cond_wait_until(&self->records_changed, &self->lock, deadline)) {
      r = sluice_memory__live_record(self, id, now_ms(self));
      break;
    }
  }
  *out_record = r != NULL ? g_bytes_ref(r->bytes) : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
              GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  SluiceMemoryRevocation *r;

  g_mutex_lock(&self->lock);
  r = g_hash_table_lookup(self->revocations, id);
  if (r == NULL) {
    r = g_new0(SluiceMemoryRevocation, 1);
    g_hash_table_insert(self->revocations, g_strdup(id), r);
  }
  /* Revoking again never shortens a revocation, and is recorded anew. */
  r->expires_at = MAX(r->expires_at, expires_at);
  r->seq = ++self->revocation_seq;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gint
by_seq(gconstpointer a, gconstpointer b)
{
  const SluiceMemoryRevocation *x = ((const gpointer *)a)[1];
  const SluiceMemoryRevocation *y = ((const gpointer *)b)[1];

  return x->seq < y->seq ? -1 : (x->seq > y->seq ? 1 : 0);
}

/* Lists live revocations recorded after @cursor (0: all), in the order
 * they were recorded, and sets @out_cursor past the newest; drops lapsed
 * ones on the way. */
static void
list_revocations_locked(SluiceMemoryBroker *self, gint64 cursor, gint64 now,
                        GPtrArray *out, gint64 *out_cursor)
{
  g_autoptr(GArray) found = g_array_new(FALSE, FALSE, 2 * sizeof(gpointer));
  GHashTableIter iter;
  gpointer pair[2];

  g_hash_table_iter_init(&iter, self->revocations);
  while (g_hash_table_iter_next(&iter, &pair[0], &pair[1])) {
    SluiceMemoryRevocation *r = pair[1];
    if (r->expires_at <= now)
      g_hash_table_iter_remove(&iter);
    else if (r->seq > cursor)
      g_array_append_vals(found, pair, 1);
  }
  g_array_sort(found, by_seq);
  for (guint i = 0; i < found->len; i++) {
    gpointer *p = &g_array_index(found, gpointer, 2 * i);
    g_ptr_array_add(out,
                    sluice_revocation_new(
                        p[0], ((SluiceMemoryRevocation *)p[1])->expires_at));
  }
  /* Everything recorded so far was seen, listed or lapsed. */
  *out_cursor = MAX(cursor, self->revocation_seq);
}

static gboolean
memory_list_revocations(SluiceBroker *broker, gint64 cursor, gint64 now,
                        GPtrArray *out, gint64 *out_cursor, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  list_revocations_locked(self, cursor, now, out, out_cursor);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_claim_periodic(SluiceBroker *broker, const gchar *name,
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
    sluice_memory__submit(self, item, now_ms(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_last_periodic(SluiceBroker *broker, const gchar *name, gint64 *out_last,
                     GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 *last;

  g_mutex_lock(&self->lock);
  last = g_hash_table_lookup(self->periodic, name);
  *out_last = last != NULL ? *last : 0;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
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

static gboolean
memory_dlq_get(SluiceBroker *broker, const gchar *entry_id,
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

static gboolean
memory_dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                  SluiceSubmit *item, gboolean *out_found, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = sluice_memory__find_dead_letter(self, entry_id);
  *out_found = l != NULL;
  if (l != NULL) {
    sluice_memory__unbury(self, l);
    sluice_memory__submit(self, item, now_ms(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_dlq_delete(SluiceBroker *broker, const gchar *entry_id,
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

static gboolean
memory_stats(SluiceBroker *broker, const gchar *const *queues,
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
    gint64 now = now_ms(self);

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

static gboolean
memory_lookup_task(SluiceBroker *broker, const gchar *id,
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

static gboolean
memory_announce(SluiceBroker *broker, const gchar *consumer, GBytes *info,
                gint64 ttl_ms, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  SluiceMemoryAnnounced *a = g_new0(SluiceMemoryAnnounced, 1);

  a->info = g_bytes_ref(info);
  a->last_seen = now_ms(self);
  a->expires_at = a->last_seen + ttl_ms;
  g_mutex_lock(&self->lock);
  g_hash_table_replace(self->workers, g_strdup(consumer), a);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_purge(SluiceBroker *broker, const gchar *queue, guint64 *out_removed,
             GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GQueue *q;

  g_mutex_lock(&self->lock);
  q = g_hash_table_lookup(self->queues, queue);
  *out_removed = q != NULL ? g_queue_get_length(q) : 0;
  if (q != NULL)
    g_hash_table_remove(self->queues, queue);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

/* ---- Seeing and steering -------------------------------------------------
 *
 * A queue's cursor is a position from its head (where fetch takes), so a
 * page listed while messages are fetched or released may skip or repeat
 * some; finding it walks the queue to that position. The schedule's
 * cursor is the last entry listed, (due time, insertion number), found in
 * O(log n) whatever changed meanwhile. */

static gboolean
memory_list_queued(SluiceBroker *broker, const gchar *queue,
                   const gchar *cursor, guint limit, GPtrArray *out,
                   gchar **out_cursor, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  guint64 offset = 0;
  guint listed = 0;
  GQueue *q;
  GList *l;

  if (cursor != NULL &&
      !g_ascii_string_to_unsigned(cursor, 10, 0, G_MAXUINT, &offset, NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a cursor of a queue listing: pass the cursor a "
                "previous page returned, or none to start at the head",
                cursor);
    return FALSE;
  }
  g_mutex_lock(&self->lock);
  q = g_hash_table_lookup(self->queues, queue);
  l = q != NULL ? g_queue_peek_nth_link(q, (guint)offset) : NULL;
  for (; l != NULL && listed < limit; l = l->next, listed++) {
    SluiceMemoryMessage *m = l->data;
    SluiceListedMessage *listed_message =
        sluice_listed_message_new(NULL, queue, m->payload, 0);
    g_autofree gchar *handle = g_strdup_printf("%" G_GUINT64_FORMAT, m->seq);

    sluice_listed_message_set_handle(listed_message, handle);
    g_ptr_array_add(out, listed_message);
  }
  *out_cursor =
      l != NULL ? g_strdup_printf("%" G_GUINT64_FORMAT, offset + listed) : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

/* A removal looks for its message from the head: items in listing order
 * find theirs at once, since those before them were just removed. */
static gboolean
memory_remove_queued(SluiceBroker *broker, SluiceRemoval *items, guint n_items,
                     GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = now_ms(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++) {
    SluiceRemoval *r = &items[i];
    GQueue *q = g_hash_table_lookup(self->queues, r->queue);
    guint64 seq = 0;

    if (q == NULL || r->handle == NULL ||
        !g_ascii_string_to_unsigned(r->handle, 10, 1, G_MAXUINT64, &seq, NULL))
      continue;
    for (GList *l = q->head; l != NULL; l = l->next) {
      SluiceMemoryMessage *m = l->data;
      if (m->seq != seq)
        continue;
      sluice_memory__message_free(m);
      g_queue_delete_link(q, l);
      if (r->record != NULL)
        sluice_memory__put_record(self, r->id, r->record, TRUE,
                                  r->record_ttl_ms, now);
      r->removed = TRUE;
      break;
    }
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_list_scheduled(SluiceBroker *broker, const gchar *cursor, guint limit,
                      GPtrArray *out, gchar **out_cursor, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  SluiceMemoryScheduled probe = {0};
  SluiceMemoryScheduled *last = NULL;
  GSequenceIter *iter;
  guint listed = 0;

  if (cursor != NULL) {
    gchar *end = NULL;
    probe.due_at = g_ascii_strtoll(cursor, &end, 10);
    if (end == cursor || *end != ':' ||
        !g_ascii_string_to_unsigned(end + 1, 10, 0, G_MAXUINT64, &probe.seq,
                                    NULL)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "“%s” is not a cursor of a schedule listing: pass the "
                  "cursor a previous page returned, or none to start at the "
                  "earliest",
                  cursor);
      return FALSE;
    }
  }
  g_mutex_lock(&self->lock);
  if (cursor == NULL) {
    iter = g_sequence_get_begin_iter(self->schedule);
  } else {
    /* Entries are unique by (due, seq): at most one compares equal, and
     * the search lands on it or past it. */
    iter = g_sequence_search(self->schedule, &probe,
                             sluice_memory__scheduled_compare, NULL);
    while (!g_sequence_iter_is_end(iter) &&
           sluice_memory__scheduled_compare(g_sequence_get(iter), &probe,
                                            NULL) <= 0)
      iter = g_sequence_iter_next(iter);
  }
  for (; !g_sequence_iter_is_end(iter) && listed < limit;
       iter = g_sequence_iter_next(iter), listed++) {
    last = g_sequence_get(iter);
    g_ptr_array_add(out,
                    sluice_listed_message_new(last->id, last->queue,
                                              last->payload, last->due_at));
  }
  *out_cursor = !g_sequence_iter_is_end(iter) && last != NULL
                    ? g_strdup_printf("%" G_GINT64_FORMAT ":%" G_GUINT64_FORMAT,
                                      last->due_at, last->seq)
                    : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_set_paused(SluiceBroker *broker, const gchar *queue, gboolean paused,
                  GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  if (paused)
    g_hash_table_add(self->paused, g_strdup(queue));
  else if (g_hash_table_remove(self->paused, queue))
    g_cond_broadcast(&self->ready); /* what it holds is ready again */
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GHashTableIter iter;
  gpointer key;

  g_mutex_lock(&self->lock);
  g_hash_table_iter_init(&iter, self->paused);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    g_ptr_array_add(out, g_strdup(key));
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_reschedule(SluiceBroker *broker, const gchar *id, gint64 due_at,
                  gboolean *out_found, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  GSequenceIter *iter;

  g_mutex_lock(&self->lock);
  iter = g_hash_table_lookup(self->scheduled_by_id, id);
  *out_found = iter != NULL;
  if (iter != NULL) {
    SluiceMemoryScheduled *s = g_sequence_get(iter);
    g_autoptr(GBytes) payload = g_bytes_ref(s->payload);
    g_autofree gchar *queue = g_strdup(s->queue);

    if (due_at > 0) {
      sluice_memory__schedule(self, id, queue, payload, due_at);
    } else {
      sluice_memory__unschedule(self, id);
      sluice_memory__push_ready(self, queue, payload);
    }
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_rate_acquire(SluiceBroker *broker, SluiceRateAcquire *items,
                    guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = now_ms(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__rate_acquire(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_slot_acquire(SluiceBroker *broker, SluiceSlotAcquire *items,
                    guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = now_ms(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__slot_acquire(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_list_slots(SluiceBroker *broker, guint limit, GPtrArray *out,
                  GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  g_autoptr(GHashTable) keys = g_hash_table_new(g_str_hash, g_str_equal);
  gint64 now = now_ms(self);
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

static gboolean
memory_slot_release(SluiceBroker *broker, SluiceSlotRelease *items,
                    guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = now_ms(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    sluice_memory__slot_release(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

/* The store (memory-store.c) and the parts that build on it (joins,
 * uniqueness) are set up and torn down here, so that the store knows
 * nothing of them. */
static void
memory_finalize(SluiceBroker *broker)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  sluice_memory__joins_clear(self);
  sluice_memory__unique_clear(self);
  sluice_memory__clear(self);
}

/* Every optional family, each a table: the memory broker has them all. */
static const SluiceBrokerSteering memory_steering = {
    .version = SLUICE_BROKER_STEERING_VERSION,
    .list_queued = memory_list_queued,
    .remove_queued = memory_remove_queued,
    .list_scheduled = memory_list_scheduled,
    .set_paused = memory_set_paused,
    .list_paused = memory_list_paused,
    .reschedule = memory_reschedule,
    .purge = memory_purge,
};

static const SluiceBrokerPeriodic memory_periodic = {
    .version = SLUICE_BROKER_PERIODIC_VERSION,
    .claim_periodic = memory_claim_periodic,
    .last_periodic = memory_last_periodic,
};

static const SluiceBrokerJoins memory_joins = {
    .version = SLUICE_BROKER_JOINS_VERSION,
    .join_open = sluice_memory__join_open,
    .join_arrive = sluice_memory__join_arrive,
    .join_read = sluice_memory__join_read,
    .join_grow = sluice_memory__join_grow,
};

static const SluiceBrokerEvents memory_events = {
    .version = SLUICE_BROKER_EVENTS_VERSION,
    .append_events = sluice_memory__append_events,
    .read_events = sluice_memory__read_events,
    .put_progress = sluice_memory__put_progress,
    .get_progress = sluice_memory__get_progress,
};

static const SluiceBrokerRates memory_rates = {
    .version = SLUICE_BROKER_RATES_VERSION,
    .rate_acquire = memory_rate_acquire,
};

static const SluiceBrokerSlots memory_slots = {
    .version = SLUICE_BROKER_SLOTS_VERSION,
    .slot_acquire = memory_slot_acquire,
    .slot_release = memory_slot_release,
    .list_slots = memory_list_slots,
};

static const SluiceBrokerUnique memory_unique = {
    .version = SLUICE_BROKER_UNIQUE_VERSION,
    .unique_enqueue = sluice_memory__unique_enqueue,
    .unique_update = sluice_memory__unique_update,
};

/* No heartbeat, reclaim or leave: one process, so no lease to keep. */
static const SluiceBrokerClass memory_broker_class = {
    .version = SLUICE_BROKER_CLASS_VERSION,
    .name = "memory",
    .instance_size = sizeof(SluiceMemoryBroker),
    .caps = SLUICE_BROKER_CAP_CLOCK_TTL | SLUICE_BROKER_CAP_IN_FLIGHT |
            SLUICE_BROKER_CAP_ORDERED,
    /* produce */
    .enqueue = memory_enqueue,
    /* consume */
    .fetch = memory_fetch,
    .settle = memory_settle,
    .wakeup = memory_wakeup,
    /* schedule */
    .promote_due = memory_promote_due,
    .cancel_scheduled = memory_cancel_scheduled,
    /* records */
    .get_record = memory_get_record,
    .put_record = memory_put_record,
    .wait_record = memory_wait_record,
    .lookup_task = memory_lookup_task,
    /* revocations */
    .revoke = memory_revoke,
    .list_revocations = memory_list_revocations,
    /* dead letters */
    .dlq_list = memory_dlq_list,
    .dlq_get = memory_dlq_get,
    .dlq_replay = memory_dlq_replay,
    .dlq_delete = memory_dlq_delete,
    /* stats and workers */
    .stats = memory_stats,
    .announce = memory_announce,
    /* lifecycle */
    .finalize = memory_finalize,
    /* optional families */
    .steering = &memory_steering,
    .periodic = &memory_periodic,
    .joins = &memory_joins,
    .events = &memory_events,
    .rates = &memory_rates,
    .slots = &memory_slots,
    .unique = &memory_unique,
};

SluiceBroker *
sluice_memory_broker_new(const SluiceMemoryBrokerOptions *options,
                         SluiceClock *clock)
{
  SluiceBroker *broker;

  /* The class is static and complete, so validation cannot fail. */
  broker = sluice_broker_new(&memory_broker_class, clock, NULL);
  g_return_val_if_fail(broker != NULL, NULL);
  sluice_memory__init(SLUICE_MEMORY_BROKER(broker),
                      options != NULL && options->dead_letter_max > 0
                          ? options->dead_letter_max
                          : SLUICE_DEFAULT_DEAD_LETTER_MAX);
  sluice_memory__joins_init(SLUICE_MEMORY_BROKER(broker));
  sluice_memory__unique_init(SLUICE_MEMORY_BROKER(broker));
  return broker;
}

/* memory-steering.c - the memory broker's steering slots, what operators
 * do to a namespace: purge a queue, list and remove queued messages, list
 * the schedule and move an entry on it, pause and resume queues, rewrite
 * waiting messages in place.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__purge(SluiceBroker *broker, const gchar *queue,
                     guint64 *out_removed, GError **error)
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

gboolean
sluice_memory__list_queued(SluiceBroker *broker, const gchar *queue,
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
gboolean
sluice_memory__remove_queued(SluiceBroker *broker, SluiceRemoval *items,
                             guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);

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

gboolean
sluice_memory__list_scheduled(SluiceBroker *broker, const gchar *cursor,
                              guint limit, GPtrArray *out, gchar **out_cursor,
                              GError **error)
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

gboolean
sluice_memory__set_paused(SluiceBroker *broker, const gchar *queue,
                          gboolean paused, GError **error)
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

gboolean
sluice_memory__list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
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

gboolean
sluice_memory__reschedule(SluiceBroker *broker, const gchar *id, gint64 due_at,
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

/* Each place keeps its message where it is: the bytes are swapped under
 * the lock, so a fetch sees the old message or the new one. */
static GBytes **
waiting_payload(SluiceMemoryBroker *self, const SluiceReplacement *r)
{
  if (r->place == SLUICE_WAITING_SCHEDULED) {
    GSequenceIter *iter = g_hash_table_lookup(self->scheduled_by_id, r->handle);
    return iter != NULL
               ? &((SluiceMemoryScheduled *)g_sequence_get(iter))->payload
               : NULL;
  }
  if (r->place == SLUICE_WAITING_DEAD) {
    GList *l = sluice_memory__find_dead_letter(self, r->handle);
    return l != NULL ? &((SluiceDeadLetter *)l->data)->payload : NULL;
  }
  {
    GQueue *q = g_hash_table_lookup(self->queues, r->queue);
    guint64 seq = 0;

    if (q == NULL || r->handle == NULL ||
        !g_ascii_string_to_unsigned(r->handle, 10, 1, G_MAXUINT64, &seq, NULL))
      return NULL;
    for (GList *l = q->head; l != NULL; l = l->next)
      if (((SluiceMemoryMessage *)l->data)->seq == seq)
        return &((SluiceMemoryMessage *)l->data)->payload;
  }
  return NULL;
}

gboolean
sluice_memory__replace_payloads(SluiceBroker *broker, SluiceReplacement *items,
                                guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++) {
    GBytes **payload = waiting_payload(self, &items[i]);

    if (payload == NULL || !g_bytes_equal(*payload, items[i].payload))
      continue;
    g_bytes_unref(*payload);
    *payload = g_bytes_ref(items[i].replacement);
    items[i].replaced = TRUE;
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

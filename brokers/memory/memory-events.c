/* memory-events.c - the memory broker's events and progress slots: the
 * lifecycle events of tasks (a queue capped in length and age; a read
 * that finds nothing new sleeps on `events_appended`) and each task's
 * latest progress report, kept until it lapses on the broker's clock.
 * Each slot takes the broker's one lock.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

static void
progress_free(gpointer data)
{
  SluiceMemoryRecord *r = data;
  g_bytes_unref(r->bytes);
  g_free(r);
}

typedef struct {
  guint64 seq;
  gint64 at;
  GBytes *bytes;
} Event;

static void
event_free(gpointer data)
{
  Event *e = data;
  g_bytes_unref(e->bytes);
  g_free(e);
}

void
sluice_memory__events_init(SluiceMemoryBroker *self)
{
  self->events = g_queue_new();
  g_cond_init(&self->events_appended);
  self->progress =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, progress_free);
}

void
sluice_memory__events_clear(SluiceMemoryBroker *self)
{
  g_clear_pointer(&self->progress, g_hash_table_unref);
  if (self->events != NULL) {
    g_queue_free_full(self->events, event_free);
    self->events = NULL;
    g_cond_clear(&self->events_appended);
  }
}

/* ---- Events -------------------------------------------------------------- */

gboolean
sluice_memory__append_events(SluiceBroker *broker, GBytes *const *events,
                             guint n, guint max_len, gint64 max_age_ms,
                             gint64 now_ms, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n; i++) {
    Event *e = g_new0(Event, 1);
    e->seq = ++self->event_seq;
    e->at = now_ms;
    e->bytes = g_bytes_ref(events[i]);
    g_queue_push_tail(self->events, e);
  }
  while (
      self->events->length > max_len ||
      (!g_queue_is_empty(self->events) &&
       ((Event *)g_queue_peek_head(self->events))->at <= now_ms - max_age_ms))
    event_free(g_queue_pop_head(self->events));
  g_cond_broadcast(&self->events_appended);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__read_events(SluiceBroker *broker, const gchar *cursor,
                           guint limit, gint64 block_ms, GPtrArray *out,
                           gchar **out_cursor, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 deadline = g_get_monotonic_time() + block_ms * 1000;
  gint64 parsed = 0;
  guint64 after, last;

  if (!sluice_broker_parse_events_cursor(cursor, &parsed, error))
    return FALSE;
  after = last = (guint64)parsed;
  g_mutex_lock(&self->lock);
  /* A cursor ahead of every event ever appended was never handed out. */
  if (after > self->event_seq) {
    g_mutex_unlock(&self->lock);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "events cursor %s is unknown: no event has reached it (the "
                "newest is %" G_GUINT64_FORMAT "); pass one a read returned",
                cursor, self->event_seq);
    return FALSE;
  }
  for (;;) {
    /* Sequence numbers have no gaps, so the first one wanted is found
     * by its distance from the head. */
    Event *head = g_queue_peek_head(self->events);
    guint skip = head != NULL && after >= head->seq
                     ? (guint)MIN(after - head->seq + 1, G_MAXUINT)
                     : 0;
    GList *l = g_queue_peek_nth_link(self->events, skip);

    for (; l != NULL && out->len < limit; l = l->next) {
      Event *e = l->data;
      g_autofree gchar *c = g_strdup_printf("%" G_GUINT64_FORMAT, e->seq);
      g_ptr_array_add(out, sluice_event_entry_new(c, e->bytes));
      last = e->seq;
    }
    if (last != after || block_ms <= 0 ||
        !g_cond_wait_until(&self->events_appended, &self->lock, deadline))
      break;
  }
  g_mutex_unlock(&self->lock);
  *out_cursor = last != after || cursor == NULL
                    ? g_strdup_printf("%" G_GUINT64_FORMAT, last)
                    : g_strdup(cursor);
  return TRUE;
}

/* ---- Progress ------------------------------------------------------------ */

gboolean
sluice_memory__put_progress(SluiceBroker *broker, const gchar *id,
                            GBytes *progress, gint64 ttl_ms, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_clock_now_ms(sluice_broker_get_clock(broker));
  SluiceMemoryRecord *r = g_new0(SluiceMemoryRecord, 1);
  GHashTableIter iter;
  gpointer value;

  r->bytes = g_bytes_ref(progress);
  r->expires_at = now + ttl_ms;
  g_mutex_lock(&self->lock);
  /* Lapsed reports are swept when the table doubles, so it stays bounded
   * by the live ones. */
  if (g_hash_table_size(self->progress) >= self->progress_sweep_at) {
    g_hash_table_iter_init(&iter, self->progress);
    while (g_hash_table_iter_next(&iter, NULL, &value))
      if (((SluiceMemoryRecord *)value)->expires_at <= now)
        g_hash_table_iter_remove(&iter);
    self->progress_sweep_at = MAX(2 * g_hash_table_size(self->progress), 1024);
  }
  g_hash_table_replace(self->progress, g_strdup(id), r);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__get_progress(SluiceBroker *broker, const gchar *id,
                            GBytes **out_progress, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_clock_now_ms(sluice_broker_get_clock(broker));
  SluiceMemoryRecord *r;

  g_mutex_lock(&self->lock);
  r = g_hash_table_lookup(self->progress, id);
  if (r != NULL && r->expires_at > now)
    *out_progress = g_bytes_ref(r->bytes);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

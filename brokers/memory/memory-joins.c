/* memory-joins.c - the version-4 slots of the memory broker (joins and
 * progress). The join slots: each
 * runs under the broker's one lock, which makes it one atomic step. A join
 * is kept until its expiry on the broker's clock, dropped when met after
 * it. */
#include "config.h"

#include "brokers/memory/memory-store.h"

typedef struct {
  gchar *queue;
  GBytes *payload;
} Released;

typedef struct {
  guint total;
  guint arrived;
  SluiceJoinStatus status;
  GBytes *meta;
  GPtrArray *outcomes; /* GBytes*, NULL until the member arrives */
  GArray *release;     /* Released */
  gint64 expires_at;
} Join;

static void
release_clear(gpointer data)
{
  Released *r = data;
  g_free(r->queue);
  g_bytes_unref(r->payload);
}

static void
join_free(gpointer data)
{
  Join *j = data;

  g_clear_pointer(&j->meta, g_bytes_unref);
  g_ptr_array_unref(j->outcomes);
  g_array_unref(j->release);
  g_free(j);
}

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
sluice_memory__joins_init(SluiceMemoryBroker *self)
{
  self->events = g_queue_new();
  g_cond_init(&self->events_appended);
  self->joins =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, join_free);
  self->progress =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, progress_free);
}

void
sluice_memory__joins_clear(SluiceMemoryBroker *self)
{
  g_clear_pointer(&self->joins, g_hash_table_unref);
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

/* Returns: (transfer none) (nullable): join @id unless it lapsed. */
static Join *
live_join(SluiceMemoryBroker *self, const gchar *id, gint64 now)
{
  Join *j = g_hash_table_lookup(self->joins, id);

  if (j != NULL && j->expires_at <= now) {
    g_hash_table_remove(self->joins, id);
    return NULL;
  }
  return j;
}

gboolean
sluice_memory__join_open(SluiceBroker *broker, const SluiceJoinSpec *joins,
                         guint n_joins, SluiceSubmit *items, guint n_items,
                         gboolean *out_existed, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_clock_now_ms(sluice_broker_get_clock(broker));

  g_mutex_lock(&self->lock);
  if (live_join(self, joins[0].id, now) != NULL) {
    *out_existed = TRUE;
    g_mutex_unlock(&self->lock);
    return TRUE;
  }
  for (guint i = 0; i < n_joins; i++) {
    const SluiceJoinSpec *spec = &joins[i];
    Join *j = g_new0(Join, 1);

    j->total = spec->total;
    j->status = SLUICE_JOIN_OPEN;
    j->meta = spec->meta != NULL ? g_bytes_ref(spec->meta) : NULL;
    j->outcomes =
        g_ptr_array_new_full(spec->total, (GDestroyNotify)g_bytes_unref);
    g_ptr_array_set_size(j->outcomes, (gint)spec->total);
    j->release =
        g_array_sized_new(FALSE, TRUE, sizeof(Released), spec->n_release);
    g_array_set_clear_func(j->release, release_clear);
    for (guint k = 0; k < spec->n_release; k++) {
      Released r = {g_strdup(spec->release[k].queue),
                    g_bytes_ref(spec->release[k].payload)};
      g_array_append_val(j->release, r);
    }
    j->expires_at = now + spec->ttl_ms;
    g_hash_table_replace(self->joins, g_strdup(spec->id), j);
  }
  for (guint i = 0; i < n_items; i++)
    sluice_memory__submit(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__join_arrive(SluiceBroker *broker, SluiceJoinArrival *items,
                           guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_clock_now_ms(sluice_broker_get_clock(broker));

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++) {
    SluiceJoinArrival *a = &items[i];
    Join *j = live_join(self, a->join_id, now);

    if (j == NULL || a->member >= j->total ||
        g_ptr_array_index(j->outcomes, a->member) != NULL)
      continue;
    g_ptr_array_index(j->outcomes, a->member) = g_bytes_ref(a->outcome);
    j->arrived++;
    a->counted = TRUE;
    if (j->status != SLUICE_JOIN_OPEN)
      continue;
    if (a->step == SLUICE_JOIN_ABANDON) {
      j->status = SLUICE_JOIN_ABANDONED;
    } else if (j->arrived == j->total || a->step == SLUICE_JOIN_RELEASE_NOW) {
      j->status = SLUICE_JOIN_RELEASED;
      a->released = TRUE;
      for (guint k = 0; k < j->release->len; k++) {
        Released *r = &g_array_index(j->release, Released, k);
        sluice_memory__push_ready(self, r->queue, r->payload);
      }
      /* Released once: the messages are not needed again. */
      g_array_set_size(j->release, 0);
    }
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__join_grow(SluiceBroker *broker, const gchar *join_id,
                         guint expected_total, guint by, SluiceSubmit *items,
                         guint n_items, guint *out_total, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_clock_now_ms(sluice_broker_get_clock(broker));
  Join *j;

  g_mutex_lock(&self->lock);
  j = live_join(self, join_id, now);
  if (j == NULL || j->status != SLUICE_JOIN_OPEN) {
    *out_total = 0;
  } else if (j->total != expected_total) {
    *out_total = j->total;
  } else {
    j->total += by;
    g_ptr_array_set_size(j->outcomes, (gint)j->total);
    for (guint i = 0; i < n_items; i++)
      sluice_memory__submit(self, &items[i], now);
    *out_total = j->total;
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

gboolean
sluice_memory__join_read(SluiceBroker *broker, const gchar *join_id,
                         gboolean with_outcomes, SluiceJoinState *out,
                         gboolean *out_found, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_clock_now_ms(sluice_broker_get_clock(broker));
  Join *j;

  g_mutex_lock(&self->lock);
  j = live_join(self, join_id, now);
  if (j != NULL) {
    *out_found = TRUE;
    out->total = j->total;
    out->arrived = j->arrived;
    out->status = j->status;
    out->meta = j->meta != NULL ? g_bytes_ref(j->meta) : NULL;
    if (with_outcomes) {
      out->outcomes =
          g_ptr_array_new_full(j->total, (GDestroyNotify)g_bytes_unref);
      for (guint k = 0; k < j->total; k++) {
        GBytes *o = g_ptr_array_index(j->outcomes, k);
        g_ptr_array_add(out->outcomes, o != NULL ? g_bytes_ref(o) : NULL);
      }
    }
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

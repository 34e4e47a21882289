/* memory-joins.c - the join slots of the memory broker: each runs under
 * the broker's one lock, which makes it one atomic step. A join is kept
 * until its expiry on the broker's clock, dropped when met after it. */
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

void
sluice_memory__joins_init(SluiceMemoryBroker *self)
{
  self->joins =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, join_free);
}

void
sluice_memory__joins_clear(SluiceMemoryBroker *self)
{
  g_clear_pointer(&self->joins, g_hash_table_unref);
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

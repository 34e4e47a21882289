/* memory-revocations.c - the memory broker's revocation slots: one entry
 * per revoked task id with its expiry on the broker's clock, listed in
 * insertion order (the cursor is the entry's sequence).
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

gboolean
sluice_memory__revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
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

gboolean
sluice_memory__list_revocations(SluiceBroker *broker, gint64 cursor, gint64 now,
                                GPtrArray *out, gint64 *out_cursor,
                                GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  g_mutex_lock(&self->lock);
  list_revocations_locked(self, cursor, now, out, out_cursor);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

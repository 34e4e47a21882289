/* memory-unique.c - the uniqueness slots of the memory broker: one claim
 * per key (its holder, whether it runs, and its expiry on the broker's
 * SluiceClock), kept under the broker's one lock with the queues and the
 * schedule, so that a claim and its message are written in one step.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

typedef struct {
  gchar *holder;
  gboolean running;
  gint64 expires_at;
} Claim;

static void
claim_free(gpointer data)
{
  Claim *c = data;

  g_free(c->holder);
  g_free(c);
}

void
sluice_memory__unique_init(SluiceMemoryBroker *self)
{
  self->unique =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, claim_free);
}

void
sluice_memory__unique_clear(SluiceMemoryBroker *self)
{
  g_clear_pointer(&self->unique, g_hash_table_unref);
}

/* Returns: (transfer none) (nullable): @key's claim unless it lapsed. */
static Claim *
live_claim(SluiceMemoryBroker *self, const gchar *key, gint64 now)
{
  Claim *c = g_hash_table_lookup(self->unique, key);

  if (c != NULL && c->expires_at <= now) {
    g_hash_table_remove(self->unique, key);
    c = NULL;
  }
  return c;
}

static void
set_claim(SluiceMemoryBroker *self, const gchar *key, const gchar *holder,
          gboolean running, gint64 expires_at)
{
  Claim *c = g_new0(Claim, 1);

  c->holder = g_strdup(holder);
  c->running = running;
  c->expires_at = expires_at;
  g_hash_table_replace(self->unique, g_strdup(key), c);
}

static void
unique_enqueue_one(SluiceMemoryBroker *self, SluiceUniqueSubmit *item,
                   gint64 now)
{
  Claim *c = live_claim(self, item->key, now);
  g_autofree gchar *old = NULL;

  if (c != NULL && (!item->replace || c->running ||
                    g_str_equal(c->holder, item->submit.id))) {
    item->existed = TRUE;
    item->holder = g_strdup(c->holder);
    return;
  }
  if (c != NULL)
    old = g_strdup(c->holder);
  sluice_memory__submit(self, &item->submit, now);
  if (item->submit.existed)
    return;
  if (old != NULL) {
    /* Off the schedule if it waits there; one in its queue is skipped by
     * the worker when it starts (the claim names another id). */
    if (g_hash_table_contains(self->scheduled_by_id, old))
      sluice_memory__unschedule(self, old);
    item->replaced = TRUE;
    item->holder = g_steal_pointer(&old);
  }
  set_claim(self, item->key, item->submit.id, FALSE, now + item->claim_ttl_ms);
}

gboolean
sluice_memory__unique_enqueue(SluiceBroker *broker, SluiceUniqueSubmit *items,
                              guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    unique_enqueue_one(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static void
unique_update_one(SluiceMemoryBroker *self, SluiceUniqueUpdate *item,
                  gint64 now)
{
  Claim *c = live_claim(self, item->key, now);
  gboolean mine = c != NULL && g_str_equal(c->holder, item->id);

  if (c != NULL && !mine) {
    item->superseded = TRUE;
    return;
  }
  switch (item->action) {
  case SLUICE_UNIQUE_CHECK:
    break;
  case SLUICE_UNIQUE_START:
  case SLUICE_UNIQUE_RELEASE:
    if (mine)
      g_hash_table_remove(self->unique, item->key);
    break;
  case SLUICE_UNIQUE_HOLD:
  case SLUICE_UNIQUE_WAIT:
    set_claim(self, item->key, item->id, item->action == SLUICE_UNIQUE_HOLD,
              now + item->ttl_ms);
    break;
  case SLUICE_UNIQUE_RENEW:
    if (mine && c->running)
      c->expires_at = now + item->ttl_ms;
    break;
  }
}

gboolean
sluice_memory__unique_update(SluiceBroker *broker, SluiceUniqueUpdate *items,
                             guint n_items, GError **error)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);
  gint64 now = sluice_memory__now(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    unique_update_one(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

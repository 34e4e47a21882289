/* redis-flow.c - the flow-control slots of the Redis broker: rate-limit
 * buckets and concurrency slots, all of a call in one script
 * (rate_acquire.lua, slot_acquire.lua, slot_release.lua) on the server's
 * clock, so a fetch's admissions cost one round trip.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

/* Items of one bucket with the same figures, in the order asked: the
 * script admits `count` of them at once. */
typedef struct {
  guint first;    /* index of its first item */
  guint count;    /* how many items */
  guint left;     /* from the reply: admissions still to hand out */
  gint64 wait_ms; /* from the reply: the wait of those not admitted */
} RateGroup;

static gboolean
same_figures(const SluiceRateAcquire *a, const SluiceRateAcquire *b)
{
  return g_str_equal(a->key, b->key) && a->interval_us == b->interval_us &&
         a->tolerance_us == b->tolerance_us && a->block_ms == b->block_ms;
}

gboolean
sluice_redis__rate_acquire(SluiceBroker *broker, SluiceRateAcquire *items,
                           guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autoptr(GArray) groups = g_array_new(FALSE, FALSE, sizeof(RateGroup));
  g_autofree guint *group_of = g_new(guint, n_items);
  g_autoptr(GHashTable) by_key = g_hash_table_new(g_str_hash, g_str_equal);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 now_ms;
  gboolean ok;

  /* A fetch's messages share a few buckets: one item per bucket makes a
   * batch cost a few commands, not a read and a write per message. */
  for (guint i = 0; i < n_items; i++) {
    gpointer found = g_hash_table_lookup(by_key, items[i].key);
    guint g = found != NULL ? GPOINTER_TO_UINT(found) - 1 : G_MAXUINT;

    if (g == G_MAXUINT ||
        !same_figures(&items[g_array_index(groups, RateGroup, g).first],
                      &items[i])) {
      RateGroup group = {.first = i};
      g = groups->len;
      g_array_append_val(groups, group);
      g_hash_table_insert(by_key, (gpointer)items[i].key,
                          GUINT_TO_POINTER(g + 1));
    }
    g_array_index(groups, RateGroup, g).count++;
    group_of[i] = g;
  }

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 5 * groups->len,
                          64 * groups->len);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, groups->len);
  for (guint g = 0; g < groups->len; g++) {
    const RateGroup *group = &g_array_index(groups, RateGroup, g);
    const SluiceRateAcquire *item = &items[group->first];

    sluice_redis_argv__add_str(&a, item->key);
    sluice_redis_argv__add_int(&a, item->interval_us);
    sluice_redis_argv__add_int(&a, item->tolerance_us);
    sluice_redis_argv__add_int(&a, item->block_ms);
    sluice_redis_argv__add_int(&a, group->count);
  }
  sluice_redis_argv__finish(&a);
  /* Repeated after a lost connection: the first run may have used up
   * admissions that nobody got, which errs toward fewer runs, never more. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_RATE_ACQUIRE, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY ||
      reply->elements != 1 + 2 * groups->len ||
      !sluice_redis_reply__to_int(reply->element[0], &now_ms)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "rate_acquire", error);
  }
  for (guint g = 0; g < groups->len; g++) {
    RateGroup *group = &g_array_index(groups, RateGroup, g);
    gint64 granted, wait_ms;

    if (!sluice_redis_reply__to_int(reply->element[1 + 2 * g], &granted) ||
        !sluice_redis_reply__to_int(reply->element[2 + 2 * g], &wait_ms)) {
      freeReplyObject(reply);
      return sluice_redis_broker__unexpected(self, "rate_acquire", error);
    }
    group->left = (guint)CLAMP(granted, 0, (gint64)group->count);
    group->wait_ms = MAX(wait_ms, 1);
  }
  for (guint i = 0; i < n_items; i++) {
    RateGroup *group = &g_array_index(groups, RateGroup, group_of[i]);

    items[i].now_ms = now_ms;
    items[i].granted = group->left > 0;
    if (items[i].granted)
      group->left--;
    items[i].wait_ms = items[i].granted ? 0 : group->wait_ms;
  }
  freeReplyObject(reply);
  return TRUE;
}

/* Runs @id on @a and reads its reply of @n integers into @out (0 or 1). */
static gboolean
eval_flags(SluiceRedisBroker *self, SluiceRedisScriptId id, const gchar *what,
           SluiceRedisArgv *a, guint n, gboolean *out, GError **error)
{
  redisReply *reply = NULL;
  gboolean ok;

  /* Repeated after a lost connection: taking a slot again renews it, and
   * giving one back twice changes nothing but may wake one waiter more
   * (which then waits again). */
  ok = sluice_redis_broker__eval(self, id, TRUE, a, &reply, error);
  sluice_redis_argv__clear(a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, what, error);
  }
  for (guint i = 0; i < n; i++) {
    gint64 v;
    if (!sluice_redis_reply__to_int(reply->element[i], &v)) {
      freeReplyObject(reply);
      return sluice_redis_broker__unexpected(self, what, error);
    }
    out[i] = v == 1;
  }
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__slot_acquire(SluiceBroker *broker, SluiceSlotAcquire *items,
                           guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gboolean *granted = g_new0(gboolean, n_items);
  SluiceRedisArgv a;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 5 * n_items,
                          32 * n_items);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_items);
  for (guint i = 0; i < n_items; i++) {
    sluice_redis_argv__add_str(&a, items[i].key);
    sluice_redis_argv__add_int(&a, items[i].max);
    sluice_redis_argv__add_str(&a, items[i].holder);
    sluice_redis_argv__add_int(&a, items[i].lease_ms);
    sluice_redis_argv__add_str(&a, items[i].waiter); /* NULL adds "" */
  }
  sluice_redis_argv__finish(&a);
  if (!eval_flags(self, SLUICE_REDIS_SCRIPT_SLOT_ACQUIRE, "slot_acquire", &a,
                  n_items, granted, error))
    return FALSE;
  for (guint i = 0; i < n_items; i++)
    items[i].granted = granted[i];
  return TRUE;
}

gboolean
sluice_redis__slot_release(SluiceBroker *broker, SluiceSlotRelease *items,
                           guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gboolean *woke = g_new0(gboolean, n_items);
  SluiceRedisArgv a;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 2 * n_items,
                          32 * n_items);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_items);
  for (guint i = 0; i < n_items; i++) {
    sluice_redis_argv__add_str(&a, items[i].key);
    sluice_redis_argv__add_str(&a, items[i].holder);
  }
  sluice_redis_argv__finish(&a);
  if (!eval_flags(self, SLUICE_REDIS_SCRIPT_SLOT_RELEASE, "slot_release", &a,
                  n_items, woke, error))
    return FALSE;
  for (guint i = 0; i < n_items; i++)
    items[i].woke = woke[i];
  return TRUE;
}

gboolean
sluice_redis__list_slots(SluiceBroker *broker, guint limit, GPtrArray *out,
                         GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 16);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, limit);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_LIST_SLOTS, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 3 != 0) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "list_slots", error);
  }
  for (gsize i = 0; i < reply->elements; i += 3) {
    const redisReply *key = reply->element[i];
    const redisReply *holders = reply->element[i + 2];
    gint64 waiting;
    SluiceSlotState *s;

    if (!sluice_redis_reply__is_string(key) ||
        !sluice_redis_reply__to_int(reply->element[i + 1], &waiting) ||
        holders->type != REDIS_REPLY_ARRAY) {
      freeReplyObject(reply);
      return sluice_redis_broker__unexpected(self, "list_slots", error);
    }
    s = sluice_slot_state_new(key->str);
    s->waiting = (guint)CLAMP(waiting, 0, G_MAXUINT);
    for (gsize j = 0; j < holders->elements; j++)
      if (sluice_redis_reply__is_string(holders->element[j]))
        g_ptr_array_add(s->holders, g_strndup(holders->element[j]->str,
                                              holders->element[j]->len));
    g_ptr_array_add(out, s);
  }
  freeReplyObject(reply);
  return TRUE;
}

/* redis-flow.c - the flow-control slots of the Redis broker: rate-limit
 * buckets and concurrency slots, all of a call in one script
 * (rate_acquire.lua, slot_acquire.lua, slot_release.lua) on the server's
 * clock, so a fetch's admissions cost one round trip.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

gboolean
sluice_redis__rate_acquire(SluiceBroker *broker, SluiceRateAcquire *items,
                           guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 now_ms;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 4 * n_items,
                          64 * n_items);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_items);
  for (guint i = 0; i < n_items; i++) {
    sluice_redis_argv__add_str(&a, items[i].key);
    sluice_redis_argv__add_int(&a, items[i].interval_us);
    sluice_redis_argv__add_int(&a, items[i].tolerance_us);
    sluice_redis_argv__add_int(&a, items[i].block_ms);
  }
  sluice_redis_argv__finish(&a);
  /* Repeated after a lost connection: the first run may have used up an
   * admission that nobody got, which errs toward fewer runs, never more. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_RATE_ACQUIRE, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 + 2 * n_items ||
      !sluice_redis_reply__to_int(reply->element[0], &now_ms)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "rate_acquire", error);
  }
  for (guint i = 0; i < n_items; i++) {
    gint64 granted, wait_ms;

    if (!sluice_redis_reply__to_int(reply->element[1 + 2 * i], &granted) ||
        !sluice_redis_reply__to_int(reply->element[2 + 2 * i], &wait_ms)) {
      freeReplyObject(reply);
      return sluice_redis_broker__unexpected(self, "rate_acquire", error);
    }
    items[i].granted = granted == 1;
    items[i].wait_ms = items[i].granted ? 0 : MAX(wait_ms, 1);
    items[i].now_ms = now_ms;
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

/* redis-flow.c - the flow-control slot of the Redis broker: rate-limit
 * buckets, all of a call in one script (rate_acquire.lua) on the server's
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

/* redis-periodic.c - the Redis broker's periodic slots: the claim of an
 * occurrence and its enqueue in one script (claim_periodic.lua), so any
 * number of schedulers dispatch an occurrence at most once, and the gate
 * a partitioned namespace passes its claims through.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

/* ---- periodic tasks ------------------------------------------------------ */

/* The periodic gate of a namespace of partitions (redis-partitioned.c),
 * kept in the partition that @broker is: ZADD GT, so that the newest
 * occurrence claimed stays recorded, then ZSCORE. */
gboolean
sluice_redis__periodic_gate(SluiceBroker *broker, const gchar *name,
                            gint64 occurrence_at, gint64 *out_newest,
                            GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_PERIODIC_GATE, NULL);
  const gchar *what = occurrence_at > 0 ? "claim_periodic" : "last_periodic";
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  *out_newest = 0;
  if (occurrence_at > 0) {
    sluice_redis_argv__init(&a, 5, 32);
    sluice_redis_argv__add_str(&a, "ZADD");
    sluice_redis_argv__add_str(&a, key);
    sluice_redis_argv__add_str(&a, "GT");
    sluice_redis_argv__add_int(&a, occurrence_at);
    sluice_redis_argv__add_str(&a, name);
    sluice_redis_argv__finish(&a);
    ok = sluice_redis_broker__command(self, what, TRUE, &a, 0, &reply, error);
    sluice_redis_argv__clear(&a);
    if (!ok)
      return FALSE;
    freeReplyObject(reply);
  }
  sluice_redis_argv__init(&a, 3, 0);
  sluice_redis_argv__add_str(&a, "ZSCORE");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__add_str(&a, name);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, what, TRUE, &a, 0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  ok = reply->type == REDIS_REPLY_NIL ||
       sluice_redis_reply__to_int(reply, out_newest);
  freeReplyObject(reply);
  if (!ok)
    return sluice_redis_broker__unexpected(self, what, error);
  return TRUE;
}

gboolean
sluice_redis__claim_periodic(SluiceBroker *broker, const gchar *name,
                             gint64 occurrence_at, SluiceSubmit *item,
                             gboolean *out_claimed, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 claimed, existed;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 9, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, name);
  sluice_redis_argv__add_int(&a, occurrence_at);
  sluice_redis_argv__add_submit(&a, item);
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__eval_pair(self, SLUICE_REDIS_SCRIPT_CLAIM_PERIODIC,
                                      "claim_periodic", &a, &claimed, &existed,
                                      error))
    return FALSE;
  *out_claimed = claimed == 1;
  item->existed = existed == 1;
  return TRUE;
}

gboolean
sluice_redis__last_periodic(SluiceBroker *broker, const gchar *name,
                            gint64 *out_last, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_PERIODIC, name);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 2, 0);
  sluice_redis_argv__add_str(&a, "GET");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "last_periodic", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  *out_last = 0;
  if (reply->type != REDIS_REPLY_NIL &&
      !sluice_redis_reply__to_int(reply, out_last)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "last_periodic", error);
  }
  freeReplyObject(reply);
  return TRUE;
}

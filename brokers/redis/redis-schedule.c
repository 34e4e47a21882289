/* redis-schedule.c - the Redis broker's schedule slots: promoting what is
 * due into its queue and cancelling a scheduled task, each one script
 * (promote_due.lua, cancel_scheduled.lua) on the schedule's sorted set.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

/* ---- schedule ------------------------------------------------------------ */

gboolean
sluice_redis__promote_due(SluiceBroker *broker, gint64 now_ms, guint max,
                          guint *out_promoted, gint64 *out_next_due,
                          GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 promoted, next;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, now_ms);
  sluice_redis_argv__add_int(&a, MAX(max, 1));
  sluice_redis_argv__finish(&a);
  /* Repeating a promotion is harmless: what moved is off the schedule. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_PROMOTE, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      !sluice_redis_reply__to_int(reply->element[0], &promoted) ||
      !sluice_redis_reply__to_int(reply->element[1], &next)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "promote_due", error);
  }
  freeReplyObject(reply);
  *out_promoted = (guint)promoted;
  *out_next_due = next;
  return TRUE;
}

gboolean
sluice_redis__cancel_scheduled(SluiceBroker *broker, const gchar *id,
                               GBytes *record, gint64 record_ttl_ms,
                               gboolean *out_removed, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 n;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3, 32);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__add_record(&a, record, TRUE);
  sluice_redis_argv__add_record_ttl(&a, record_ttl_ms);
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__eval_integer(self, SLUICE_REDIS_SCRIPT_CANCEL,
                                         "cancel_scheduled", &a, &n, error))
    return FALSE;
  *out_removed = n == 1;
  return TRUE;
}

/* redis-revocations.c - the Redis broker's revocation slots. Revocations
 * are listed by the order they were made in (a sequence number), never by
 * expiry, so a worker syncing them never misses one that expires out of
 * order.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

/* ---- revocation ---------------------------------------------------------- */

gboolean
sluice_redis__revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
                     GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2, 32);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__add_int(&a, expires_at);
  sluice_redis_argv__finish(&a);
  /* Repeating it records the revocation once more: harmless. */
  return sluice_redis_broker__eval_void(self, SLUICE_REDIS_SCRIPT_REVOKE, TRUE,
                                        &a, error);
}

gboolean
sluice_redis__list_revocations(SluiceBroker *broker, gint64 cursor,
                               gint64 now_ms, GPtrArray *out,
                               gint64 *out_cursor, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 next;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, MAX(cursor, 0));
  sluice_redis_argv__add_int(&a, now_ms);
  sluice_redis_argv__finish(&a);
  /* Repeating it is harmless: the pruning is of what lapsed. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_REVOCATIONS_SINCE,
                                 TRUE, &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 1 ||
      !sluice_redis_reply__to_int(reply->element[0], &next)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "list_revocations", error);
  }
  for (size_t i = 1; i + 1 < reply->elements; i += 2) {
    gint64 expires;
    g_autofree gchar *rid = NULL;

    if (!sluice_redis_reply__is_string(reply->element[i]) ||
        !sluice_redis_reply__to_int(reply->element[i + 1], &expires))
      continue;
    rid = sluice_redis_reply__dup(reply->element[i]);
    g_ptr_array_add(out, sluice_revocation_new(rid, expires));
  }
  freeReplyObject(reply);
  *out_cursor = MAX(next, cursor);
  return TRUE;
}

/* redis-unique.c - the uniqueness slots of the Redis broker: every item of
 * a call in one script (unique_enqueue.lua, unique_update.lua), so that a
 * claim and the message it admits are written in one atomic step, on the
 * server's clock. The claims are strings {ns}:uq:<key> in the namespace's
 * hash tag (redis-keys.h).
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

gboolean
sluice_redis__unique_enqueue(SluiceBroker *broker, SluiceUniqueSubmit *items,
                             guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 10 * n_items,
                          64 * n_items);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_items);
  for (guint i = 0; i < n_items; i++) {
    sluice_redis_argv__add_str(&a, items[i].key);
    sluice_redis_argv__add_int(&a, items[i].claim_ttl_ms);
    sluice_redis_argv__add_str(&a, items[i].replace ? "1" : "0");
    sluice_redis_argv__add_submit(&a, &items[i].submit);
  }
  sluice_redis_argv__finish(&a);
  /* Repeated after a lost connection: the repeat finds the key held by
   * its own id and answers "held" by it, which the core reads as done. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_UNIQUE_ENQUEUE, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 * n_items) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "unique_enqueue", error);
  }
  for (guint i = 0; i < n_items; i++) {
    const redisReply *h = reply->element[2 * i + 1];
    gint64 status;

    if (!sluice_redis_reply__to_int(reply->element[2 * i], &status) ||
        !sluice_redis_reply__is_string(h) || status < 0 || status > 3) {
      for (guint j = 0; j < i; j++)
        g_clear_pointer(&items[j].holder, g_free);
      freeReplyObject(reply);
      return sluice_redis_broker__unexpected(self, "unique_enqueue", error);
    }
    items[i].existed = status == 1;
    items[i].replaced = status == 2;
    items[i].submit.existed = status == 3;
    if (status == 1 || status == 2)
      items[i].holder = g_strndup(h->str, h->len);
  }
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__unique_update(SluiceBroker *broker, SluiceUniqueUpdate *items,
                            guint n_items, GError **error)
{
  static const gchar actions[] = {
      [SLUICE_UNIQUE_CHECK] = 'c',   [SLUICE_UNIQUE_START] = 's',
      [SLUICE_UNIQUE_HOLD] = 'h',    [SLUICE_UNIQUE_WAIT] = 'w',
      [SLUICE_UNIQUE_RELEASE] = 'r', [SLUICE_UNIQUE_RENEW] = 'n',
  };
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 4 * n_items,
                          48 * n_items);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_items);
  for (guint i = 0; i < n_items; i++) {
    sluice_redis_argv__add_str(&a, items[i].key);
    sluice_redis_argv__add_str(&a, items[i].id);
    sluice_redis_argv__add(&a, &actions[items[i].action], 1);
    sluice_redis_argv__add_int(&a, MAX(items[i].ttl_ms, 1));
  }
  sluice_redis_argv__finish(&a);
  /* Every action is safe to repeat: it only ever writes what the same
   * call would write again. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_UNIQUE_UPDATE, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n_items) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "unique_update", error);
  }
  for (guint i = 0; i < n_items; i++) {
    gint64 v;
    if (!sluice_redis_reply__to_int(reply->element[i], &v)) {
      freeReplyObject(reply);
      return sluice_redis_broker__unexpected(self, "unique_update", error);
    }
    items[i].superseded = v == 1;
  }
  freeReplyObject(reply);
  return TRUE;
}

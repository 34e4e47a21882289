/* redis-stats.c - the Redis broker's stats and worker slots: the counts of
 * a namespace in one read-only script, and the announcements workers make
 * of themselves.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

/* ---- admin --------------------------------------------------------------- */

gboolean
sluice_redis__stats(SluiceBroker *broker, const gchar *const *queues,
                    SluiceBrokerStats *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *depths, *reasons, *workers, *dropped;
  gint64 scheduled, dead, in_flight, stale;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 8, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  if (queues == NULL)
    sluice_redis_argv__add_str(&a, "*");
  else
    for (guint i = 0; queues[i] != NULL; i++)
      sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_STATS, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 8 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      !sluice_redis_reply__to_int(reply->element[1], &scheduled) ||
      !sluice_redis_reply__to_int(reply->element[2], &dead) ||
      reply->element[3]->type != REDIS_REPLY_ARRAY ||
      reply->element[4]->type != REDIS_REPLY_ARRAY ||
      reply->element[4]->elements % 3 != 0 ||
      !sluice_redis_reply__to_int(reply->element[5], &in_flight) ||
      !sluice_redis_reply__to_int(reply->element[6], &stale) ||
      reply->element[7]->type != REDIS_REPLY_ARRAY) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "stats", error);
  }
  depths = reply->element[0];
  reasons = reply->element[3];
  workers = reply->element[4];
  dropped = reply->element[7];
  for (size_t i = 0; i + 1 < depths->elements; i += 2) {
    g_autofree gchar *name = sluice_redis_reply__dup(depths->element[i]);
    gint64 n = 0;
    sluice_redis_reply__to_int(depths->element[i + 1], &n);
    sluice_broker_stats_add_queue(out, name, n);
  }
  for (size_t i = 0; i + 1 < reasons->elements; i += 2) {
    g_autofree gchar *reason = sluice_redis_reply__dup(reasons->element[i]);
    gint64 n = 0;
    if (sluice_redis_reply__to_int(reasons->element[i + 1], &n) && n > 0)
      sluice_broker_stats_add_dead_letters(out, reason, n);
  }
  for (size_t i = 0; i + 2 < workers->elements; i += 3) {
    g_autofree gchar *worker = sluice_redis_reply__dup(workers->element[i]);
    redisReply *info = workers->element[i + 2];
    g_autoptr(GBytes) bytes = NULL;
    gint64 seen = 0;

    sluice_redis_reply__to_int(workers->element[i + 1], &seen);
    if (info->type == REDIS_REPLY_STRING)
      bytes = sluice_redis_reply__steal_bytes(info, 0);
    sluice_broker_stats_add_worker_info(out, worker, seen, bytes != NULL,
                                        bytes);
  }
  for (size_t i = 0; i + 1 < dropped->elements; i += 2) {
    g_autofree gchar *reason = sluice_redis_reply__dup(dropped->element[i]);
    gint64 n = 0;
    if (sluice_redis_reply__to_int(dropped->element[i + 1], &n) && n > 0)
      sluice_broker_stats_add_dropped(out, reason, n);
  }
  out->scheduled = scheduled;
  out->dead_letters = dead;
  out->in_flight = in_flight;
  /* The namespace's counter (every process's fenced settles), or this
   * broker's own if that is higher (the key was deleted by hand). */
  out->stale_settles = MAX(stale, g_atomic_int_get(&self->stale_settles));
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__announce(SluiceBroker *broker, const gchar *consumer,
                       GBytes *info, gint64 ttl_ms, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 4, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, sluice_redis_broker__now_ms(self));
  sluice_redis_argv__add_int(&a, MAX(ttl_ms, 1));
  sluice_redis_argv__add_bytes(&a, info);
  sluice_redis_argv__finish(&a);
  return sluice_redis_broker__eval_void(self, SLUICE_REDIS_SCRIPT_ANNOUNCE,
                                        TRUE, &a, error);
}

/* redis-joins.c - the join slots of the Redis brokers, one Lua script
 * each (lua/join_open.lua, join_arrive.lua, join_read.lua, join_grow.lua),
 * on one hash per join in the namespace's hash tag. Both transports share
 * them: a release pushes through the transport's t_push.
 *
 * Repeats: join_open is safe to repeat (a second call finds the first
 * join and writes nothing), and so is join_arrive (a member stored once is
 * never counted again), so both are repeated once on a fresh connection
 * when one breaks mid-call.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"

gboolean
sluice_redis__join_open(SluiceBroker *broker, const SluiceJoinSpec *joins,
                        guint n_joins, SluiceSubmit *items, guint n_items,
                        gboolean *out_existed, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  guint n_args = 1;
  gint64 existed = 0;
  gboolean ok;

  for (guint i = 0; i < n_joins; i++)
    n_args += 5 + 2 * joins[i].n_release;
  n_args += 8 * n_items;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + n_args,
                          n_items * 48 + n_joins * 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_joins);
  for (guint i = 0; i < n_joins; i++) {
    const SluiceJoinSpec *j = &joins[i];

    sluice_redis_argv__add_str(&a, j->id);
    sluice_redis_argv__add_int(&a, j->total);
    sluice_redis_argv__add_int(&a, MAX(j->ttl_ms, 1));
    if (j->meta != NULL)
      sluice_redis_argv__add_bytes(&a, j->meta);
    else
      sluice_redis_argv__add(&a, "", 0);
    sluice_redis_argv__add_int(&a, j->n_release);
    for (guint k = 0; k < j->n_release; k++) {
      sluice_redis_argv__add_str(&a, j->release[k].queue);
      sluice_redis_argv__add_bytes(&a, j->release[k].payload);
    }
  }
  for (guint i = 0; i < n_items; i++) {
    const SluiceSubmit *item = &items[i];

    if (item->due_at <= 0 && item->record == NULL) {
      sluice_redis_argv__add(&a, "r", 1);
      sluice_redis_argv__add_str(&a, item->queue);
      sluice_redis_argv__add_bytes(&a, item->payload);
    } else {
      sluice_redis_argv__add(&a, "s", 1);
      sluice_redis_argv__add_submit(&a, item);
    }
  }
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_JOIN_OPEN, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!sluice_redis_reply__to_int(reply, &existed)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_open", error);
  }
  freeReplyObject(reply);
  *out_existed = existed == 1;
  return TRUE;
}

gboolean
sluice_redis__join_arrive(SluiceBroker *broker, SluiceJoinArrival *items,
                          guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 4 * n_items,
                          n_items * 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_items);
  for (guint i = 0; i < n_items; i++) {
    sluice_redis_argv__add_str(&a, items[i].join_id);
    sluice_redis_argv__add_int(&a, items[i].member);
    sluice_redis_argv__add_bytes(&a, items[i].outcome);
    sluice_redis_argv__add_int(&a, items[i].step);
  }
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_JOIN_ARRIVE, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!sluice_redis_reply__is_string(reply) || reply->len != n_items) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_arrive", error);
  }
  for (guint i = 0; i < n_items; i++) {
    items[i].counted = reply->str[i] != '0';
    items[i].released = reply->str[i] == '2';
  }
  freeReplyObject(reply);
  return TRUE;
}

/* HGETALL of the join's outcomes, after its header was read: an arrival in
 * between may add one the header did not count, which no reader minds. */
static gboolean
read_outcomes(SluiceRedisBroker *self, const gchar *join_id, gint64 total,
              SluiceJoinState *out, GError **error)
{
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  g_autofree gchar *suffix = g_strconcat(join_id, ":o", NULL);
  gboolean ok;

  sluice_redis_argv__init(&a, 2, 64);
  sluice_redis_argv__add_str(&a, "HGETALL");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_JOIN, suffix);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "join_read", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 0) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_read", error);
  }
  out->outcomes =
      g_ptr_array_new_full((guint)total, (GDestroyNotify)g_bytes_unref);
  g_ptr_array_set_size(out->outcomes, (gint)total);
  for (gsize i = 0; i + 1 < reply->elements; i += 2) {
    gint64 member = -1;
    if (sluice_redis_reply__to_int(reply->element[i], &member) && member >= 0 &&
        member < total && reply->element[i + 1]->type == REDIS_REPLY_STRING &&
        g_ptr_array_index(out->outcomes, member) == NULL)
      g_ptr_array_index(out->outcomes, member) =
          sluice_redis_reply__steal_bytes(reply->element[i + 1], 0);
  }
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__join_read(SluiceBroker *broker, const gchar *join_id,
                        gboolean with_outcomes, SluiceJoinState *out,
                        gboolean *out_found, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 total = 0, arrived = 0, status = 0;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, join_id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_JOIN_READ, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY ||
      (reply->elements != 0 &&
       (reply->elements != 4 ||
        !sluice_redis_reply__to_int(reply->element[0], &total) ||
        !sluice_redis_reply__to_int(reply->element[1], &arrived) ||
        !sluice_redis_reply__to_int(reply->element[2], &status) || total < 0 ||
        total > G_MAXUINT32 || status < 0 || status > 2))) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_read", error);
  }
  *out_found = reply->elements > 0;
  if (*out_found) {
    out->total = (guint)total;
    out->arrived = (guint)arrived;
    out->status = (SluiceJoinStatus)status;
    if (reply->element[3]->len > 0)
      out->meta = sluice_redis_reply__steal_bytes(reply->element[3], 0);
  }
  freeReplyObject(reply);
  if (*out_found && with_outcomes)
    return read_outcomes(self, join_id, total, out, error);
  return TRUE;
}

gboolean
sluice_redis__join_grow(SluiceBroker *broker, const gchar *join_id,
                        guint expected_total, guint by, SluiceSubmit *items,
                        guint n_items, guint *out_total, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 total = 0;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3 + 7 * n_items,
                          n_items * 48);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, join_id);
  sluice_redis_argv__add_int(&a, expected_total);
  sluice_redis_argv__add_int(&a, by);
  for (guint i = 0; i < n_items; i++)
    sluice_redis_argv__add_submit(&a, &items[i]);
  sluice_redis_argv__finish(&a);
  /* Not repeated on a lost connection: the repeat would find the total
   * grown and report a conflict for what in fact succeeded. */
  if (!sluice_redis_broker__eval_integer(self, SLUICE_REDIS_SCRIPT_JOIN_GROW,
                                         "join_grow", &a, &total, error))
    return FALSE;
  *out_total = (guint)CLAMP(total, 0, G_MAXUINT32);
  return TRUE;
}

/* redis-records.c - the Redis broker's record slots: result records (and
 * waiting for one) and task lookups.
 *
 * Records are written with a PX expiry and, when final, announced on the
 * task's done channel in the same step; wait_record subscribes before it
 * reads, so it never misses the final record.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"

/* ---- results ------------------------------------------------------------- */

/* GET the record; @out_final tells whether it is final. */
static gboolean
read_record(SluiceRedisBroker *self, const gchar *id, GBytes **out_record,
            gboolean *out_final, GError **error)
{
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  *out_record = NULL;
  *out_final = FALSE;
  sluice_redis_argv__init(&a, 2, 64);
  sluice_redis_argv__add_str(&a, "GET");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_RECORD, id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "get_record", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type == REDIS_REPLY_STRING) {
    gchar flag = reply->len > 0 ? reply->str[0] : '\0';
    if (flag == SLUICE_REDIS_RECORD_FINAL ||
        flag == SLUICE_REDIS_RECORD_PENDING) {
      *out_final = flag == SLUICE_REDIS_RECORD_FINAL;
      *out_record = sluice_redis_reply__steal_bytes(reply, 1);
    } else {
      /* Not written by Sluice: hand it over whole, finality unknown. */
      *out_record = sluice_redis_reply__steal_bytes(reply, 0);
    }
  } else if (reply->type != REDIS_REPLY_NIL) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "get_record", error);
  }
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__get_record(SluiceBroker *broker, const gchar *id,
                         GBytes **out_record, GError **error)
{
  gboolean final;

  return read_record(SLUICE_REDIS_BROKER(broker), id, out_record, &final,
                     error);
}

gboolean
sluice_redis__put_record(SluiceBroker *broker, const gchar *id, GBytes *record,
                         gboolean final, gint64 ttl_ms, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3,
                          g_bytes_get_size(record) + 32);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__add_record(&a, record, final);
  sluice_redis_argv__add_record_ttl(&a, ttl_ms);
  sluice_redis_argv__finish(&a);
  return sluice_redis_broker__eval_void(self, SLUICE_REDIS_SCRIPT_RECORD, TRUE,
                                        &a, error);
}

/* A batch of records that are not final: pipelined SET ... PX, no Lua and
 * no notification (nobody waits for a record that is not final). Writing
 * one twice does no harm. */
typedef struct {
  const SluiceRecordWrite *items;
  guint n;
} RecordBatch;

static gboolean
put_records_on(SluiceRedisBroker *self, SluiceRedisConn *conn, gpointer data,
               GError **error)
{
  const RecordBatch *batch = data;
  g_autofree redisReply **replies = g_new0(redisReply *, batch->n);
  gboolean ok;

  for (guint i = 0; i < batch->n; i++) {
    const SluiceRecordWrite *w = &batch->items[i];
    SluiceRedisArgv a;

    sluice_redis_argv__init(&a, 5, 64);
    sluice_redis_argv__add(&a, "SET", 3);
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_RECORD, w->id);
    sluice_redis_argv__add_record(&a, w->record, FALSE);
    sluice_redis_argv__add(&a, "PX", 2);
    sluice_redis_argv__add_record_ttl(&a, w->ttl_ms);
    sluice_redis_argv__finish(&a);
    sluice_redis_conn__append(conn, (int)a.len, a.argv, a.lens);
    sluice_redis_argv__clear(&a);
  }
  ok = sluice_redis_conn__exchange(self->pool, conn, batch->n, replies, -1,
                                   error);
  for (guint r = 0; ok && r < batch->n; r++)
    ok =
        sluice_redis_reply__check(self->pool, replies[r], "put_records", error);
  for (guint r = 0; r < batch->n; r++)
    if (replies[r] != NULL)
      freeReplyObject(replies[r]);
  return ok;
}

gboolean
sluice_redis__put_records(SluiceBroker *broker, const SluiceRecordWrite *items,
                          guint n, GError **error)
{
  RecordBatch batch = {items, n};

  return sluice_redis_broker__run(SLUICE_REDIS_BROKER(broker), TRUE,
                                  put_records_on, &batch, error);
}

/* One pub/sub command on @conn and its confirmation (["subscribe", ch, n]
 * or ["unsubscribe", ch, n]); messages that arrive first are skipped. */
static gboolean
pubsub_command(SluiceRedisBroker *self, SluiceRedisConn *conn,
               const gchar *command, const gchar *channel, GError **error)
{
  const char *argv[2] = {command, channel};
  size_t lens[2] = {strlen(command), strlen(channel)};
  gint64 deadline =
      g_get_monotonic_time() +
      sluice_redis_pool__get_command_timeout_ms(self->pool) * 1000;
  redisReply *reply = NULL;

  sluice_redis_conn__append(conn, 2, argv, lens);
  if (!sluice_redis_conn__exchange(self->pool, conn, 1, &reply, 0, error))
    return FALSE;
  for (;;) {
    gboolean confirmation;

    if (!sluice_redis_reply__check(self->pool, reply, command, error)) {
      freeReplyObject(reply);
      sluice_redis_conn__set_broken(conn);
      return FALSE;
    }
    confirmation = reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
                   sluice_redis_reply__is_string(reply->element[0]) &&
                   g_ascii_strncasecmp(reply->element[0]->str, command,
                                       reply->element[0]->len) == 0 &&
                   reply->element[0]->len == strlen(command);
    freeReplyObject(reply);
    reply = NULL;
    if (confirmation)
      return TRUE;
    if (g_get_monotonic_time() >= deadline ||
        !sluice_redis_conn__read_within(
            self->pool, conn, (deadline - g_get_monotonic_time()) / 1000,
            &reply, error))
      break;
    if (reply == NULL)
      break;
  }
  sluice_redis_conn__set_broken(conn);
  if (error != NULL && *error == NULL)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "%s: Redis at %s did not confirm in time", command,
                sluice_redis_pool__get_display_url(self->pool));
  return FALSE;
}

typedef struct {
  const gchar *id;
  gint64 deadline; /* monotonic */
  GBytes **out_record;
} RecordWait;

/* Subscribes @sub to the record's channel, then reads the record after
 * every notification (or safety-net period) until it is final or the
 * deadline passes; unsubscribes before @sub goes back to the pool. */
static gboolean
wait_record_on(SluiceRedisBroker *self, SluiceRedisConn *sub, gpointer data,
               GError **error)
{
  RecordWait *wait = data;
  g_autofree gchar *channel =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_DONE, wait->id);
  GBytes *record = NULL;
  gboolean final = FALSE;
  gboolean ok = FALSE;

  /* Subscribe first, then read: a final record written in between is
   * either seen by the read or announced on the channel. */
  if (!pubsub_command(self, sub, "SUBSCRIBE", channel, error))
    return FALSE;

  for (;;) {
    redisReply *message = NULL;
    gint64 remaining_ms;

    g_clear_pointer(&record, g_bytes_unref);
    ok = read_record(self, wait->id, &record, &final, error);
    if (!ok || final)
      break;
    remaining_ms = (wait->deadline - g_get_monotonic_time()) / 1000;
    if (remaining_ms <= 0)
      break;
    /* Woken by the notification, or after the safety-net period; the
     * record is read again either way. */
    ok = sluice_redis_conn__read_within(self->pool, sub,
                                        MIN(remaining_ms, self->wait_poll_ms),
                                        &message, error);
    if (message != NULL)
      freeReplyObject(message);
    if (!ok)
      break;
  }

  /* Leave the connection as we found it, or drop it. */
  if (!sluice_redis_conn__is_broken(sub) &&
      !pubsub_command(self, sub, "UNSUBSCRIBE", channel, NULL))
    sluice_redis_conn__set_broken(sub);
  if (!ok) {
    g_clear_pointer(&record, g_bytes_unref);
    return FALSE;
  }
  *wait->out_record = record;
  return TRUE;
}

gboolean
sluice_redis__wait_record(SluiceBroker *broker, const gchar *id,
                          gint64 timeout_ms, GBytes **out_record,
                          GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  RecordWait wait = {id, g_get_monotonic_time() + timeout_ms * 1000,
                     out_record};
  gboolean final = FALSE;

  *out_record = NULL;
  if (timeout_ms <= 0)
    return read_record(self, id, out_record, &final, error);
  /* Not repeated: a subscription that broke is reported, and the caller
   * waits again if it wants to. */
  return sluice_redis_broker__run(self, FALSE, wait_record_on, &wait, error);
}

gboolean
sluice_redis__lookup_task(SluiceBroker *broker, const gchar *id,
                          SluiceTaskLocation *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 place = 0;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_LOOKUP, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
      !sluice_redis_reply__to_int(reply->element[0], &place))
    goto unexpected;
  if (place == 1) {
    if (reply->elements != 4 ||
        !sluice_redis_reply__to_int(reply->element[1], &out->due_at) ||
        !sluice_redis_reply__is_string(reply->element[2]) ||
        reply->element[3]->type != REDIS_REPLY_STRING)
      goto unexpected;
    out->place = SLUICE_TASK_PLACE_SCHEDULED;
    out->queue = sluice_redis_reply__dup(reply->element[2]);
    out->payload = sluice_redis_reply__steal_bytes(reply->element[3], 0);
  } else if (place == 2) {
    if (reply->elements != 2 ||
        (out->dead_letter = sluice_redis_broker__dead_letter_from_reply(
             reply->element[1])) == NULL)
      goto unexpected;
    out->place = SLUICE_TASK_PLACE_DEAD;
  }
  freeReplyObject(reply);
  return TRUE;

unexpected:
  freeReplyObject(reply);
  return sluice_redis_broker__unexpected(self, "lookup_task", error);
}

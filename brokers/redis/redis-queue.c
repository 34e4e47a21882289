/* redis-queue.c - the Redis broker's slots that move messages: enqueue,
 * fetch, settle, heartbeat, leave, reclaim and wakeup.
 *
 * Enqueue and settle batch: one script call per batch, each item atomic on
 * its own. Both have a path without Lua for the batches that need only
 * plain commands (a native push of items with nothing but a payload; the
 * records of settlements whose ack does nothing), because a script
 * argument costs Redis several times a plain command's parsing. Fetch and
 * reclaim are the transport's; the rest hands the transport's Lua its
 * arguments (t_check, t_ack, t_release, t_heartbeat, t_leave).
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"

/* ---- produce ------------------------------------------------------------- */

/* An enqueue batch of plain items (ready now, no claim, no record) through
 * the transport's native push: the transport's commands per queue, and an
 * SADD of the queues this instance has not added to the known-queues set
 * lately (so a single enqueue is usually one command), in one round trip
 * and without Lua. Not replayed after an unknown outcome: these items have
 * no idempotency key (the caller may retry with ids, as for the script). */
typedef struct {
  SluiceSubmit *items;
  guint n_items;
  GPtrArray *queues;
  GPtrArray *to_add; /* the queues to SADD */
} NativeEnqueue;

/* Which of @queues to SADD now: those not added by this instance within
 * SLUICE_REDIS_QUEUE_READD_MS. Nothing removes a queue from the set. */
static void
queues_to_add(SluiceRedisBroker *self, GPtrArray *queues, GPtrArray *out)
{
  gint64 now = g_get_monotonic_time();

  g_mutex_lock(&self->queues_lock);
  for (guint k = 0; k < queues->len; k++) {
    gpointer when;
    if (!g_hash_table_lookup_extended(self->queues_added, queues->pdata[k],
                                      NULL, &when) ||
        now - (gint64)GPOINTER_TO_SIZE(when) >
            SLUICE_REDIS_QUEUE_READD_MS * 1000)
      g_ptr_array_add(out, queues->pdata[k]);
  }
  g_mutex_unlock(&self->queues_lock);
}

static void
queues_added(SluiceRedisBroker *self, GPtrArray *added)
{
  gint64 now = g_get_monotonic_time();

  g_mutex_lock(&self->queues_lock);
  for (guint k = 0; k < added->len; k++)
    g_hash_table_insert(self->queues_added, g_strdup(added->pdata[k]),
                        GSIZE_TO_POINTER((gsize)now));
  g_mutex_unlock(&self->queues_lock);
}

static gboolean
enqueue_native_on(SluiceRedisBroker *self, SluiceRedisConn *conn, gpointer data,
                  GError **error)
{
  NativeEnqueue *batch = data;
  g_autofree GBytes **payloads = g_new(GBytes *, batch->n_items);
  g_autofree redisReply **replies = NULL;
  SluiceRedisArgv a;
  guint n_replies = 0;
  gboolean ok;

  if (batch->to_add->len > 0) {
    sluice_redis_argv__init(&a, 2 + batch->to_add->len, 64);
    sluice_redis_argv__add(&a, "SADD", 4);
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_QUEUES, "");
    for (guint k = 0; k < batch->to_add->len; k++)
      sluice_redis_argv__add_str(&a, g_ptr_array_index(batch->to_add, k));
    sluice_redis_argv__finish(&a);
    sluice_redis_conn__append(conn, (int)a.len, a.argv, a.lens);
    sluice_redis_argv__clear(&a);
    n_replies++;
  }
  for (guint k = 0; k < batch->queues->len; k++) {
    const gchar *q = g_ptr_array_index(batch->queues, k);
    guint n = 0;

    /* The batch's order within each queue is kept. */
    for (guint i = 0; i < batch->n_items; i++)
      if (strcmp(batch->items[i].queue, q) == 0)
        payloads[n++] = batch->items[i].payload;
    n_replies += self->transport->push_native(self, conn, q, payloads, n);
  }
  replies = g_new0(redisReply *, n_replies);
  if (!sluice_redis_conn__exchange(self->pool, conn, n_replies, replies, -1,
                                   error))
    return FALSE;
  ok = TRUE;
  for (guint r = 0; ok && r < n_replies; r++)
    ok = sluice_redis_reply__check(self->pool, replies[r], "enqueue", error);
  sluice_redis_replies__free(replies, n_replies);
  return ok;
}

gboolean
sluice_redis__enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
                      GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autoptr(GPtrArray) queues = g_ptr_array_new();
  g_autofree gchar *token = NULL;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean idempotent = TRUE;
  gboolean plain = TRUE;
  const gchar *last = NULL;
  gboolean ok;

  /* The distinct queues, for one SADD to the known-queues set. Batches
   * usually go to one queue, so the last match is tried first. */
  for (guint i = 0; i < n_items; i++) {
    const gchar *q = items[i].queue;
    gboolean seen = last != NULL && strcmp(last, q) == 0;

    for (guint k = 0; !seen && k < queues->len; k++)
      seen = strcmp(g_ptr_array_index(queues, k), q) == 0;
    if (!seen)
      g_ptr_array_add(queues, (gpointer)q);
    last = q;
    if (items[i].dedup_ttl_ms <= 0)
      idempotent = FALSE;
    if (items[i].due_at > 0 || items[i].dedup_ttl_ms > 0 ||
        items[i].record != NULL)
      plain = FALSE;
  }
  if (plain && self->transport->push_native != NULL) {
    g_autoptr(GPtrArray) to_add = g_ptr_array_new();
    NativeEnqueue batch = {items, n_items, queues, to_add};

    queues_to_add(self, queues, to_add);
    if (!sluice_redis_broker__run_durable(self, FALSE, "enqueue",
                                          enqueue_native_on, &batch, error))
      return FALSE;
    queues_added(self, to_add);
    return TRUE;
  }
  token = g_strdup_printf("%s:%" G_GUINT64_FORMAT, self->token_prefix,
                          (guint64)atomic_fetch_add_explicit(
                              &self->token_seq, 1, memory_order_relaxed));

  sluice_redis_argv__init(
      &a, SLUICE_REDIS_SCRIPT_ARGV0 + 2 + queues->len + 8 * n_items,
      n_items * 48);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  /* The claims this call makes hold its token, so the one retry on a fresh
   * connection (below) recognises its own writes instead of reporting
   * them as "existed". */
  sluice_redis_argv__add_str(&a, token);
  sluice_redis_argv__add_int(&a, queues->len);
  for (guint k = 0; k < queues->len; k++)
    sluice_redis_argv__add_str(&a, g_ptr_array_index(queues, k));
  for (guint i = 0; i < n_items; i++) {
    const SluiceSubmit *item = &items[i];

    /* The compact form for a message that is only pushed. */
    if (item->due_at <= 0 && item->dedup_ttl_ms <= 0 && item->record == NULL) {
      sluice_redis_argv__add(&a, "r", 1);
      sluice_redis_argv__add_str(&a, item->queue);
      sluice_redis_argv__add_bytes(&a, item->payload);
    } else {
      sluice_redis_argv__add(&a, "s", 1);
      sluice_redis_argv__add_submit(&a, item);
    }
  }
  sluice_redis_argv__finish(&a);

  ok = sluice_redis_broker__eval_durable(self, SLUICE_REDIS_SCRIPT_ENQUEUE,
                                         idempotent, "enqueue", &a, &reply,
                                         error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!sluice_redis_reply__is_string(reply) || reply->len != n_items) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "enqueue", error);
  }
  for (guint i = 0; i < n_items; i++)
    items[i].existed = reply->str[i] == '1';
  freeReplyObject(reply);
  return TRUE;
}

/* ---- consume ------------------------------------------------------------- */

gboolean
sluice_redis__fetch(SluiceBroker *broker, const gchar *consumer,
                    const gchar *const *queues, guint max, gint64 block_ms,
                    GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);

  return self->transport->fetch(self, consumer, queues, max, block_ms, out,
                                error);
}

gboolean
sluice_redis__reclaim(SluiceBroker *broker, const gchar *consumer,
                      const gchar *const *queues, guint max, gint64 idle_ms,
                      GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);

  return self->transport->reclaim(self, consumer, queues, max, idle_ms, out,
                                  error);
}

gboolean
sluice_redis__count_reclaimable(SluiceBroker *broker, const gchar *consumer,
                                const gchar *const *queues, guint max,
                                gint64 idle_ms, guint *out_n, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);

  return self->transport->count_reclaimable(self, consumer, queues, max,
                                            idle_ms, out_n, error);
}

static gboolean
settle_is_noop(SluiceRedisBroker *self, const SluiceSettlement *s)
{
  return s->action == SLUICE_SETTLE_ACK && s->record == NULL &&
         self->transport->ack_is_noop;
}

static void
add_settlement(SluiceRedisBroker *self, SluiceRedisArgv *a,
               const SluiceSettlement *s)
{
  static const gchar ops[] = {[SLUICE_SETTLE_ACK] = 'A',
                              [SLUICE_SETTLE_RETRY] = 'R',
                              [SLUICE_SETTLE_DEAD_LETTER] = 'D',
                              [SLUICE_SETTLE_RELEASE] = 'L'};
  const SluiceDelivery *d = s->delivery;

  if (s->action == SLUICE_SETTLE_ACK && self->transport->ack_is_noop) {
    /* Only the record to write: the compact form. */
    sluice_redis_argv__add(a, "a", 1);
    sluice_redis_argv__add_str(a, s->id);
    sluice_redis_argv__add_record(a, s->record, s->record_final);
    sluice_redis_argv__add_record_ttl(a, s->record_ttl_ms);
    return;
  }
  sluice_redis_argv__add(a, &ops[s->action], 1);
  sluice_redis_argv__add_str(a, d->queue);
  sluice_redis_argv__add_str(a, d->handle);
  sluice_redis_argv__add_str(a, s->id);
  sluice_redis_argv__add_record(a, s->record, s->record_final);
  sluice_redis_argv__add_record_ttl(a, s->record_ttl_ms);
  switch (s->action) {
  case SLUICE_SETTLE_RETRY:
    sluice_redis_argv__add_bytes(a, s->reschedule_payload);
    sluice_redis_argv__add_int(a, s->reschedule_at);
    break;
  case SLUICE_SETTLE_DEAD_LETTER: {
    const SluiceDeadLetter *dl = s->dead_letter;
    sluice_redis_argv__add_bytes(a, dl->payload != NULL ? dl->payload
                                                        : d->payload);
    sluice_redis_argv__add_str(a, dl->task_id);
    sluice_redis_argv__add_str(a, dl->task);
    sluice_redis_argv__add_str(a, dl->reason != NULL ? dl->reason : "unknown");
    sluice_redis_argv__add_str(a, dl->detail);
    sluice_redis_argv__add_str(a, dl->source != NULL ? dl->source : d->queue);
    sluice_redis_argv__add_int(a, dl->deliveries > 0 ? dl->deliveries
                                                     : d->delivery_count);
    sluice_redis_argv__add_int(
        a, dl->at > 0 ? dl->at : sluice_redis_broker__now_ms(self));
    break;
  }
  case SLUICE_SETTLE_RELEASE:
    sluice_redis_argv__add_bytes(a, d->payload);
    sluice_redis_argv__add_int(a, d->delivery_count);
    break;
  case SLUICE_SETTLE_ACK:
  default:
    break;
  }
}

/* A settle batch whose every sent item only writes a record (an ACK on a
 * transport whose ack does nothing: fast mode with results on), without
 * Lua: pipelined SET ... PX, plus one PUBSUB NUMSUB over the channels of
 * the final ones; PUBLISH goes, in a second round trip, only to channels
 * someone listens to. Not atomic, and it need not be: each SET is atomic,
 * it precedes the NUMSUB, and a waiter subscribes before it reads, so it
 * is either counted or finds the record. Sets *out_refused when Redis
 * refused a write (out of memory): the caller then uses the allow-oom
 * script, and the SETs that went through are simply written again. */
typedef struct {
  SluiceSettlement *items;
  guint n_items;
  gboolean *out_refused;
} NativeSettle;

static gboolean
settle_records_native_on(SluiceRedisBroker *self, SluiceRedisConn *conn,
                         gpointer data, GError **error)
{
  NativeSettle *batch = data;
  SluiceSettlement *items = batch->items;
  guint n_items = batch->n_items;
  g_autoptr(GPtrArray) listened = g_ptr_array_new();
  g_autofree redisReply **replies = g_new0(redisReply *, n_items + 1);
  SluiceRedisArgv channels;
  guint n_replies = 0;
  guint n_final = 0;
  gboolean ok;

  *batch->out_refused = FALSE;
  sluice_redis_argv__init(&channels, 2 + n_items, n_items * 48);
  sluice_redis_argv__add(&channels, "PUBSUB", 6);
  sluice_redis_argv__add(&channels, "NUMSUB", 6);
  for (guint i = 0; i < n_items; i++) {
    const SluiceSettlement *s = &items[i];
    SluiceRedisArgv a;

    if (settle_is_noop(self, s))
      continue;
    sluice_redis_argv__init(&a, 5, 64);
    sluice_redis_argv__add(&a, "SET", 3);
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_RECORD, s->id);
    sluice_redis_argv__add_record(&a, s->record, s->record_final);
    sluice_redis_argv__add(&a, "PX", 2);
    sluice_redis_argv__add_record_ttl(&a, s->record_ttl_ms);
    sluice_redis_argv__finish(&a);
    sluice_redis_conn__append(conn, (int)a.len, a.argv, a.lens);
    sluice_redis_argv__clear(&a);
    n_replies++;
    if (s->record_final) {
      sluice_redis_argv__add_key(&channels, &self->keys, SLUICE_REDIS_K_DONE,
                                 s->id);
      n_final++;
    }
  }
  sluice_redis_argv__finish(&channels);
  if (n_final > 0) {
    sluice_redis_conn__append(conn, (int)channels.len, channels.argv,
                              channels.lens);
    n_replies++;
  }
  sluice_redis_argv__clear(&channels);

  ok = sluice_redis_conn__exchange(self->pool, conn, n_replies, replies, -1,
                                   error);
  for (guint r = 0; ok && r < n_replies; r++) {
    /* The caller tells a refusal from a failure by *out_refused; @error
     * (FULL) is set either way, as an op must. */
    if (sluice_redis_reply__is_error_code(replies[r], "OOM"))
      *batch->out_refused = TRUE;
    ok = sluice_redis_reply__check(self->pool, replies[r], "settle", error);
  }
  if (ok && n_final > 0) {
    const redisReply *counts = replies[n_replies - 1];
    for (gsize j = 1; counts->type == REDIS_REPLY_ARRAY && j < counts->elements;
         j += 2)
      if (counts->element[j]->integer > 0)
        g_ptr_array_add(listened, counts->element[j - 1]);
  }
  if (ok && listened->len > 0) {
    g_autofree redisReply **published = g_new0(redisReply *, listened->len);

    for (guint k = 0; k < listened->len; k++) {
      const redisReply *channel = g_ptr_array_index(listened, k);
      const char *argv[] = {"PUBLISH", channel->str, "F"};
      size_t lens[] = {7, channel->len, 1};
      sluice_redis_conn__append(conn, 3, argv, lens);
    }
    ok = sluice_redis_conn__exchange(self->pool, conn, listened->len, published,
                                     -1, error);
    sluice_redis_replies__free(published, listened->len);
  }
  sluice_redis_replies__free(replies, n_replies);
  return ok;
}

gboolean
sluice_redis__settle(SluiceBroker *broker, const gchar *consumer,
                     SluiceSettlement *items, guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  guint n_sent = 0;
  guint stale = 0;
  gint64 dropped = 0;
  gboolean only_records = TRUE;
  gboolean ok;

  for (guint i = 0; i < n_items; i++) {
    items[i].status = SLUICE_SETTLE_DONE;
    if (!settle_is_noop(self, &items[i])) {
      n_sent++;
      if (items[i].action != SLUICE_SETTLE_ACK ||
          !self->transport->ack_is_noop || items[i].id == NULL)
        only_records = FALSE;
    }
  }
  if (n_sent == 0)
    return TRUE; /* nothing to write: no round trip */
  if (only_records) {
    gboolean refused = FALSE;
    NativeSettle batch = {items, n_items, &refused};
    GError *local = NULL;

    if (sluice_redis_broker__run_durable(
            self, FALSE, "settle", settle_records_native_on, &batch, &local))
      return TRUE;
    if (!refused) {
      g_propagate_error(error, local);
      return FALSE;
    }
    g_clear_error(&local);
    /* Out of memory: the allow-oom script below still drains. */
  }

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2 + 14 * n_sent,
                          n_sent * 32);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, self->dead_letter_max);
  sluice_redis_argv__add_str(&a, consumer);
  for (guint i = 0; i < n_items; i++)
    if (!settle_is_noop(self, &items[i]))
      add_settlement(self, &a, &items[i]);
  sluice_redis_argv__finish(&a);

  ok = sluice_redis_broker__eval_durable(self, SLUICE_REDIS_SCRIPT_SETTLE,
                                         FALSE, "settle", &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      !sluice_redis_reply__is_string(reply->element[0]) ||
      reply->element[0]->len != n_sent ||
      !sluice_redis_reply__to_int(reply->element[1], &dropped)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "settle", error);
  }
  for (guint i = 0, k = 0; i < n_items; i++) {
    gchar c;

    if (settle_is_noop(self, &items[i]))
      continue;
    c = reply->element[0]->str[k++];
    if (c == 'S' || c == 'G') {
      items[i].status = c == 'S' ? SLUICE_SETTLE_STALE : SLUICE_SETTLE_GONE;
      stale++;
    }
  }
  freeReplyObject(reply);
  if (stale > 0)
    g_atomic_int_add(&self->stale_settles, (gint)stale);
  /* The cap doing what it was set to do (a documented way to lose data,
   * counted in the stats): a notice, not a warning, which GLib tests make
   * fatal. */
  if (dropped > 0)
    sluice_broker_log(&self->parent, G_LOG_LEVEL_MESSAGE,
                      "the dead-letter queue of namespace “%s” is full "
                      "(dead_letter_max %u): dropped the %" G_GINT64_FORMAT
                      " oldest dead letters for good",
                      self->keys.ns, self->dead_letter_max, dropped);
  return TRUE;
}

gboolean
sluice_redis__heartbeat(SluiceBroker *broker, const gchar *consumer,
                        gint64 lease_ms, SluiceDelivery *const *held,
                        guint n_held, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  gboolean leases = (self->transport->caps & SLUICE_BROKER_CAP_LEASES) != 0;
  SluiceRedisArgv a;

  /* Without leases the transport has nothing to renew: the deliveries
   * held are not sent at all. */
  if (!leases)
    n_held = 0;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3 + 2 * n_held, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, sluice_redis_broker__now_ms(self));
  sluice_redis_argv__add_int(&a, MAX(lease_ms, 0));
  for (guint i = 0; i < n_held; i++) {
    sluice_redis_argv__add_str(&a, held[i]->queue);
    sluice_redis_argv__add_str(&a, held[i]->handle);
  }
  sluice_redis_argv__finish(&a);
  return sluice_redis_broker__eval_void(self, SLUICE_REDIS_SCRIPT_HEARTBEAT,
                                        TRUE, &a, error);
}

gboolean
sluice_redis__leave(SluiceBroker *broker, const gchar *consumer, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__finish(&a);
  return sluice_redis_broker__eval_void(self, SLUICE_REDIS_SCRIPT_LEAVE, TRUE,
                                        &a, error);
}

void
sluice_redis__wakeup(SluiceBroker *broker)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);

  if (self->pool != NULL)
    sluice_redis_pool__wakeup(self->pool);
}

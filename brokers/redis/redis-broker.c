/* redis-broker.c - the Redis brokers' shared slots and public constructor
 * (sluice-redis.h).
 *
 * One implementation of every broker slot serves both modes; only the
 * queue transport differs (redis-transport.h): the fast transport is lists
 * (brokers/redis-fast/), the reliable one streams. sluice_redis_broker_new()
 * picks the transport from the mode, builds the broker class from it, and
 * splices the transport's Lua fragment into the shared scripts.
 *
 * How each slot reaches Redis (round trips in brackets):
 *
 *   enqueue           one script call for the whole batch [1]: idempotency
 *                     claim (SET NX PX semantics), push or schedule, record,
 *                     known-queues set, per item atomic
 *   fetch             the transport [1]
 *   settle            one script call for the whole batch [1]; items that
 *                     need no write (an ACK without record when the
 *                     transport's ack is a no-op) are not sent, so a batch
 *                     of only those costs nothing [0]
 *   heartbeat/leave   one script [1]
 *   promote_due       one script [1], earliest first, returns the next due
 *   cancel_scheduled  one script [1]
 *   get/put_record    GET [1] / one script (SET PX + PUBLISH) [1]
 *   wait_record       SUBSCRIBE on a connection of its own, then GET on
 *                     another, re-read after every notification or 5 s
 *   revoke            ZADD GT [1]
 *   list_revocations  ZREMRANGEBYSCORE + ZRANGEBYSCORE, pipelined [1]
 *   claim_periodic    one script (CAS + submit) [1]; last_periodic GET [1]
 *   dlq_*             XRANGE [1] or one script [1]
 *   stats             one read-only script [1]
 *   purge             one script [1]
 *   wakeup            CLIENT UNBLOCK from another connection [1]
 *
 * Times: due times and revocation expiries are compared with the now_ms the
 * core passes; heartbeats use the broker's SluiceClock. TTLs are Redis PX
 * expiries, so the class does not declare SLUICE_BROKER_CAP_CLOCK_TTL. A
 * record or claim TTL <= 0 is taken as 24 h: no per-task key lives forever.
 *
 * Records: the stored value is one flag byte ('F' final, 'P' not) and the
 * record bytes, so wait_record knows a final record without decoding it
 * (brokers never decode envelopes or records).
 *
 * Retries inside the broker: an operation that is harmless to repeat
 * (reads, records, promotion, revocations, an enqueue whose every item has
 * an idempotency claim) is sent once more on a fresh connection when its
 * connection breaks mid-call; anything else reports UNAVAILABLE and leaves
 * the decision to the caller, as the contract says.
 *
 * To add a slot: implement it here on top of sluice_redis_broker__eval()
 * or __command(), give it a script in redis-scripts.c if it touches more
 * than one key, and set it in redis_class_init().
 */
#include "config.h"

#include "core/sluice-private.h"

#include "brokers/redis/redis-broker.h"

#define SELF(b) ((SluiceRedisBroker *)(b))

/* ---- Argument vectors ---------------------------------------------------- */

void
sluice_redis_argv__init(SluiceRedisArgv *a, guint cap, gsize scratch_hint)
{
  a->cap = MAX(cap, 8);
  a->len = 0;
  a->argv = g_new(const char *, a->cap);
  a->lens = g_new(size_t, a->cap);
  a->scratch_at = g_new(gssize, a->cap);
  a->scratch = g_string_sized_new(MAX(scratch_hint, 64));
}

void
sluice_redis_argv__clear(SluiceRedisArgv *a)
{
  g_clear_pointer(&a->argv, g_free);
  g_clear_pointer(&a->lens, g_free);
  g_clear_pointer(&a->scratch_at, g_free);
  if (a->scratch != NULL)
    g_string_free(a->scratch, TRUE);
  a->scratch = NULL;
  a->len = a->cap = 0;
}

static guint
argv_slot(SluiceRedisArgv *a)
{
  if (a->len == a->cap) {
    a->cap *= 2;
    a->argv = g_renew(const char *, a->argv, a->cap);
    a->lens = g_renew(size_t, a->lens, a->cap);
    a->scratch_at = g_renew(gssize, a->scratch_at, a->cap);
  }
  return a->len++;
}

void
sluice_redis_argv__add(SluiceRedisArgv *a, const void *data, gsize len)
{
  guint i = argv_slot(a);

  a->argv[i] = data != NULL ? data : "";
  a->lens[i] = data != NULL ? len : 0;
  a->scratch_at[i] = -1;
}

void
sluice_redis_argv__add_str(SluiceRedisArgv *a, const gchar *s)
{
  sluice_redis_argv__add(a, s, s != NULL ? strlen(s) : 0);
}

void
sluice_redis_argv__add_bytes(SluiceRedisArgv *a, GBytes *bytes)
{
  gsize len = 0;
  gconstpointer data = bytes != NULL ? g_bytes_get_data(bytes, &len) : NULL;

  sluice_redis_argv__add(a, data, len);
}

void
sluice_redis_argv__reserve(SluiceRedisArgv *a, guint n)
{
  for (guint k = 0; k < n; k++)
    sluice_redis_argv__add(a, NULL, 0);
}

void
sluice_redis_argv__add_int(SluiceRedisArgv *a, gint64 value)
{
  guint i = argv_slot(a);
  gsize at = a->scratch->len;

  g_string_append_printf(a->scratch, "%" G_GINT64_FORMAT, value);
  a->scratch_at[i] = (gssize)at;
  a->lens[i] = a->scratch->len - at;
}

void
sluice_redis_argv__add_record(SluiceRedisArgv *a, GBytes *record,
                              gboolean final)
{
  guint i;
  gsize at, len = 0;
  gconstpointer data;

  if (record == NULL) {
    sluice_redis_argv__add(a, NULL, 0);
    return;
  }
  i = argv_slot(a);
  at = a->scratch->len;
  data = g_bytes_get_data(record, &len);
  g_string_append_c(a->scratch, final ? SLUICE_REDIS_RECORD_FINAL
                                      : SLUICE_REDIS_RECORD_PENDING);
  g_string_append_len(a->scratch, data, (gssize)len);
  a->scratch_at[i] = (gssize)at;
  a->lens[i] = len + 1;
}

void
sluice_redis_argv__add_key(SluiceRedisArgv *a, const SluiceRedisKeys *keys,
                           const gchar *suffix, const gchar *name)
{
  guint i = argv_slot(a);
  gsize at = sluice_redis_keys__append(keys, a->scratch, suffix, name);

  a->scratch_at[i] = (gssize)at;
  a->lens[i] = a->scratch->len - at;
}

void
sluice_redis_argv__finish(SluiceRedisArgv *a)
{
  for (guint i = 0; i < a->len; i++)
    if (a->scratch_at[i] >= 0)
      a->argv[i] = a->scratch->str + a->scratch_at[i];
}

/* ---- Running commands ---------------------------------------------------- */

SluiceRedisConn *
sluice_redis_broker__acquire(SluiceRedisBroker *self, GError **error)
{
  return sluice_redis_pool__acquire(self->pool, error);
}

void
sluice_redis_broker__release(SluiceRedisBroker *self, SluiceRedisConn *conn)
{
  sluice_redis_pool__release(self->pool, conn);
}

gint64
sluice_redis_broker__now_ms(SluiceRedisBroker *self)
{
  return sluice_clock_now_ms(sluice_broker_get_clock(&self->parent));
}

/* Whether a failed attempt may be made once more on a fresh connection. */
static gboolean
may_retry(gboolean idempotent, guint attempt, gboolean conn_broke,
          const GError *local)
{
  return idempotent && attempt == 0 && conn_broke &&
         g_error_matches(local, SLUICE_BROKER_ERROR,
                         SLUICE_BROKER_ERROR_UNAVAILABLE);
}

gboolean
sluice_redis_broker__eval_script(SluiceRedisBroker *self,
                                 const SluiceRedisScript *script,
                                 gboolean idempotent, SluiceRedisArgv *args,
                                 redisReply **out_reply, GError **error)
{
  for (guint attempt = 0;; attempt++) {
    GError *local = NULL;
    SluiceRedisConn *conn;
    gboolean ok, broke;

    conn = sluice_redis_pool__acquire(self->pool, error);
    if (conn == NULL)
      return FALSE;
    ok = sluice_redis_script__eval(self->pool, conn, script, &self->keys,
                                   (int)args->len, args->argv, args->lens,
                                   out_reply, &local);
    broke = conn->broken;
    sluice_redis_pool__release(self->pool, conn);
    if (ok)
      return TRUE;
    if (!may_retry(idempotent, attempt, broke, local)) {
      g_propagate_error(error, local);
      return FALSE;
    }
    g_error_free(local);
  }
}

gboolean
sluice_redis_broker__eval(SluiceRedisBroker *self, SluiceRedisScriptId id,
                          gboolean idempotent, SluiceRedisArgv *args,
                          redisReply **out_reply, GError **error)
{
  return sluice_redis_broker__eval_script(self, &self->scripts[id], idempotent,
                                          args, out_reply, error);
}

gboolean
sluice_redis_broker__command(SluiceRedisBroker *self, const gchar *what,
                             gboolean idempotent, SluiceRedisArgv *args,
                             gint64 block_ms, redisReply **out_reply,
                             GError **error)
{
  *out_reply = NULL;
  for (guint attempt = 0;; attempt++) {
    GError *local = NULL;
    SluiceRedisConn *conn;
    redisReply *reply = NULL;
    gboolean ok, broke;

    conn = sluice_redis_pool__acquire(self->pool, error);
    if (conn == NULL)
      return FALSE;
    sluice_redis_conn__append(conn, (int)args->len, args->argv, args->lens);
    ok = sluice_redis_conn__exchange(self->pool, conn, 1, &reply, block_ms,
                                     &local);
    broke = conn->broken;
    sluice_redis_pool__release(self->pool, conn);
    if (ok) {
      if (!sluice_redis_reply__check(self->pool, reply, what, error)) {
        freeReplyObject(reply);
        return FALSE;
      }
      *out_reply = reply;
      return TRUE;
    }
    if (!may_retry(idempotent, attempt, broke, local)) {
      g_propagate_error(error, local);
      return FALSE;
    }
    g_error_free(local);
  }
}

/* Pipelines @n commands on one connection and checks every reply. */
static gboolean
run_pipeline(SluiceRedisBroker *self, const gchar *what, gboolean idempotent,
             SluiceRedisArgv *cmds, guint n, redisReply **replies,
             GError **error)
{
  for (guint attempt = 0;; attempt++) {
    GError *local = NULL;
    SluiceRedisConn *conn;
    gboolean ok, broke;

    conn = sluice_redis_pool__acquire(self->pool, error);
    if (conn == NULL)
      return FALSE;
    for (guint i = 0; i < n; i++)
      sluice_redis_conn__append(conn, (int)cmds[i].len, cmds[i].argv,
                                cmds[i].lens);
    ok = sluice_redis_conn__exchange(self->pool, conn, n, replies, 0, &local);
    broke = conn->broken;
    sluice_redis_pool__release(self->pool, conn);
    if (ok) {
      for (guint i = 0; i < n; i++) {
        if (!sluice_redis_reply__check(self->pool, replies[i], what, error)) {
          sluice_redis_replies__free(replies, n);
          return FALSE;
        }
      }
      return TRUE;
    }
    if (!may_retry(idempotent, attempt, broke, local)) {
      g_propagate_error(error, local);
      return FALSE;
    }
    g_error_free(local);
  }
}

/* ---- Reply parsing ------------------------------------------------------- */

static gboolean
unexpected_reply(SluiceRedisBroker *self, const gchar *what, GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
              "%s: Redis at %s sent a reply of an unexpected shape; is it "
              "Redis 7.0 or newer, and are the namespace's keys only written "
              "by Sluice?",
              what, sluice_redis_pool__get_display_url(self->pool));
  return FALSE;
}

static gboolean
reply_is_string(const redisReply *r)
{
  return r != NULL &&
         (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/* Integer or decimal-string reply (scores come as strings) to gint64. */
static gboolean
reply_to_int(const redisReply *r, gint64 *out)
{
  gchar *end = NULL;
  gdouble d;

  if (r == NULL)
    return FALSE;
  if (r->type == REDIS_REPLY_INTEGER) {
    *out = r->integer;
    return TRUE;
  }
  if (!reply_is_string(r) || r->len == 0 || r->len > 40)
    return FALSE;
  {
    gchar buf[48];
    memcpy(buf, r->str, r->len);
    buf[r->len] = '\0';
    *out = g_ascii_strtoll(buf, &end, 10);
    if (*end == '\0')
      return TRUE;
    /* A score may come as "1.5e+12": go through a double. */
    d = g_ascii_strtod(buf, &end);
    /* "inf" or 1e300 from a hostile or damaged entry: no gint64 holds it
     * (and converting it would be undefined). */
    if (*end != '\0' || !(d > -9.2e18 && d < 9.2e18))
      return FALSE;
    *out = (gint64)(d < 0 ? d - 0.5 : d + 0.5);
  }
  return TRUE;
}

static gchar *
reply_dup(const redisReply *r)
{
  return g_strndup(r->str, r->len);
}

static gint64
record_ttl(gint64 ttl_ms)
{
  return ttl_ms > 0 ? ttl_ms : SLUICE_REDIS_DEFAULT_RECORD_TTL_MS;
}

/* A stream entry id as Redis prints it: digits, or digits-digits. */
static gboolean
valid_entry_id(const gchar *id)
{
  const gchar *p = id;
  gboolean dash = FALSE;

  if (id == NULL || !g_ascii_isdigit(*p) || strlen(id) > 41)
    return FALSE;
  for (; *p != '\0'; p++) {
    if (*p == '-' && !dash && g_ascii_isdigit(p[1]))
      dash = TRUE;
    else if (!g_ascii_isdigit(*p))
      return FALSE;
  }
  return TRUE;
}

/* ---- produce ------------------------------------------------------------- */

static void
add_submit(SluiceRedisArgv *a, const SluiceSubmit *item)
{
  sluice_redis_argv__add_str(a, item->id);
  sluice_redis_argv__add_str(a, item->queue);
  sluice_redis_argv__add_bytes(a, item->payload);
  sluice_redis_argv__add_int(a, MAX(item->due_at, 0));
  sluice_redis_argv__add_int(a, MAX(item->dedup_ttl_ms, 0));
  sluice_redis_argv__add_record(a, item->record, FALSE);
  sluice_redis_argv__add_int(a, record_ttl(item->record_ttl_ms));
}

/* An enqueue batch of plain items (ready now, no claim, no record) through
 * the transport's native push: one SADD of the batch's queues, then the
 * transport's commands per queue, in one round trip and without Lua. Not
 * replayed after an unknown outcome: these items have no idempotency key
 * (the caller may retry with ids, as for the script). */
static gboolean
enqueue_native(SluiceRedisBroker *self, SluiceSubmit *items, guint n_items,
               GPtrArray *queues, GError **error)
{
  g_autofree GBytes **payloads = g_new(GBytes *, n_items);
  g_autofree redisReply **replies = NULL;
  SluiceRedisConn *conn;
  SluiceRedisArgv a;
  guint n_replies = 1;
  gboolean ok;

  conn = sluice_redis_pool__acquire(self->pool, error);
  if (conn == NULL)
    return FALSE;
  sluice_redis_argv__init(&a, 2 + queues->len, 64);
  sluice_redis_argv__add(&a, "SADD", 4);
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_QUEUES, "");
  for (guint k = 0; k < queues->len; k++)
    sluice_redis_argv__add_str(&a, g_ptr_array_index(queues, k));
  sluice_redis_argv__finish(&a);
  sluice_redis_conn__append(conn, (int)a.len, a.argv, a.lens);
  sluice_redis_argv__clear(&a);
  for (guint k = 0; k < queues->len; k++) {
    const gchar *q = g_ptr_array_index(queues, k);
    guint n = 0;

    /* The batch's order within each queue is kept. */
    for (guint i = 0; i < n_items; i++)
      if (strcmp(items[i].queue, q) == 0)
        payloads[n++] = items[i].payload;
    n_replies += self->transport->push_native(self, conn, q, payloads, n);
  }
  replies = g_new0(redisReply *, n_replies);
  ok = sluice_redis_conn__exchange(self->pool, conn, n_replies, replies, -1,
                                   error);
  sluice_redis_pool__release(self->pool, conn);
  if (!ok)
    return FALSE;
  for (guint r = 0; ok && r < n_replies; r++)
    ok = sluice_redis_reply__check(self->pool, replies[r], "enqueue", error);
  sluice_redis_replies__free(replies, n_replies);
  return ok;
}

static gboolean
redis_enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
              GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  g_autoptr(GPtrArray) queues = g_ptr_array_new();
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
  if (plain && self->transport->push_native != NULL)
    return enqueue_native(self, items, n_items, queues, error);

  sluice_redis_argv__init(
      &a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + queues->len + 8 * n_items,
      n_items * 48);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
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
      add_submit(&a, item);
    }
  }
  sluice_redis_argv__finish(&a);

  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_ENQUEUE, idempotent,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!reply_is_string(reply) || reply->len != n_items) {
    freeReplyObject(reply);
    return unexpected_reply(self, "enqueue", error);
  }
  for (guint i = 0; i < n_items; i++)
    items[i].existed = reply->str[i] == '1';
  freeReplyObject(reply);
  return TRUE;
}

/* ---- consume ------------------------------------------------------------- */

static gboolean
redis_fetch(SluiceBroker *broker, const gchar *consumer,
            const gchar *const *queues, guint max, gint64 block_ms,
            GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);

  return self->transport->fetch(self, consumer, queues, max, block_ms, out,
                                error);
}

static gboolean
redis_reclaim(SluiceBroker *broker, const gchar *consumer,
              const gchar *const *queues, guint max, gint64 idle_ms,
              GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);

  return self->transport->reclaim(self, consumer, queues, max, idle_ms, out,
                                  error);
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
    sluice_redis_argv__add_int(a, record_ttl(s->record_ttl_ms));
    return;
  }
  sluice_redis_argv__add(a, &ops[s->action], 1);
  sluice_redis_argv__add_str(a, d->queue);
  sluice_redis_argv__add_str(a, d->handle);
  sluice_redis_argv__add_str(a, s->id);
  sluice_redis_argv__add_record(a, s->record, s->record_final);
  sluice_redis_argv__add_int(a, record_ttl(s->record_ttl_ms));
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
static gboolean
settle_records_native(SluiceRedisBroker *self, SluiceSettlement *items,
                      guint n_items, gboolean *out_refused, GError **error)
{
  g_autoptr(GPtrArray) listened = g_ptr_array_new();
  g_autofree redisReply **replies = g_new0(redisReply *, n_items + 1);
  SluiceRedisArgv channels;
  SluiceRedisConn *conn;
  guint n_replies = 0;
  guint n_final = 0;
  gboolean ok;

  *out_refused = FALSE;
  conn = sluice_redis_pool__acquire(self->pool, error);
  if (conn == NULL)
    return FALSE;
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
    sluice_redis_argv__add_int(&a, record_ttl(s->record_ttl_ms));
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
    if (sluice_redis_reply__is_error_code(replies[r], "OOM")) {
      *out_refused = TRUE;
      ok = FALSE;
    } else {
      ok = sluice_redis_reply__check(self->pool, replies[r], "settle", error);
    }
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
  sluice_redis_pool__release(self->pool, conn);
  sluice_redis_replies__free(replies, n_replies);
  return ok;
}

static gboolean
redis_settle(SluiceBroker *broker, const gchar *consumer,
             SluiceSettlement *items, guint n_items, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  guint n_sent = 0;
  guint stale = 0;
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
    GError *local = NULL;

    if (settle_records_native(self, items, n_items, &refused, &local))
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

  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_SETTLE, FALSE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!reply_is_string(reply) || reply->len != n_sent) {
    freeReplyObject(reply);
    return unexpected_reply(self, "settle", error);
  }
  for (guint i = 0, k = 0; i < n_items; i++) {
    if (settle_is_noop(self, &items[i]))
      continue;
    if (reply->str[k++] == 'S') {
      items[i].status = SLUICE_SETTLE_STALE;
      stale++;
    }
  }
  freeReplyObject(reply);
  if (stale > 0)
    g_atomic_int_add(&self->stale_settles, (gint)stale);
  return TRUE;
}

static gboolean
redis_heartbeat(SluiceBroker *broker, const gchar *consumer, gint64 lease_ms,
                SluiceDelivery *const *held, guint n_held, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  gboolean leases = (self->transport->caps & SLUICE_BROKER_CAP_LEASES) != 0;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

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
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_HEARTBEAT, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

static gboolean
redis_leave(SluiceBroker *broker, const gchar *consumer, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_LEAVE, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

static void
redis_wakeup(SluiceBroker *broker)
{
  SluiceRedisBroker *self = SELF(broker);

  if (self->pool != NULL)
    sluice_redis_pool__wakeup(self->pool);
}

/* ---- schedule ------------------------------------------------------------ */

static gboolean
redis_promote_due(SluiceBroker *broker, gint64 now_ms, guint max,
                  guint *out_promoted, gint64 *out_next_due, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
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
      !reply_to_int(reply->element[0], &promoted) ||
      !reply_to_int(reply->element[1], &next)) {
    freeReplyObject(reply);
    return unexpected_reply(self, "promote_due", error);
  }
  freeReplyObject(reply);
  *out_promoted = (guint)promoted;
  *out_next_due = next;
  return TRUE;
}

/* Runs shared script @id with @a (finished; cleared here) and reads its
 * integer reply into @out. */
static gboolean
eval_integer(SluiceRedisBroker *self, SluiceRedisScriptId id, const gchar *what,
             SluiceRedisArgv *a, gint64 *out, GError **error)
{
  redisReply *reply = NULL;
  gboolean ok = sluice_redis_broker__eval(self, id, FALSE, a, &reply, error);

  sluice_redis_argv__clear(a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_INTEGER) {
    freeReplyObject(reply);
    return unexpected_reply(self, what, error);
  }
  *out = reply->integer;
  freeReplyObject(reply);
  return TRUE;
}

/* Runs shared script @id with @a (finished; cleared here) and reads its
 * reply of two integers, {found or claimed, existed}. */
static gboolean
eval_pair(SluiceRedisBroker *self, SluiceRedisScriptId id, const gchar *what,
          SluiceRedisArgv *a, gint64 *out_first, gint64 *out_second,
          GError **error)
{
  redisReply *reply = NULL;
  gboolean ok = sluice_redis_broker__eval(self, id, FALSE, a, &reply, error);

  sluice_redis_argv__clear(a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      !reply_to_int(reply->element[0], out_first) ||
      !reply_to_int(reply->element[1], out_second)) {
    freeReplyObject(reply);
    return unexpected_reply(self, what, error);
  }
  freeReplyObject(reply);
  return TRUE;
}

static gboolean
redis_cancel_scheduled(SluiceBroker *broker, const gchar *id, GBytes *record,
                       gint64 record_ttl_ms, gboolean *out_removed,
                       GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  gint64 n;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3, 32);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__add_record(&a, record, TRUE);
  sluice_redis_argv__add_int(&a, record_ttl(record_ttl_ms));
  sluice_redis_argv__finish(&a);
  if (!eval_integer(self, SLUICE_REDIS_SCRIPT_CANCEL, "cancel_scheduled", &a,
                    &n, error))
    return FALSE;
  *out_removed = n == 1;
  return TRUE;
}

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
    return unexpected_reply(self, "get_record", error);
  }
  freeReplyObject(reply);
  return TRUE;
}

static gboolean
redis_get_record(SluiceBroker *broker, const gchar *id, GBytes **out_record,
                 GError **error)
{
  gboolean final;

  return read_record(SELF(broker), id, out_record, &final, error);
}

static gboolean
redis_put_record(SluiceBroker *broker, const gchar *id, GBytes *record,
                 gboolean final, gint64 ttl_ms, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3,
                          g_bytes_get_size(record) + 32);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__add_record(&a, record, final);
  sluice_redis_argv__add_int(&a, record_ttl(ttl_ms));
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_RECORD, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
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
      conn->broken = TRUE;
      return FALSE;
    }
    confirmation = reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
                   reply_is_string(reply->element[0]) &&
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
  conn->broken = TRUE;
  if (error != NULL && *error == NULL)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "%s: Redis at %s did not confirm in time", command,
                sluice_redis_pool__get_display_url(self->pool));
  return FALSE;
}

static gboolean
redis_wait_record(SluiceBroker *broker, const gchar *id, gint64 timeout_ms,
                  GBytes **out_record, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
  g_autofree gchar *channel = NULL;
  SluiceRedisConn *sub;
  GBytes *record = NULL;
  gboolean final = FALSE;
  gboolean ok = FALSE;

  *out_record = NULL;
  if (timeout_ms <= 0)
    return read_record(self, id, out_record, &final, error);

  /* Subscribe first, then read: a final record written in between is
   * either seen by the read or announced on the channel. */
  sub = sluice_redis_broker__acquire(self, error);
  if (sub == NULL)
    return FALSE;
  channel = sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_DONE, id);
  if (!pubsub_command(self, sub, "SUBSCRIBE", channel, error)) {
    sluice_redis_broker__release(self, sub);
    return FALSE;
  }

  for (;;) {
    redisReply *message = NULL;
    gint64 remaining_ms;

    g_clear_pointer(&record, g_bytes_unref);
    ok = read_record(self, id, &record, &final, error);
    if (!ok || final)
      break;
    remaining_ms = (deadline - g_get_monotonic_time()) / 1000;
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
  if (!sub->broken && !pubsub_command(self, sub, "UNSUBSCRIBE", channel, NULL))
    sub->broken = TRUE;
  sluice_redis_broker__release(self, sub);
  if (!ok) {
    g_clear_pointer(&record, g_bytes_unref);
    return FALSE;
  }
  *out_record = record;
  return TRUE;
}

/* ---- revocation ---------------------------------------------------------- */

static gboolean
redis_revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
             GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_REVOKED, NULL);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  /* GT: revoking again never shortens a revocation. */
  sluice_redis_argv__init(&a, 5, 32);
  sluice_redis_argv__add_str(&a, "ZADD");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__add_str(&a, "GT");
  sluice_redis_argv__add_int(&a, expires_at);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "revoke", TRUE, &a, 0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

static gboolean
redis_list_revocations(SluiceBroker *broker, gint64 after, gint64 now_ms,
                       GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_REVOKED, NULL);
  g_autofree gchar *lapsed = g_strdup_printf("%" G_GINT64_FORMAT, now_ms);
  g_autofree gchar *from =
      g_strdup_printf("(%" G_GINT64_FORMAT, MAX(after, now_ms));
  SluiceRedisArgv cmds[2];
  redisReply *replies[2] = {NULL, NULL};
  redisReply *list;
  gboolean ok;

  /* Prune what lapsed, then list what expires after both the cursor and
   * now; pipelined, one round trip. */
  sluice_redis_argv__init(&cmds[0], 4, 0);
  sluice_redis_argv__add_str(&cmds[0], "ZREMRANGEBYSCORE");
  sluice_redis_argv__add_str(&cmds[0], key);
  sluice_redis_argv__add_str(&cmds[0], "-inf");
  sluice_redis_argv__add_str(&cmds[0], lapsed);
  sluice_redis_argv__finish(&cmds[0]);
  sluice_redis_argv__init(&cmds[1], 5, 0);
  sluice_redis_argv__add_str(&cmds[1], "ZRANGEBYSCORE");
  sluice_redis_argv__add_str(&cmds[1], key);
  sluice_redis_argv__add_str(&cmds[1], from);
  sluice_redis_argv__add_str(&cmds[1], "+inf");
  sluice_redis_argv__add_str(&cmds[1], "WITHSCORES");
  sluice_redis_argv__finish(&cmds[1]);
  ok = run_pipeline(self, "list_revocations", TRUE, cmds, 2, replies, error);
  sluice_redis_argv__clear(&cmds[0]);
  sluice_redis_argv__clear(&cmds[1]);
  if (!ok)
    return FALSE;

  list = replies[1];
  if (list->type != REDIS_REPLY_ARRAY || list->elements % 2 != 0) {
    sluice_redis_replies__free(replies, 2);
    return unexpected_reply(self, "list_revocations", error);
  }
  for (size_t i = 0; i + 1 < list->elements; i += 2) {
    gint64 expires;
    g_autofree gchar *rid = NULL;

    if (!reply_is_string(list->element[i]) ||
        !reply_to_int(list->element[i + 1], &expires))
      continue;
    rid = reply_dup(list->element[i]);
    g_ptr_array_add(out, sluice_revocation_new(rid, expires));
  }
  sluice_redis_replies__free(replies, 2);
  return TRUE;
}

/* ---- periodic tasks ------------------------------------------------------ */

static gboolean
redis_claim_periodic(SluiceBroker *broker, const gchar *name,
                     gint64 occurrence_at, SluiceSubmit *item,
                     gboolean *out_claimed, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  gint64 claimed, existed;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 9, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, name);
  sluice_redis_argv__add_int(&a, occurrence_at);
  add_submit(&a, item);
  sluice_redis_argv__finish(&a);
  if (!eval_pair(self, SLUICE_REDIS_SCRIPT_CLAIM_PERIODIC, "claim_periodic", &a,
                 &claimed, &existed, error))
    return FALSE;
  *out_claimed = claimed == 1;
  item->existed = existed == 1;
  return TRUE;
}

static gboolean
redis_last_periodic(SluiceBroker *broker, const gchar *name, gint64 *out_last,
                    GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
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
  if (reply->type != REDIS_REPLY_NIL && !reply_to_int(reply, out_last)) {
    freeReplyObject(reply);
    return unexpected_reply(self, "last_periodic", error);
  }
  freeReplyObject(reply);
  return TRUE;
}

/* ---- dead letters -------------------------------------------------------- */

/* One XRANGE element ([id, [field, value, ...]]) to a SluiceDeadLetter. */
SluiceDeadLetter *
sluice_redis_broker__dead_letter_from_reply(redisReply *entry)
{
  SluiceDeadLetter *dl;
  redisReply *fields;

  if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
      !reply_is_string(entry->element[0]) ||
      entry->element[1]->type != REDIS_REPLY_ARRAY)
    return NULL;
  dl = sluice_dead_letter_new();
  dl->entry_id = reply_dup(entry->element[0]);
  fields = entry->element[1];
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    redisReply *f = fields->element[i];
    redisReply *v = fields->element[i + 1];
    gint64 n;

    if (!reply_is_string(f) || !reply_is_string(v))
      continue;
#define FIELD_IS(name)                                                         \
  (f->len == strlen(name) && memcmp(f->str, name, f->len) == 0)
    if (FIELD_IS("payload")) {
      if (dl->payload != NULL)
        g_bytes_unref(dl->payload);
      dl->payload = sluice_redis_reply__steal_bytes(v, 0);
    } else if (FIELD_IS("task_id")) {
      g_free(dl->task_id);
      dl->task_id = reply_dup(v);
    } else if (FIELD_IS("task")) {
      g_free(dl->task);
      dl->task = reply_dup(v);
    } else if (FIELD_IS("reason")) {
      g_free(dl->reason);
      dl->reason = reply_dup(v);
    } else if (FIELD_IS("detail")) {
      g_free(dl->detail);
      dl->detail = reply_dup(v);
    } else if (FIELD_IS("source")) {
      g_free(dl->source);
      dl->source = reply_dup(v);
    } else if (FIELD_IS("deliveries") && reply_to_int(v, &n)) {
      dl->deliveries = (guint)CLAMP(n, 0, G_MAXUINT);
    } else if (FIELD_IS("at") && reply_to_int(v, &n)) {
      dl->at = n;
    }
#undef FIELD_IS
  }
  if (dl->payload == NULL)
    dl->payload = g_bytes_new(NULL, 0);
  return dl;
}

static gboolean
dlq_range(SluiceRedisBroker *self, const gchar *what, const gchar *start,
          const gchar *end, guint count, GPtrArray *out, GError **error)
{
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_DLQ, NULL);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 6, 16);
  sluice_redis_argv__add_str(&a, "XRANGE");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__add_str(&a, start);
  sluice_redis_argv__add_str(&a, end);
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, count);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, what, TRUE, &a, 0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY) {
    freeReplyObject(reply);
    return unexpected_reply(self, what, error);
  }
  for (size_t i = 0; i < reply->elements; i++) {
    SluiceDeadLetter *dl =
        sluice_redis_broker__dead_letter_from_reply(reply->element[i]);
    if (dl != NULL)
      g_ptr_array_add(out, dl);
  }
  freeReplyObject(reply);
  return TRUE;
}

static gboolean
redis_dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
               GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  g_autofree gchar *start = NULL;

  if (after != NULL && !valid_entry_id(after)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a dead-letter entry id (they look like "
                "1700000000000-0): pass an entry_id from a previous listing, "
                "or NULL to start from the oldest",
                after);
    return FALSE;
  }
  /* "(" makes the start exclusive (Redis 6.2+). */
  start = after != NULL ? g_strconcat("(", after, NULL) : g_strdup("-");
  return dlq_range(self, "dlq_list", start, "+", limit, out, error);
}

static gboolean
redis_dlq_get(SluiceBroker *broker, const gchar *entry_id,
              SluiceDeadLetter **out_entry, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  g_autoptr(GPtrArray) found =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);

  if (valid_entry_id(entry_id) &&
      !dlq_range(self, "dlq_get", entry_id, entry_id, 1, found, error))
    return FALSE;
  if (found->len == 0) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_NOT_FOUND,
                "no dead letter “%s” in namespace “%s”: it was replayed, "
                "deleted or dropped by the dead_letter_max cap",
                entry_id, self->keys.ns);
    return FALSE;
  }
  *out_entry = g_ptr_array_steal_index(found, 0);
  return TRUE;
}

static gboolean
redis_dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                 SluiceSubmit *item, gboolean *out_found, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  gint64 found, existed;

  *out_found = FALSE;
  if (!valid_entry_id(entry_id))
    return TRUE;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 8, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, entry_id);
  add_submit(&a, item);
  sluice_redis_argv__finish(&a);
  if (!eval_pair(self, SLUICE_REDIS_SCRIPT_DLQ_REPLAY, "dlq_replay", &a, &found,
                 &existed, error))
    return FALSE;
  *out_found = found == 1;
  item->existed = existed == 1;
  return TRUE;
}

static gboolean
redis_dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                 gboolean *out_found, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  gint64 n;

  *out_found = FALSE;
  if (!valid_entry_id(entry_id))
    return TRUE;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, entry_id);
  sluice_redis_argv__finish(&a);
  if (!eval_integer(self, SLUICE_REDIS_SCRIPT_DLQ_DELETE, "dlq_delete", &a, &n,
                    error))
    return FALSE;
  *out_found = n == 1;
  return TRUE;
}

/* ---- admin --------------------------------------------------------------- */

static gboolean
redis_stats(SluiceBroker *broker, const gchar *const *queues,
            SluiceBrokerStats *out, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *depths, *reasons, *workers;
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
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 7 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      !reply_to_int(reply->element[1], &scheduled) ||
      !reply_to_int(reply->element[2], &dead) ||
      reply->element[3]->type != REDIS_REPLY_ARRAY ||
      reply->element[4]->type != REDIS_REPLY_ARRAY ||
      !reply_to_int(reply->element[5], &in_flight) ||
      !reply_to_int(reply->element[6], &stale)) {
    freeReplyObject(reply);
    return unexpected_reply(self, "stats", error);
  }
  depths = reply->element[0];
  reasons = reply->element[3];
  workers = reply->element[4];
  for (size_t i = 0; i + 1 < depths->elements; i += 2) {
    g_autofree gchar *name = reply_dup(depths->element[i]);
    gint64 n = 0;
    reply_to_int(depths->element[i + 1], &n);
    sluice_broker_stats_add_queue(out, name, n);
  }
  for (size_t i = 0; i + 1 < reasons->elements; i += 2) {
    g_autofree gchar *reason = reply_dup(reasons->element[i]);
    gint64 n = 0;
    if (reply_to_int(reasons->element[i + 1], &n) && n > 0)
      sluice_broker_stats_add_dead_letters(out, reason, n);
  }
  for (size_t i = 0; i + 1 < workers->elements; i += 2) {
    g_autofree gchar *worker = reply_dup(workers->element[i]);
    gint64 seen = 0;
    reply_to_int(workers->element[i + 1], &seen);
    sluice_broker_stats_add_worker(out, worker, seen);
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

static gboolean
redis_purge(SluiceBroker *broker, const gchar *queue, guint64 *out_removed,
            GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  gint64 n;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, queue);
  sluice_redis_argv__finish(&a);
  if (!eval_integer(self, SLUICE_REDIS_SCRIPT_PURGE, "purge", &a, &n, error))
    return FALSE;
  *out_removed = (guint64)MAX(n, 0);
  return TRUE;
}

/* ---- lifecycle ----------------------------------------------------------- */

static void
redis_close(SluiceBroker *broker)
{
  SluiceRedisBroker *self = SELF(broker);

  if (self->pool != NULL)
    sluice_redis_pool__close(self->pool);
}

static void
redis_finalize(SluiceBroker *broker)
{
  SluiceRedisBroker *self = SELF(broker);

  /* May run on a half-built instance: every field may be unset. */
  if (self->transport != NULL && self->transport->finalize != NULL)
    self->transport->finalize(self);
  g_clear_pointer(&self->pool, sluice_redis_pool__free);
  sluice_redis_keys__clear(&self->keys);
  if (self->scripts[0].text != NULL)
    sluice_redis_scripts__clear(self->scripts);
}

static void
redis_class_init(SluiceBrokerClass *klass, const SluiceRedisTransport *t)
{
  memset(klass, 0, sizeof *klass);
  klass->version = SLUICE_BROKER_CLASS_VERSION;
  klass->name = t->name;
  klass->instance_size = sizeof(SluiceRedisBroker);
  klass->caps = t->caps;
  klass->enqueue = redis_enqueue;
  klass->fetch = redis_fetch;
  klass->settle = redis_settle;
  klass->heartbeat = redis_heartbeat;
  klass->reclaim = t->reclaim != NULL ? redis_reclaim : NULL;
  klass->leave = redis_leave;
  klass->wakeup = redis_wakeup;
  klass->promote_due = redis_promote_due;
  klass->cancel_scheduled = redis_cancel_scheduled;
  klass->get_record = redis_get_record;
  klass->put_record = redis_put_record;
  klass->wait_record = redis_wait_record;
  klass->revoke = redis_revoke;
  klass->list_revocations = redis_list_revocations;
  klass->claim_periodic = redis_claim_periodic;
  klass->last_periodic = redis_last_periodic;
  klass->dlq_list = redis_dlq_list;
  klass->dlq_get = redis_dlq_get;
  klass->dlq_replay = redis_dlq_replay;
  klass->dlq_delete = redis_dlq_delete;
  klass->stats = redis_stats;
  klass->purge = redis_purge;
  klass->close = redis_close;
  klass->finalize = redis_finalize;
}

/* ---- Public API ---------------------------------------------------------- */

void
sluice_redis_options_init(SluiceRedisOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->mode = SLUICE_REDIS_FAST;
}

/* The transports by mode. */
static const SluiceRedisTransport *
transport_for_mode(SluiceRedisMode mode)
{
  switch (mode) {
  case SLUICE_REDIS_FAST:
    return sluice_redis__fast_transport();
  case SLUICE_REDIS_RELIABLE:
    return sluice_redis__reliable_transport();
  default:
    return NULL;
  }
}

SluiceBroker *
sluice_redis_broker_new(const SluiceRedisOptions *options, SluiceClock *clock,
                        GError **error)
{
  SluiceRedisOptions defaults;
  const SluiceRedisTransport *transport;
  SluiceRedisUrl url = {0};
  SluiceBrokerClass klass;
  SluiceRedisBroker *self;
  SluiceBroker *broker;
  const gchar *ns;

  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (options == NULL) {
    sluice_redis_options_init(&defaults);
    options = &defaults;
  }

  transport = transport_for_mode(options->mode);
  if (transport == NULL) {
    g_set_error_literal(error, SLUICE_BROKER_ERROR,
                        SLUICE_BROKER_ERROR_UNSUPPORTED,
                        "unknown Redis mode: use SLUICE_REDIS_FAST or "
                        "SLUICE_REDIS_RELIABLE");
    return NULL;
  }
  ns = options->namespace_ != NULL ? options->namespace_
                                   : SLUICE_REDIS_DEFAULT_NAMESPACE;
  if (!sluice_redis_keys__valid_namespace(ns, error))
    return NULL;
  if (!sluice_redis_url__parse(options->url != NULL ? options->url
                                                    : SLUICE_REDIS_DEFAULT_URL,
                               &url, error))
    return NULL;

  redis_class_init(&klass, transport);
  broker = sluice_broker_new(&klass, clock, error);
  if (broker == NULL) {
    sluice_redis_url__clear(&url);
    return NULL;
  }
  self = SELF(broker);
  self->transport = transport;
  self->pool = sluice_redis_pool__new(
      &url,
      options->connect_timeout_ms > 0 ? options->connect_timeout_ms
                                      : SLUICE_REDIS_DEFAULT_CONNECT_TIMEOUT_MS,
      options->command_timeout_ms > 0 ? options->command_timeout_ms
                                      : SLUICE_REDIS_DEFAULT_COMMAND_TIMEOUT_MS,
      options->reconnect_max_backoff_ms > 0 ? options->reconnect_max_backoff_ms
                                            : SLUICE_REDIS_DEFAULT_BACKOFF_MS);
  sluice_redis_url__clear(&url);
  sluice_redis_keys__init(&self->keys, ns);
  sluice_redis_pool__set_namespace(self->pool, ns);
  sluice_redis_scripts__init(self->scripts, transport->lua);
  self->wait_poll_ms = SLUICE_REDIS_WAIT_POLL_MS;
  self->dead_letter_max = options->dead_letter_max > 0
                              ? options->dead_letter_max
                              : SLUICE_DEFAULT_DEAD_LETTER_MAX;
  if (transport->init != NULL && !transport->init(self, error)) {
    sluice_broker_unref(broker);
    return NULL;
  }
  return broker;
}

gboolean
sluice_redis_broker_ping(SluiceBroker *broker, GError **error)
{
  SluiceRedisBroker *self = SELF(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(broker->klass->finalize == redis_finalize, FALSE);

  sluice_redis_argv__init(&a, 1, 0);
  sluice_redis_argv__add_str(&a, "PING");
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "PING", TRUE, &a, 0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

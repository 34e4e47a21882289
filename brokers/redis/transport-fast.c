/* transport-fast.c - the "redis-fast" broker: one Redis list per queue.
 *
 * DELIVERY GUARANTEE: at most once. A message is pushed with LPUSH and
 * popped from the right with BLMPOP; once popped it exists only in the
 * worker that popped it. A worker that dies loses what it had popped (its
 * running and prefetched tasks). In exchange there is nothing to
 * acknowledge, so a task that succeeds without storing a result costs no
 * Redis round trip at all after its fetch, and a fetch takes many messages
 * at once.
 *
 * What it omits, compared with redis-reliable: leases, heartbeated
 * ownership, reclaiming, fencing (no SLUICE_BROKER_CAP_LEASES, _FENCING or
 * _IN_FLIGHT: stats report in_flight = -1).
 *
 * Everything that is not the queue itself (records, schedule, revocations,
 * periodic claims, dead letters, stats, reconnection) is the shared Redis
 * layer (redis-broker.c); this file only says how a list carries messages:
 *
 *   push     LPUSH {ns}:q:<queue>             (enqueue, promotion, replay);
 *            a plain enqueue batch sends LPUSH itself, without a script
 *   fetch    a script (lua/fast/fetch.lua) pops with RPOP COUNT from the
 *            queues in priority order, skipping those in {ns}:paused
 *            (read in the same step: once a pause is stored no fetch
 *            takes from the queue), so a message of queues[i] always goes
 *            before one of queues[i+1]. When all were empty, BLMPOP <s> n
 *            key... RIGHT COUNT max waits on those not paused (none: a
 *            BLPOP of a key nobody writes); the socket waits block_ms plus
 *            the command timeout, and `wakeup` can interrupt it (CLIENT
 *            UNBLOCK). What it popped goes back to the consuming end, in
 *            order, if its queue was paused while it waited
 *            (lua/fast/give_back.lua: one round trip more after a wait that
 *            ended with data).
 *   release  RPUSH back to the consuming end, so it is fetched next;
 *            skipped if the same bytes are there already, so a settle
 *            repeated after a lost reply does not release twice (unless a
 *            fetch took it in between: a possible duplicate at shutdown)
 *   ack      nothing (ack_is_noop): an ACK without record is not even sent
 *   list     LRANGE with negative indices, a page from the consuming end;
 *            its cursor is an offset from that end, so a page listed while
 *            workers pop (or releases push back) may skip or repeat some
 *   replace  LPOS of the listed bytes from the consuming end, LSET there
 *            (an index from that end, so both walk from it): in place, the
 *            message keeps its place in the order
 *
 * Payloads are handed to the core without a copy: each delivery's GBytes
 * takes over the buffer hiredis allocated for the reply element.
 *
 * To extend: a new list operation belongs in the Lua fragment
 * (lua/transport-fast.lua) if a shared script needs it, or in a C function here if only this transport
 * does; see redis-transport.h for the fragment's contract.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/redis-lua.h"

/* ---- Transport state ----------------------------------------------------- */

typedef struct {
  SluiceRedisScript fetch;     /* lua/fast/fetch.lua */
  SluiceRedisScript give_back; /* lua/fast/give_back.lua */
} FastData;

static gboolean
fast_init(SluiceRedisBroker *self, GError **error)
{
  FastData *d = g_new0(FastData, 1);

  sluice_redis_script__init(&d->fetch, "fetch", NULL,
                            sluice_redis_lua__fast_fetch);
  sluice_redis_script__init(&d->give_back, "fetch", NULL,
                            sluice_redis_lua__fast_give_back);
  self->transport_data = d;
  return TRUE;
}

static void
fast_finalize(SluiceRedisBroker *self)
{
  FastData *d = self->transport_data;

  if (d == NULL)
    return;
  sluice_redis_script__clear(&d->fetch);
  sluice_redis_script__clear(&d->give_back);
  g_free(d);
  self->transport_data = NULL;
}

/* ---- fetch --------------------------------------------------------------- */

static void
add_delivery(GPtrArray *out, const gchar *queue, redisReply *element)
{
  GBytes *payload = sluice_redis_reply__steal_bytes(element, 0);

  g_ptr_array_add(out, sluice_delivery_new(queue, payload, NULL, 1));
  g_bytes_unref(payload);
}

/* The non-blocking pop, in priority order, of the queues not paused (one
 * script: the pause and the pop are one step). Sets @out_paused[i] for each
 * queue found paused. */
static gboolean
pop_unpaused(SluiceRedisBroker *self, const gchar *const *queues, guint n,
             guint max, GPtrArray *out, gboolean *out_paused, GError **error)
{
  FastData *d = self->transport_data;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *got, *paused;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + n, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, max);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  /* Not repeated on a lost connection: what the lost call popped is gone
   * (at most once). */
  ok = sluice_redis_broker__eval_script(self, &d->fetch, FALSE, &a, &reply,
                                        error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      reply->element[1]->type != REDIS_REPLY_ARRAY ||
      reply->element[0]->elements % 2 != 0)
    goto unexpected;
  got = reply->element[0];
  paused = reply->element[1];
  for (size_t i = 0; i < got->elements; i += 2) {
    gint64 qi;
    if (!sluice_redis_reply__to_int(got->element[i], &qi) || qi < 1 || qi > n ||
        got->element[i + 1]->type != REDIS_REPLY_STRING)
      goto unexpected;
    add_delivery(out, queues[qi - 1], got->element[i + 1]);
  }
  for (size_t i = 0; i < paused->elements; i++) {
    gint64 qi;
    if (!sluice_redis_reply__to_int(paused->element[i], &qi) || qi < 1 ||
        qi > n)
      goto unexpected;
    out_paused[qi - 1] = TRUE;
  }
  freeReplyObject(reply);
  return TRUE;

unexpected:
  freeReplyObject(reply);
  return sluice_redis_broker__unexpected(self, "fetch", error);
}

/* What a blocking pop took from @queue, if the queue was paused while it
 * waited, goes back where it was (lua/fast/give_back.lua); Returns: TRUE
 * when it went back, and then the deliveries from @from on are dropped. On
 * a failure they are kept: the pop happened before the pause reached it. */
static gboolean
give_back_if_paused(SluiceRedisBroker *self, const gchar *queue, GPtrArray *out,
                    guint from)
{
  FastData *d = self->transport_data;
  g_autoptr(GError) error = NULL;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 back = 0;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + out->len - from,
                          0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, queue);
  for (guint i = from; i < out->len; i++)
    sluice_redis_argv__add_bytes(&a,
                                 ((SluiceDelivery *)out->pdata[i])->payload);
  sluice_redis_argv__finish(&a);
  if (sluice_redis_broker__eval_script(self, &d->give_back, FALSE, &a, &reply,
                                       &error)) {
    sluice_redis_reply__to_int(reply, &back);
    freeReplyObject(reply);
  } else {
    sluice_broker_log(&self->parent, G_LOG_LEVEL_WARNING,
                      "fetch: could not check whether queue “%s” was paused "
                      "while the fetch waited: %s; what it took runs",
                      queue, error->message);
  }
  sluice_redis_argv__clear(&a);
  if (back != 1)
    return FALSE;
  /* The caller's free function (if any) must not see them again. */
  for (guint i = from; i < out->len; i++)
    g_clear_pointer(&out->pdata[i], sluice_delivery_free);
  g_ptr_array_set_size(out, from);
  return TRUE;
}

/* BLMPOP over @queues (those not paused), blocking up to @block_ms. */
static gboolean
blocking_pop(SluiceRedisBroker *self, const gchar *const *queues, guint n,
             guint max, gint64 block_ms, GPtrArray *out,
             const gchar **out_queue, GError **error)
{
  gchar timeout[32];
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *elements;
  const gchar *queue = NULL;
  guint first_key;
  gboolean ok;

  sluice_redis_argv__init(&a, n + 8, n * 32);
  /* Seconds with millisecond precision, without the locale's decimal
   * point. */
  g_snprintf(timeout, sizeof timeout, "%" G_GINT64_FORMAT ".%03d",
             block_ms / 1000, (int)(block_ms % 1000));
  sluice_redis_argv__add_str(&a, "BLMPOP");
  sluice_redis_argv__add_str(&a, timeout);
  sluice_redis_argv__add_int(&a, n);
  first_key = a.len;
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_QUEUE,
                               queues[i]);
  sluice_redis_argv__add_str(&a, "RIGHT");
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, max);
  sluice_redis_argv__finish(&a);

  /* Not repeated on a lost connection: what the lost call popped is gone
   * (at most once), and repeating a blocking call would double its wait. */
  ok = sluice_redis_broker__command(self, "fetch", FALSE, &a, block_ms, &reply,
                                    error);
  if (!ok)
    goto out;
  if (reply->type == REDIS_REPLY_NIL)
    goto out; /* timed out, woken up, or nothing ready */
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_STRING ||
      reply->element[1]->type != REDIS_REPLY_ARRAY)
    goto unexpected;

  /* Which queue: BLMPOP names the key it popped from. */
  for (guint i = 0; i < n && queue == NULL; i++) {
    if (a.lens[first_key + i] == reply->element[0]->len &&
        memcmp(a.argv[first_key + i], reply->element[0]->str,
               reply->element[0]->len) == 0)
      queue = queues[i];
  }
  if (queue == NULL)
    goto unexpected;

  elements = reply->element[1];
  for (size_t i = 0; i < elements->elements; i++)
    if (elements->element[i]->type == REDIS_REPLY_STRING)
      add_delivery(out, queue, elements->element[i]);
  *out_queue = queue;
  goto out;

unexpected:
  ok = FALSE;
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
              "fetch: Redis at %s answered %s with a reply of an unexpected "
              "shape; is it Redis 7.0 or newer?",
              sluice_redis_pool__get_display_url(self->pool), a.argv[0]);
out:
  if (reply != NULL)
    freeReplyObject(reply);
  sluice_redis_argv__clear(&a);
  return ok;
}

static gboolean
fast_fetch(SluiceRedisBroker *self, const gchar *consumer,
           const gchar *const *queues, guint max, gint64 block_ms,
           GPtrArray *out, GError **error)
{
  guint n = g_strv_length((gchar **)queues);
  g_autofree gboolean *paused = g_new0(gboolean, MAX(n, 1));
  g_autoptr(GPtrArray) open = g_ptr_array_new();
  const gchar *queue = NULL;
  guint before = out->len;

  if (max == 0 || n == 0)
    return TRUE;
  if (!pop_unpaused(self, queues, n, max, out, paused, error))
    return FALSE;
  if (out->len > before || block_ms <= 0)
    return TRUE;

  /* Nothing ready: wait on the queues that are not paused (a paused one's
   * messages would be popped at once, put back, popped again...). */
  for (guint i = 0; i < n; i++)
    if (!paused[i])
      g_ptr_array_add(open, (gpointer)queues[i]);
  if (open->len == 0)
    return sluice_redis_broker__idle(self, block_ms, error);
  if (!blocking_pop(self, (const gchar *const *)open->pdata, open->len, max,
                    block_ms, out, &queue, error))
    return FALSE;
  /* A pause stored while it waited: what it popped goes back. */
  if (out->len > before)
    give_back_if_paused(self, queue, out, before);
  return TRUE;
}

/* One LPUSH per chunk of payloads, as t_push_many does in Lua. */
#define PUSH_CHUNK 1000

static guint
fast_push_native(SluiceRedisBroker *self, SluiceRedisConn *conn,
                 const gchar *queue, GBytes *const *payloads, guint n)
{
  guint commands = 0;

  for (guint start = 0; start < n; start += PUSH_CHUNK) {
    guint k = MIN(PUSH_CHUNK, n - start);
    SluiceRedisArgv a;

    sluice_redis_argv__init(&a, 2 + k, 64);
    sluice_redis_argv__add(&a, "LPUSH", 5);
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_QUEUE, queue);
    for (guint i = 0; i < k; i++)
      sluice_redis_argv__add_bytes(&a, payloads[start + i]);
    sluice_redis_argv__finish(&a);
    sluice_redis_conn__append(conn, (int)a.len, a.argv, a.lens);
    sluice_redis_argv__clear(&a);
    commands++;
  }
  return commands;
}

static const SluiceRedisTransport fast_transport = {
    .name = "redis-fast",
    .caps = SLUICE_BROKER_CAP_SHARED | SLUICE_BROKER_CAP_DURABLE |
            SLUICE_BROKER_CAP_ORDERED,
    .lua = sluice_redis_lua__transport_fast,
    .ack_is_noop = TRUE,
    .init = fast_init,
    .finalize = fast_finalize,
    .fetch = fast_fetch,
    .reclaim = NULL,
    .push_native = fast_push_native,
};

const SluiceRedisTransport *
sluice_redis__fast_transport(void)
{
  return &fast_transport;
}

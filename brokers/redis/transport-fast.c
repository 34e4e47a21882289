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
 *   fetch    BLMPOP <s> n key... RIGHT COUNT max, the queues in priority
 *            order: BLMPOP pops from the first non-empty list, so a
 *            message of queues[i] always goes before one of queues[i+1].
 *            block_ms == 0 uses LMPOP, because a BLMPOP timeout of 0 means
 *            "forever". The socket waits block_ms plus the command timeout,
 *            and `wakeup` can interrupt the BLMPOP (CLIENT UNBLOCK).
 *   release  RPUSH back to the consuming end, so it is fetched next;
 *            skipped if the same bytes are there already, so a settle
 *            repeated after a lost reply does not release twice (unless a
 *            fetch took it in between: a possible duplicate at shutdown)
 *   ack      nothing (ack_is_noop): an ACK without record is not even sent
 *   list     LRANGE with negative indices, a page from the consuming end;
 *            its cursor is an offset from that end, so a page listed while
 *            workers pop (or releases push back) may skip or repeat some
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

static gboolean
fast_fetch(SluiceRedisBroker *self, const gchar *consumer,
           const gchar *const *queues, guint max, gint64 block_ms,
           GPtrArray *out, GError **error)
{
  guint n_queues = g_strv_length((gchar **)queues);
  gchar timeout[32];
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *elements;
  const gchar *queue = NULL;
  guint first_key;
  gboolean ok;

  sluice_redis_argv__init(&a, n_queues + 8, n_queues * 32);
  if (block_ms > 0) {
    /* Seconds with millisecond precision, without the locale's decimal
     * point. */
    g_snprintf(timeout, sizeof timeout, "%" G_GINT64_FORMAT ".%03d",
               block_ms / 1000, (int)(block_ms % 1000));
    sluice_redis_argv__add_str(&a, "BLMPOP");
    sluice_redis_argv__add_str(&a, timeout);
  } else {
    sluice_redis_argv__add_str(&a, "LMPOP");
  }
  sluice_redis_argv__add_int(&a, n_queues);
  first_key = a.len;
  for (guint i = 0; i < n_queues; i++)
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
  for (guint i = 0; i < n_queues && queue == NULL; i++) {
    if (a.lens[first_key + i] == reply->element[0]->len &&
        memcmp(a.argv[first_key + i], reply->element[0]->str,
               reply->element[0]->len) == 0)
      queue = queues[i];
  }
  if (queue == NULL)
    goto unexpected;

  elements = reply->element[1];
  for (size_t i = 0; i < elements->elements; i++) {
    GBytes *payload;

    if (elements->element[i]->type != REDIS_REPLY_STRING)
      continue;
    payload = sluice_redis_reply__steal_bytes(elements->element[i], 0);
    g_ptr_array_add(out, sluice_delivery_new(queue, payload, NULL, 1));
    g_bytes_unref(payload);
  }
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
    .init = NULL,
    .finalize = NULL,
    .fetch = fast_fetch,
    .reclaim = NULL,
    .push_native = fast_push_native,
};

const SluiceRedisTransport *
sluice_redis__fast_transport(void)
{
  return &fast_transport;
}

/* redis-broker.h - the shared Redis broker: instance struct and the helpers
 * a transport uses (internal).
 *
 * redis-broker.c implements every slot of sluice/sys/broker.h except `fetch`
 * and `reclaim`, which it forwards to the transport (redis-transport.h).
 * A transport's C code reaches Redis only through the helpers below, so it
 * inherits the pool, the outage handling, the error mapping and the
 * NOSCRIPT fallback.
 */
#pragma once

#include <stdatomic.h>

#include "brokers/redis/redis-argv.h"
#include "brokers/redis/redis-conn.h"
#include "brokers/redis/redis-keys.h"
#include "brokers/redis/redis-scripts.h"
#include "brokers/redis/redis-transport.h"

G_BEGIN_DECLS

#define SLUICE_REDIS_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define SLUICE_REDIS_DEFAULT_COMMAND_TIMEOUT_MS 10000
#define SLUICE_REDIS_DEFAULT_BACKOFF_MS 5000
/* The longest a wait_record waits for a notification before it reads the
 * record again anyway (the safety-net poll, docs/design.md). */
#define SLUICE_REDIS_WAIT_POLL_MS 5000

/**
 * SluiceRedisBroker:
 * @parent: the base; first
 * @transport: how queues carry messages
 * @transport_data: (nullable): the transport's own state
 * @pool: every connection
 * @keys: the namespace's (single) partition
 * @scripts: the shared scripts, with the transport's fragment spliced in
 * @dead_letter_max: the DLQ cap
 * @stale_settles: settlements refused by fencing (atomic)
 * @wait_poll_ms: the safety-net period of wait_record
 *   (SLUICE_REDIS_WAIT_POLL_MS; tests raise it to prove that wake-ups come
 *   from the notification)
 * @token_prefix: random, made once per broker: with @token_seq, the
 *   per-call token of the enqueue script (unique across processes)
 * @token_seq: the calls numbered so far (atomic)
 */
struct _SluiceRedisBroker {
  SluiceBroker parent;
  const SluiceRedisTransport *transport;
  gpointer transport_data;
  SluiceRedisPool *pool;
  SluiceRedisKeys keys;
  SluiceRedisScript scripts[SLUICE_REDIS_SCRIPT_N];
  guint dead_letter_max;
  gint stale_settles;
  gint64 wait_poll_ms;
  gchar *token_prefix;
  atomic_uint_fast64_t token_seq;
};

/**
 * SluiceRedisOp:
 * @conn: checked out for this call alone
 * @data: the caller's
 *
 * One step with Redis on @conn (appends, exchanges, reads the replies).
 * Returns FALSE with @error on failure; a failure of the connection itself
 * marks @conn broken (the exchange functions of redis-conn.h do). It may
 * run twice (see sluice_redis_broker__run()), so it starts afresh from
 * @data each time and leaves nothing of its own behind when it fails.
 */
typedef gboolean (*SluiceRedisOp)(SluiceRedisBroker *self,
                                  SluiceRedisConn *conn, gpointer data,
                                  GError **error);

/**
 * sluice_redis_broker__run:
 * @idempotent: TRUE when running @op twice does no harm: then, when its
 *   connection broke mid-call (so the outcome is unknown), @op runs once
 *   more on a fresh connection
 *
 * Checks a connection out of the broker's pool, runs @op on it and checks
 * it back in (freed if broken). Every exchange of the Redis broker goes
 * through here, so connections are taken in one place and the retry rule
 * of redis-broker.c is decided in one place.
 */
gboolean sluice_redis_broker__run(SluiceRedisBroker *self, gboolean idempotent,
                                  SluiceRedisOp op, gpointer data,
                                  GError **error);

/**
 * sluice_redis_broker__eval:
 * @args: built with SLUICE_REDIS_SCRIPT_ARGV0 reserved slots first, and
 *   finished
 * @idempotent: TRUE when running the step twice does no harm: then a
 *   connection lost mid-call is replaced and the call made once more
 * @out_reply: (out) (transfer full): the reply (never an error reply)
 *
 * Runs a shared script on a pooled connection.
 */
gboolean sluice_redis_broker__eval(SluiceRedisBroker *self,
                                   SluiceRedisScriptId id, gboolean idempotent,
                                   SluiceRedisArgv *args,
                                   redisReply **out_reply, GError **error);

/**
 * sluice_redis_broker__eval_script:
 * Like sluice_redis_broker__eval() for a transport's own script.
 */
gboolean sluice_redis_broker__eval_script(SluiceRedisBroker *self,
                                          const SluiceRedisScript *script,
                                          gboolean idempotent,
                                          SluiceRedisArgv *args,
                                          redisReply **out_reply,
                                          GError **error);

/**
 * sluice_redis_broker__command:
 * @what: for error messages
 * @block_ms: > 0 for a blocking command: it may wait that long, and
 *   `wakeup` can interrupt it
 * @out_reply: (out) (transfer full): the reply (never an error reply)
 *
 * Runs one command (from @args, finished, no reserved slots).
 */
gboolean sluice_redis_broker__command(SluiceRedisBroker *self,
                                      const gchar *what, gboolean idempotent,
                                      SluiceRedisArgv *args, gint64 block_ms,
                                      redisReply **out_reply, GError **error);

/**
 * sluice_redis_broker__exchange:
 * @out_reply: (out) (transfer full): the reply, error replies included
 *   (tell them apart with sluice_redis_reply__is_error_code())
 *
 * Like sluice_redis_broker__command() for a caller that handles some error
 * replies itself; map the others with sluice_redis_reply__check().
 */
gboolean sluice_redis_broker__exchange(SluiceRedisBroker *self,
                                       gboolean idempotent,
                                       SluiceRedisArgv *args, gint64 block_ms,
                                       redisReply **out_reply, GError **error);

/** sluice_redis_broker__now_ms: Returns: the broker clock's time. */
gint64 sluice_redis_broker__now_ms(SluiceRedisBroker *self);

G_END_DECLS

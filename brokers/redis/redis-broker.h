/* redis-broker.h - the shared Redis broker: instance struct and the helpers
 * a transport uses (internal).
 *
 * redis-broker.c implements every slot of sluice-broker.h except `fetch`
 * and `reclaim`, which it forwards to the transport (redis-transport.h).
 * A transport's C code reaches Redis only through the helpers below, so it
 * inherits the pool, the outage handling, the error mapping and the
 * NOSCRIPT fallback.
 */
#pragma once

#include "brokers/redis/redis-conn.h"
#include "brokers/redis/redis-keys.h"
#include "brokers/redis/redis-scripts.h"
#include "brokers/redis/redis-transport.h"

G_BEGIN_DECLS

#define SLUICE_REDIS_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define SLUICE_REDIS_DEFAULT_COMMAND_TIMEOUT_MS 10000
#define SLUICE_REDIS_DEFAULT_BACKOFF_MS 5000
/* Used when a caller passes a record or claim TTL <= 0: every per-task key
 * must expire (DESIGN.md: result_ttl defaults to 24 h). */
#define SLUICE_REDIS_DEFAULT_RECORD_TTL_MS (24 * 60 * 60 * 1000)
/* The longest a wait_record waits for a notification before it reads the
 * record again anyway (the safety-net poll of DESIGN.md). */
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
};

/**
 * SluiceRedisArgv:
 *
 * Builds the argument vector of one command without an allocation per
 * argument: strings and byte arrays are borrowed (they must outlive the
 * call), numbers and records are formatted into one scratch buffer.
 * sluice_redis_argv__finish() turns the scratch offsets into pointers once
 * the buffer stops growing.
 */
typedef struct {
  const char **argv;
  size_t *lens;
  gssize *scratch_at; /* >= 0: argv[i] lives at scratch->str + value */
  guint len;
  guint cap;
  GString *scratch;
} SluiceRedisArgv;

/** sluice_redis_argv__init: room for @cap arguments (it grows if needed)
 * and @scratch_hint bytes of scratch. Clear with _clear(). */
void sluice_redis_argv__init(SluiceRedisArgv *a, guint cap, gsize scratch_hint);
void sluice_redis_argv__clear(SluiceRedisArgv *a);
/** Adds @len bytes at @data, borrowed. */
void sluice_redis_argv__add(SluiceRedisArgv *a, const void *data, gsize len);
/** Adds a NUL-terminated string, borrowed; NULL adds "". */
void sluice_redis_argv__add_str(SluiceRedisArgv *a, const gchar *s);
/** Adds a GBytes' data, borrowed; NULL adds "". */
void sluice_redis_argv__add_bytes(SluiceRedisArgv *a, GBytes *bytes);
/** Adds @value in decimal (copied into the scratch buffer). */
void sluice_redis_argv__add_int(SluiceRedisArgv *a, gint64 value);
/** Adds @n empty slots (the EVALSHA head, filled by script__eval). */
void sluice_redis_argv__reserve(SluiceRedisArgv *a, guint n);
/** Adds a stored record: the flag byte then @record (copied); NULL adds
 * "" (no record). */
void sluice_redis_argv__add_record(SluiceRedisArgv *a, GBytes *record,
                                   gboolean final);
/** Adds the key @suffix + @name of @keys (built in the scratch buffer). */
void sluice_redis_argv__add_key(SluiceRedisArgv *a, const SluiceRedisKeys *keys,
                                const gchar *suffix, const gchar *name);
/** Resolves scratch arguments; call once, after the last add. */
void sluice_redis_argv__finish(SluiceRedisArgv *a);

/**
 * sluice_redis_broker__acquire / __release:
 * Check a connection out of / back into the broker's pool (see
 * sluice_redis_pool__acquire()).
 */
SluiceRedisConn *sluice_redis_broker__acquire(SluiceRedisBroker *self,
                                              GError **error);
void sluice_redis_broker__release(SluiceRedisBroker *self,
                                  SluiceRedisConn *conn);

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

/** sluice_redis_broker__now_ms: Returns: the broker clock's time. */
gint64 sluice_redis_broker__now_ms(SluiceRedisBroker *self);

/**
 * sluice_redis_broker__dead_letter_from_reply:
 * @entry: one element of an XRANGE reply of the dead-letter stream; its
 *   payload string is taken over (the reply keeps the rest)
 *
 * Returns: (transfer full) (nullable): the entry, NULL when @entry is not
 * shaped like one. Every field comes from Redis as it is: callers (and the
 * fuzz target fuzz/fuzz-dead-letter.c) treat them as outside bytes.
 */
SluiceDeadLetter *
sluice_redis_broker__dead_letter_from_reply(redisReply *entry);

G_END_DECLS

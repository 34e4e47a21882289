/* redis-broker.h - the Redis broker's shared layer: the instance struct,
 * the helpers every slot and transport runs Redis with, and the slots the
 * class is built from (internal).
 *
 * A slot or a transport's C code reaches Redis only through
 * sluice_redis_broker__run() and the helpers on top of it (eval, command,
 * exchange), so it inherits the pool, the outage handling, the one retry
 * rule, the error mapping and the NOSCRIPT fallback. redis-broker.c gives
 * the tour of the files.
 */
#pragma once

#include <stdatomic.h>

#include "brokers/redis/redis-argv.h"
#include "brokers/redis/redis-keys.h"
#include "brokers/redis/net/redis-net.h"
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
 * SluiceRedisGate:
 * @check: (nullable): TRUE once what the gate stands for holds; FALSE and
 *   an error when it does not (yet): called before every step until it
 *   returns TRUE, so it must be cheap once it has
 * @data: (nullable): @check's
 * @free: (nullable): frees @data with the broker
 *
 * A check that the broker's builder installs, run before a broker's first
 * step. The shared layer knows nothing of what it checks: redis.c installs
 * the check that the namespace is not split in partitions on the broker it
 * hands to the user (redis-partitions.h); a broker that is part of a
 * namespace of partitions has none (the namespace's broker checks).
 */
typedef struct {
  gboolean (*check)(gpointer data, GError **error);
  gpointer data;
  GDestroyNotify free;
} SluiceRedisGate;

/**
 * SluiceRedisUrlParams:
 * @partitions: `partitions=N` (any form of URL), 0 when absent
 * @min_replicas_ack: `min_replicas_ack=N`, -1 when absent
 * @min_replicas_timeout_ms: `min_replicas_timeout_ms=T`, -1 when absent
 *
 * The query parameters of a Redis URL that are the broker's: the network
 * layer hands back what it does not know (SluiceRedisUrl.params).
 */
typedef struct {
  guint partitions;
  gint min_replicas_ack;
  gint64 min_replicas_timeout_ms;
} SluiceRedisUrlParams;

/**
 * sluice_redis__parse_url:
 * @url: (out caller-allocates): as sluice_redis_url__parse() fills it;
 *   untouched on failure
 * @params: (out caller-allocates): the broker's parameters
 *
 * Parses a Redis URL with the network layer, then the parameters it
 * handed back. Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_INVALID
 * saying what is wrong (a parameter neither knows is named), never
 * showing a password.
 */
gboolean sluice_redis__parse_url(const gchar *text, SluiceRedisUrl *url,
                                 SluiceRedisUrlParams *params, GError **error);

/**
 * SluiceRedisBroker:
 * @parent: the base; first
 * @transport: how queues carry messages
 * @transport_data: (nullable): the transport's own state
 * @pool: every connection
 * @keys: the namespace's keys, or one partition's
 * @scripts: the shared scripts, with the transport's fragment spliced in
 * @dead_letter_max: the DLQ cap
 * @stale_settles: settlements refused by fencing (atomic)
 * @wait_poll_ms: the safety-net period of wait_record
 *   (SLUICE_REDIS_WAIT_POLL_MS; tests raise it to prove that wake-ups come
 *   from the notification)
 * @token_prefix: random, made once per broker: with @token_seq, the
 *   per-call token of the enqueue script (unique across processes)
 * @token_seq: the calls numbered so far (atomic)
 * @min_replicas_ack: enqueue and settle WAIT for this many replicas (0 =
 *   they do not wait)
 * @min_replicas_timeout_ms: ...for at most this long
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
  guint min_replicas_ack;
  gint64 min_replicas_timeout_ms;
  /* Queues this instance added to the known-queues set, and when (an
   * enqueue repeats the SADD only after SLUICE_REDIS_QUEUE_READD_MS). */
  GMutex queues_lock;
  GHashTable *queues_added; /* queue (owned) -> GINT64 monotonic us */
  /* What must hold before the first command (see SluiceRedisGate). */
  SluiceRedisGate gate;
  /* What every new connection checks (sluice_redis_broker__setup()): the
   * namespace's meta key and the mode this client records there; the
   * servers whose eviction policy was looked at (by URL as shown); and
   * whether to look at none (atomic; sluice_redis__skip_policy_check()). */
  gchar *meta_key;
  const gchar *meta_mode;
  gchar *mode_setting; /* where the user sets the mode, for the message */
  GMutex policy_lock;
  GHashTable *policy_checked;
  gint quiet;
  /* Set before its first connection on a broker that only reads the
   * layout (sluice_redis_get_layout()): its connections record nothing. */
  gboolean inspect;
  /* Atomic: told the user once that the namespace has newer clients. */
  gint scripts_told;
};

/* A queue's SADD is repeated this long after the last one, so a known-
 * queues set emptied by hand (FLUSHDB) is written again. */
#define SLUICE_REDIS_QUEUE_READD_MS 60000

/* The instance behind a slot's SluiceBroker. */
#define SLUICE_REDIS_BROKER(broker) ((SluiceRedisBroker *)(broker))

/**
 * SluiceRedisOp:
 * @conn: checked out for this call alone
 * @data: the caller's
 *
 * One step with Redis on @conn (appends, exchanges, reads the replies).
 * Returns FALSE with @error on failure; a failure of the connection itself
 * marks @conn broken (the exchange functions of net/redis-net.h do). It may
 * run twice (see sluice_redis_broker__run()), so it starts afresh from
 * @data each time and leaves nothing of its own behind when it fails.
 */
typedef gboolean (*SluiceRedisOp)(SluiceRedisBroker *self,
                                  SluiceRedisConn *conn, gpointer data,
                                  GError **error);

/**
 * sluice_redis_broker__setup:
 * @data: the SluiceRedisBroker
 *
 * The broker's hook on every new connection of its pool
 * (sluice_redis_pool__set_setup()): the namespace's mode, recorded on
 * first use and compared after, and once per server its eviction policy.
 * Returns: FALSE with SLUICE_BROKER_ERROR_INVALID (the namespace is used
 * in the other mode), an error of the reply, or UNAVAILABLE when the
 * connection failed.
 */
gboolean sluice_redis_broker__setup(SluiceRedisConn *conn, gpointer data,
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
 * sluice_redis_broker__run_durable:
 * @what: the step, for the message ("enqueue", "settle")
 *
 * sluice_redis_broker__run() for a write that min_replicas_ack covers:
 * when the broker has min_replicas_ack > 0 and @op succeeded, WAIT for
 * that many replicas on @op's connection (up to min_replicas_timeout_ms).
 * Returns: FALSE and SLUICE_BROKER_ERROR_UNAVAILABLE when fewer confirmed
 * (@op's write is on the master then, not known to be on a replica).
 */
gboolean sluice_redis_broker__run_durable(SluiceRedisBroker *self,
                                          gboolean idempotent,
                                          const gchar *what, SluiceRedisOp op,
                                          gpointer data, GError **error);

/**
 * sluice_redis_broker__eval_durable:
 * sluice_redis_broker__eval() through sluice_redis_broker__run_durable();
 * on FALSE *@out_reply is NULL.
 */
gboolean
sluice_redis_broker__eval_durable(SluiceRedisBroker *self,
                                  SluiceRedisScriptId id, gboolean idempotent,
                                  const gchar *what, SluiceRedisArgv *args,
                                  redisReply **out_reply, GError **error);

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

/**
 * sluice_redis_broker__idle:
 * Waits up to @block_ms for nothing (a BLPOP of the idle key), or until
 * `wakeup`: what a fetch does whose queues are all paused, so that it
 * neither spins nor takes anything.
 */
gboolean sluice_redis_broker__idle(SluiceRedisBroker *self, gint64 block_ms,
                                   GError **error);

/** sluice_redis_broker__now_ms: Returns: the broker clock's time. */
gint64 sluice_redis_broker__now_ms(SluiceRedisBroker *self);

/**
 * sluice_redis_broker__eval_void:
 * @a: finished; cleared here
 *
 * Runs shared script @id for its effect alone: its reply is dropped.
 */
gboolean sluice_redis_broker__eval_void(SluiceRedisBroker *self,
                                        SluiceRedisScriptId id,
                                        gboolean idempotent, SluiceRedisArgv *a,
                                        GError **error);

/**
 * sluice_redis_broker__ping:
 * @what: for error messages
 *
 * One PING on a pooled connection (repeated once on a fresh one if its
 * connection broke). Making a connection checks the credentials and the
 * namespace's mode, so a PING checks everything a broker needs.
 */
gboolean sluice_redis_broker__ping(SluiceRedisBroker *self, const gchar *what,
                                   GError **error);

/**
 * sluice_redis_broker__eval_integer:
 * @a: finished; cleared here
 *
 * Runs shared script @id (not repeated after a lost connection) and reads
 * its integer reply into @out; any other reply is unexpected (@what names
 * the step in the message).
 */
gboolean sluice_redis_broker__eval_integer(SluiceRedisBroker *self,
                                           SluiceRedisScriptId id,
                                           const gchar *what,
                                           SluiceRedisArgv *a, gint64 *out,
                                           GError **error);

/**
 * sluice_redis_broker__eval_pair:
 * Like sluice_redis_broker__eval_integer() for a script that answers two
 * integers, {found or claimed, existed}.
 */
gboolean sluice_redis_broker__eval_pair(SluiceRedisBroker *self,
                                        SluiceRedisScriptId id,
                                        const gchar *what, SluiceRedisArgv *a,
                                        gint64 *out_first, gint64 *out_second,
                                        GError **error);

/**
 * sluice_redis_broker__unexpected:
 * Sets @error (SLUICE_BROKER_ERROR_FAILED) for a reply of a shape the step
 * @what does not know, naming the server and the likely causes.
 * Returns: FALSE, for `return sluice_redis_broker__unexpected (...)`.
 */
gboolean sluice_redis_broker__unexpected(SluiceRedisBroker *self,
                                         const gchar *what, GError **error);

/* ---- The slots ------------------------------------------------------------
 *
 * Each is the slot of the same name in sluice/sys/broker.h, set in the
 * class by redis_class_init() (redis.c).
 */

/* redis-queue.c */
gboolean sluice_redis__enqueue(SluiceBroker *broker, SluiceSubmit *items,
                               guint n_items, GError **error);
gboolean sluice_redis__fetch(SluiceBroker *broker, const gchar *consumer,
                             const gchar *const *queues, guint max,
                             gint64 block_ms, GPtrArray *out, GError **error);
/* Forwarded to the transport; set only when it has them. */
gboolean sluice_redis__reclaim(SluiceBroker *broker, const gchar *consumer,
                               const gchar *const *queues, guint max,
                               gint64 idle_ms, GPtrArray *out, GError **error);
gboolean sluice_redis__count_reclaimable(SluiceBroker *broker,
                                         const gchar *consumer,
                                         const gchar *const *queues, guint max,
                                         gint64 idle_ms, guint *out_n,
                                         GError **error);
gboolean sluice_redis__settle(SluiceBroker *broker, const gchar *consumer,
                              SluiceSettlement *items, guint n_items,
                              GError **error);
gboolean sluice_redis__heartbeat(SluiceBroker *broker, const gchar *consumer,
                                 gint64 lease_ms, SluiceDelivery *const *held,
                                 guint n_held, GError **error);
gboolean sluice_redis__leave(SluiceBroker *broker, const gchar *consumer,
                             GError **error);
void sluice_redis__wakeup(SluiceBroker *broker);

/* redis-schedule.c */
gboolean sluice_redis__promote_due(SluiceBroker *broker, gint64 now_ms,
                                   guint max, guint *out_promoted,
                                   gint64 *out_next_due, GError **error);
gboolean sluice_redis__cancel_scheduled(SluiceBroker *broker, const gchar *id,
                                        GBytes *record, gint64 record_ttl_ms,
                                        gboolean *out_removed, GError **error);

/* redis-records.c */
gboolean sluice_redis__get_record(SluiceBroker *broker, const gchar *id,
                                  GBytes **out_record, GError **error);
gboolean sluice_redis__put_record(SluiceBroker *broker, const gchar *id,
                                  GBytes *record, gboolean final, gint64 ttl_ms,
                                  GError **error);
gboolean sluice_redis__put_records(SluiceBroker *broker,
                                   const SluiceRecordWrite *items, guint n,
                                   GError **error);
gboolean sluice_redis__wait_record(SluiceBroker *broker, const gchar *id,
                                   gint64 timeout_ms, GBytes **out_record,
                                   GError **error);
gboolean sluice_redis__lookup_task(SluiceBroker *broker, const gchar *id,
                                   SluiceTaskLocation *out, GError **error);

/* redis-revocations.c */
gboolean sluice_redis__revoke(SluiceBroker *broker, const gchar *id,
                              gint64 expires_at, GError **error);
gboolean sluice_redis__list_revocations(SluiceBroker *broker, gint64 cursor,
                                        gint64 now_ms, GPtrArray *out,
                                        gint64 *out_cursor, GError **error);

/* redis-dead-letters.c */
gboolean sluice_redis__dlq_list(SluiceBroker *broker, const gchar *after,
                                guint limit, GPtrArray *out, GError **error);
gboolean sluice_redis__dlq_get(SluiceBroker *broker, const gchar *entry_id,
                               SluiceDeadLetter **out_entry, GError **error);
gboolean sluice_redis__dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                                  SluiceSubmit *item, gboolean *out_found,
                                  GError **error);
gboolean sluice_redis__dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                                  gboolean *out_found, GError **error);
/* For a namespace of partitions (redis-partitioned.c), beyond the
 * contract: redis.c hands it over in SluiceRedisPartitionOps
 * (redis-partitions.h says what it does). */
gboolean sluice_redis__dlq_oldest(SluiceBroker *broker, gint64 *out_count,
                                  gchar **out_entry_id, GError **error);
gboolean sluice_redis__dlq_drop(SluiceBroker *broker, const gchar *entry_id,
                                gboolean *out_dropped, GError **error);

/* redis-stats.c */
gboolean sluice_redis__stats(SluiceBroker *broker, const gchar *const *queues,
                             SluiceBrokerStats *out, GError **error);
gboolean sluice_redis__announce(SluiceBroker *broker, const gchar *consumer,
                                GBytes *info, gint64 ttl_ms, GError **error);

/* redis.c */
gboolean sluice_redis__check(SluiceBroker *broker, GError **error);

/* redis-steering.c */
gboolean sluice_redis__list_queued(SluiceBroker *broker, const gchar *queue,
                                   const gchar *cursor, guint limit,
                                   GPtrArray *out, gchar **out_cursor,
                                   GError **error);
gboolean sluice_redis__remove_queued(SluiceBroker *broker, SluiceRemoval *items,
                                     guint n_items, GError **error);
gboolean sluice_redis__replace_payloads(SluiceBroker *broker,
                                        SluiceReplacement *items, guint n_items,
                                        GError **error);
gboolean sluice_redis__list_scheduled(SluiceBroker *broker, const gchar *cursor,
                                      guint limit, GPtrArray *out,
                                      gchar **out_cursor, GError **error);
gboolean sluice_redis__reschedule(SluiceBroker *broker, const gchar *id,
                                  gint64 due_at, gboolean *out_found,
                                  GError **error);
gboolean sluice_redis__purge(SluiceBroker *broker, const gchar *queue,
                             guint64 *out_removed, GError **error);
gboolean sluice_redis__set_paused(SluiceBroker *broker, const gchar *queue,
                                  gboolean paused, GError **error);
gboolean sluice_redis__list_paused(SluiceBroker *broker, GPtrArray *out,
                                   GError **error);

/* redis-periodic.c */
/* For a namespace of partitions, as dlq_oldest is (redis-dead-letters.c). */
gboolean sluice_redis__periodic_gate(SluiceBroker *broker, const gchar *name,
                                     gint64 occurrence_at, gint64 *out_newest,
                                     GError **error);
gboolean sluice_redis__claim_periodic(SluiceBroker *broker, const gchar *name,
                                      gint64 occurrence_at, SluiceSubmit *item,
                                      gboolean *out_claimed, GError **error);
gboolean sluice_redis__last_periodic(SluiceBroker *broker, const gchar *name,
                                     gint64 *out_last, GError **error);

/* redis-joins.c */
gboolean sluice_redis__join_open(SluiceBroker *broker,
                                 const SluiceJoinSpec *joins, guint n_joins,
                                 SluiceSubmit *items, guint n_items,
                                 gboolean *out_existed, GError **error);
gboolean sluice_redis__join_arrive(SluiceBroker *broker,
                                   SluiceJoinArrival *items, guint n_items,
                                   GError **error);
gboolean sluice_redis__join_read(SluiceBroker *broker, const gchar *join_id,
                                 gboolean with_outcomes, SluiceJoinState *out,
                                 gboolean *out_found, GError **error);
gboolean sluice_redis__join_grow(SluiceBroker *broker, const gchar *join_id,
                                 guint expected_total, guint by,
                                 SluiceSubmit *items, guint n_items,
                                 guint *out_total, GError **error);

/* redis-events.c */
gboolean sluice_redis__put_progress(SluiceBroker *broker, const gchar *id,
                                    GBytes *progress, gint64 ttl_ms,
                                    GError **error);
gboolean sluice_redis__get_progress(SluiceBroker *broker, const gchar *id,
                                    GBytes **out_progress, GError **error);
gboolean sluice_redis__append_events(SluiceBroker *broker,
                                     GBytes *const *events, guint n,
                                     guint max_len, gint64 max_age_ms,
                                     gint64 now_ms, GError **error);
gboolean sluice_redis__read_events(SluiceBroker *broker, const gchar *cursor,
                                   guint limit, gint64 block_ms, GPtrArray *out,
                                   gchar **out_cursor, GError **error);

/* redis-flow.c */
gboolean sluice_redis__rate_acquire(SluiceBroker *broker,
                                    SluiceRateAcquire *items, guint n_items,
                                    GError **error);
gboolean sluice_redis__slot_acquire(SluiceBroker *broker,
                                    SluiceSlotAcquire *items, guint n_items,
                                    GError **error);
gboolean sluice_redis__slot_release(SluiceBroker *broker,
                                    SluiceSlotRelease *items, guint n_items,
                                    GError **error);
gboolean sluice_redis__list_slots(SluiceBroker *broker, guint limit,
                                  GPtrArray *out, GError **error);

/* redis-unique.c */
gboolean sluice_redis__unique_enqueue(SluiceBroker *broker,
                                      SluiceUniqueSubmit *items, guint n_items,
                                      GError **error);
gboolean sluice_redis__unique_update(SluiceBroker *broker,
                                     SluiceUniqueUpdate *items, guint n_items,
                                     GError **error);

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

/* redis-keys.h - the one module that names Redis keys (internal).
 *
 * Every key of a namespace starts with the partition prefix "{ns}:", whose
 * hash tag puts the whole namespace in one Redis Cluster slot, so every Lua
 * script touches one slot. C code builds keys with the functions below from
 * the SLUICE_REDIS_K_* suffixes; Lua scripts build them from the locals of
 * brokers/redis/lua/prelude.lua (K_QUEUE for SLUICE_REDIS_K_QUEUE, ...),
 * which the clients in other languages ship too. test-redis-fast checks
 * that both name the same suffixes.
 *
 * Layout (P = "{ns}:"):
 *
 *   P q:<queue>           list, fast mode (LPUSH in, pop RIGHT)
 *   P s:<queue>           stream + consumer group, reliable mode
 *   P schedule            zset: task id -> due time (ms)
 *   P sched:payload       hash: task id -> payload of the scheduled message
 *   P sched:queue         hash: task id -> queue it is promoted to
 *   P r:<id>              result record: one flag byte ('F' final, 'P' not
 *                         final) followed by the record bytes; always PX
 *   P done:<id>           pub/sub channel: a final record was written
 *   P revoked             zset: task id -> revocation expiry (ms)
 *   P periodic:<name>     string: last dispatched occurrence (ms)
 *   P dedup:<id>          string: idempotency claim; always PX
 *   P dlq                 stream of dead letters, exactly capped
 *   P dlq:count           hash: reason -> number of entries in P dlq
 *   P queues              set of every queue name ever submitted to
 *   P workers             zset: worker id -> last heartbeat (ms)
 *   P alive:<worker>      liveness key with a PX lease, reliable mode
 *   P stale               integer: settlements refused by fencing, counted
 *                         by the settle script (namespace-wide, for stats)
 *   P meta                hash: what the namespace is: "mode" (fast or
 *                         reliable), recorded by its first client;
 *                         "layout", the version of this layout
 *                         (SLUICE_REDIS_LAYOUT_VERSION; absent on a
 *                         namespace made before it was recorded: 1);
 *                         "scripts", "N:SHA1" of the newest script set
 *                         its clients ran (redis-broker.c); "partitions"
 *                         (redis-partitions.h). Each partition's own
 *                         meta records mode, layout and scripts too
 *   P revoked:seq         zset: task id -> insertion number of its latest
 *                         revocation (the workers' sync cursor)
 *   P revoked:n           integer: the last insertion number given
 *   P dlq:ids             hash: task id -> entry id of its newest dead letter
 *   P dlq:dropped         hash: reason -> dead letters dropped by the cap
 *   P winfo:<worker>      string: what a worker announced (opaque bytes of
 *                         the core), PX its lease: gone = not alive
 *   P paused              set of the paused queues' names; the fetch
 *                         scripts read it in the step that takes
 *                         (lua/fast/fetch.lua, lua/reliable/fetch.lua),
 *                         so once a pause is stored nothing of the queue
 *                         is taken
 *   P idle                a list nobody writes: a fetch whose queues are
 *                         all paused blocks on it (BLPOP), so that it
 *                         waits as an idle fetch does and `wakeup` ends
 *                         it
 *   P join:<id>           hash: a workflow join (redis-joins.c): t total,
 *                         n arrived, s status, m meta, rn and q<k>/p<k> the
 *                         messages it releases; always PX
 *   P join:<id>:o         hash: the join's member -> outcome, PX as the
 *                         join
 *   P progress:<id>       string: a task's last progress report (opaque
 *                         bytes of the core); always PX
 *   P events              stream: the namespace's events (field e), capped
 *                         by length (MAXLEN) and age (MINID)
 *   P rl:<bucket>         string: a rate-limit bucket's theoretical
 *                         arrival time (us of the server's TIME); PX a
 *                         second past it. Named in rate_acquire.lua alone,
 *                         not in the prelude (every other script's bytes
 *                         stay as the clients ship them)
 *   P cs:<key>            zset: a concurrency key's holders -> lease
 *                         expiry (ms of TIME); PEXPIRE the last lease
 *   P cw:<key>            zset: task ids waiting for a slot of the key ->
 *                         when they began waiting (slot_acquire.lua and
 *                         slot_release.lua alone name both)
 *   P periodic-gate       zset: periodic name -> newest occurrence claimed
 *                         (ms); partition 0 of a partitioned namespace
 *                         only (redis-partitioned.c)
 *   P uq:<key>            string: a uniqueness claim: 'w' (waiting) or 'r'
 *                         (running) and the holder's task id; always PX
 *                         (unique_enqueue.lua and unique_update.lua alone
 *                         name it)
 *
 * Per-task keys (r:, dedup:) always carry a TTL; the others are shared and
 * bounded by the code that writes them.
 *
 * CLUSTER. @slot is the partition's Redis Cluster slot (net/redis-net.h):
 * every connection of an operation on the partition is checked out for it
 * (sluice_redis_pool__acquire_slot), which a cluster pool routes.
 *
 * PARTITIONS. A SluiceRedisKeys describes one partition: the whole
 * namespace ("{ns}"), or partition k of a namespace split in N ("{ns#k}",
 * redis-partitions.h), each served by a broker of its own. Scripts never
 * see the namespace itself, only KEYS[1] = the prefix, so they work
 * unchanged on any partition.
 */
#pragma once

#include <sluice/sys/broker.h>

G_BEGIN_DECLS

/* The version of the layout above. A change to it (a key renamed, a type
 * changed) is a new version with a migration that takes a namespace from
 * the one before, run by the first client of the new version that
 * connects (redis-broker.c); a client of an older version refuses a newer
 * namespace. */
#define SLUICE_REDIS_LAYOUT_VERSION 1

/* Key suffixes after the prefix. Used by C and spliced into Lua. */
#define SLUICE_REDIS_K_QUEUE "q:"
#define SLUICE_REDIS_K_STREAM "s:"
#define SLUICE_REDIS_K_SCHEDULE "schedule"
#define SLUICE_REDIS_K_SCHED_PAYLOAD "sched:payload"
#define SLUICE_REDIS_K_SCHED_QUEUE "sched:queue"
#define SLUICE_REDIS_K_RECORD "r:"
#define SLUICE_REDIS_K_DONE "done:"
#define SLUICE_REDIS_K_REVOKED "revoked"
#define SLUICE_REDIS_K_PERIODIC "periodic:"
#define SLUICE_REDIS_K_DEDUP "dedup:"
#define SLUICE_REDIS_K_DLQ "dlq"
#define SLUICE_REDIS_K_DLQ_COUNT "dlq:count"
#define SLUICE_REDIS_K_QUEUES "queues"
#define SLUICE_REDIS_K_WORKERS "workers"
#define SLUICE_REDIS_K_ALIVE "alive:"
#define SLUICE_REDIS_K_STALE "stale"
#define SLUICE_REDIS_K_META "meta"
#define SLUICE_REDIS_K_REVOKED_SEQ "revoked:seq"
#define SLUICE_REDIS_K_REVOKED_N "revoked:n"
#define SLUICE_REDIS_K_DLQ_IDS "dlq:ids"
#define SLUICE_REDIS_K_DLQ_DROPPED "dlq:dropped"
#define SLUICE_REDIS_K_WINFO "winfo:"
#define SLUICE_REDIS_K_JOIN "join:"
#define SLUICE_REDIS_K_PROGRESS "progress:"
#define SLUICE_REDIS_K_EVENTS "events"
#define SLUICE_REDIS_K_PAUSED "paused"
#define SLUICE_REDIS_K_IDLE "idle"
#define SLUICE_REDIS_K_RATE "rl:"
#define SLUICE_REDIS_K_SLOTS "cs:"
#define SLUICE_REDIS_K_SLOT_WAITERS "cw:"
#define SLUICE_REDIS_K_PERIODIC_GATE "periodic-gate"

/* The first byte of a stored record. */
#define SLUICE_REDIS_RECORD_FINAL 'F'
#define SLUICE_REDIS_RECORD_PENDING 'P'

typedef struct {
  gchar *ns;     /* the namespace as configured */
  gchar *prefix; /* "{ns}:", "{ns#k}:" or "{ns#k.j}:" */
  gsize prefix_len;
  guint slot; /* the Redis Cluster slot of the prefix's hash tag */
} SluiceRedisKeys;

/**
 * sluice_redis_keys__valid_namespace:
 * Returns: TRUE when @ns can be a namespace: non-empty, at most 256 bytes,
 * without '{', '}' (they would break the hash tag), '#' (reserved for
 * partitions) or control characters. Otherwise sets @error
 * (SLUICE_BROKER_ERROR_INVALID, saying what to change).
 */
gboolean sluice_redis_keys__valid_namespace(const gchar *ns, GError **error);

/**
 * sluice_redis_keys__init:
 * @keys: (out caller-allocates): filled; free its contents with
 *   sluice_redis_keys__clear()
 * @ns: (transfer none): a valid namespace (copied)
 *
 * The keys of the single partition of @ns.
 */
void sluice_redis_keys__init(SluiceRedisKeys *keys, const gchar *ns);

/**
 * sluice_redis_keys__init_partition:
 * @n: how many partitions the namespace has
 *
 * Like sluice_redis_keys__init() for partition @index of a namespace split
 * in @n: the hash tag is "{ns#index}", or "{ns#index.j}" with the smallest
 * j >= 1 that puts it in the index-th n-th of the slot space (strictly
 * inside: from ceil(index 16384 / n) to below floor((index + 1) 16384 / n)),
 * when "{ns#index}" does not. So the partitions cover the slot space
 * evenly, and a cluster whose masters serve equal ranges of slots (as
 * `redis-cli --cluster create` makes them) gets n / masters partitions
 * each when masters divides n, whatever the namespace is called.
 */
void sluice_redis_keys__init_partition(SluiceRedisKeys *keys, const gchar *ns,
                                       guint index, guint n);

/** sluice_redis_keys__clear: frees what @keys holds; NULL-safe fields. */
void sluice_redis_keys__clear(SluiceRedisKeys *keys);

/**
 * sluice_redis_keys__append:
 * @keys: the partition
 * @buf: (transfer none): the key is appended to it
 * @suffix: one of SLUICE_REDIS_K_*
 * @name: (nullable): the queue, id, name or worker for per-entity keys
 *
 * Appends prefix + suffix + name to @buf (no allocation when @buf is big
 * enough, so callers reuse one GString for many keys). Returns the offset
 * of the key in @buf.
 */
gsize sluice_redis_keys__append(const SluiceRedisKeys *keys, GString *buf,
                                const gchar *suffix, const gchar *name);

/**
 * sluice_redis_keys__make:
 * Returns: (transfer full): prefix + suffix + name as a new string.
 */
gchar *sluice_redis_keys__make(const SluiceRedisKeys *keys, const gchar *suffix,
                               const gchar *name);

G_END_DECLS

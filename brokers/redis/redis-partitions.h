/* redis-partitions.h - a namespace split in partitions, and the record of
 * how a namespace is split (internal).
 *
 * A namespace of N > 1 partitions is N Redis brokers, partition k with the
 * hash tag {ns#k}, behind a composite broker of its own class
 * (redis-partitioned.c) that routes each slot through the contract
 * (sluice_broker_*()): by a hash of the task id for everything about one
 * task, to the delivery's partition for settlements, to every partition
 * for fetches, reclaims, promotions and stats, to partition 0 for what
 * every worker must see at once (revocations, pauses, announcements, the
 * periodic gate). What it needs of its parts beyond the contract is
 * SluiceRedisPartitionOps, which redis.c gives it. N = 1 is the plain
 * broker of redis.c, {ns}, as it always was.
 *
 * A namespace records its number of partitions in {ns}:meta, field
 * "partitions" (absent = 1), checked lazily by every client before its
 * first command (SluiceRedisLayout): redis.c installs the check as the
 * gate of the broker it hands out (a plain broker's SluiceRedisGate, the
 * composite's first step).
 *
 * Who calls whom: redis.c builds the parts, the layout check and the
 * composite; the composite calls its parts through the contract and the
 * ops; the layout check builds the brokers it counts tasks with through
 * the SluiceRedisPartBuilder redis.c gives it. None of them calls redis.c.
 */
#pragma once

#include <sluice/sluice-redis.h>
#include <sluice/sys/broker.h>

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

typedef struct _SluiceRedisLayout SluiceRedisLayout;

/**
 * SluiceRedisPartBuilder:
 * @index: the partition, or -1 for the whole namespace ({ns})
 * @n: how many partitions the namespace has (1 with @index -1)
 *
 * Makes a broker of one partition of the namespace of @options, with no
 * gate and telling nothing of the server's configuration (the client's
 * own broker does that). Returns: (transfer full): the broker, or NULL
 * and @error.
 */
typedef SluiceBroker *(*SluiceRedisPartBuilder)(
    const SluiceRedisOptions *options, const SluiceRedisUrl *url, gint index,
    guint n, GError **error);

/**
 * SluiceRedisPartitionOps:
 * @periodic_gate: in @part (partition 0), records @occurrence_at as the
 *   newest occurrence claimed of periodic task @name unless a newer one is
 *   recorded (with @occurrence_at 0 it records nothing), and sets
 *   @out_newest to the newest recorded now (0: none). One key, so each
 *   call is atomic.
 * @dlq_oldest: sets @out_count to how many dead letters @part holds and
 *   @out_entry_id (transfer full) to its oldest's entry id (NULL: none)
 * @dlq_drop: drops dead letter @entry_id of @part as the cap drops one
 *   (counted as dropped, by reason), in one step; sets @out_dropped
 *
 * What the composite needs of a Redis partition that the contract does
 * not say: a periodic claim is atomic with its enqueue only within one
 * partition (hence a gate in partition 0 before it), and the dead-letter
 * cap is the namespace's, across partitions (hence a trim). Each returns
 * FALSE exactly when it sets @error.
 */
typedef struct {
  gboolean (*periodic_gate)(SluiceBroker *part, const gchar *name,
                            gint64 occurrence_at, gint64 *out_newest,
                            GError **error);
  gboolean (*dlq_oldest)(SluiceBroker *part, gint64 *out_count,
                         gchar **out_entry_id, GError **error);
  gboolean (*dlq_drop)(SluiceBroker *part, const gchar *entry_id,
                       gboolean *out_dropped, GError **error);
} SluiceRedisPartitionOps;

/**
 * sluice_redis__partitioned_new:
 * @parts: (array length=n) (transfer full): the brokers of the partitions,
 *   partition k at index k (taken over even when this fails)
 * @n: 2 ... SLUICE_REDIS_MAX_PARTITIONS
 * @ops: (transfer none): static
 * @layout: (transfer full): the check that the namespace is split in @n,
 *   made before the composite's first step
 * @ns: the namespace, for messages
 * @dead_letter_max: the namespace's dead-letter cap, all partitions
 *   together
 *
 * Returns: (transfer full): the broker of the namespace, or NULL and
 * @error.
 */
SluiceBroker *sluice_redis__partitioned_new(SluiceBroker **parts, guint n,
                                            const SluiceRedisPartitionOps *ops,
                                            SluiceRedisLayout *layout,
                                            const gchar *ns,
                                            guint dead_letter_max,
                                            SluiceClock *clock, GError **error);

/** Returns: TRUE when @broker was made by sluice_redis__partitioned_new(). */
gboolean sluice_redis__is_partitioned(SluiceBroker *broker);

/**
 * sluice_redis__partition_count:
 * Returns: how many partitions @broker spreads its namespace over: 1 for
 * a plain Redis broker.
 */
guint sluice_redis__partition_count(SluiceBroker *broker);

/**
 * sluice_redis__partition_at:
 * Returns: (transfer none): partition @index of a partitioned broker, a
 * plain Redis broker (for tests: its keys, its wait_poll_ms).
 */
SluiceBroker *sluice_redis__partition_at(SluiceBroker *broker, guint index);

/**
 * sluice_redis__partition_of:
 * Returns: the partition of task @id among @n: FNV-1a (32 bits) of its
 * bytes, modulo @n. Clients in other languages that split a namespace must
 * compute the same.
 */
guint sluice_redis__partition_of(const gchar *id, guint n);

/**
 * sluice_redis_layout__new:
 * @build: makes the brokers the check reads the namespace with
 * Returns: (transfer full): the check that the namespace of @options is
 * split in @n partitions (copies what it needs).
 */
SluiceRedisLayout *sluice_redis_layout__new(const SluiceRedisOptions *options,
                                            const SluiceRedisUrl *url, guint n,
                                            SluiceRedisPartBuilder build);

/**
 * sluice_redis_layout__ensure:
 * @layout: a SluiceRedisLayout (a gpointer, to serve as a SluiceRedisGate)
 *
 * Does the check once (later calls return TRUE at once): reads the number
 * the namespace recorded; when it is another one, the namespace may only
 * change to @n if it holds no task (nothing ready, scheduled, in flight or
 * dead-lettered under the recorded number), and then records @n.
 * Returns: FALSE and SLUICE_BROKER_ERROR_INVALID saying what to do, or an
 * error of Redis (UNAVAILABLE, ...), after which the next call checks
 * again.
 */
gboolean sluice_redis_layout__ensure(gpointer layout, GError **error);

/**
 * sluice_redis_layout__read:
 * @inspect: makes brokers whose connections record nothing in {ns}:meta
 * @out: (out caller-allocates): filled (sluice_redis_get_layout())
 *
 * Reads the layout version, script set and partitions the namespace of
 * @options records, and each partition's layout version.
 */
gboolean sluice_redis_layout__read(const SluiceRedisOptions *options,
                                   const SluiceRedisUrl *url,
                                   SluiceRedisPartBuilder inspect,
                                   SluiceLayout *out, GError **error);

/** sluice_redis_layout__free: NULL-safe; a GDestroyNotify. */
void sluice_redis_layout__free(gpointer layout);

G_END_DECLS

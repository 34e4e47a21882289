/* redis-partitions.h - a namespace split in partitions, and the record of
 * how a namespace is split (internal).
 *
 * A namespace of N > 1 partitions is N Redis brokers of the shared layer,
 * partition k with the hash tag {ns#k}, behind one broker of its own class
 * (redis-partitioned.c) that routes each slot: by a hash of the task id
 * for everything about one task, to the delivery's partition for
 * settlements, to every partition for fetches, reclaims, promotions and
 * stats, to partition 0 for what every worker must see at once
 * (revocations, pauses, announcements, the periodic gate). N = 1 is the
 * plain broker of redis.c, {ns}, as it always was.
 *
 * A namespace records its number of partitions in {ns}:meta, field
 * "partitions" (absent = 1), checked lazily by every client before its
 * first command (SluiceRedisLayout).
 */
#pragma once

#include <sluice/sluice-redis.h>
#include <sluice/sys/broker.h>

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

typedef struct _SluiceRedisLayout SluiceRedisLayout;

/**
 * sluice_redis__partition_new:
 * @options: checked already (namespace, mode)
 * @url: parsed already
 * @index: the partition (its tag: sluice_redis_keys__init_partition()),
 *   or -1 for the whole namespace ({ns})
 * @n: how many partitions the namespace has (1 with @index -1)
 * @layout: (nullable) (transfer full): checked before the broker's first
 *   command; NULL for a broker that is part of another
 *
 * Returns: (transfer full): a broker of the shared layer, or NULL and
 * @error.
 */
SluiceBroker *sluice_redis__partition_new(const SluiceRedisOptions *options,
                                          const SluiceRedisUrl *url,
                                          SluiceClock *clock, gint index,
                                          guint n, SluiceRedisLayout *layout,
                                          GError **error);

/**
 * sluice_redis__skip_policy_check:
 * @broker: made by sluice_redis__partition_new()
 *
 * Its connections log nothing about the server's configuration: for a
 * broker whose servers another broker of the client checks already.
 */
void sluice_redis__skip_policy_check(SluiceBroker *broker);

/**
 * sluice_redis__partitioned_new:
 * @n: 2 ... SLUICE_REDIS_MAX_PARTITIONS
 *
 * Returns: (transfer full): the broker of a namespace of @n partitions,
 * or NULL and @error.
 */
SluiceBroker *sluice_redis__partitioned_new(const SluiceRedisOptions *options,
                                            const SluiceRedisUrl *url,
                                            SluiceClock *clock, guint n,
                                            GError **error);

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
 * broker of the shared layer (for tests: its keys, its wait_poll_ms).
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
 * Returns: (transfer full): the check that the namespace of @options is
 * split in @n partitions (copies what it needs).
 */
SluiceRedisLayout *sluice_redis_layout__new(const SluiceRedisOptions *options,
                                            const SluiceRedisUrl *url, guint n);

/**
 * sluice_redis_layout__ensure:
 * Does the check once (later calls return TRUE at once): reads the number
 * the namespace recorded; when it is another one, the namespace may only
 * change to @n if it holds no task (nothing ready, scheduled, in flight or
 * dead-lettered under the recorded number), and then records @n.
 * Returns: FALSE and SLUICE_BROKER_ERROR_INVALID saying what to do, or an
 * error of Redis (UNAVAILABLE, ...), after which the next call checks
 * again.
 */
gboolean sluice_redis_layout__ensure(SluiceRedisLayout *layout, GError **error);

/** sluice_redis_layout__free: NULL-safe. */
void sluice_redis_layout__free(SluiceRedisLayout *layout);

G_END_DECLS

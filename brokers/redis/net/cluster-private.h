/* redis-cluster.h - Redis Cluster: the slot map and the routing of every
 * command to the node that serves its slot (internal).
 *
 * A SluiceRedisCluster is the router (redis-conn.h) of the pool of a broker
 * made from a redis+cluster:// URL. It keeps one pool per node (so one
 * connection per node per thread, as with one server), reads the slot map
 * with CLUSTER SHARDS (CLUSTER SLOTS before Redis 7.0), and follows the
 * cluster's redirections: MOVED (the slot has a new owner: the map is read
 * again and the command sent there), ASK (the slot is migrating and the
 * key is already on the target: ASKING and the command, once, there),
 * TRYAGAIN and CLUSTERDOWN (sent again after a capped backoff, within the
 * command timeout). redis-cluster.c explains why a script is never sent
 * after an ASK.
 */
#pragma once

#include "brokers/redis/net/node-private.h"
#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

typedef struct _SluiceRedisCluster SluiceRedisCluster;

/**
 * SluiceRedisClusterStats:
 * @moved: MOVED replies followed
 * @ask: ASK replies followed (ASKING, then the command on the target)
 * @ask_waits: ASK replies to a script, waited out instead of followed
 * @tryagain: TRYAGAIN replies waited out
 * @clusterdown: CLUSTERDOWN replies waited out
 * @refreshes: slot maps read
 *
 * What the router did since the broker was made (for tests and
 * diagnostics).
 */
typedef struct {
  guint64 moved;
  guint64 ask;
  guint64 ask_waits;
  guint64 tryagain;
  guint64 clusterdown;
  guint64 refreshes;
} SluiceRedisClusterStats;

/* The router functions, for sluice_redis_pool__set_router(). */
extern const SluiceRedisRouter sluice_redis_cluster__router;

/**
 * sluice_redis_cluster__new:
 * @url: a redis+cluster:// URL (copied); its nodes are where the first
 *   slot map is read
 * @ns: (nullable): the namespace, for permission messages
 *
 * Makes no connection. Returns: (transfer full): give it to
 * sluice_redis_pool__set_router(), which frees it with the pool.
 */
SluiceRedisCluster *sluice_redis_cluster__new(const SluiceRedisUrl *url,
                                              gint64 connect_timeout_ms,
                                              gint64 command_timeout_ms,
                                              gint64 max_backoff_ms,
                                              const gchar *ns);

/** sluice_redis_cluster__get_stats: fills @out with the counts so far. */
void sluice_redis_cluster__get_stats(SluiceRedisCluster *cluster,
                                     SluiceRedisClusterStats *out);

G_END_DECLS

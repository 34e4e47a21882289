/* cluster-private.h - the Cluster router: a redis+cluster:// pool
 * (cluster.c; internal to brokers/redis/net/).
 */
#pragma once

#include "brokers/redis/net/node-private.h"
#include "brokers/redis/net/router-private.h"

G_BEGIN_DECLS

/* The router functions, for a pool (pool.c). */
extern const SluiceRedisRouter sluice_redis_cluster__router;

/**
 * sluice_redis_cluster__new:
 * @url: a redis+cluster:// URL (copied); its nodes are where the first
 *   slot map is read
 * @settings: (transfer none): the pool's; must outlive the router
 *
 * Makes no connection. Returns: (transfer full): the router's data, freed
 * by its free slot.
 */
gpointer sluice_redis_cluster__new(const SluiceRedisUrl *url,
                                   const SluiceRedisNetSettings *settings);

/** sluice_redis_cluster__get_stats: fills @out with what the router of
 * @data did so far. */
void sluice_redis_cluster__get_stats(gpointer data,
                                     SluiceRedisClusterStats *out);

G_END_DECLS

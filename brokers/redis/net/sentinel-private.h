/* sentinel-private.h - the Sentinel router: a redis+sentinel:// pool
 * (sentinel.c; internal to brokers/redis/net/).
 */
#pragma once

#include "brokers/redis/net/node-private.h"
#include "brokers/redis/net/router-private.h"

G_BEGIN_DECLS

/* The router functions, for a pool (pool.c). */
extern const SluiceRedisRouter sluice_redis_sentinel__router;

/**
 * sluice_redis_sentinel__new:
 * @url: a redis+sentinel:// URL (copied)
 * @settings: (transfer none): the pool's; must outlive the router
 *
 * Makes no connection. Returns: (transfer full): the router's data, freed
 * by its free slot.
 */
gpointer sluice_redis_sentinel__new(const SluiceRedisUrl *url,
                                    const SluiceRedisNetSettings *settings);

G_END_DECLS

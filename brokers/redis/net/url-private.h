/* url-private.h - what the routers need of URLs beyond redis-net.h
 * (url.c; internal to brokers/redis/net/).
 */
#pragma once

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

/**
 * sluice_redis_url__for_node:
 * @cluster: a redis+cluster:// URL
 * @to: (out caller-allocates): filled with a redis:// URL of @host:@port
 *   with @cluster's credentials; clear it with sluice_redis_url__clear()
 */
void sluice_redis_url__for_node(const SluiceRedisUrl *cluster,
                                const gchar *host, gint port,
                                SluiceRedisUrl *to);

G_END_DECLS

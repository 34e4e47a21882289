/* router-private.h - what a pool does instead of talking to one server
 * (internal to brokers/redis/net/).
 *
 * A pool (pool.c) hands every call to its router: the direct path (one
 * node, pool.c), Redis Sentinel (sentinel.c: the master's node, found by
 * asking the sentinels) or Redis Cluster (cluster.c: a node per server and
 * the slot map). Each slot stands for the pool function of the same name
 * (redis-net.h) and @data is the router's own state. Routers reach
 * servers through nodes (node.c) and never through the pool, so the pool
 * may pick them and the routers never call it back.
 *
 * To add a router (say, for a proxy that speaks another redirection):
 * write net/<name>.c with a `const SluiceRedisRouter` and a constructor,
 * declare them in a <name>-private.h, and pick it in pick_router() of
 * pool.c from what the URL says.
 */
#pragma once

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

/**
 * SluiceRedisRouter:
 * @acquire: sluice_redis_pool__acquire_slot(); every slot is required
 * @release: sluice_redis_pool__release()
 * @exchange: sluice_redis_conn__exchange()
 * @wakeup: sluice_redis_pool__wakeup()
 * @get_master: sluice_redis_pool__get_master()
 * @close: sluice_redis_pool__close()
 * @free: frees @data (the pool was closed first)
 */
typedef struct {
  SluiceRedisConn *(*acquire)(gpointer data, guint slot, GError **error);
  void (*release)(gpointer data, SluiceRedisConn *conn);
  gboolean (*exchange)(gpointer data, SluiceRedisConn *conn, guint n_replies,
                       redisReply **replies, gint64 block_ms, GError **error);
  void (*wakeup)(gpointer data);
  gchar *(*get_master)(gpointer data);
  void (*close)(gpointer data);
  void (*free)(gpointer data);
} SluiceRedisRouter;

G_END_DECLS

/* pool.c - the pool of connections of one owner (a broker), made from a
 * URL (see redis-net.h for the API).
 *
 * A pool checks connections out to threads and back, exchanges commands
 * for replies on them, and wakes blocked ones; what that means for the
 * servers behind it is its router's (router-private.h), which the pool
 * picks from the URL itself:
 *
 *   redis://, unix://   the direct path: one node (node.c), below
 *   redis+sentinel://   sentinel.c: the master's node, found by asking the
 *                       sentinels, and followed through failovers
 *   redis+cluster://    cluster.c: a node per server, the slot map, and
 *                       MOVED, ASK, TRYAGAIN and CLUSTERDOWN followed
 *
 * so an owner writes the same code for all three, and sees only what the
 * URL said differently through the connections it gets (a failed-over
 * connection, sluice_redis_conn__failed_over()).
 *
 * What every node of a pool shares (timeouts, the largest reply, the
 * namespace that permission messages name, the owner's setup hook) is
 * the pool's SluiceRedisNetSettings, set before the first connection and
 * read by every node as it makes one, so a hook installed after the pool
 * was made reaches the nodes a cluster learns of later too.
 *
 * The pool knows nothing of what its owner keeps in Redis: an owner that
 * must check something on every new connection (the broker: the
 * namespace's mode, the server's eviction policy) installs a setup hook.
 *
 * To add a router: see router-private.h; here it is one branch of
 * pick_router(). A new connection type (TLS) needs nothing here: every
 * node connects with the type its URL names (conn.c).
 */
#include "config.h"

#include "brokers/redis/net/cluster-private.h"
#include "brokers/redis/net/errors-private.h"
#include "brokers/redis/net/node-private.h"
#include "brokers/redis/net/sentinel-private.h"

struct _SluiceRedisPool {
  SluiceRedisUrl url;
  SluiceRedisNetSettings settings;
  const SluiceRedisRouter *router;
  gpointer router_data;
};

/* ---- The direct path: one node ------------------------------------------ */

static SluiceRedisConn *
direct_acquire(gpointer data, guint slot, GError **error)
{
  return sluice_redis_node__acquire(data, error);
}

static void
direct_release(gpointer data, SluiceRedisConn *conn)
{
  sluice_redis_node__release(data, conn);
}

static gboolean
direct_exchange(gpointer data, SluiceRedisConn *conn, guint n_replies,
                redisReply **replies, gint64 block_ms, GError **error)
{
  return sluice_redis_node__exchange(data, conn, n_replies, replies, block_ms,
                                     error);
}

static void
direct_wakeup(gpointer data)
{
  sluice_redis_node__wakeup(data);
}

static gchar *
direct_get_master(gpointer data)
{
  const SluiceRedisUrl *url = sluice_redis_node__get_url(data);

  return url->is_unix ? g_strdup(url->path)
                      : g_strdup_printf("%s:%d", url->host, url->port);
}

static void
direct_close(gpointer data)
{
  sluice_redis_node__close(data);
}

static void
direct_free(gpointer data)
{
  sluice_redis_node__free(data);
}

static const SluiceRedisRouter direct_router = {
    .acquire = direct_acquire,
    .release = direct_release,
    .exchange = direct_exchange,
    .wakeup = direct_wakeup,
    .get_master = direct_get_master,
    .close = direct_close,
    .free = direct_free,
};

/* ---- The pool ------------------------------------------------------------ */

/* The router for what @pool's URL says. A new router is one line here. */
static void
pick_router(SluiceRedisPool *pool)
{
  if (pool->url.is_cluster) {
    pool->router = &sluice_redis_cluster__router;
    pool->router_data = sluice_redis_cluster__new(&pool->url, &pool->settings);
  } else if (pool->url.is_sentinel) {
    pool->router = &sluice_redis_sentinel__router;
    pool->router_data = sluice_redis_sentinel__new(&pool->url, &pool->settings);
  } else {
    pool->router = &direct_router;
    pool->router_data = sluice_redis_node__new(&pool->url, &pool->settings);
  }
}

SluiceRedisPool *
sluice_redis_pool__new(const SluiceRedisUrl *url,
                       const SluiceRedisPoolOptions *options)
{
  SluiceRedisPool *pool = g_new0(SluiceRedisPool, 1);

  g_return_val_if_fail(url != NULL && options != NULL, NULL);
  sluice_redis_url__copy(url, &pool->url);
  pool->settings.connect_timeout_ms = MAX(options->connect_timeout_ms, 1);
  pool->settings.command_timeout_ms = MAX(options->command_timeout_ms, 1);
  pool->settings.max_backoff_ms = MAX(options->max_backoff_ms, 1);
  pool->settings.max_reply_bytes = options->max_reply_bytes > 0
                                       ? options->max_reply_bytes
                                       : SLUICE_REDIS_MAX_REPLY_BYTES;
  pick_router(pool);
  return pool;
}

void
sluice_redis_pool__set_setup(SluiceRedisPool *pool, SluiceRedisSetupFunc setup,
                             gpointer user_data)
{
  pool->settings.setup = setup;
  pool->settings.setup_data = user_data;
}

void
sluice_redis_pool__set_namespace(SluiceRedisPool *pool, const gchar *ns)
{
  g_free(pool->settings.grant_ns);
  pool->settings.grant_ns = g_strdup(ns);
}

void
sluice_redis_pool__close(SluiceRedisPool *pool)
{
  if (pool != NULL)
    pool->router->close(pool->router_data);
}

void
sluice_redis_pool__free(SluiceRedisPool *pool)
{
  if (pool == NULL)
    return;
  sluice_redis_pool__close(pool);
  pool->router->free(pool->router_data);
  g_free(pool->settings.grant_ns);
  sluice_redis_url__clear(&pool->url);
  g_free(pool);
}

const gchar *
sluice_redis_pool__get_display_url(SluiceRedisPool *pool)
{
  return pool->url.display;
}

gint64
sluice_redis_pool__get_command_timeout_ms(SluiceRedisPool *pool)
{
  return pool->settings.command_timeout_ms;
}

gchar *
sluice_redis_pool__get_master(SluiceRedisPool *pool)
{
  return pool->router->get_master(pool->router_data);
}

gboolean
sluice_redis_pool__get_cluster_stats(SluiceRedisPool *pool,
                                     SluiceRedisClusterStats *out)
{
  if (pool->router != &sluice_redis_cluster__router)
    return FALSE;
  sluice_redis_cluster__get_stats(pool->router_data, out);
  return TRUE;
}

SluiceRedisConn *
sluice_redis_pool__acquire_slot(SluiceRedisPool *pool, guint slot,
                                GError **error)
{
  return pool->router->acquire(pool->router_data, slot, error);
}

void
sluice_redis_pool__release(SluiceRedisPool *pool, SluiceRedisConn *conn)
{
  if (conn != NULL)
    pool->router->release(pool->router_data, conn);
}

gboolean
sluice_redis_conn__exchange(SluiceRedisPool *pool, SluiceRedisConn *conn,
                            guint n_replies, redisReply **replies,
                            gint64 block_ms, GError **error)
{
  return pool->router->exchange(pool->router_data, conn, n_replies, replies,
                                block_ms, error);
}

gboolean
sluice_redis_conn__read_within(SluiceRedisPool *pool, SluiceRedisConn *conn,
                               gint64 timeout_ms, redisReply **out_reply,
                               GError **error)
{
  /* A pub/sub read is the connection's node's business, whatever the
   * router: the node it was checked out of keeps its outage. */
  return sluice_redis_node__read_within(conn->node, conn, timeout_ms, out_reply,
                                        error);
}

void
sluice_redis_pool__wakeup(SluiceRedisPool *pool)
{
  pool->router->wakeup(pool->router_data);
}

gboolean
sluice_redis_reply__check(SluiceRedisPool *pool, const redisReply *reply,
                          const gchar *what, GError **error)
{
  return sluice_redis_error__check(pool->url.display, pool->settings.grant_ns,
                                   reply, what, NULL, error);
}

gboolean
sluice_redis_reply__check_script(SluiceRedisPool *pool, const redisReply *reply,
                                 const gchar *what,
                                 const SluiceRedisScriptInfo *script,
                                 GError **error)
{
  return sluice_redis_error__check(pool->url.display, pool->settings.grant_ns,
                                   reply, what, script, error);
}

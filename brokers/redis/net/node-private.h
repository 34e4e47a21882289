/* node-private.h - the connections to one Redis server (node.c; internal
 * to brokers/redis/net/).
 *
 * A SluiceRedisNode is what a pool keeps per server: its idle
 * connections, its outage, its blocked fetches for CLIENT UNBLOCK, and
 * how to make a connection to it. The direct path of a pool is one node;
 * the Sentinel router keeps one for the master, whose address it finds;
 * the Cluster router one per node of the cluster.
 */
#pragma once

#include "brokers/redis/net/conn-private.h"

G_BEGIN_DECLS

/**
 * SluiceRedisNetSettings:
 * @connect_timeout_ms: > 0: the longest a connection takes to be made,
 *   handshake and setup hook included
 * @command_timeout_ms: > 0: the longest wait for a reply on top of any
 *   block time, and for a server that does not read
 * @max_backoff_ms: > 0: the longest pause between reconnection attempts
 * @max_reply_bytes: > 0: the largest reply a connection takes
 * @grant_ns: (nullable): the namespace permission messages name
 * @setup: (nullable): the owner's hook on every new connection
 * @setup_data: for @setup
 *
 * What every node of one pool shares, owned by the pool (pool.c) and
 * borrowed by its routers and nodes, which it outlives. Set before the
 * first connection; read without a lock after.
 */
typedef struct {
  gint64 connect_timeout_ms;
  gint64 command_timeout_ms;
  gint64 max_backoff_ms;
  gsize max_reply_bytes;
  gchar *grant_ns;
  SluiceRedisSetupFunc setup;
  gpointer setup_data;
} SluiceRedisNetSettings;

typedef struct _SluiceRedisNode SluiceRedisNode;

/**
 * SluiceRedisNodeDialer:
 * @open: makes a connection for @node within @timeout_ms instead of one to
 *   the node's own address (with sluice_redis_node__dial() and
 *   sluice_redis_node__setup()). Returns: (transfer full) (nullable): the
 *   connection, or NULL and @error; then *@outage (transfer full) says why
 *   when the server could not be reached (the node logs it and backs
 *   off), and stays NULL when a server answered no.
 * @lost: (nullable): the server was lost: a connection broke, or an
 *   attempt to make one failed
 * @ready: (nullable): whether a new connection can be made at once, with
 *   no slow lookup first (a wakeup makes one only then); NULL: always
 *
 * How a router tells a node where its server is, when that changes (the
 * Sentinel router's master). A node without one connects to its URL.
 */
typedef struct {
  SluiceRedisConn *(*open)(gpointer data, SluiceRedisNode *node,
                           gint64 timeout_ms, gchar **outage, GError **error);
  void (*lost)(gpointer data);
  gboolean (*ready)(gpointer data);
} SluiceRedisNodeDialer;

/**
 * sluice_redis_node__new:
 * @url: (transfer none): copied: the server (redis:// or unix://), or for
 *   a node with a dialer the credentials, database and shown name alone
 * @settings: (transfer none): must outlive the node
 *
 * Makes no connection. Returns: (transfer full).
 */
SluiceRedisNode *sluice_redis_node__new(const SluiceRedisUrl *url,
                                        const SluiceRedisNetSettings *settings);

/** sluice_redis_node__set_dialer: @dialer (static) and @data (borrowed,
 * must outlive the node) replace the node's own way to connect. Call
 * before the first connection. */
void sluice_redis_node__set_dialer(SluiceRedisNode *node,
                                   const SluiceRedisNodeDialer *dialer,
                                   gpointer data);

/** sluice_redis_node__get_url: Returns: (transfer none). */
const SluiceRedisUrl *sluice_redis_node__get_url(SluiceRedisNode *node);

/**
 * sluice_redis_node__acquire:
 * Checks out an idle connection (one whose peer hung up, or of an older
 * generation, is dropped on the way) or makes a new one. During an outage
 * at most one thread tries per backoff period; the others fail at once.
 * Returns: (transfer full): a connection for the calling thread alone, or
 * NULL and SLUICE_BROKER_ERROR_UNAVAILABLE, _AUTH, _INVALID, _CLOSED or
 * the setup hook's error.
 */
SluiceRedisConn *sluice_redis_node__acquire(SluiceRedisNode *node,
                                            GError **error);

/** sluice_redis_node__release: @conn (transfer full, nullable) is kept if
 * healthy, freed if broken or if the node is closed. */
void sluice_redis_node__release(SluiceRedisNode *node, SluiceRedisConn *conn);

/**
 * sluice_redis_node__exchange:
 * sluice_redis_conn__exchange() on a connection of @node: its outage
 * bookkeeping and, while @block_ms > 0, its CLIENT UNBLOCK registration.
 */
gboolean sluice_redis_node__exchange(SluiceRedisNode *node,
                                     SluiceRedisConn *conn, guint n_replies,
                                     redisReply **replies, gint64 block_ms,
                                     GError **error);

/** sluice_redis_node__read_within: sluice_redis_conn__read_within() on a
 * connection of @node. */
gboolean sluice_redis_node__read_within(SluiceRedisNode *node,
                                        SluiceRedisConn *conn,
                                        gint64 timeout_ms,
                                        redisReply **out_reply, GError **error);

/** sluice_redis_node__wakeup: CLIENT UNBLOCK for every connection of
 * @node blocked now, from another one; never waits for a reconnection. */
void sluice_redis_node__wakeup(SluiceRedisNode *node);

/** sluice_redis_node__close: frees the idle connections and refuses new
 * check-outs (SLUICE_BROKER_ERROR_CLOSED). */
void sluice_redis_node__close(SluiceRedisNode *node);

/** sluice_redis_node__free: closes and frees @node. NULL-safe. */
void sluice_redis_node__free(SluiceRedisNode *node);

/* ---- For dialers ---------------------------------------------------------- */

/**
 * sluice_redis_node__dial:
 * @host: (nullable): where to connect (with @port); NULL: the node's URL
 * @probe: (nullable): see sluice_redis_handshake__run()
 * @out_probe: (out) (optional): its reply
 * @reason: (out) (transfer full): on failure, why the server could not be
 *   talked to
 *
 * A connection of @node: made by the URL's connection type within
 * @timeout_ms, and its handshake (AUTH, SELECT, CLIENT ID, @probe); of the
 * node's current generation. The owner's hook is not run yet.
 * Returns: (transfer full) (nullable): NULL with *@reason (no answer) or
 * @error (the server answered no).
 */
SluiceRedisConn *sluice_redis_node__dial(SluiceRedisNode *node,
                                         const gchar *host, gint port,
                                         gint64 timeout_ms, const gchar *probe,
                                         redisReply **out_probe, gchar **reason,
                                         GError **error);

/**
 * sluice_redis_node__setup:
 * Runs the owner's hook on @conn (nothing when there is none).
 * Returns: TRUE, or FALSE with *@reason when @conn broke on the way (an
 * outage), with @error when the hook refused it.
 */
gboolean sluice_redis_node__setup(SluiceRedisNode *node, SluiceRedisConn *conn,
                                  gchar **reason, GError **error);

/** sluice_redis_node__get_generation: Returns: the generation connections
 * are made in now. */
guint sluice_redis_node__get_generation(SluiceRedisNode *node);

/**
 * sluice_redis_node__retire:
 * Starts a new generation: the idle connections are freed, and those
 * checked out now are not reused once released (they are of the old one).
 * Returns: the new generation.
 */
guint sluice_redis_node__retire(SluiceRedisNode *node);

/** sluice_redis_node__retire_if: sluice_redis_node__retire() when
 * @generation is the current one; Returns: TRUE when it retired. */
gboolean sluice_redis_node__retire_if(SluiceRedisNode *node, guint generation);

G_END_DECLS

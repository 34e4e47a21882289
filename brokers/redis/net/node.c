/* node.c - the connections to one Redis server, shared by the threads of
 * one pool (see node-private.h).
 *
 * Design choices, in the order an operation meets them:
 *
 * CONNECT. A connection is made by the URL's connection type within the
 * connect timeout (conn.c), then shakes hands in one pipelined round trip
 * (handshake.c: AUTH, SELECT, CLIENT ID), then runs the owner's setup
 * hook (sluice_redis_pool__set_setup()), which may make round trips of
 * its own and may refuse the connection. A router that finds the server
 * itself (Sentinel) puts its own dialer in place of the node's address and
 * uses the same steps (sluice_redis_node__dial(), __setup()).
 *
 * POOL. Idle connections sit in a GQueue under a mutex; the mutex is held
 * only to push or pop, never across a round trip. A connection checked out
 * is used by one thread only. Before an idle connection is handed out, a
 * zero-timeout poll() checks that the server did not close it meanwhile
 * (CLIENT KILL, a server restart, an idle timeout): an idle RESP2
 * connection has nothing to read, so anything readable means it is gone,
 * and it is dropped without costing the caller an error. A connection that
 * failed (I/O error, timeout, protocol error) is marked broken and freed
 * on release, never reused. A node's generation, bumped by
 * sluice_redis_node__retire() (the Sentinel router, when the master
 * changed), makes every connection made before it one that is dropped
 * rather than reused.
 *
 * OUTAGES. outage.c: one line when the server is lost and one when it is
 * back, and capped backoff between attempts; during the backoff a check-out
 * that finds no idle connection fails at once with
 * SLUICE_BROKER_ERROR_UNAVAILABLE.
 *
 * WAKEUP. A connection in a blocking command (BLMPOP, XREADGROUP BLOCK)
 * registers its CLIENT ID for the duration of the exchange; wakeup sends
 * CLIENT UNBLOCK for each registered id from another connection of the
 * node. A fetch whose command is still on its way to the server when
 * wakeup runs is not unblocked; the worker bounds every fetch anyway.
 * Wakeup must not block: it uses an idle connection, and only when there
 * is none makes one with a short connect timeout (WAKEUP_CONNECT_MS),
 * never during an outage or when the dialer would have to look the server
 * up first.
 *
 * To extend: what every connection says first is handshake.c; new error
 * codes are errors.c.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/net/handshake-private.h"
#include "brokers/redis/net/node-private.h"
#include "brokers/redis/net/outage-private.h"

/* The longest a wakeup may spend making a connection. */
#define WAKEUP_CONNECT_MS 250

struct _SluiceRedisNode {
  SluiceRedisUrl url;
  const SluiceRedisNetSettings *settings;
  const SluiceRedisNodeDialer *dialer;
  gpointer dialer_data;
  SluiceRedisOutage outage;

  GMutex lock; /* guards everything below */
  GQueue idle; /* SluiceRedisConn*, most recently used at the head */
  gboolean closed;
  guint generation;
  GArray *blocked_ids; /* gint64 CLIENT IDs blocked now */
};

SluiceRedisNode *
sluice_redis_node__new(const SluiceRedisUrl *url,
                       const SluiceRedisNetSettings *settings)
{
  SluiceRedisNode *node = g_new0(SluiceRedisNode, 1);

  sluice_redis_url__copy(url, &node->url);
  node->settings = settings;
  sluice_redis_outage__init(&node->outage, node->url.display,
                            settings->max_backoff_ms);
  g_mutex_init(&node->lock);
  g_queue_init(&node->idle);
  node->blocked_ids = g_array_new(FALSE, FALSE, sizeof(gint64));
  return node;
}

void
sluice_redis_node__set_dialer(SluiceRedisNode *node,
                              const SluiceRedisNodeDialer *dialer,
                              gpointer data)
{
  node->dialer = dialer;
  node->dialer_data = data;
}

const SluiceRedisUrl *
sluice_redis_node__get_url(SluiceRedisNode *node)
{
  return &node->url;
}

void
sluice_redis_node__close(SluiceRedisNode *node)
{
  GQueue idle = G_QUEUE_INIT;

  if (node == NULL)
    return;
  g_mutex_lock(&node->lock);
  node->closed = TRUE;
  idle = node->idle;
  g_queue_init(&node->idle);
  g_mutex_unlock(&node->lock);
  g_queue_clear_full(&idle, (GDestroyNotify)sluice_redis_conn__free);
}

void
sluice_redis_node__free(SluiceRedisNode *node)
{
  if (node == NULL)
    return;
  sluice_redis_node__close(node);
  g_array_unref(node->blocked_ids);
  g_mutex_clear(&node->lock);
  sluice_redis_outage__clear(&node->outage);
  sluice_redis_url__clear(&node->url);
  g_free(node);
}

/* ---- Generations --------------------------------------------------------- */

guint
sluice_redis_node__get_generation(SluiceRedisNode *node)
{
  guint generation;

  g_mutex_lock(&node->lock);
  generation = node->generation;
  g_mutex_unlock(&node->lock);
  return generation;
}

/* Called with the lock held; the caller frees @idle after unlocking. */
static guint
retire_locked(SluiceRedisNode *node, GQueue *idle)
{
  *idle = node->idle;
  g_queue_init(&node->idle);
  return ++node->generation;
}

guint
sluice_redis_node__retire(SluiceRedisNode *node)
{
  GQueue idle;
  guint generation;

  g_mutex_lock(&node->lock);
  generation = retire_locked(node, &idle);
  g_mutex_unlock(&node->lock);
  g_queue_clear_full(&idle, (GDestroyNotify)sluice_redis_conn__free);
  return generation;
}

gboolean
sluice_redis_node__retire_if(SluiceRedisNode *node, guint generation)
{
  GQueue idle = G_QUEUE_INIT;
  gboolean retired = FALSE;

  g_mutex_lock(&node->lock);
  if (generation == node->generation) {
    retire_locked(node, &idle);
    retired = TRUE;
  }
  g_mutex_unlock(&node->lock);
  g_queue_clear_full(&idle, (GDestroyNotify)sluice_redis_conn__free);
  return retired;
}

/* ---- Making connections -------------------------------------------------- */

/* The server could not be reached (@reason): an outage, and a router that
 * looks the server up forgets it. */
static void
note_lost(SluiceRedisNode *node, const gchar *reason, gboolean attempt)
{
  if (attempt)
    sluice_redis_outage__failed(&node->outage, reason);
  else
    sluice_redis_outage__lost(&node->outage, reason);
  if (node->dialer != NULL && node->dialer->lost != NULL)
    node->dialer->lost(node->dialer_data);
}

SluiceRedisConn *
sluice_redis_node__dial(SluiceRedisNode *node, const gchar *host, gint port,
                        gint64 timeout_ms, const gchar *probe,
                        redisReply **out_probe, gchar **reason, GError **error)
{
  const SluiceRedisUrl *url = &node->url;
  SluiceRedisEndpoint endpoint = {0};
  const SluiceRedisConnType *type;
  SluiceRedisConn *conn;

  /* What a type needs beyond the address is the URL's: for "tls" its
   * settings and their one context, the same for every server of the URL
   * (a sentinel's master, every node of a cluster). */
  endpoint.settings = url->tls;
  if (host != NULL) {
    endpoint.host = host;
    endpoint.port = port;
  } else {
    endpoint.host = url->host;
    endpoint.port = url->port;
    endpoint.path = url->path;
  }
  type = sluice_redis_conn_type__find(url->conn_type);
  g_return_val_if_fail(type != NULL, NULL);
  conn = sluice_redis_conn__open(type, &endpoint, timeout_ms, reason);
  if (conn == NULL)
    return NULL;
  /* A write to a stalled server waits at most the command timeout; reads
   * are bounded by each call's deadline. */
  conn->send_timeout_ms = node->settings->command_timeout_ms;
  conn->setup_timeout_ms = timeout_ms;
  conn->max_reply_bytes = node->settings->max_reply_bytes;
  conn->node = node;
  conn->server = url->display;
  conn->grant_ns = node->settings->grant_ns;
  conn->generation = sluice_redis_node__get_generation(node);
  if (!sluice_redis_handshake__run(conn, url, node->settings->grant_ns, probe,
                                   out_probe, reason, error)) {
    if (*reason != NULL)
      sluice_redis_conn__diagnose(conn, &endpoint, timeout_ms, reason);
    sluice_redis_conn__free(conn);
    return NULL;
  }
  return conn;
}

gboolean
sluice_redis_node__setup(SluiceRedisNode *node, SluiceRedisConn *conn,
                         gchar **reason, GError **error)
{
  const SluiceRedisNetSettings *settings = node->settings;
  GError *local = NULL;

  if (settings->setup == NULL ||
      settings->setup(conn, settings->setup_data, &local))
    return TRUE;
  /* The hook's round trip broke the connection: not made, as any failed
   * attempt; any other failure is the hook's answer. */
  if (conn->broken) {
    *reason = g_strdup(local->message);
    g_error_free(local);
  } else {
    g_propagate_error(error, local);
  }
  return FALSE;
}

/* The node's own way: its URL's address. */
static SluiceRedisConn *
open_direct(SluiceRedisNode *node, gint64 timeout_ms, gchar **outage,
            GError **error)
{
  g_autofree gchar *reason = NULL;
  SluiceRedisConn *conn;

  conn = sluice_redis_node__dial(node, NULL, 0, timeout_ms, NULL, NULL, &reason,
                                 error);
  if (conn != NULL && !sluice_redis_node__setup(node, conn, &reason, error))
    g_clear_pointer(&conn, sluice_redis_conn__free);
  if (conn != NULL || reason == NULL)
    return conn; /* made, or the server answered no: not an outage */
  /* A TLS refusal says what to do itself (conn-type-private.h), and so
   * does a port of the other kind. */
  if (g_str_has_prefix(reason, "TLS") || strstr(reason, "use redis") != NULL)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "cannot connect to Redis at %s: %s", node->url.display, reason);
  else
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "cannot connect to Redis at %s: %s; check that redis-server "
                "is running there and that the URL is right",
                node->url.display, reason);
  *outage = g_steal_pointer(&reason);
  return NULL;
}

/* Makes a new connection within @timeout_ms; no lock held. */
static SluiceRedisConn *
node_open(SluiceRedisNode *node, gint64 timeout_ms, GError **error)
{
  g_autofree gchar *outage = NULL;
  SluiceRedisConn *conn;

  if (node->dialer != NULL)
    conn =
        node->dialer->open(node->dialer_data, node, timeout_ms, &outage, error);
  else
    conn = open_direct(node, timeout_ms, &outage, error);
  if (conn != NULL)
    sluice_redis_outage__ended(&node->outage);
  else if (outage != NULL)
    note_lost(node, outage, TRUE);
  return conn;
}

/* ---- Checking out and in ------------------------------------------------- */

SluiceRedisConn *
sluice_redis_node__acquire(SluiceRedisNode *node, GError **error)
{
  gint64 wait_ms = 0;

  for (;;) {
    SluiceRedisConn *conn;
    gboolean current;

    g_mutex_lock(&node->lock);
    if (node->closed) {
      g_mutex_unlock(&node->lock);
      g_set_error_literal(error, SLUICE_BROKER_ERROR,
                          SLUICE_BROKER_ERROR_CLOSED,
                          "the Redis broker was closed");
      return NULL;
    }
    conn = g_queue_pop_head(&node->idle);
    current = conn != NULL && conn->generation == node->generation;
    g_mutex_unlock(&node->lock);
    if (conn == NULL)
      break;
    if (current && sluice_redis_conn__alive(conn))
      return conn;
    /* Made for a master that is one no more, or the server hung up on it
     * while it was idle. */
    sluice_redis_conn__free(conn);
  }

  if (!sluice_redis_outage__may_try(&node->outage, &wait_ms)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "Redis at %s is unreachable; the next reconnection attempt "
                "is in %" G_GINT64_FORMAT " ms (check that redis-server is "
                "running there and that the URL is right)",
                node->url.display, wait_ms);
    return NULL;
  }
  return node_open(node, node->settings->connect_timeout_ms, error);
}

void
sluice_redis_node__release(SluiceRedisNode *node, SluiceRedisConn *conn)
{
  if (conn == NULL)
    return;
  if (!conn->broken) {
    g_mutex_lock(&node->lock);
    if (!node->closed && conn->generation == node->generation) {
      g_queue_push_head(&node->idle, conn);
      conn = NULL;
    }
    g_mutex_unlock(&node->lock);
  }
  sluice_redis_conn__free(conn);
}

/* ---- Exchanges ----------------------------------------------------------- */

static void
register_blocked(SluiceRedisNode *node, gint64 id)
{
  g_mutex_lock(&node->lock);
  g_array_append_val(node->blocked_ids, id);
  g_mutex_unlock(&node->lock);
}

static void
unregister_blocked(SluiceRedisNode *node, gint64 id)
{
  g_mutex_lock(&node->lock);
  for (guint i = 0; i < node->blocked_ids->len; i++) {
    if (g_array_index(node->blocked_ids, gint64, i) == id) {
      g_array_remove_index_fast(node->blocked_ids, i);
      break;
    }
  }
  g_mutex_unlock(&node->lock);
}

gboolean
sluice_redis_node__exchange(SluiceRedisNode *node, SluiceRedisConn *conn,
                            guint n_replies, redisReply **replies,
                            gint64 block_ms, GError **error)
{
  g_autofree gchar *reason = NULL;
  gboolean ok;

  block_ms = MAX(block_ms, 0);
  if (block_ms > 0)
    register_blocked(node, conn->client_id);
  ok = sluice_redis_conn__transact(
      conn, n_replies, replies, node->settings->command_timeout_ms + block_ms,
      &reason);
  if (block_ms > 0)
    unregister_blocked(node, conn->client_id);
  if (!ok) {
    note_lost(node, reason, FALSE);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "lost the connection to Redis at %s (%s); the operation may "
                "or may not have been carried out",
                node->url.display, reason);
  }
  return ok;
}

gboolean
sluice_redis_node__read_within(SluiceRedisNode *node, SluiceRedisConn *conn,
                               gint64 timeout_ms, redisReply **out_reply,
                               GError **error)
{
  g_autofree gchar *reason = NULL;

  if (sluice_redis_conn__read(
          conn, g_get_monotonic_time() + MAX(timeout_ms, 0) * 1000, out_reply,
          &reason) != SLUICE_REDIS_READ_FAILED)
    return TRUE;
  conn->broken = TRUE;
  note_lost(node, reason, FALSE);
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
              "lost the connection to Redis at %s (%s)", node->url.display,
              reason);
  return FALSE;
}

void
sluice_redis_node__wakeup(SluiceRedisNode *node)
{
  g_autoptr(GArray) ids = NULL;
  SluiceRedisConn *conn;
  redisReply **replies;
  gchar text[32];
  gboolean may_connect;

  g_mutex_lock(&node->lock);
  if (node->closed || node->blocked_ids->len == 0) {
    g_mutex_unlock(&node->lock);
    return;
  }
  ids = g_array_copy(node->blocked_ids);
  conn = g_queue_pop_head(&node->idle);
  if (conn != NULL && conn->generation != node->generation)
    g_clear_pointer(&conn, sluice_redis_conn__free);
  g_mutex_unlock(&node->lock);

  if (conn != NULL && !sluice_redis_conn__alive(conn))
    g_clear_pointer(&conn, sluice_redis_conn__free);
  /* A dialer that must look the server up first (the sentinels: a timeout
   * per sentinel) is not asked here. */
  may_connect = !sluice_redis_outage__active(&node->outage) &&
                (node->dialer == NULL || node->dialer->ready == NULL ||
                 node->dialer->ready(node->dialer_data));
  if (conn == NULL && may_connect)
    conn = node_open(
        node, MIN(node->settings->connect_timeout_ms, WAKEUP_CONNECT_MS), NULL);
  if (conn == NULL)
    return;

  for (guint i = 0; i < ids->len; i++) {
    const char *argv[3] = {"CLIENT", "UNBLOCK", text};
    size_t lens[3] = {6, 7, 0};

    g_snprintf(text, sizeof text, "%" G_GINT64_FORMAT,
               g_array_index(ids, gint64, i));
    lens[2] = strlen(text);
    sluice_redis_conn__append(conn, 3, argv, lens);
  }
  replies = g_new0(redisReply *, ids->len);
  /* Replies are 0 or 1 (unblocked or not blocked any more): either is
   * fine, so they are only read to keep the connection in step. */
  if (sluice_redis_node__exchange(node, conn, ids->len, replies, 0, NULL))
    sluice_redis_replies__free(replies, ids->len);
  g_free(replies);
  sluice_redis_node__release(node, conn);
}

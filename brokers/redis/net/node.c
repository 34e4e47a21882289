/* redis-conn.c - hiredis connections and the pool that shares them
 * between threads (see redis-conn.h for the API).
 *
 * Design choices, in the order an operation meets them:
 *
 * URL. Parsed by redis-url.c; the password is kept for AUTH and never
 * shown: every message uses url->display.
 *
 * CONNECT. A connection is made within the connect timeout by the URL's
 * connection type, then one pipelined round trip of [AUTH] [SELECT] CLIENT
 * ID. AUTH takes an ACL user when the URL has one. The CLIENT ID is what
 * sluice_redis_pool__wakeup() names in CLIENT UNBLOCK. Then the owner's
 * setup hook (sluice_redis_pool__set_setup()) checks what it needs.
 *
 * I/O. A connection is a socket of a connection type (net/conn.c): the
 * bytes move with send(MSG_NOSIGNAL) and poll() against a per-call
 * deadline; hiredis formats the commands and parses the replies. A
 * command's deadline is the command timeout plus, for a blocking command,
 * its block time.
 *
 * POOL. Idle connections sit in a GQueue under a mutex; the mutex is held
 * only to push or pop, never across a round trip. A connection checked out
 * is used by one thread only. Before an idle connection is handed out, a
 * zero-timeout poll() checks that the server did not close it meanwhile
 * (CLIENT KILL, a server restart, an idle timeout): an idle RESP2
 * connection has nothing to read, so anything readable means it is gone,
 * and it is dropped without costing the caller an error. A connection that
 * failed (I/O error, timeout, protocol error) is marked broken and freed
 * on release, never reused.
 *
 * OUTAGES. The first failure to reach the server starts an outage and logs
 * exactly one warning: "lost connection to <url>: <reason>; retrying".
 * During an outage at most one thread attempts a reconnection per backoff
 * period (100 ms doubling up to reconnect_max_backoff_ms); the others fail
 * at once with SLUICE_BROKER_ERROR_UNAVAILABLE instead of piling up
 * connection attempts, and the caller (the worker) waits that out. The
 * first successful connection ends the outage with one more line. An
 * error reply from a reachable server (AUTH, OOM) is not an outage.
 *
 * SENTINEL. For a redis+sentinel:// URL the pool keeps the master's
 * address, learnt from the sentinels (redis-sentinel.c) when it must make
 * a connection and does not know it: at first, after a connection broke,
 * after a server turned out not to be the master, or after a reply said it
 * no longer is one (-READONLY: demoted to a replica; -LOADING; -MASTERDOWN).
 * Every new connection asks ROLE in its handshake, and a server that is
 * not a master is a failed connection attempt (the sentinels are asked
 * again after the usual backoff), so a sentinel that lags behind a
 * failover costs a retry, not a write to a replica. When the sentinels
 * name a different master the pool logs one line, with both addresses,
 * and bumps its generation: idle connections of an older generation are
 * dropped instead of reused, so writes stop reaching a demoted master as
 * soon as any thread of the process learnt of the failover; and a
 * connection that was being made to the old master meanwhile (a paused
 * master that resumes still says "master" until the sentinels demote it)
 * is refused rather than learnt, and so is an answer of a sentinel that
 * has not caught up (its config-epoch is lower than one the pool saw), so
 * the pool never moves back. A reply of
 * the three kinds above marks the connection broken and failover: nothing
 * of its exchange was written, so redis-broker.c may replay the step.
 *
 * WAKEUP. A connection in a blocking command (BLMPOP, XREADGROUP BLOCK)
 * registers its CLIENT ID for the duration of the exchange; wakeup sends
 * CLIENT UNBLOCK for each registered id from another pooled connection. A
 * fetch whose command is still on its way to the server when wakeup runs
 * is not unblocked; the worker bounds every fetch anyway. Wakeup must not
 * block: it uses an idle connection, and only when there is none makes one
 * with a short connect timeout (WAKEUP_CONNECT_MS), never during an outage.
 *
 * To extend: new connection-level setup (CLIENT SETNAME, a RESP3 HELLO once
 * hiredis has it) belongs in conn_handshake(); new error codes in
 * sluice_redis_reply__check() (redis-errors.c).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include "brokers/redis/net/conn-private.h"
#include "brokers/redis/net/errors-private.h"
#include "brokers/redis/net/node-private.h"
#include "brokers/redis/net/redis-net.h"
#include "brokers/redis/net/sentinel-private.h"

#define INITIAL_BACKOFF_MS 100
/* The longest a wakeup may spend making a connection. */
#define WAKEUP_CONNECT_MS 250
#define conn_free sluice_redis_conn__free

struct _SluiceRedisPool {
  SluiceRedisUrl url;
  /* Sentinel URLs, under lock: the master in use (master_host NULL while
   * unknown: ask the sentinels), the last one a connection was made to
   * (for the failover line), and the generation, bumped at each change. */
  gchar *master_host;
  gint master_port;
  gchar *last_master;
  guint generation;
  gint64 master_epoch; /* the highest config-epoch learnt; -1: none */
  gint64 connect_timeout_ms;
  gint64 command_timeout_ms;
  gint64 max_backoff_ms;

  GMutex lock; /* guards everything below */
  GQueue idle; /* SluiceRedisConn*, most recently used at the head */
  gboolean closed;
  gboolean outage;
  gint64 outage_since_us; /* monotonic */
  gint64 next_attempt_us; /* monotonic; no attempt before this */
  gint64 backoff_ms;      /* the next pause after a failed attempt */
  GArray *blocked_ids;    /* gint64 CLIENT IDs blocked now */

  /* Set once, before the first connection: the owner's hook on every new
   * connection (sluice_redis_pool__set_setup()), or NULL. */
  SluiceRedisSetupFunc setup;
  gpointer setup_data;
  gchar *ns; /* for permission messages; may be NULL */

  /* Set once, before the first connection: who does the work instead
   * (Redis Cluster), or NULL. */
  const SluiceRedisRouter *router;
  gpointer router_data;
};

/* ---- Outage bookkeeping -------------------------------------------------- */

/* Called with pool->lock held. Returns TRUE when this failure starts an
 * outage: the caller then logs it, after unlocking (a log writer may take
 * locks of its own). */
static gboolean
outage_begin_locked(SluiceRedisPool *pool)
{
  if (pool->outage)
    return FALSE;
  pool->outage = TRUE;
  pool->outage_since_us = g_get_monotonic_time();
  pool->backoff_ms = MIN(INITIAL_BACKOFF_MS, pool->max_backoff_ms);
  return TRUE;
}

/* Debug level: a worker says once that its broker is gone and once that it
 * is back (with how long), and a producer gets the error itself; a line
 * per connection pool on top would say it twice. */
static void
log_lost(SluiceRedisPool *pool, const gchar *reason)
{
  sluice_broker_log(NULL, G_LOG_LEVEL_DEBUG,
                    "lost connection to %s: %s; retrying", pool->url.display,
                    reason);
}

/* A connection that worked before failed: the server may be gone, or just
 * this connection; allow an immediate reconnection attempt. */
/* Called with pool->lock held: the next connection asks the sentinels. */
static void
forget_master_locked(SluiceRedisPool *pool)
{
  g_clear_pointer(&pool->master_host, g_free);
}

static void
note_lost(SluiceRedisPool *pool, const gchar *reason)
{
  gboolean began;

  g_mutex_lock(&pool->lock);
  forget_master_locked(pool);
  began = outage_begin_locked(pool);
  pool->next_attempt_us = g_get_monotonic_time();
  g_mutex_unlock(&pool->lock);
  if (began)
    log_lost(pool, reason);
}

static void
note_connect_failed(SluiceRedisPool *pool, const gchar *reason)
{
  gboolean began;

  g_mutex_lock(&pool->lock);
  forget_master_locked(pool);
  began = outage_begin_locked(pool);
  pool->next_attempt_us = g_get_monotonic_time() + pool->backoff_ms * 1000;
  pool->backoff_ms = MIN(pool->backoff_ms * 2, pool->max_backoff_ms);
  g_mutex_unlock(&pool->lock);
  if (began)
    log_lost(pool, reason);
}

static void
note_connected(SluiceRedisPool *pool)
{
  gint64 since = 0;
  gboolean was_out;

  g_mutex_lock(&pool->lock);
  was_out = pool->outage;
  if (was_out)
    since = pool->outage_since_us;
  pool->outage = FALSE;
  pool->next_attempt_us = 0;
  pool->backoff_ms = MIN(INITIAL_BACKOFF_MS, pool->max_backoff_ms);
  g_mutex_unlock(&pool->lock);
  if (was_out)
    sluice_broker_log(NULL, G_LOG_LEVEL_DEBUG,
                      "connection to %s is back after %" G_GINT64_FORMAT " ms",
                      pool->url.display,
                      (g_get_monotonic_time() - since) / 1000);
}

/* ---- Connections --------------------------------------------------------- */

static void
register_blocked(SluiceRedisPool *pool, gint64 id)
{
  g_mutex_lock(&pool->lock);
  g_array_append_val(pool->blocked_ids, id);
  g_mutex_unlock(&pool->lock);
}

static void
unregister_blocked(SluiceRedisPool *pool, gint64 id)
{
  g_mutex_lock(&pool->lock);
  for (guint i = 0; i < pool->blocked_ids->len; i++) {
    if (g_array_index(pool->blocked_ids, gint64, i) == id) {
      g_array_remove_index_fast(pool->blocked_ids, i);
      break;
    }
  }
  g_mutex_unlock(&pool->lock);
}

/* A reply that says the server stopped being a writable master: it was
 * demoted to a replica (READONLY), is loading (LOADING), or is a replica
 * cut off from its master (MASTERDOWN). None of them runs a write, so the
 * exchange wrote nothing. */
static gboolean
says_not_master(const redisReply *reply)
{
  return reply != NULL && reply->type == REDIS_REPLY_ERROR &&
         (sluice_redis_reply__is_error_code(reply, "READONLY") ||
          sluice_redis_reply__is_error_code(reply, "LOADING") ||
          sluice_redis_reply__is_error_code(reply, "MASTERDOWN"));
}

static void
note_not_master(SluiceRedisPool *pool, SluiceRedisConn *conn,
                redisReply **replies, guint n)
{
  for (guint i = 0; i < n; i++) {
    if (says_not_master(replies[i])) {
      conn->broken = TRUE;
      conn->failover = TRUE;
      g_mutex_lock(&pool->lock);
      /* Only the first connection to notice makes the pool ask again. */
      if (conn->generation == pool->generation) {
        forget_master_locked(pool);
        pool->generation++;
      }
      g_mutex_unlock(&pool->lock);
      return;
    }
  }
}

gboolean
sluice_redis_conn__exchange(SluiceRedisPool *pool, SluiceRedisConn *conn,
                            guint n_replies, redisReply **replies,
                            gint64 block_ms, GError **error)
{
  g_autofree gchar *reason = NULL;
  gboolean ok;

  if (pool->router != NULL)
    return pool->router->exchange(pool->router_data, conn, n_replies, replies,
                                  block_ms, error);
  block_ms = MAX(block_ms, 0);
  if (block_ms > 0)
    register_blocked(pool, conn->client_id);
  ok = sluice_redis_conn__transact(
      conn, n_replies, replies, pool->command_timeout_ms + block_ms, &reason);
  if (block_ms > 0)
    unregister_blocked(pool, conn->client_id);
  if (!ok) {
    note_lost(pool, reason);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "lost the connection to Redis at %s (%s); the operation may "
                "or may not have been carried out",
                pool->url.display, reason);
  } else if (pool->url.is_sentinel) {
    note_not_master(pool, conn, replies, n_replies);
  }
  return ok;
}

gboolean
sluice_redis_conn__read_within(SluiceRedisPool *pool, SluiceRedisConn *conn,
                               gint64 timeout_ms, redisReply **out_reply,
                               GError **error)
{
  g_autofree gchar *reason = NULL;
  SluiceRedisRead r;

  if (conn->home != NULL)
    pool = conn->home;
  r = sluice_redis_conn__read(
      conn, g_get_monotonic_time() + MAX(timeout_ms, 0) * 1000, out_reply,
      &reason);
  if (r == SLUICE_REDIS_READ_FAILED) {
    conn->broken = TRUE;
    note_lost(pool, reason);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "lost the connection to Redis at %s (%s)", pool->url.display,
                reason);
    return FALSE;
  }
  return TRUE;
}

/* AUTH, SELECT, CLIENT ID (and ROLE for a sentinel's master) in one round
 * trip. On failure returns FALSE and either sets *reason (the server could
 * not be talked to: an outage) or @error (the server answered no). */
static gboolean
conn_handshake(SluiceRedisPool *pool, SluiceRedisConn *conn, gint64 timeout_ms,
               gchar **reason, GError **error)
{
  const SluiceRedisUrl *url = &pool->url;
  redisReply *replies[4] = {NULL, NULL, NULL, NULL};
  guint n = 0;
  guint auth_at = G_MAXUINT, select_at = G_MAXUINT, role_at = G_MAXUINT;
  guint id_at;
  gboolean ok = FALSE;

  if (url->password != NULL) {
    const char *argv[3];
    size_t lens[3];
    int argc = 0;

    argv[argc] = "AUTH";
    lens[argc++] = 4;
    if (url->user != NULL) {
      argv[argc] = url->user;
      lens[argc++] = strlen(url->user);
    }
    argv[argc] = url->password;
    lens[argc++] = strlen(url->password);
    sluice_redis_conn__append(conn, argc, argv, lens);
    auth_at = n++;
  }
  if (url->db != 0) {
    gchar db[16];
    const char *argv[2] = {"SELECT", db};
    size_t lens[2];

    g_snprintf(db, sizeof db, "%d", url->db);
    lens[0] = 6;
    lens[1] = strlen(db);
    sluice_redis_conn__append(conn, 2, argv, lens);
    select_at = n++;
  }
  {
    const char *argv[2] = {"CLIENT", "ID"};
    size_t lens[2] = {6, 2};
    sluice_redis_conn__append(conn, 2, argv, lens);
    id_at = n++;
  }
  if (url->is_sentinel) {
    const char *argv[1] = {"ROLE"};
    size_t lens[1] = {4};
    sluice_redis_conn__append(conn, 1, argv, lens);
    role_at = n++;
  }
  if (!sluice_redis_conn__transact(conn, n, replies, timeout_ms, reason))
    return FALSE;

  if (auth_at != G_MAXUINT &&
      !sluice_redis_reply__check(pool, replies[auth_at], "AUTH", error))
    goto out;
  if (select_at != G_MAXUINT && replies[select_at]->type == REDIS_REPLY_ERROR) {
    if (sluice_redis_reply__is_error_code(replies[select_at], "ERR"))
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "Redis at %s refused database %d (%s): use a database "
                  "number below its “databases” setting",
                  url->display, url->db, replies[select_at]->str);
    else
      sluice_redis_reply__check(pool, replies[select_at], "SELECT", error);
    goto out;
  }
  if (!sluice_redis_reply__check(pool, replies[id_at], "CLIENT ID", error))
    goto out;
  if (replies[id_at]->type != REDIS_REPLY_INTEGER) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                "Redis at %s answered CLIENT ID with something else than a "
                "number: is it a Redis server (7.0 or newer)?",
                url->display);
    goto out;
  }
  conn->client_id = replies[id_at]->integer;
  if (role_at != G_MAXUINT) {
    const redisReply *role = replies[role_at];

    if (role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
        role->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(role->element[0]->str, "master") != 0) {
      /* A sentinel named a server that is not (or no longer) the master:
       * a failed attempt, so the sentinels are asked again after the
       * backoff. */
      *reason = g_strdup_printf(
          "the server the sentinels named is a %s, not the master (a "
          "failover under way?)",
          strcmp(role->element[0]->str, "slave") == 0 ? "replica"
                                                      : role->element[0]->str);
      goto out;
    }
    if (!sluice_redis_reply__check(pool, role, "ROLE", error))
      goto out;
  }
  ok = TRUE;
out:
  sluice_redis_replies__free(replies, n);
  return ok;
}

/* A connection to @host:@port was made and ROLE says master: the pool
 * connects there from now on. When that is another server than the last
 * one, this is a failover: one line, and a new generation, so that idle
 * connections to the old master are not reused. But when the pool moved
 * to another master while this connection was being made (@seen, the
 * generation when its address was chosen, is old), it is an old master
 * that has not been demoted yet (a paused one, resumed): refused, so that
 * no write goes there; as is an address of an older config-epoch (@epoch,
 * -1 when unknown) than the pool has learnt. Returns FALSE when refused,
 * else TRUE and the connection's generation in @out_generation. */
static gboolean
learn_master(SluiceRedisPool *pool, const gchar *host, gint port, guint seen,
             gint64 epoch, guint *out_generation)
{
  g_autofree gchar *addr = g_strdup_printf("%s:%d", host, port);
  g_autofree gchar *old = NULL;

  g_mutex_lock(&pool->lock);
  if ((seen != pool->generation ||
       (epoch >= 0 && epoch < pool->master_epoch)) &&
      pool->last_master != NULL && strcmp(pool->last_master, addr) != 0) {
    g_mutex_unlock(&pool->lock);
    return FALSE;
  }
  pool->master_epoch = MAX(pool->master_epoch, epoch);
  if (pool->last_master != NULL && strcmp(pool->last_master, addr) != 0) {
    old = g_steal_pointer(&pool->last_master);
    pool->generation++;
  }
  g_free(pool->last_master);
  pool->last_master = g_strdup(addr);
  g_free(pool->master_host);
  pool->master_host = g_strdup(host);
  pool->master_port = port;
  *out_generation = pool->generation;
  g_mutex_unlock(&pool->lock);
  if (old != NULL)
    sluice_broker_log(NULL, G_LOG_LEVEL_MESSAGE,
                      "Redis Sentinel failover of master “%s” (%s): the "
                      "master moved from %s to %s; reconnected",
                      pool->url.master_name, pool->url.display, old, addr);
  return TRUE;
}

gchar *
sluice_redis_pool__get_master(SluiceRedisPool *pool)
{
  gchar *addr;

  if (!pool->url.is_sentinel)
    return pool->url.is_unix
               ? g_strdup(pool->url.path)
               : g_strdup_printf("%s:%d", pool->url.host, pool->url.port);
  g_mutex_lock(&pool->lock);
  addr = g_strdup(pool->last_master);
  g_mutex_unlock(&pool->lock);
  return addr;
}

/* The owner's hook, after the handshake. A failure of the connection
 * itself (the hook's round trip broke it) is an outage like any failed
 * connection attempt: *reason; any other is the hook's answer: @error. */
static gboolean
conn_setup(SluiceRedisPool *pool, SluiceRedisConn *conn, gchar **reason,
           GError **error)
{
  GError *local = NULL;

  if (pool->setup == NULL || pool->setup(conn, pool->setup_data, &local))
    return TRUE;
  if (conn->broken) {
    *reason = g_strdup(local->message);
    g_error_free(local);
  } else {
    g_propagate_error(error, local);
  }
  return FALSE;
}

/* Connects to @host:@port (a TCP server), or to the URL's socket when
 * @host is NULL, and makes the handshake. Returns NULL with *reason set
 * when the server could not be talked to (an outage), or with @error when
 * it answered no. */
static SluiceRedisConn *
conn_connect(SluiceRedisPool *pool, const gchar *host, gint port,
             gint64 timeout_ms, gchar **reason, GError **error)
{
  SluiceRedisEndpoint endpoint = {host, port, pool->url.path, NULL};
  SluiceRedisConn *conn;

  conn = sluice_redis_conn__open(
      sluice_redis_conn_type__find(host == NULL ? "unix" : pool->url.conn_type),
      &endpoint, timeout_ms, reason);
  if (conn == NULL)
    return NULL;
  /* A write to a stalled server waits at most the command timeout; reads
   * are bounded by each call's deadline. */
  conn->send_timeout_ms = pool->command_timeout_ms;
  conn->server = pool->url.display;
  conn->grant_ns = pool->ns;
  conn->setup_timeout_ms = timeout_ms;
  if (!conn_handshake(pool, conn, timeout_ms, reason, error) ||
      !conn_setup(pool, conn, reason, error)) {
    conn_free(conn);
    return NULL;
  }
  return conn;
}

/* Makes a new connection within @timeout_ms; no lock held. For a sentinel
 * URL: to the master the pool knows, or else the one the sentinels name;
 * when the known one fails (gone, or not the master any more: a failover
 * the pool has not seen), the sentinels are asked at once, once. */
static SluiceRedisConn *
conn_open(SluiceRedisPool *pool, gint64 timeout_ms, GError **error)
{
  const SluiceRedisUrl *url = &pool->url;
  g_autofree gchar *reason = NULL;
  g_autofree gchar *where = NULL;
  SluiceRedisConn *conn = NULL;

  if (!url->is_sentinel) {
    conn = conn_connect(pool, url->is_unix ? NULL : url->host, url->port,
                        timeout_ms, &reason, error);
  } else {
    for (guint attempt = 0; conn == NULL && attempt < 3; attempt++) {
      g_autofree gchar *host = NULL;
      gint port = 0;
      guint seen;
      gint64 epoch;
      gboolean asked = FALSE;
      GError *local = NULL;

      g_mutex_lock(&pool->lock);
      host = g_strdup(pool->master_host);
      port = pool->master_port;
      seen = pool->generation;
      epoch = pool->master_epoch;
      g_mutex_unlock(&pool->lock);
      if (host == NULL) {
        asked = TRUE;
        if (!sluice_redis_sentinel__resolve(url, timeout_ms, epoch, &host,
                                            &port, &epoch, &local)) {
          if (g_error_matches(local, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNAVAILABLE))
            note_connect_failed(pool, local->message);
          /* Otherwise a sentinel answered no: not an outage. */
          g_propagate_error(error, local);
          return NULL;
        }
      }
      g_clear_pointer(&reason, g_free);
      g_free(where);
      where = g_strdup_printf(" (master %s:%d)", host, port);
      conn = conn_connect(pool, host, port, timeout_ms, &reason, error);
      if (conn != NULL) {
        if (!learn_master(pool, host, port, seen, epoch, &conn->generation)) {
          g_clear_pointer(&conn, conn_free);
          reason = g_strdup_printf("%s:%d answered as a master after the "
                                   "pool had moved to another one",
                                   host, port);
        }
      } else if (reason == NULL || asked) {
        break; /* an answer (AUTH...), or the sentinels' latest word */
      } else {
        g_mutex_lock(&pool->lock);
        forget_master_locked(pool);
        g_mutex_unlock(&pool->lock);
      }
    }
  }
  if (conn != NULL) {
    note_connected(pool);
    return conn;
  }
  if (reason == NULL)
    return NULL; /* the server answered: not an outage */
  note_connect_failed(pool, reason);
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
              "cannot connect to Redis at %s%s: %s; check that redis-server "
              "is running there and that the URL is right",
              url->display, where != NULL ? where : "", reason);
  return NULL;
}

/* ---- The pool ------------------------------------------------------------ */

void
sluice_redis_pool__set_setup(SluiceRedisPool *pool, SluiceRedisSetupFunc setup,
                             gpointer user_data)
{
  pool->setup = setup;
  pool->setup_data = user_data;
  if (pool->router != NULL && pool->router->set_setup != NULL)
    pool->router->set_setup(pool->router_data, setup, user_data);
}

SluiceRedisPool *
sluice_redis_pool__new(const SluiceRedisUrl *url, gint64 connect_timeout_ms,
                       gint64 command_timeout_ms, gint64 max_backoff_ms)
{
  SluiceRedisPool *pool = g_new0(SluiceRedisPool, 1);

  sluice_redis_url__copy(url, &pool->url);
  pool->connect_timeout_ms = MAX(connect_timeout_ms, 1);
  pool->command_timeout_ms = MAX(command_timeout_ms, 1);
  pool->max_backoff_ms = MAX(max_backoff_ms, 1);
  pool->backoff_ms = MIN(INITIAL_BACKOFF_MS, pool->max_backoff_ms);
  pool->master_epoch = -1;
  g_mutex_init(&pool->lock);
  g_queue_init(&pool->idle);
  pool->blocked_ids = g_array_new(FALSE, FALSE, sizeof(gint64));
  return pool;
}

void
sluice_redis_pool__set_namespace(SluiceRedisPool *pool, const gchar *ns)
{
  g_free(pool->ns);
  pool->ns = g_strdup(ns);
}

void
sluice_redis_pool__set_router(SluiceRedisPool *pool,
                              const SluiceRedisRouter *router, gpointer data)
{
  pool->router = router;
  pool->router_data = data;
}

gpointer
sluice_redis_pool__get_router_data(SluiceRedisPool *pool)
{
  return pool->router_data;
}

void
sluice_redis_pool__close(SluiceRedisPool *pool)
{
  GQueue idle = G_QUEUE_INIT;

  if (pool == NULL)
    return;
  if (pool->router != NULL)
    pool->router->close(pool->router_data);
  g_mutex_lock(&pool->lock);
  pool->closed = TRUE;
  idle = pool->idle;
  g_queue_init(&pool->idle);
  g_mutex_unlock(&pool->lock);
  g_queue_clear_full(&idle, (GDestroyNotify)conn_free);
}

void
sluice_redis_pool__free(SluiceRedisPool *pool)
{
  if (pool == NULL)
    return;
  sluice_redis_pool__close(pool);
  if (pool->router != NULL)
    pool->router->free(pool->router_data);
  g_array_unref(pool->blocked_ids);
  g_free(pool->ns);
  g_mutex_clear(&pool->lock);
  sluice_redis_url__clear(&pool->url);
  g_free(pool->master_host);
  g_free(pool->last_master);
  g_free(pool);
}

const gchar *
sluice_redis_pool__get_namespace(SluiceRedisPool *pool)
{
  return pool->ns;
}

gboolean
sluice_redis_reply__check(SluiceRedisPool *pool, const redisReply *reply,
                          const gchar *what, GError **error)
{
  return sluice_redis_error__check(pool->url.display, pool->ns, reply, what,
                                   NULL, error);
}

gboolean
sluice_redis_reply__check_script(SluiceRedisPool *pool, const redisReply *reply,
                                 const gchar *what,
                                 const SluiceRedisScriptInfo *script,
                                 GError **error)
{
  return sluice_redis_error__check(pool->url.display, pool->ns, reply, what,
                                   script, error);
}

const gchar *
sluice_redis_pool__get_display_url(SluiceRedisPool *pool)
{
  return pool->url.display;
}

gint64
sluice_redis_pool__get_command_timeout_ms(SluiceRedisPool *pool)
{
  return pool->command_timeout_ms;
}

SluiceRedisConn *
sluice_redis_pool__acquire(SluiceRedisPool *pool, GError **error)
{
  return sluice_redis_pool__acquire_slot(pool, 0, error);
}

SluiceRedisConn *
sluice_redis_pool__acquire_slot(SluiceRedisPool *pool, guint slot,
                                GError **error)
{
  if (pool->router != NULL)
    return pool->router->acquire(pool->router_data, slot, error);
  for (;;) {
    SluiceRedisConn *conn;

    g_mutex_lock(&pool->lock);
    if (pool->closed) {
      g_mutex_unlock(&pool->lock);
      g_set_error_literal(error, SLUICE_BROKER_ERROR,
                          SLUICE_BROKER_ERROR_CLOSED,
                          "the Redis broker was closed");
      return NULL;
    }
    conn = g_queue_pop_head(&pool->idle);
    if (conn == NULL)
      break; /* lock still held */
    if (conn->generation != pool->generation) {
      g_mutex_unlock(&pool->lock);
      conn_free(conn); /* made for a master that is one no more */
      continue;
    }
    g_mutex_unlock(&pool->lock);
    if (sluice_redis_conn__alive(conn))
      return conn;
    conn_free(conn); /* the server hung up on it while it was idle */
  }

  if (pool->outage) {
    gint64 now = g_get_monotonic_time();
    if (now < pool->next_attempt_us) {
      gint64 wait_ms = (pool->next_attempt_us - now + 999) / 1000;
      g_mutex_unlock(&pool->lock);
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                  "Redis at %s is unreachable; the next reconnection attempt "
                  "is in %" G_GINT64_FORMAT " ms (check that redis-server is "
                  "running there and that the URL is right)",
                  pool->url.display, wait_ms);
      return NULL;
    }
    /* This thread makes the attempt of this period; others wait theirs. */
    pool->next_attempt_us = now + pool->backoff_ms * 1000;
  }
  g_mutex_unlock(&pool->lock);
  return conn_open(pool, pool->connect_timeout_ms, error);
}

void
sluice_redis_pool__release(SluiceRedisPool *pool, SluiceRedisConn *conn)
{
  if (conn == NULL)
    return;
  if (pool->router != NULL) {
    pool->router->release(pool->router_data, conn);
    return;
  }
  if (!conn->broken) {
    g_mutex_lock(&pool->lock);
    if (!pool->closed) {
      g_queue_push_head(&pool->idle, conn);
      conn = NULL;
    }
    g_mutex_unlock(&pool->lock);
  }
  conn_free(conn);
}

void
sluice_redis_pool__wakeup(SluiceRedisPool *pool)
{
  g_autoptr(GArray) ids = NULL;
  SluiceRedisConn *conn;
  redisReply **replies;
  gchar text[32];
  gboolean may_connect;

  if (pool->router != NULL) {
    pool->router->wakeup(pool->router_data);
    return;
  }
  g_mutex_lock(&pool->lock);
  if (pool->closed || pool->blocked_ids->len == 0) {
    g_mutex_unlock(&pool->lock);
    return;
  }
  ids = g_array_copy(pool->blocked_ids);
  conn = g_queue_pop_head(&pool->idle);
  /* Asking the sentinels could take a timeout per sentinel: not here. */
  may_connect =
      !pool->outage && (!pool->url.is_sentinel || pool->master_host != NULL);
  g_mutex_unlock(&pool->lock);

  if (conn != NULL && !sluice_redis_conn__alive(conn))
    g_clear_pointer(&conn, conn_free);
  if (conn == NULL && may_connect)
    conn =
        conn_open(pool, MIN(pool->connect_timeout_ms, WAKEUP_CONNECT_MS), NULL);
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
  replies = g_newa(redisReply *, ids->len);
  /* Replies are 0 or 1 (unblocked or not blocked any more): either is
   * fine, so they are only read to keep the connection in step. */
  if (sluice_redis_conn__exchange(pool, conn, ids->len, replies, 0, NULL))
    sluice_redis_replies__free(replies, ids->len);
  sluice_redis_pool__release(pool, conn);
}

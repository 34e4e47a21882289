/* redis-conn.h - connections and the connection pool of the Redis brokers
 * (internal; URLs are redis-url.h, error replies redis-errors.h).
 *
 * A SluiceRedisPool owns every hiredis context of one broker. An operation
 * checks a connection out (sluice_redis_pool__acquire), appends its commands,
 * exchanges them for replies in one round trip, and checks the connection
 * back in (sluice_redis_pool__release). A context is never used by two
 * threads at once, and the pool's lock is never held across a round trip.
 *
 * The pool also owns the outage state: capped exponential backoff between
 * reconnection attempts, exactly one warning when the server is lost and
 * one line when it is back, and the list of connections blocked in a fetch
 * (for sluice_redis_pool__wakeup).
 */
#pragma once

#include <sluice/sys/broker.h>

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

typedef struct _SluiceRedisPool SluiceRedisPool;

/**
 * SluiceRedisSetupFunc:
 * @conn: a new connection, after the layer's handshake (AUTH, SELECT,
 *   CLIENT ID, and ROLE on a sentinel's master), before it serves anything
 * @user_data: what sluice_redis_pool__set_setup() was given
 *
 * The owner's check of every new connection, on every node of a cluster.
 * It may make round trips of its own (sluice_redis_conn__append() and
 * sluice_redis_conn__roundtrip()).
 * Returns: TRUE, or FALSE and @error: the connection is refused with
 * @error (or, when @conn broke on the way, counted as not made).
 */
typedef gboolean (*SluiceRedisSetupFunc)(SluiceRedisConn *conn,
                                         gpointer user_data, GError **error);

/**
 * SluiceRedisRouter:
 *
 * What a pool does instead of talking to one server, when it has a router
 * (Redis Cluster, redis-cluster.c): each function stands for the pool
 * function of the same name, and @data is what was given to
 * sluice_redis_pool__set_router(). Connections a router hands out carry
 * their node's pool in @home.
 */
typedef struct {
  SluiceRedisConn *(*acquire)(gpointer data, guint slot, GError **error);
  void (*release)(gpointer data, SluiceRedisConn *conn);
  gboolean (*exchange)(gpointer data, SluiceRedisConn *conn, guint n_replies,
                       redisReply **replies, gint64 block_ms, GError **error);
  void (*wakeup)(gpointer data);
  void (*set_setup)(gpointer data, SluiceRedisSetupFunc setup,
                    gpointer user_data);
  void (*close)(gpointer data);
  void (*free)(gpointer data);
} SluiceRedisRouter;

/**
 * sluice_redis_pool__new:
 * @url: (transfer none): copied
 * @connect_timeout_ms: > 0
 * @command_timeout_ms: > 0; the longest wait for a reply on top of any
 *   blocking time
 * @max_backoff_ms: > 0; the longest pause between reconnection attempts
 *
 * Makes no connection. Returns: (transfer full): free with
 * sluice_redis_pool__free().
 */
SluiceRedisPool *sluice_redis_pool__new(const SluiceRedisUrl *url,
                                        gint64 connect_timeout_ms,
                                        gint64 command_timeout_ms,
                                        gint64 max_backoff_ms);

/**
 * sluice_redis_pool__set_setup:
 * @setup: (nullable): the hook
 * @user_data: (transfer none): for @setup; must outlive the pool
 *
 * Installs the hook every new connection runs. Call before the first
 * connection.
 */
void sluice_redis_pool__set_setup(SluiceRedisPool *pool,
                                  SluiceRedisSetupFunc setup,
                                  gpointer user_data);

/**
 * sluice_redis_pool__set_router:
 * @router: (transfer none): static
 * @data: (transfer full): freed with @router->free by
 *   sluice_redis_pool__free()
 *
 * From now on the pool hands its work to @router. Call before the first
 * connection.
 */
void sluice_redis_pool__set_router(SluiceRedisPool *pool,
                                   const SluiceRedisRouter *router,
                                   gpointer data);

/** sluice_redis_pool__get_router_data: Returns: (transfer none)
 * (nullable): the @data of sluice_redis_pool__set_router(). */
gpointer sluice_redis_pool__get_router_data(SluiceRedisPool *pool);

/**
 * sluice_redis_pool__close:
 * Frees the idle connections and refuses new check-outs
 * (SLUICE_BROKER_ERROR_CLOSED). Connections checked out now are freed when
 * they come back.
 */
void sluice_redis_pool__close(SluiceRedisPool *pool);

/** sluice_redis_pool__free: closes and frees @pool. NULL-safe. */
void sluice_redis_pool__free(SluiceRedisPool *pool);

/** sluice_redis_pool__get_display_url: Returns: (transfer none): the URL
 * without its password, valid while @pool is. */
const gchar *sluice_redis_pool__get_display_url(SluiceRedisPool *pool);

/** sluice_redis_pool__get_namespace: Returns: (transfer none) (nullable):
 * what sluice_redis_pool__set_namespace() set. */
const gchar *sluice_redis_pool__get_namespace(SluiceRedisPool *pool);

/** sluice_redis_pool__get_command_timeout_ms: Returns: the reply timeout. */
gint64 sluice_redis_pool__get_command_timeout_ms(SluiceRedisPool *pool);

/**
 * sluice_redis_pool__acquire:
 *
 * Checks out an idle connection (one whose peer hung up is dropped on the
 * way) or makes a new one: connect, AUTH, SELECT and CLIENT ID in one
 * round trip. During an outage, at most one thread tries to reconnect per
 * backoff period and the others fail at once.
 *
 * Returns: (transfer full): a connection for the calling thread alone;
 * give it back with sluice_redis_pool__release(). Or NULL and
 * SLUICE_BROKER_ERROR_UNAVAILABLE (server unreachable: the message names
 * the URL and what to check), _AUTH (credentials refused), _INVALID (no
 * such database) or _CLOSED.
 */
SluiceRedisConn *sluice_redis_pool__acquire(SluiceRedisPool *pool,
                                            GError **error);

/**
 * sluice_redis_pool__acquire_slot:
 * @slot: the Redis Cluster slot of the keys the connection will serve
 *   (redis-slot.h); only a pool with a router looks at it
 *
 * sluice_redis_pool__acquire() for the keys of one slot.
 */
SluiceRedisConn *sluice_redis_pool__acquire_slot(SluiceRedisPool *pool,
                                                 guint slot, GError **error);

/**
 * sluice_redis_pool__release:
 * @conn: (transfer full) (nullable): checked in if healthy, freed if
 *   broken or if the pool is closed
 */
void sluice_redis_pool__release(SluiceRedisPool *pool, SluiceRedisConn *conn);

/**
 * sluice_redis_conn__exchange:
 * @replies: (out) (array length=n_replies): set to the replies (transfer
 *   full, free each with freeReplyObject()); error replies are replies too
 *   (see sluice_redis_reply__check())
 * @block_ms: >= 0: how long the server may block before answering (a
 *   BLMPOP timeout); added to the command timeout, and while it runs the
 *   connection can be woken by sluice_redis_pool__wakeup()
 *
 * Sends what was appended and reads @n_replies replies, in one round trip.
 * Returns: TRUE, or FALSE with every reply NULL, @conn marked broken, and
 * SLUICE_BROKER_ERROR_UNAVAILABLE (connection lost or no reply in time;
 * the commands may or may not have run).
 */
gboolean sluice_redis_conn__exchange(SluiceRedisPool *pool,
                                     SluiceRedisConn *conn, guint n_replies,
                                     redisReply **replies, gint64 block_ms,
                                     GError **error);

/**
 * sluice_redis_conn__read_within:
 * @out_reply: (out): a reply (transfer full), or NULL when none came
 *   within @timeout_ms
 *
 * Reads one unsolicited reply (a pub/sub message). A timeout is not an
 * error and leaves @conn usable.
 * Returns: FALSE (and @conn broken, UNAVAILABLE) only on I/O failure.
 */
gboolean sluice_redis_conn__read_within(SluiceRedisPool *pool,
                                        SluiceRedisConn *conn,
                                        gint64 timeout_ms,
                                        redisReply **out_reply, GError **error);

/**
 * sluice_redis_pool__get_master:
 * Returns: (transfer full) (nullable): "host:port" of the master the pool
 * connects to now (for a sentinel URL, the last one the sentinels named
 * and ROLE confirmed; NULL before the first connection).
 */
gchar *sluice_redis_pool__get_master(SluiceRedisPool *pool);

/**
 * sluice_redis_reply__check:
 * @reply: (nullable): a reply
 * @what: what was being done, for the message ("enqueue")
 *
 * Returns: TRUE when @reply is not an error reply. Otherwise FALSE and an
 * error mapped from the Redis error: OOM -> _FULL; NOAUTH, WRONGPASS,
 * NOPERM (naming the missing command, or the key and channel patterns to
 * grant) -> _AUTH; MISCONF, LOADING, READONLY, BUSY, MASTERDOWN,
 * TRYAGAIN, CLUSTERDOWN -> _UNAVAILABLE; anything else -> _FAILED. Each
 * message names the URL (without password) and what to do.
 */
gboolean sluice_redis_reply__check(SluiceRedisPool *pool,
                                   const redisReply *reply, const gchar *what,
                                   GError **error);

/**
 * sluice_redis_reply__check_script:
 * @script: (nullable): the script that gave @reply
 *
 * sluice_redis_reply__check() for the reply of a script. A user whose ACL
 * lacks a command the script calls gets an error that names the command:
 * Redis only says which line of the script was refused, so the line is
 * looked up in @script's text.
 */
gboolean sluice_redis_reply__check_script(SluiceRedisPool *pool,
                                          const redisReply *reply,
                                          const gchar *what,
                                          const SluiceRedisScriptInfo *script,
                                          GError **error);

/**
 * sluice_redis_pool__set_namespace:
 * @ns: (nullable): copied
 *
 * The namespace the pool serves, so that a permission error can say which
 * key and channel patterns to grant.
 */
void sluice_redis_pool__set_namespace(SluiceRedisPool *pool, const gchar *ns);

/**
 * sluice_redis_pool__wakeup:
 * Sends CLIENT UNBLOCK for every connection blocked now in an exchange
 * with @block_ms > 0, from another connection of the pool. Never waits for
 * a reconnection: with no idle connection during an outage it does
 * nothing (a blocked fetch fails by itself then).
 */
void sluice_redis_pool__wakeup(SluiceRedisPool *pool);

G_END_DECLS

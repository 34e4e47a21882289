/* redis-net.h - the Redis client of the Redis brokers: URLs, replies,
 * error replies, hash slots (internal to libsluice; the one header the
 * files above brokers/redis/net/ include).
 */
#pragma once

#include <hiredis/hiredis.h>

#include <sluice/sluice-brokers.h>

G_BEGIN_DECLS

/* ---- URLs (url.c) -------------------------------------------------------- */

/**
 * SluiceRedisUrlParam:
 * @name: a query parameter's name
 * @value: its value ("" when the URL gives none)
 */
typedef struct {
  gchar *name;
  gchar *value;
} SluiceRedisUrlParam;

/**
 * SluiceRedisUrl:
 * @is_unix: TRUE for unix:///path, FALSE for redis://host:port
 * @host: (nullable): TCP host
 * @port: TCP port
 * @path: (nullable): unix socket path
 * @db: the database to SELECT
 * @user: (nullable): ACL user (percent-decoded)
 * @password: (nullable): password (percent-decoded); never logged
 * @display: the URL as it may be shown: the password replaced by "***"
 * @is_sentinel: TRUE for redis+sentinel://: @host and @port are unset
 *   (the sentinels name the master), @user and @password are the data
 *   credentials (for the master), @sentinels and @master_name say where
 *   to ask
 * @sentinels: (array length=n_sentinels): "host" strings, with
 *   @sentinel_ports alongside
 * @master_name: the name the sentinels monitor the master under
 * @sentinel_user: (nullable): ACL user for the sentinels (sentinel_user=)
 * @sentinel_password: (nullable): password for the sentinels
 *   (sentinel_password=); never logged
 * @is_cluster: TRUE for redis+cluster://; then @host and @port are the
 *   first seed and @db is 0
 * @n_seeds: the nodes a redis+cluster:// URL names (0 otherwise)...
 * @seed_hosts: (array length=n_seeds): ...their hosts...
 * @seed_ports: (array length=n_seeds): ...and their ports
 * @params: (array length=n_params): the query parameters this layer
 *   does not know, in the order of the URL, percent-decoded: the owner's
 *   to parse, and to refuse with sluice_redis_url__refuse_unknown() when
 *   it does not know them either
 * @conn_type: the connection type its connections use ("tcp", "unix"; see
 *   net/conn-type-private.h): a static string
 * @shown: the URL text as a message may quote it (every password masked),
 *   for sluice_redis_url__refuse()
 */
typedef struct {
  gboolean is_unix;
  gchar *host;
  gint port;
  gchar *path;
  gint db;
  gchar *user;
  gchar *password;
  gchar *display;
  gboolean is_sentinel;
  guint n_sentinels;
  gchar **sentinels;
  gint *sentinel_ports;
  gchar *master_name;
  gchar *sentinel_user;
  gchar *sentinel_password;
  gboolean is_cluster;
  guint n_seeds;
  gchar **seed_hosts;
  gint *seed_ports;
  SluiceRedisUrlParam *params;
  guint n_params;
  const gchar *conn_type;
  gchar *shown;
} SluiceRedisUrl;

/**
 * sluice_redis_url__parse:
 * @text: `redis://[[user]:password@]host[:port][/db][?params]`,
 *   `redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/
 *   MASTERNAME[/db][?params]`,
 *   `redis+cluster://[[user]:password@]host[:port][,host[:port]...][/0]
 *   [?params]` or `unix:///path/to/socket[?db=N&params]`; this layer
 *   reads db=N of unix:// and sentinel_user=U and sentinel_password=P of
 *   redis+sentinel://, and hands every other parameter back in
 *   @url->params
 * @url: (out caller-allocates): filled on success; clear it with
 *   sluice_redis_url__clear(). Untouched on failure.
 *
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_INVALID saying what is
 * wrong with the URL (the message never contains the password).
 */
gboolean sluice_redis_url__parse(const gchar *text, SluiceRedisUrl *url,
                                 GError **error);

/** sluice_redis_url__clear: frees what @url holds (wiping the password). */
void sluice_redis_url__clear(SluiceRedisUrl *url);

/** sluice_redis_url__copy: fills @to (cleared or fresh) with copies of
 * @from's strings; clear it with sluice_redis_url__clear(). */
void sluice_redis_url__copy(const SluiceRedisUrl *from, SluiceRedisUrl *to);

/**
 * sluice_redis_url__refuse:
 * @why: what is wrong, as a phrase
 *
 * Sets SLUICE_BROKER_ERROR_INVALID: "invalid Redis URL “<@url->shown>”:
 * @why (expected <the forms>)", for the owner of @url that refuses one of
 * its parameters. Returns: FALSE.
 */
gboolean sluice_redis_url__refuse(const SluiceRedisUrl *url, const gchar *why,
                                  GError **error);

/**
 * sluice_redis_url__refuse_unknown:
 * @name: a parameter of @url->params that the owner does not know
 * @owner_names: (array zero-terminated=1): the parameters the owner knows
 *
 * sluice_redis_url__refuse() saying that @name is unknown and naming
 * every parameter the URL takes: this layer's for its scheme, then
 * @owner_names. Returns: FALSE.
 */
gboolean sluice_redis_url__refuse_unknown(const SluiceRedisUrl *url,
                                          const gchar *name,
                                          const gchar *const *owner_names,
                                          GError **error);

/**
 * sluice_redis_url__for_node:
 * @cluster: a redis+cluster:// URL
 * @to: (out caller-allocates): filled with a redis:// URL of @host:@port
 *   with @cluster's credentials; clear it with sluice_redis_url__clear()
 */
void sluice_redis_url__for_node(const SluiceRedisUrl *cluster,
                                const gchar *host, gint port,
                                SluiceRedisUrl *to);

/* ---- Connections (conn.c) ----------------------------------------------- */

/**
 * SluiceRedisConn:
 *
 * One connection to one Redis server, checked out of a pool by one thread
 * (sluice_redis_pool__acquire() in redis-conn.h) and used by it alone
 * until it is released. Commands are appended, then exchanged for their
 * replies in one round trip.
 */
typedef struct _SluiceRedisConn SluiceRedisConn;

/**
 * sluice_redis_conn__append:
 * Appends one command to @conn's output buffer (nothing is sent yet).
 * @argv and @lens are borrowed for the call only: the command is
 * formatted into the buffer (hiredis's redisFormatSdsCommandArgv()).
 */
void sluice_redis_conn__append(SluiceRedisConn *conn, int argc,
                               const char **argv, const size_t *lens);

/** sluice_redis_conn__is_broken: Returns: TRUE when @conn can no longer be
 * trusted (I/O error, timeout, protocol error): released, it is freed. */
gboolean sluice_redis_conn__is_broken(const SluiceRedisConn *conn);

/** sluice_redis_conn__set_broken: @conn is not to be reused (a caller that
 * left it in a state of its own, such as subscribed). */
void sluice_redis_conn__set_broken(SluiceRedisConn *conn);

/**
 * sluice_redis_conn__failed_over:
 * Returns: TRUE when a reply on @conn said that its server is no longer a
 * writable master (-READONLY, -LOADING, -MASTERDOWN on a redis+sentinel://
 * pool): @conn is broken, nothing of that exchange was written, and the
 * step may be made again on a fresh connection, which goes to the master
 * the sentinels name now.
 */
gboolean sluice_redis_conn__failed_over(const SluiceRedisConn *conn);

/** sluice_redis_conn__get_server: Returns: (transfer none): the URL of the
 * server @conn talks to, as it may be shown (no password). */
const gchar *sluice_redis_conn__get_server(const SluiceRedisConn *conn);

/**
 * sluice_redis_conn__roundtrip:
 * @replies: (out) (array length=n): the replies (transfer full), error
 *   replies included
 *
 * For a setup hook (sluice_redis_pool__set_setup()): sends what was
 * appended and reads @n replies within the connection's setup time (the
 * connect timeout), without the pool's outage bookkeeping.
 * Returns: TRUE, or FALSE with every reply NULL, @conn broken and
 * SLUICE_BROKER_ERROR_UNAVAILABLE whose message is the reason alone ("no
 * reply within 5000 ms"): the pool counts the connection as not made and
 * quotes it in its own message.
 */
gboolean sluice_redis_conn__roundtrip(SluiceRedisConn *conn, guint n,
                                      redisReply **replies, GError **error);

/**
 * sluice_redis_conn__check_reply:
 * sluice_redis_reply__check() for a reply on @conn, where no pool is at
 * hand (a setup hook): the message names @conn's server.
 */
gboolean sluice_redis_conn__check_reply(const SluiceRedisConn *conn,
                                        const redisReply *reply,
                                        const gchar *what, GError **error);

/* ---- Replies (reply.c) ------------------------------------------------ */

/** sluice_redis_reply__is_string: Returns: TRUE for a string or status
 * reply (NULL-safe). */
gboolean sluice_redis_reply__is_string(const redisReply *r);

/**
 * sluice_redis_reply__to_int:
 * An integer reply, or a decimal string (scores come as strings, maybe as
 * "1.5e+12", rounded), to @out.
 * Returns: FALSE, @out untouched, for anything else.
 */
gboolean sluice_redis_reply__to_int(const redisReply *r, gint64 *out);

/** sluice_redis_reply__dup: Returns: (transfer full): a string reply's
 * bytes as a NUL-terminated string. */
gchar *sluice_redis_reply__dup(const redisReply *r);

/** sluice_redis_reply__is_error_code: Returns: TRUE if @reply is an error
 * reply whose code (first word) is @code ("NOSCRIPT"). */
gboolean sluice_redis_reply__is_error_code(const redisReply *reply,
                                           const gchar *code);

/**
 * sluice_redis_reply__steal_bytes:
 * @reply: a string (or status) reply
 * @skip: bytes to drop from the front (0, or 1 for a record's flag byte)
 *
 * Returns: (transfer full): the reply's bytes from @skip on, as a GBytes
 * that takes over hiredis's buffer (no copy); @reply's string becomes
 * NULL, and freeReplyObject() still frees the rest of @reply.
 */
GBytes *sluice_redis_reply__steal_bytes(redisReply *reply, gsize skip);

/** sluice_redis_replies__free: frees @n replies (NULL entries skipped). */
void sluice_redis_replies__free(redisReply **replies, guint n);

/* ---- Error replies (errors.c) -------------------------------------------- */

/**
 * SluiceRedisScriptInfo:
 * @name: the script's name, for messages
 * @text: (nullable): its Lua source
 */
typedef struct {
  const gchar *name;
  const gchar *text;
} SluiceRedisScriptInfo;

/* ---- Hash slots (slot.c) ------------------------------------------------ */

#define SLUICE_REDIS_SLOTS 16384

/**
 * sluice_redis_slot__of_key:
 * @key: (array length=len): a key, binary-safe
 *
 * Returns: the Redis Cluster slot of @key, 0 ... SLUICE_REDIS_SLOTS - 1.
 */
guint sluice_redis_slot__of_key(const gchar *key, gsize len);

G_END_DECLS

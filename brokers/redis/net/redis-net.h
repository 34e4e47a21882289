/* redis-net.h - the Redis client under the Redis brokers: URLs,
 * connections, the pool with its Sentinel and Cluster routers, replies,
 * error replies, hash slots (internal to libsluice; the one header the
 * files above brokers/redis/net/ include).
 *
 * The layer knows nothing of the broker: no namespace, key, mode, script
 * or partition. It takes a URL and gives connections to the servers it
 * names, and its errors are SLUICE_BROKER_ERROR's (what users see) with
 * messages that say what to do, never a password.
 *
 * The tour, as an owner (the broker, brokers/redis/redis.c) uses it:
 *
 *   SluiceRedisUrl url;                          URLs (url.c)
 *   sluice_redis_url__parse(text, &url, &error);
 *     ... url.params: the query parameters the layer does not know, for
 *     the owner to parse, or to refuse with sluice_redis_url__refuse_unknown()
 *   pool = sluice_redis_pool__new(&url, &opts);  the pool (pool.c) picks its
 *                                                router: one server,
 *                                                Sentinel or Cluster
 *   sluice_redis_pool__set_setup(pool, hook, owner);   the owner's check of
 *                                                every new connection
 *   conn = sluice_redis_pool__acquire_slot(pool, slot, &error);
 *   sluice_redis_conn__append(conn, argc, argv, lens);  commands (conn.c)
 *   sluice_redis_conn__exchange(pool, conn, n, replies, block_ms, &error);
 *   sluice_redis_reply__check(pool, replies[0], "enqueue", &error);
 *   sluice_redis_pool__release(pool, conn);
 *
 * Below this header, by floor (no file calls one above it):
 *
 *   pool.c         the pool: picks the router from the URL; the direct path
 *   sentinel.c     router: the master the sentinels name, across failovers
 *   cluster.c      router: the slot map, MOVED, ASK, TRYAGAIN, CLUSTERDOWN
 *   node.c         the connections to one server: idle ones, outage,
 *                  wakeup (CLIENT UNBLOCK), the setup hook
 *   handshake.c    AUTH, SELECT, CLIENT ID on every new connection
 *   outage.c       backoff between attempts and the lost/back log lines
 *   conn.c         one connection: a socket of a connection type, hiredis's
 *                  reader and command formatting, the deadlines
 *   conn-tcp.c, conn-unix.c, conn-fd.c   the connection types
 *   url.c, errors.c, reply.c, slot.c      what every floor uses
 *
 * To extend: a connection type (TLS) is one file and one line in the
 * conn_types[] table of conn.c (conn-type-private.h says what it
 * implements), plus the URL scheme that names it (url.c); a router is one
 * file and one line in pick_router() of pool.c (router-private.h).
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
 * SluiceRedisTlsConfig:
 * @ca_file: (nullable): PEM file of the CAs that may sign the servers'
 *   certificates (tls_ca_file=); with @ca_dir NULL too: the system's trust
 *   store
 * @ca_dir: (nullable): a directory of such CAs, by subject hash
 *   (c_rehash/openssl rehash; tls_ca_dir=)
 * @cert: (nullable): PEM file of this client's certificate (and its chain)
 *   for servers that verify clients (tls_cert=); needs @key
 * @key: (nullable): PEM file of its private key, unencrypted (tls_key=)
 * @server_name: (nullable): the name sent by SNI and checked against the
 *   certificate (tls_server_name=); NULL: each server's own host
 * @min_version: 0 (not given: TLS 1.2), 12 (TLS 1.2) or 13 (TLS 1.3)
 *   (tls_min_version=1.2|1.3)
 * @insecure: no verification of the certificate at all (tls_insecure=1):
 *   logged as a warning once per broker
 *
 * What a rediss:// URL says of TLS, or what an owner adds to it
 * (sluice_redis_url__merge_tls()). Strings are borrowed where a struct is
 * passed in and owned where the layer keeps one.
 */
typedef struct {
  const gchar *ca_file;
  const gchar *ca_dir;
  const gchar *cert;
  const gchar *key;
  const gchar *server_name;
  gint min_version;
  gboolean insecure;
} SluiceRedisTlsConfig;

struct _SluiceRedisTls;

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
 * @conn_type: the connection type its connections use ("tcp", "unix",
 *   "tls"; see net/conn-type-private.h): a static string
 * @shown: the URL text as a message may quote it (every password masked),
 *   for sluice_redis_url__refuse()
 * @tls: (nullable): for rediss://, rediss+sentinel:// and
 *   rediss+cluster://: the TLS settings and their one context (net/
 *   tls-private.h), a reference shared by every copy of the URL, so every
 *   connection of its owner, to every server, uses the same; NULL for a
 *   plain URL
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
  struct _SluiceRedisTls *tls;
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
 * sluice_redis_url__merge_tls:
 * @config: (transfer none): what the owner's own settings say (a
 *   SluiceRedisOptions' tls_* fields); NULL or empty strings and 0 say
 *   nothing
 * @origin: how the owner's user names those settings, for messages
 *   ("SluiceRedisOptions")
 *
 * Adds @config to what @url's query said, before the URL is first used or
 * copied. A setting given in both places must be the same; a setting for a
 * URL that is not rediss:// is refused, not ignored.
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_INVALID naming the
 * setting.
 */
gboolean sluice_redis_url__merge_tls(SluiceRedisUrl *url,
                                     const SluiceRedisTlsConfig *config,
                                     const gchar *origin, GError **error);

/**
 * sluice_redis_url__prepare_tls:
 * Reads the files @url's TLS settings name now (CA, client certificate
 * and key), once for the URL and all its copies, rather than at the first
 * connection; nothing for a plain URL. With tls_insecure it logs its
 * warning here, once.
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_INVALID naming the file
 * and what is wrong with it.
 */
gboolean sluice_redis_url__prepare_tls(SluiceRedisUrl *url, GError **error);

/* ---- Connections (conn.c) ----------------------------------------------- */

/**
 * SluiceRedisConn:
 *
 * One connection to one Redis server, checked out of a pool by one thread
 * (sluice_redis_pool__acquire_slot()) and used by it alone until it is
 * released. Commands are appended, then exchanged for their
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

/* ---- The pool (pool.c) ---------------------------------------------------- */

/**
 * SluiceRedisPool:
 *
 * Every connection of one owner to the servers a URL names. An operation
 * checks a connection out (sluice_redis_pool__acquire_slot()), appends
 * its commands, exchanges them for replies in one round trip
 * (sluice_redis_conn__exchange()) and checks the connection back in
 * (sluice_redis_pool__release()). A connection is never used by two
 * threads at once, and no lock of the pool is held across a round trip.
 * The pool picks how to reach the servers from the URL: one server
 * (redis://, unix://), the master Redis Sentinel names (redis+sentinel://)
 * or the nodes of a Redis Cluster (redis+cluster://), and keeps per
 * server: capped exponential backoff between reconnection attempts,
 * exactly one line when the server is lost and one when it is back, and
 * the connections blocked in a command (for sluice_redis_pool__wakeup()).
 */
typedef struct _SluiceRedisPool SluiceRedisPool;

/**
 * SluiceRedisPoolOptions:
 * @connect_timeout_ms: > 0: the longest a connection takes to be made
 *   (connect, handshake and setup hook)
 * @command_timeout_ms: > 0: the longest wait for a reply on top of any
 *   block time, and for a server that does not read what is sent
 * @max_backoff_ms: > 0: the longest pause between reconnection attempts
 * @max_reply_bytes: the largest reply a connection takes; 0: 512 MiB
 *   (Redis's own proto-max-bulk-len), beyond which the connection is
 *   dropped and the call fails as UNAVAILABLE
 */
typedef struct {
  gint64 connect_timeout_ms;
  gint64 command_timeout_ms;
  gint64 max_backoff_ms;
  gsize max_reply_bytes;
} SluiceRedisPoolOptions;

/**
 * SluiceRedisSetupFunc:
 * @conn: a new connection, after the layer's handshake (AUTH, SELECT,
 *   CLIENT ID, and ROLE on a sentinel's master), before it serves anything
 * @user_data: what sluice_redis_pool__set_setup() was given
 *
 * The owner's check of every new connection, on every server of the pool
 * (every node of a cluster). It may make round trips of its own
 * (sluice_redis_conn__append(), sluice_redis_conn__roundtrip()).
 * Returns: TRUE, or FALSE and @error: the connection is refused with
 * @error (or, when @conn broke on the way, counted as a failed attempt).
 */
typedef gboolean (*SluiceRedisSetupFunc)(SluiceRedisConn *conn,
                                         gpointer user_data, GError **error);

/**
 * SluiceRedisClusterStats:
 * @moved: MOVED replies followed
 * @ask: ASK replies followed (ASKING, then the command on the target)
 * @ask_waits: ASK replies to a script, waited out instead of followed
 * @tryagain: TRYAGAIN replies waited out
 * @clusterdown: CLUSTERDOWN replies waited out
 * @refreshes: slot maps read
 *
 * What the Cluster router of a pool did since the pool was made (for
 * tests and diagnostics).
 */
typedef struct {
  guint64 moved;
  guint64 ask;
  guint64 ask_waits;
  guint64 tryagain;
  guint64 clusterdown;
  guint64 refreshes;
} SluiceRedisClusterStats;

/**
 * sluice_redis_pool__new:
 * @url: (transfer none): copied
 * @options: (transfer none): read now
 *
 * Makes no connection. Returns: (transfer full): free with
 * sluice_redis_pool__free().
 */
SluiceRedisPool *sluice_redis_pool__new(const SluiceRedisUrl *url,
                                        const SluiceRedisPoolOptions *options);

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
 * sluice_redis_pool__set_namespace:
 * @ns: (nullable): copied
 *
 * What a permission error says to grant: the key and channel patterns
 * ~{@ns}:* and &{@ns}:*. A plain string to the pool. Call before the
 * first connection.
 */
void sluice_redis_pool__set_namespace(SluiceRedisPool *pool, const gchar *ns);

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

/** sluice_redis_pool__get_command_timeout_ms: Returns: the reply timeout. */
gint64 sluice_redis_pool__get_command_timeout_ms(SluiceRedisPool *pool);

/**
 * sluice_redis_pool__get_master:
 * Returns: (transfer full) (nullable): "host:port" of the master the pool
 * connects to now (for a sentinel URL, the last one the sentinels named
 * and ROLE confirmed, NULL before the first connection; for a cluster URL,
 * its first node).
 */
gchar *sluice_redis_pool__get_master(SluiceRedisPool *pool);

/**
 * sluice_redis_pool__get_cluster_stats:
 * Returns: TRUE and @out filled for a redis+cluster:// pool; FALSE (@out
 * untouched) for any other.
 */
gboolean sluice_redis_pool__get_cluster_stats(SluiceRedisPool *pool,
                                              SluiceRedisClusterStats *out);

/**
 * sluice_redis_pool__acquire_slot:
 * @slot: the Redis Cluster slot of the keys the connection will serve
 *   (sluice_redis_slot__of_key()); only a cluster pool looks at it
 *
 * Checks out an idle connection (one whose peer hung up is dropped on the
 * way) or makes a new one. During an outage, at most one thread tries to
 * reconnect per backoff period and the others fail at once.
 *
 * Returns: (transfer full): a connection for the calling thread alone;
 * give it back with sluice_redis_pool__release(). Or NULL and
 * SLUICE_BROKER_ERROR_UNAVAILABLE (server unreachable: the message names
 * the URL and what to check), _AUTH (credentials refused), _INVALID (no
 * such database), _CLOSED, or the setup hook's error.
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
 * Sends what was appended and reads @n_replies replies, in one round trip
 * (on a cluster, more when some commands are redirected: only those are
 * sent again).
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
 * sluice_redis_pool__wakeup:
 * Sends CLIENT UNBLOCK for every connection blocked now in an exchange
 * with @block_ms > 0, from another connection to the same server. Never
 * waits for a reconnection: with no idle connection during an outage it
 * does nothing (a blocked fetch fails by itself then).
 */
void sluice_redis_pool__wakeup(SluiceRedisPool *pool);

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

G_END_DECLS

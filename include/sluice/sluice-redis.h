/* sluice-redis.h - the Redis brokers.
 *
 * Two modes share one Redis layer (connections, keys, Lua scripts, results,
 * the schedule, revocations, periodic claims, dead letters) and differ only
 * in how a queue carries messages:
 *
 *   SLUICE_REDIS_FAST      a list per queue (LPUSH / BLMPOP). Quick; nothing
 *                          to acknowledge, so a worker that dies loses what it
 *                          had popped: its running and prefetched tasks.
 *   SLUICE_REDIS_RELIABLE  a stream and consumer group per queue (XADD /
 *                          XREADGROUP / XACK). At-least-once: what a dead
 *                          worker held is reclaimed and run again.
 *
 * Every key of a namespace carries the hash tag {ns}, so one namespace is
 * one Redis Cluster slot and every atomic step is one Lua script; a
 * namespace split in partitions (SluiceRedisOptions.partitions) has a tag
 * per partition, each a slot, and every atomic step is still one script
 * in one of them.
 *
 * Connections are made lazily, one per thread that talks to Redis, and
 * re-made with capped backoff after an outage (a worker logs one line when
 * an outage begins and one, with its duration, when it ends).
 * A Redis that cannot be reached is SLUICE_BROKER_ERROR_UNAVAILABLE, with
 * the URL (without its password) in the message.
 */
#pragma once

#include <sluice/sluice-brokers.h>
#include <sluice/sluice-clock.h>
#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

/* SluiceRedisMode (fast or reliable, as above) is declared in
 * sluice-brokers.h, whose sluice_broker_new_for_url() takes it too. */

#define SLUICE_REDIS_DEFAULT_URL "redis://127.0.0.1:6379/0"
#define SLUICE_REDIS_DEFAULT_NAMESPACE "sluice"
#define SLUICE_REDIS_DEFAULT_MIN_REPLICAS_TIMEOUT_MS 1000
/* The most partitions a namespace can be split in. */
#define SLUICE_REDIS_MAX_PARTITIONS 1024

/**
 * SluiceRedisTlsVersion:
 * @SLUICE_REDIS_TLS_DEFAULT: what the URL says (tls_min_version=), else
 *   TLS 1.2
 * @SLUICE_REDIS_TLS_1_2: TLS 1.2 or newer (1.3 is preferred when the
 *   server has it)
 * @SLUICE_REDIS_TLS_1_3: TLS 1.3 only
 *
 * The oldest TLS version a rediss:// connection accepts.
 */
typedef enum {
  SLUICE_REDIS_TLS_DEFAULT = 0,
  SLUICE_REDIS_TLS_1_2,
  SLUICE_REDIS_TLS_1_3,
} SluiceRedisTlsVersion;

/**
 * SluiceRedisOptions:
 * @url: (nullable): `redis://[[user]:password@]host[:port][/db]`,
 *   `unix:///path/to/socket[?db=N]` (a socket URL carries no credentials:
 *   protect the socket by its file permissions), or
 *   `redis+sentinel://[[user]:password@]host:port[,host:port...]/MASTER[/db]`
 *   (Redis Sentinel: the sentinels are asked where the master MASTER is,
 *   and again after a failover; the user:password@ is the master's, the
 *   sentinels' own go in the query as sentinel_password=P and
 *   sentinel_user=U), or `redis+cluster://[[user]:password@]host:port
 *   [,host:port...]` (Redis Cluster). `rediss://`, `rediss+sentinel://`
 *   and `rediss+cluster://` are the same over TLS, to every server the
 *   URL leads to (the master, the sentinels, every node of a cluster),
 *   and take the query parameters tls_ca_file, tls_ca_dir, tls_cert,
 *   tls_key, tls_server_name, tls_min_version=1.2|1.3 and tls_insecure=1
 *   (the fields below; docs/redis.md, "TLS"). Every form takes the query
 *   parameters min_replicas_ack=N and min_replicas_timeout_ms=T (see
 *   below). NULL = SLUICE_REDIS_DEFAULT_URL
 * @mode: fast or reliable (the default, as for the sluice command). A
 *   namespace records the mode of its first client; a client of the other
 *   mode is refused (SLUICE_BROKER_ERROR_INVALID, naming both), so that a
 *   fast producer and a reliable worker never miss each other's tasks
 * @ns: (nullable): the namespace: key prefix and hash tag ({ns}:...), as
 *   the docs write it (the field is not called "namespace", a C++
 *   keyword, so that the headers stay usable from C++); NULL = "sluice"
 * @connect_timeout_ms: per connection attempt (0 = 5000)
 * @command_timeout_ms: per reply, on top of any blocking time (0 = 10000)
 * @dead_letter_max: keep at most this many dead letters (0 = 10000)
 * @reconnect_max_backoff_ms: the longest pause between reconnection
 *   attempts (0 = 5000)
 * @min_replicas_ack: after each enqueue and settle, wait (Redis WAIT) until
 *   this many replicas have the write, and fail with
 *   SLUICE_BROKER_ERROR_UNAVAILABLE when fewer confirm it in time: the
 *   write is then on the master but not known to be on a replica (a
 *   failover could lose it); repeating it is safe. 0 = the URL's
 *   min_replicas_ack, else no waiting. WAIT is not consensus: a replica
 *   that has the write may still not be the one promoted.
 * @min_replicas_timeout_ms: how long that wait may take (0 = the URL's
 *   min_replicas_timeout_ms, else 1000)
 * @partitions: how many partitions the namespace is split in,
 *   each with its own hash tag ({ns#0} ... {ns#N-1}), so that a Redis
 *   Cluster spreads one namespace over its masters (docs/redis.md,
 *   "Partitions"). 0 = what the URL says (`?partitions=N`), else 1: one
 *   hash tag {ns}, today's layout. A partitioned broker does not have
 *   SLUICE_BROKER_CAP_ORDERED. Every client of a namespace must use the
 *   same number: a namespace records it, and a client of another number is
 *   refused (SLUICE_BROKER_ERROR_INVALID) unless the namespace is empty
 * @mode_setting: (nullable): where this client's user sets @mode, in
 *   their own words, for the message that refuses a namespace of the other
 *   mode ("set this client's mode to fast (<mode_setting>)"): the sluice
 *   command names its --mode option; NULL = "SluiceRedisOptions.mode"
 * @tls_ca_file: (nullable): a rediss:// URL's CAs: a PEM file of the
 *   certificates that may sign the servers' (the URL's tls_ca_file=).
 *   With @tls_ca_dir, NULL = the system's trust store
 * @tls_ca_dir: (nullable): a directory of CA certificates named by
 *   subject hash (`openssl rehash DIR`; the URL's tls_ca_dir=)
 * @tls_cert: (nullable): this client's certificate (PEM, with its
 *   intermediates) for a server that verifies clients (tls-auth-clients
 *   yes: mutual TLS); needs @tls_key (the URL's tls_cert=)
 * @tls_key: (nullable): its private key (PEM, unencrypted: protect the
 *   file by its permissions; the URL's tls_key=)
 * @tls_server_name: (nullable): the name sent by SNI and checked against
 *   each server's certificate (the URL's tls_server_name=); NULL = the
 *   host the connection is made to
 * @tls_min_version: the oldest TLS version accepted (the URL's
 *   tls_min_version=)
 * @tls_insecure: TRUE: no verification of the servers' certificates at
 *   all (the URL's tls_insecure=1): anyone on the network path can pose as
 *   the server. For tests only; logged as a warning once per broker.
 *   FALSE = what the URL says
 *
 * The tls_* fields are for a rediss URL: set with any other,
 * sluice_redis_broker_new() refuses them (SLUICE_BROKER_ERROR_INVALID), as
 * it refuses a field that the URL gives differently. The strings are
 * borrowed for the call to sluice_redis_broker_new(), which copies them
 * and reads the files they name (a file it cannot use is
 * SLUICE_BROKER_ERROR_INVALID, naming it).
 *
 * Initialise with sluice_redis_options_init(); the broker copies it.
 */
typedef struct {
  const gchar *url;
  SluiceRedisMode mode;
  const gchar *ns;
  gint64 connect_timeout_ms;
  gint64 command_timeout_ms;
  guint dead_letter_max;
  gint64 reconnect_max_backoff_ms;
  guint min_replicas_ack;
  gint64 min_replicas_timeout_ms;
  guint partitions;
  const gchar *mode_setting;
  const gchar *tls_ca_file;
  const gchar *tls_ca_dir;
  const gchar *tls_cert;
  const gchar *tls_key;
  const gchar *tls_server_name;
  SluiceRedisTlsVersion tls_min_version;
  gboolean tls_insecure;
} SluiceRedisOptions;

SLUICE_AVAILABLE_IN_0_1
void sluice_redis_options_init(SluiceRedisOptions *options);

/**
 * sluice_redis_broker_new:
 * @options: (nullable): copied; NULL = defaults (reliable mode)
 * @clock: (nullable) (transfer none): the clock due times and revocation
 *   expiries are compared with; NULL = a real clock. TTLs of keys (result
 *   records, idempotency claims, liveness) follow the Redis server's own
 *   time.
 *
 * Checks the options (a malformed URL is SLUICE_BROKER_ERROR_INVALID) but
 * does not connect: use sluice_redis_broker_ping() to check the server.
 * A library configured --without-redis has no Redis broker: it returns
 * NULL and SLUICE_BROKER_ERROR_FAILED saying so.
 * Returns: (transfer full): the broker, or NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceBroker *sluice_redis_broker_new(const SluiceRedisOptions *options,
                                      SluiceClock *clock, GError **error);

/**
 * sluice_redis_broker_ping:
 * Connects (if needed) and sends PING. A new connection also checks what
 * the namespace records: its mode, its layout version and its script set
 * (recording them on a new namespace, docs/redis.md).
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_UNAVAILABLE (with the URL),
 * SLUICE_BROKER_ERROR_AUTH (wrong user or password) or
 * SLUICE_BROKER_ERROR_INVALID (the namespace is used in the other mode, has
 * a newer layout version than this Sluice, or runs a script set of the
 * same version with other bytes).
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_redis_broker_ping(SluiceBroker *broker, GError **error);

/**
 * sluice_redis_get_layout:
 * @options: (transfer none): the namespace (its mode does not matter)
 * @out: (out caller-allocates): filled (no need to init it); clear it
 *   with sluice_layout_clear()
 *
 * Reads the namespace's layout version (and, in SluiceLayout.notes, its
 * mode, its script set against this client's, its partitions) and changes
 * nothing: a broker's connections would record what a new namespace
 * lacks. A namespace made before versions were recorded is at version 1,
 * unrecorded; an empty one at 0.
 * Returns: TRUE, or FALSE and the errors of sluice_redis_broker_ping().
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_redis_get_layout(const SluiceRedisOptions *options,
                                 SluiceLayout *out, GError **error);

/**
 * sluice_redis_migrate:
 * @options: (transfer none): as for sluice_redis_broker_new()
 * @out: (out caller-allocates) (optional): the layout after, as
 *   sluice_redis_get_layout() fills it
 *
 * Does what the first connection of a broker of this Sluice does to the
 * namespace and each of its partitions, now: records the layout version
 * and the script set where they are missing, and refuses a newer layout.
 * (Layout version 1 is the first: no step changes keys yet.)
 * Returns: TRUE, or FALSE and the errors of sluice_redis_broker_ping().
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_redis_migrate(const SluiceRedisOptions *options,
                              SluiceLayout *out, GError **error);

G_END_DECLS

/* redis-url.h - Redis URLs (internal). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

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
 * @is_cluster: TRUE for redis+cluster://; then @host and @port are the
 *   first seed and @db is 0
 * @n_seeds: the nodes a redis+cluster:// URL names (0 otherwise)...
 * @seed_hosts: (array length=n_seeds): ...their hosts...
 * @seed_ports: (array length=n_seeds): ...and their ports
 * @partitions: the `partitions=N` query parameter (any form of URL), 0
 *   when the URL has none
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
  gboolean is_cluster;
  guint n_seeds;
  gchar **seed_hosts;
  gint *seed_ports;
  guint partitions;
} SluiceRedisUrl;

/**
 * sluice_redis_url__parse:
 * @text: `redis://[[user]:password@]host[:port][/db]`,
 *   `unix:///path/to/socket[?db=N]` or
 *   `redis+cluster://[[user]:password@]host[:port][,host[:port]...][/0]`;
 *   each may end with `?partitions=N` (a socket URL: `?db=N&partitions=N`)
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
 * sluice_redis_url__for_node:
 * @cluster: a redis+cluster:// URL
 * @to: (out caller-allocates): filled with a redis:// URL of @host:@port
 *   with @cluster's credentials; clear it with sluice_redis_url__clear()
 */
void sluice_redis_url__for_node(const SluiceRedisUrl *cluster,
                                const gchar *host, gint port,
                                SluiceRedisUrl *to);

G_END_DECLS

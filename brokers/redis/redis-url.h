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
} SluiceRedisUrl;

/**
 * sluice_redis_url__parse:
 * @text: `redis://[[user]:password@]host[:port][/db]` or
 *   `unix:///path/to/socket[?db=N]`
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

G_END_DECLS

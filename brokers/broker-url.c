/* broker-url.c - opening the broker a URL names: `sqlite://` for the
 * SQLite broker, `redis://`, `redis+sentinel://` and `unix://` for Redis. The one place that
 * maps a URL's scheme to a broker, for the library and the command alike.
 */
#include "config.h"

#include <string.h>

#include <sluice/sluice-redis.h>
#include <sluice/sluice-sqlite.h>

#define SQLITE_SCHEME "sqlite://"

gboolean
sluice_url_is_sqlite(const gchar *url)
{
  return url != NULL &&
         g_ascii_strncasecmp(url, SQLITE_SCHEME, strlen(SQLITE_SCHEME)) == 0;
}

gboolean
sluice_sqlite_url_parse(const gchar *url, SluiceSqliteOptions *options,
                        gchar **out_path, GError **error)
{
  g_autofree gchar *path = NULL;
  const gchar *rest;
  const gchar *query;

  g_return_val_if_fail(url != NULL && options != NULL && out_path != NULL,
                       FALSE);
  if (!sluice_url_is_sqlite(url) || url[strlen(SQLITE_SCHEME)] != '/') {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a SQLite URL: write sqlite:///absolute/path/to/"
                "file.db (three slashes)",
                url);
    return FALSE;
  }
  rest = url + strlen(SQLITE_SCHEME);
  query = strchr(rest, '?');
  path = g_uri_unescape_segment(rest, query, NULL);
  if (path == NULL || path[1] == '\0') {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” names no database file: write "
                "sqlite:///absolute/path/to/file.db",
                url);
    return FALSE;
  }
  if (query != NULL) {
    g_auto(GStrv) params = g_strsplit(query + 1, "&", -1);
    for (guint i = 0; params[i] != NULL; i++) {
      const gchar *p = params[i];
      if (g_ascii_strcasecmp(p, "synchronous=full") == 0)
        options->synchronous = SLUICE_SQLITE_SYNC_FULL;
      else if (g_ascii_strcasecmp(p, "synchronous=normal") == 0)
        options->synchronous = SLUICE_SQLITE_SYNC_NORMAL;
      else if (g_ascii_strcasecmp(p, "synchronous=off") == 0)
        options->synchronous = SLUICE_SQLITE_SYNC_OFF;
      else if (p[0] != '\0') {
        g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                    "unknown parameter “%s” in the SQLite URL “%s”: the one "
                    "parameter is synchronous=full|normal|off",
                    p, url);
        return FALSE;
      }
    }
  }
  options->path = path;
  *out_path = g_steal_pointer(&path);
  return TRUE;
}

SluiceBroker *
sluice_broker_new_for_url(const gchar *url, SluiceClock *clock, GError **error)
{
  g_return_val_if_fail(url != NULL, NULL);
  if (sluice_url_is_sqlite(url)) {
    SluiceSqliteOptions options;
    g_autofree gchar *path = NULL;

    sluice_sqlite_options_init(&options);
    if (!sluice_sqlite_url_parse(url, &options, &path, error))
      return NULL;
    return sluice_sqlite_broker_new(&options, clock, error);
  }
  if (g_ascii_strncasecmp(url, "redis://", 8) == 0 ||
      g_ascii_strncasecmp(url, "redis+sentinel://", 17) == 0 ||
      g_ascii_strncasecmp(url, "unix://", 7) == 0 ||
      /* TLS: the same forms over rediss (brokers/redis/net/url.c). */
      g_ascii_strncasecmp(url, "rediss://", 9) == 0 ||
      g_ascii_strncasecmp(url, "rediss+sentinel://", 18) == 0 ||
      g_ascii_strncasecmp(url, "rediss+cluster://", 17) == 0) {
    SluiceRedisOptions options;

    sluice_redis_options_init(&options);
    options.url = url;
    return sluice_redis_broker_new(&options, clock, error);
  }
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "“%s” is not a broker URL: use sqlite:///path/to/file.db, "
              "redis://HOST[:PORT][/DB], "
              "redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB], "
              "unix:///path/to/socket, or rediss:// (and rediss+sentinel://, "
              "rediss+cluster://) for TLS",
              url);
  return NULL;
}

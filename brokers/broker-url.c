/* broker-url.c - the broker a URL names: the one table of URL schemes,
 * for the library and the `sluice` command alike (which has no copy of
 * its own), and the SQLite URL's parser.
 *
 *   sqlite://        the SQLite broker (sluice_sqlite_url_parse())
 *   redis://, redis+sentinel://, redis+cluster://, unix://
 *                    the Redis broker, which parses the rest itself
 *                    (brokers/redis/net/url.c), partitions included
 *   memory:          a memory broker of this process
 *
 * A new scheme is a row of `schemes` and a constructor: the message for
 * an unknown scheme lists the table, so it cannot leave one out.
 */
#include "config.h"

#include <string.h>

#include <sluice/sluice-redis.h>
#include <sluice/sluice-sqlite.h>
#include <sluice/sys/broker.h>

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

void
sluice_broker_url_options_init(SluiceBrokerUrlOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->mode = SLUICE_REDIS_RELIABLE;
}

static SluiceBroker *
open_sqlite(const gchar *url, const SluiceBrokerUrlOptions *o,
            SluiceClock *clock, GError **error)
{
  SluiceSqliteOptions options;
  g_autofree gchar *path = NULL;

  sluice_sqlite_options_init(&options);
  if (!sluice_sqlite_url_parse(url, &options, &path, error))
    return NULL;
  options.dead_letter_max = o->dead_letter_max;
  options.read_only = o->read_only;
  return sluice_sqlite_broker_new(&options, clock, error);
}

static SluiceBroker *
open_redis(const gchar *url, const SluiceBrokerUrlOptions *o,
           SluiceClock *clock, GError **error)
{
  SluiceRedisOptions options;

  sluice_redis_options_init(&options);
  options.url = url;
  options.ns = o->ns;
  options.mode = o->mode;
  options.dead_letter_max = o->dead_letter_max;
  options.min_replicas_ack = o->min_replicas_ack;
  options.mode_setting = o->mode_setting;
  return sluice_redis_broker_new(&options, clock, error);
}

static SluiceBroker *
open_memory(const gchar *url, const SluiceBrokerUrlOptions *o,
            SluiceClock *clock, GError **error)
{
  SluiceMemoryBrokerOptions options = {.dead_letter_max = o->dead_letter_max};
  const gchar *rest = strchr(url, ':') + 1;

  /* Nothing may follow: a memory broker has nothing to name, and a
   * "memory:foo" that quietly ignored its foo would look like a choice. */
  if (strcmp(rest, "") != 0 && strcmp(rest, "//") != 0) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "a memory broker URL is memory: alone (it names no file or "
                "server: its messages live in this process)");
    return NULL;
  }
  return sluice_memory_broker_new(&options, clock);
}

/* Every scheme, in the order the message for an unknown one names them. */
static const struct {
  const gchar *scheme; /* with its "://" or ":" */
  const gchar *form;   /* for the message */
  SluiceBroker *(*open)(const gchar *url, const SluiceBrokerUrlOptions *o,
                        SluiceClock *clock, GError **error);
} schemes[] = {
    {"sqlite://", "sqlite:///path/to/file.db", open_sqlite},
    {"redis://", "redis://HOST[:PORT][/DB]", open_redis},
    {"redis+sentinel://", "redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER",
     open_redis},
    {"redis+cluster://", "redis+cluster://HOST:PORT[,HOST:PORT...]",
     open_redis},
    {"unix://", "unix:///path/to/redis.sock", open_redis},
    /* TLS: the same forms over rediss (brokers/redis/net/url.c). */
    {"rediss://", "rediss://HOST[:PORT][/DB]", open_redis},
    {"rediss+sentinel://", "rediss+sentinel://HOST:PORT[,HOST:PORT...]/MASTER",
     open_redis},
    {"rediss+cluster://", "rediss+cluster://HOST:PORT[,HOST:PORT...]",
     open_redis},
    {"memory:", "memory:", open_memory},
};

SluiceBroker *
sluice_broker_new_for_url(const gchar *url,
                          const SluiceBrokerUrlOptions *options,
                          SluiceClock *clock, GError **error)
{
  SluiceBrokerUrlOptions defaults;
  g_autoptr(GString) forms = g_string_new(NULL);
  gsize scheme_len;

  g_return_val_if_fail(url != NULL, NULL);
  if (options == NULL) {
    sluice_broker_url_options_init(&defaults);
    options = &defaults;
  }
  for (gsize i = 0; i < G_N_ELEMENTS(schemes); i++) {
    if (g_ascii_strncasecmp(url, schemes[i].scheme,
                            strlen(schemes[i].scheme)) == 0)
      return schemes[i].open(url, options, clock, error);
    g_string_append_printf(forms, "%s%s",
                           i == 0                           ? ""
                           : i + 1 == G_N_ELEMENTS(schemes) ? " or "
                                                            : ", ",
                           schemes[i].form);
  }
  /* Only the scheme is quoted: the rest may hold a password. */
  scheme_len = strcspn(url, ":/@?#");
  if (url[0] == '/') {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "a broker URL is expected, not a path: for a SQLite "
                "database write sqlite:// and the absolute path "
                "(sqlite:///path/to/file.db); the broker URLs are %s",
                forms->str);
  } else if (url[scheme_len] != ':' || scheme_len == 0) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "the broker URL has no scheme (nothing before “:”): write "
                "one of %s",
                forms->str);
  } else {
    g_autofree gchar *shown =
        sluice_broker_escape_text(url, (gssize)scheme_len, 40);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "unknown broker URL scheme “%s:”: the broker URLs are %s",
                shown, forms->str);
  }
  return NULL;
}

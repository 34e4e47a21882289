/* redis-url.c - Redis URLs: parsing, the shown form, copies (see
 * redis-url.h).
 *
 * `redis://[[user]:password@]host[:port][/db]` or `unix:///path?db=N`.
 * The userinfo ends at the last '@', so a password may hold '/', '?', '#',
 * ':' or '@' as it is (or percent-encoded); user and password are
 * percent-decoded, the rest is parsed with GLib's GUri. The password is
 * kept for AUTH and never shown: every message uses url->display, where it
 * reads "***".
 */
#include "config.h"

#include <string.h>

#include <sluice/sluice-redis.h>
#include <sluice/sys/broker.h>

#include "brokers/redis/redis-url.h"

/* ---- URLs ----------------------------------------------------------------
 *
 * Users paste passwords into URLs as they are, with '/', '?', '#', ':' or
 * '@' unescaped, so the URL is not handed to GUri whole (GUri would end the
 * userinfo at the first '/' or '@' and show the rest of the password as a
 * host or a path). The text is split first, by one rule that never
 * depends on what the password holds: after "scheme://", everything up to
 * the LAST '@' is the userinfo, the user before its first ':' and the
 * password after it. Only the part after that '@' goes to GUri. Every
 * message shows the URL rebuilt from the scheme, the user and that part,
 * so the password cannot reach one, however the URL is malformed; a
 * userinfo without ':' may be a password typed without its colon, so it is
 * not shown either.
 */

static gboolean
url_invalid(GError **error, const gchar *shown, const gchar *why)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "invalid Redis URL “%s”: %s (expected "
              "redis://[[user]:password@]host[:port][/db], "
              "unix:///path/to/socket[?db=N] or "
              "redis+cluster://[[user]:password@]host:port[,host:port...])",
              shown, why);
  return FALSE;
}

static gboolean
parse_db(const gchar *text, gint *out)
{
  guint64 value;

  if (text == NULL || text[0] == '\0')
    return FALSE;
  if (!g_ascii_string_to_unsigned(text, 10, 0, G_MAXINT, &value, NULL))
    return FALSE;
  *out = (gint)value;
  return TRUE;
}

/* The query of any form of URL: `partitions=N` everywhere, `db=N` where
 * @db_allowed (a socket URL has no path to carry it). */
static gboolean
parse_query(const gchar *query, gboolean db_allowed, const gchar *shown,
            SluiceRedisUrl *parsed, GError **error)
{
  g_autoptr(GHashTable) params =
      g_uri_parse_params(query, -1, "&", G_URI_PARAMS_NONE, NULL);
  GHashTableIter iter;
  gpointer key, value;

  if (params == NULL)
    return url_invalid(error, shown, "the query is malformed");
  g_hash_table_iter_init(&iter, params);
  while (g_hash_table_iter_next(&iter, &key, &value)) {
    guint64 n;

    if (strcmp(key, "partitions") == 0) {
      if (!g_ascii_string_to_unsigned(value, 10, 1, SLUICE_REDIS_MAX_PARTITIONS,
                                      &n, NULL))
        return url_invalid(error, shown,
                           "partitions=N takes a number from 1 to " G_STRINGIFY(
                               SLUICE_REDIS_MAX_PARTITIONS));
      parsed->partitions = (guint)n;
    } else if (db_allowed && strcmp(key, "db") == 0) {
      if (!parse_db(value, &parsed->db))
        return url_invalid(error, shown,
                           "db=N takes a database number (0 ... 15)");
    } else {
      return url_invalid(error, shown,
                         db_allowed ? "the query parameters are db=N and "
                                      "partitions=N"
                                    : "the only query parameter is "
                                      "partitions=N");
    }
  }
  return TRUE;
}

static gchar *
make_display(const SluiceRedisUrl *url)
{
  GString *s = g_string_new(url->is_unix      ? "unix://"
                            : url->is_cluster ? "redis+cluster://"
                                              : "redis://");
  g_autofree gchar *host = NULL;

  if (url->is_unix) {
    g_autofree gchar *path = sluice_broker_escape_text(url->path, -1, 0);

    g_string_append(s, path);
    if (url->db != 0)
      g_string_append_printf(s, "?db=%d", url->db);
    return g_string_free(s, FALSE);
  }
  if (url->user != NULL || url->password != NULL) {
    if (url->user != NULL) {
      g_autofree gchar *user = g_uri_escape_string(url->user, NULL, FALSE);
      g_autofree gchar *shown = sluice_broker_escape_text(user, -1, 0);
      g_string_append(s, shown);
    }
    if (url->password != NULL)
      g_string_append(s, ":***");
    g_string_append_c(s, '@');
  }
  for (guint i = 0; i < MAX(url->n_seeds, 1); i++) {
    g_clear_pointer(&host, g_free);
    host = sluice_broker_escape_text(
        url->n_seeds > 0 ? url->seed_hosts[i] : url->host, -1, 0);
    if (i > 0)
      g_string_append_c(s, ',');
    if (strchr(host, ':') != NULL)
      g_string_append_printf(s, "[%s]", host);
    else
      g_string_append(s, host);
    g_string_append_printf(s, ":%d",
                           url->n_seeds > 0 ? url->seed_ports[i] : url->port);
  }
  g_string_append_printf(s, "/%d", url->db);
  return g_string_free(s, FALSE);
}

/* The pieces of a URL text, by the rule at the top of this section. All
 * point into the text; @userinfo is NULL when there is no '@'. */
typedef struct {
  const gchar *scheme; /* NULL when the text has no "scheme://" */
  gsize scheme_len;
  const gchar *userinfo;
  gsize userinfo_len;
  const gchar *colon; /* the first ':' of the userinfo, or NULL */
  const gchar *rest;  /* after the "scheme://" and the userinfo's '@' */
} UrlParts;

static void
split_url(const gchar *text, UrlParts *parts)
{
  const gchar *p = text;
  const gchar *after_scheme = text;
  const gchar *at;

  memset(parts, 0, sizeof *parts);
  /* RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) then "://". */
  if (g_ascii_isalpha(*p)) {
    while (g_ascii_isalnum(*p) || *p == '+' || *p == '-' || *p == '.')
      p++;
    if (g_str_has_prefix(p, "://")) {
      parts->scheme = text;
      parts->scheme_len = (gsize)(p - text);
      after_scheme = p + 3;
    }
  }
  parts->rest = after_scheme;
  at = strrchr(after_scheme, '@');
  if (at != NULL) {
    parts->userinfo = after_scheme;
    parts->userinfo_len = (gsize)(at - after_scheme);
    parts->colon = memchr(after_scheme, ':', parts->userinfo_len);
    parts->rest = at + 1;
  }
}

/* The URL as messages may show it: no password, nothing that could be
 * one, every byte printable UTF-8. */
static gchar *
shown_url(const UrlParts *parts)
{
  GString *s = g_string_new(NULL);
  g_autofree gchar *rest = sluice_broker_escape_text(parts->rest, -1, 200);

  if (parts->scheme != NULL) {
    g_autofree gchar *scheme =
        sluice_broker_escape_text(parts->scheme, (gssize)parts->scheme_len, 20);
    g_string_append_printf(s, "%s://", scheme);
  }
  if (parts->userinfo != NULL) {
    if (parts->colon != NULL) {
      g_autofree gchar *user = sluice_broker_escape_text(
          parts->userinfo, (gssize)(parts->colon - parts->userinfo), 64);
      g_string_append_printf(s, "%s:***@", user);
    } else {
      g_string_append(s, "***@");
    }
  }
  g_string_append(s, rest);
  return g_string_free(s, FALSE);
}

/* Percent-decodes @len bytes of @text into a NUL-free string, or NULL. */
static gchar *
unescape_part(const gchar *text, gsize len)
{
  g_autofree gchar *raw = g_strndup(text, len);

  return g_uri_unescape_string(raw, NULL);
}

/* ---- redis+cluster:// ---------------------------------------------------
 *
 * After the userinfo: a comma-separated list of nodes, each host[:port]
 * ([v6]:port for IPv6), then nothing, "/" or "/0": a Cluster has database
 * 0 alone. Any node of the cluster will do; more than one is a fallback
 * for when the first is down at start-up.
 */

static gboolean
parse_cluster_node(const gchar *text, gsize len, gchar **out_host,
                   gint *out_port)
{
  const gchar *end = text + len;
  const gchar *host_end;
  const gchar *colon = NULL;
  guint64 port = 6379;

  if (len > 0 && text[0] == '[') {
    host_end = memchr(text, ']', len);
    if (host_end == NULL || host_end == text + 1)
      return FALSE;
    if (host_end + 1 < end) {
      if (host_end[1] != ':')
        return FALSE;
      colon = host_end + 1;
    }
    text++;
  } else {
    colon = memchr(text, ':', len);
    host_end = colon != NULL ? colon : end;
    if (host_end == text)
      return FALSE;
  }
  if (colon != NULL) {
    g_autofree gchar *digits = g_strndup(colon + 1, (gsize)(end - colon - 1));
    if (!g_ascii_string_to_unsigned(digits, 10, 1, 65535, &port, NULL))
      return FALSE;
  }
  *out_host = g_strndup(text, (gsize)(host_end - text));
  *out_port = (gint)port;
  return TRUE;
}

static gboolean
parse_cluster_nodes(const gchar *rest, const gchar *shown,
                    SluiceRedisUrl *parsed, GError **error)
{
  gsize nodes_len = strcspn(rest, "/?#");
  const gchar *tail = rest + nodes_len;
  const gchar *query = strchr(tail, '?');
  g_auto(GStrv) items = NULL;
  g_autofree gchar *nodes = g_strndup(rest, nodes_len);
  g_autofree gchar *path =
      g_strndup(tail, query != NULL ? (gsize)(query - tail) : strlen(tail));

  if (strchr(tail, '#') != NULL)
    return url_invalid(error, shown,
                       "redis+cluster:// URLs take no fragment (#...)");
  if (query != NULL && !parse_query(query + 1, FALSE, shown, parsed, error))
    return FALSE;
  if (path[0] == '/' && path[1] != '\0' && strcmp(path, "/0") != 0)
    return url_invalid(error, shown,
                       "a Redis Cluster has database 0 alone: end the URL "
                       "with the node list, “/” or “/0”");
  items = g_strsplit(nodes, ",", -1);
  if (items[0] == NULL)
    return url_invalid(error, shown,
                       "name at least one node of the cluster "
                       "(redis+cluster://host:port[,host:port...])");
  parsed->is_cluster = TRUE;
  parsed->n_seeds = g_strv_length(items);
  parsed->seed_hosts = g_new0(gchar *, parsed->n_seeds + 1);
  parsed->seed_ports = g_new0(gint, parsed->n_seeds);
  for (guint i = 0; i < parsed->n_seeds; i++) {
    if (!parse_cluster_node(items[i], strlen(items[i]), &parsed->seed_hosts[i],
                            &parsed->seed_ports[i])) {
      sluice_redis_url__clear(parsed);
      return url_invalid(error, shown,
                         "each node of a redis+cluster:// URL is host[:port] "
                         "or [IPv6]:port, separated by commas");
    }
  }
  parsed->host = g_strdup(parsed->seed_hosts[0]);
  parsed->port = parsed->seed_ports[0];
  return TRUE;
}

gboolean
sluice_redis_url__parse(const gchar *text, SluiceRedisUrl *url, GError **error)
{
  g_autoptr(GUri) uri = NULL;
  g_autofree gchar *shown = NULL;
  g_autofree gchar *scheme = NULL;
  g_autofree gchar *hostpart = NULL;
  SluiceRedisUrl parsed = {0};
  UrlParts parts;
  const gchar *host;
  const gchar *query;

  g_return_val_if_fail(text != NULL && url != NULL, FALSE);

  split_url(text, &parts);
  shown = shown_url(&parts);
  if (parts.scheme == NULL)
    return url_invalid(error, shown,
                       "it does not start with redis:// or unix://");
  scheme = g_ascii_strdown(parts.scheme, (gssize)parts.scheme_len);
  if (strcmp(scheme, "rediss") == 0)
    return url_invalid(error, shown,
                       "TLS (rediss://) is not supported by hiredis 0.14; "
                       "reach a TLS Redis through a local TLS tunnel");
  if (strcmp(scheme, "unix") != 0 && strcmp(scheme, "redis") != 0 &&
      strcmp(scheme, "redis+cluster") != 0)
    return url_invalid(error, shown,
                       "the scheme must be redis://, unix:// or "
                       "redis+cluster://");
  if (strcmp(scheme, "unix") == 0 && parts.userinfo != NULL)
    /* A socket is protected by its file permissions; '@' in a socket
     * path is written %40. */
    return url_invalid(error, shown,
                       "unix:// URLs cannot carry credentials (write '@' in "
                       "a socket path as %40); use redis:// or a socket that "
                       "needs none");
  if (parts.userinfo != NULL && parts.colon == NULL)
    return url_invalid(error, shown,
                       "a user needs a password: write user:password@ or "
                       ":password@ (an ACL user with nopass accepts any "
                       "password)");

  if (strcmp(scheme, "redis+cluster") == 0) {
    if (!parse_cluster_nodes(parts.rest, shown, &parsed, error))
      return FALSE;
    goto credentials;
  }

  /* Only what follows the userinfo goes to GUri: it holds no password. */
  hostpart = g_strconcat(scheme, "://", parts.rest, NULL);
  uri = g_uri_parse(hostpart, G_URI_FLAGS_NON_DNS, NULL);
  if (uri == NULL)
    return url_invalid(error, shown,
                       "it is not a well-formed URL; percent-encode special "
                       "characters of the host and the path");
  if (g_uri_get_fragment(uri) != NULL)
    return url_invalid(error, shown, "a fragment (#...) has no meaning here");
  host = g_uri_get_host(uri);
  query = g_uri_get_query(uri);

  if (strcmp(scheme, "unix") == 0) {
    parsed.is_unix = TRUE;
    if (host != NULL && host[0] != '\0')
      return url_invalid(error, shown,
                         "a unix URL has no host: write unix:///path (three "
                         "slashes)");
    if (g_uri_get_path(uri)[0] != '/')
      return url_invalid(error, shown,
                         "the socket path is missing or not absolute");
    if (query != NULL && !parse_query(query, TRUE, shown, &parsed, error))
      return FALSE;
    parsed.path = g_strdup(g_uri_get_path(uri));
  } else {
    const gchar *path = g_uri_get_path(uri);

    if (host == NULL || host[0] == '\0')
      return url_invalid(error, shown,
                         "the host is missing (redis://host[:port][/db])");
    if (query != NULL && !parse_query(query, FALSE, shown, &parsed, error))
      return FALSE;
    if (path[0] != '\0' && strcmp(path, "/") != 0 &&
        !parse_db(path + 1, &parsed.db))
      return url_invalid(error, shown,
                         "the path must be a database number (/0 ... /15)");
    parsed.host = g_strdup(host);
    parsed.port = g_uri_get_port(uri) > 0 ? g_uri_get_port(uri) : 6379;
  }

credentials:
  if (parts.userinfo != NULL) {
    gsize user_len = (gsize)(parts.colon - parts.userinfo);
    const gchar *pw = parts.colon + 1;
    gsize pw_len = parts.userinfo_len - user_len - 1;
    gchar *user = unescape_part(parts.userinfo, user_len);

    parsed.password = unescape_part(pw, pw_len);
    if (user == NULL || parsed.password == NULL) {
      g_free(user);
      sluice_redis_url__clear(&parsed);
      return url_invalid(error, shown,
                         "the user or the password holds a '%' that does not "
                         "start an escape (%XX) or an escaped NUL; write '%' "
                         "as %25");
    }
    if (user[0] != '\0')
      parsed.user = user;
    else
      g_free(user);
  }
  parsed.display = make_display(&parsed);
  *url = parsed;
  return TRUE;
}

void
sluice_redis_url__clear(SluiceRedisUrl *url)
{
  if (url == NULL)
    return;
  g_clear_pointer(&url->host, g_free);
  g_clear_pointer(&url->path, g_free);
  g_clear_pointer(&url->user, g_free);
  if (url->password != NULL)
    memset(url->password, 0, strlen(url->password));
  g_clear_pointer(&url->password, g_free);
  g_clear_pointer(&url->display, g_free);
  g_clear_pointer(&url->seed_hosts, g_strfreev);
  g_clear_pointer(&url->seed_ports, g_free);
  url->n_seeds = 0;
  url->is_cluster = FALSE;
  url->partitions = 0;
}

void
sluice_redis_url__copy(const SluiceRedisUrl *from, SluiceRedisUrl *to)
{
  to->is_unix = from->is_unix;
  to->host = g_strdup(from->host);
  to->port = from->port;
  to->path = g_strdup(from->path);
  to->db = from->db;
  to->user = g_strdup(from->user);
  to->password = g_strdup(from->password);
  to->display = g_strdup(from->display);
  to->is_cluster = from->is_cluster;
  to->n_seeds = from->n_seeds;
  to->seed_hosts = g_strdupv(from->seed_hosts);
  to->seed_ports = g_memdup2(from->seed_ports, sizeof(gint) * from->n_seeds);
  to->partitions = from->partitions;
}

void
sluice_redis_url__for_node(const SluiceRedisUrl *cluster, const gchar *host,
                           gint port, SluiceRedisUrl *to)
{
  memset(to, 0, sizeof *to);
  to->host = g_strdup(host);
  to->port = port;
  to->user = g_strdup(cluster->user);
  to->password = g_strdup(cluster->password);
  to->display = make_display(to);
}

/* url.c - Redis URLs: parsing, the shown form, copies (see redis-net.h).
 *
 * `redis://[[user]:password@]host[:port][/db]`, `unix:///path?db=N`,
 * `redis+sentinel://[[user]:password@]h1[:p1][,h2[:p2]...]/MASTER[/db]` or
 * `redis+cluster://[[user]:password@]h1[:p1][,h2[:p2]...][/0]`.
 * In a sentinel URL the userinfo is what the MASTER wants (the same
 * meaning as in redis://: the credentials of the server that holds the
 * data), and the sentinels' own credentials are the query parameters
 * sentinel_user and sentinel_password: a sentinel that needs none (the
 * common case) costs nothing, and moving from redis:// to
 * redis+sentinel:// keeps the userinfo. GUri cannot parse a host list,
 * so sentinel URLs are parsed here.
 * The userinfo ends at the last '@', so a password may hold '/', '?', '#',
 * ':' or '@' as it is (or percent-encoded); user and password are
 * percent-decoded, the rest is parsed with GLib's GUri. The password is
 * kept for AUTH and never shown: every message uses url->display, where it
 * reads "***".
 *
 * What a URL says about a connection is parsed here; every other query
 * parameter is handed back to the owner (SluiceRedisUrl.params), which
 * parses its own and refuses the rest with sluice_redis_url__refuse_unknown(),
 * so this file knows nothing of what is built on the layer.
 *
 * TLS: rediss://, rediss+sentinel:// and rediss+cluster:// are the three
 * TCP forms with conn_type "tls" and a SluiceRedisTls (tls-private.h) made
 * of their tls_* parameters (tls_ca_file, tls_ca_dir, tls_cert, tls_key,
 * tls_server_name, tls_min_version=1.2|1.3, tls_insecure=1), which every
 * copy of the URL shares; the files they name are read when the owner
 * prepares the URL (sluice_redis_url__prepare_tls()) or at the first
 * connection, never while parsing. A tls_* parameter on a plain URL is
 * refused: it would otherwise be silently ignored.
 *
 * To add a scheme: recognise it in parse_into(), set conn_type to the
 * connection type it needs (conn-type-private.h) and what that type reads
 * (SluiceRedisEndpoint.settings), parse the scheme's own query parameters
 * in parse_params(), and name them in sluice_redis_url__refuse_unknown()
 * and in url_invalid()'s list of forms.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/net/tls-private.h"
#include "brokers/redis/net/url-private.h"
#include "serializers/text.h"

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
              "redis+sentinel://[[user]:password@]host:port[,host:port...]/"
              "MASTERNAME[/db], "
              "redis+cluster://[[user]:password@]host:port[,host:port...], "
              "unix:///path/to/socket[?db=N], or rediss://, "
              "rediss+sentinel://, rediss+cluster:// for TLS)",
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

static void
append_userinfo(GString *s, const SluiceRedisUrl *url)
{
  if (url->user != NULL || url->password != NULL) {
    if (url->user != NULL) {
      g_autofree gchar *user = g_uri_escape_string(url->user, NULL, FALSE);
      g_autofree gchar *shown = sluice_text__escape(user, -1, 0);
      g_string_append(s, shown);
    }
    if (url->password != NULL)
      g_string_append(s, ":***");
    g_string_append_c(s, '@');
  }
}

static gchar *
make_display(const SluiceRedisUrl *url)
{
  gboolean tls = url->tls != NULL;
  GString *s = g_string_new(
      url->is_unix      ? "unix://"
      : url->is_cluster ? (tls ? "rediss+cluster://" : "redis+cluster://")
      : tls             ? "rediss://"
                        : "redis://");
  g_autofree gchar *host = NULL;

  if (url->is_sentinel) {
    g_autofree gchar *name = NULL;

    g_string_assign(s, tls ? "rediss+sentinel://" : "redis+sentinel://");
    append_userinfo(s, url);
    for (guint i = 0; i < url->n_sentinels; i++) {
      g_autofree gchar *h = sluice_text__escape(url->sentinels[i], -1, 0);
      if (i > 0)
        g_string_append_c(s, ',');
      if (strchr(h, ':') != NULL)
        g_string_append_printf(s, "[%s]:%d", h, url->sentinel_ports[i]);
      else
        g_string_append_printf(s, "%s:%d", h, url->sentinel_ports[i]);
    }
    name = sluice_text__escape(url->master_name, -1, 0);
    g_string_append_printf(s, "/%s/%d", name, url->db);
    return g_string_free(s, FALSE);
  }
  if (url->is_unix) {
    g_autofree gchar *path = sluice_text__escape(url->path, -1, 0);

    g_string_append(s, path);
    if (url->db != 0)
      g_string_append_printf(s, "?db=%d", url->db);
    return g_string_free(s, FALSE);
  }
  append_userinfo(s, url);
  /* A cluster URL shows every seed node. */
  for (guint i = 0; i < MAX(url->n_seeds, 1); i++) {
    g_clear_pointer(&host, g_free);
    host = sluice_text__escape(
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

/* @rest with the value of every query parameter whose name says
 * "password" (sentinel_password) replaced by "***". */
static gchar *
mask_query_passwords(const gchar *rest)
{
  const gchar *q = strchr(rest, '?');
  g_auto(GStrv) pieces = NULL;
  GString *s;

  if (q == NULL)
    return g_strdup(rest);
  s = g_string_new_len(rest, q - rest + 1);
  pieces = g_strsplit(q + 1, "&", -1);
  for (guint i = 0; pieces[i] != NULL; i++) {
    const gchar *eq = strchr(pieces[i], '=');
    g_autofree gchar *name =
        eq != NULL ? g_strndup(pieces[i], eq - pieces[i]) : NULL;

    if (i > 0)
      g_string_append_c(s, '&');
    if (name != NULL && strstr(name, "password") != NULL)
      g_string_append_printf(s, "%s=***", name);
    else
      g_string_append(s, pieces[i]);
  }
  return g_string_free(s, FALSE);
}

/* The URL as messages may show it: no password, nothing that could be
 * one, every byte printable UTF-8. */
static gchar *
shown_url(const UrlParts *parts)
{
  GString *s = g_string_new(NULL);
  g_autofree gchar *masked = mask_query_passwords(parts->rest);
  g_autofree gchar *rest = sluice_text__escape(masked, -1, 200);

  if (parts->scheme != NULL) {
    g_autofree gchar *scheme =
        sluice_text__escape(parts->scheme, (gssize)parts->scheme_len, 20);
    g_string_append_printf(s, "%s://", scheme);
  }
  if (parts->userinfo != NULL) {
    if (parts->colon != NULL) {
      g_autofree gchar *user = sluice_text__escape(
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

static void
param_clear(gpointer data)
{
  SluiceRedisUrlParam *param = data;

  g_free(param->name);
  g_free(param->value);
}

/* The tls_* parameters of a URL, as parsed (owned); @on for the rediss
 * schemes. */
typedef struct {
  gboolean on;
  gchar *ca_file;
  gchar *ca_dir;
  gchar *cert;
  gchar *key;
  gchar *server_name;
  gint min_version;
  gboolean insecure;
  gboolean insecure_given;
} TlsParams;

static void
tls_params_clear(TlsParams *tls)
{
  g_free(tls->ca_file);
  g_free(tls->ca_dir);
  g_free(tls->cert);
  g_free(tls->key);
  g_free(tls->server_name);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(TlsParams, tls_params_clear)

/* The parameter names of TLS, for the message that refuses an unknown
 * one. */
static const gchar *const tls_param_names[] = {
    "tls_ca_file",     "tls_ca_dir",      "tls_cert",     "tls_key",
    "tls_server_name", "tls_min_version", "tls_insecure", NULL};

/* A server name: a host name or an address, nothing a certificate check
 * could misread. */
static gboolean
valid_server_name(const gchar *name)
{
  if (name[0] == '\0' || strlen(name) > 253)
    return FALSE;
  if (g_hostname_is_ip_address(name))
    return TRUE;
  for (const gchar *c = name; *c != '\0'; c++)
    if (!g_ascii_isalnum(*c) && *c != '.' && *c != '-' && *c != '_')
      return FALSE;
  return TRUE;
}

/* Parses @key=@value into @tls when it is one of TLS's parameters.
 * Returns: 1 (taken: @key and @value are freed here), 0 (not TLS's: the
 * caller keeps both) or -1 (refused, @error set; both freed here). */
static gint
take_tls_param(TlsParams *tls, gchar *key, gchar *value, const gchar *shown,
               GError **error)
{
  gchar **slot = NULL;
  const gchar *why = NULL;

  if (!g_str_has_prefix(key, "tls_"))
    return 0;
  if (!tls->on) {
    why = "the tls_* parameters are for TLS: write rediss:// (or "
          "rediss+sentinel://, rediss+cluster://)";
    goto refuse;
  }
  if (strcmp(key, "tls_ca_file") == 0)
    slot = &tls->ca_file;
  else if (strcmp(key, "tls_ca_dir") == 0)
    slot = &tls->ca_dir;
  else if (strcmp(key, "tls_cert") == 0)
    slot = &tls->cert;
  else if (strcmp(key, "tls_key") == 0)
    slot = &tls->key;
  else if (strcmp(key, "tls_server_name") == 0)
    slot = &tls->server_name;

  if (slot != NULL) {
    if (*slot != NULL) {
      why = "a tls_* parameter is given twice: give each once";
      goto refuse;
    }
    if (value[0] == '\0') {
      why = "a tls_* parameter has no value: tls_ca_file, tls_ca_dir, "
            "tls_cert and tls_key take a path, tls_server_name a host name";
      goto refuse;
    }
    if (slot == &tls->server_name && !valid_server_name(value)) {
      why = "tls_server_name must be a host name or an address";
      goto refuse;
    }
    *slot = value;
    g_free(key);
    return 1;
  }
  if (strcmp(key, "tls_min_version") == 0) {
    if (tls->min_version != 0) {
      why = "tls_min_version is given twice: give it once";
      goto refuse;
    }
    if (strcmp(value, "1.2") == 0)
      tls->min_version = 12;
    else if (strcmp(value, "1.3") == 0)
      tls->min_version = 13;
    else {
      why = "tls_min_version is 1.2 (the default) or 1.3";
      goto refuse;
    }
  } else if (strcmp(key, "tls_insecure") == 0) {
    if (tls->insecure_given) {
      why = "tls_insecure is given twice: give it once";
      goto refuse;
    }
    tls->insecure_given = TRUE;
    if (strcmp(value, "1") == 0 || strcmp(value, "true") == 0 ||
        strcmp(value, "yes") == 0)
      tls->insecure = TRUE;
    else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0 ||
             strcmp(value, "no") == 0)
      tls->insecure = FALSE;
    else {
      why = "tls_insecure is 1 (no verification of the server: for tests "
            "only) or 0";
      goto refuse;
    }
  } else {
    return 0; /* unknown: refused by the owner, with every name */
  }
  g_free(key);
  g_free(value);
  return 1;

refuse:
  g_free(key);
  g_free(value);
  url_invalid(error, shown, why);
  return -1;
}

/* The query parameters of the connection: for unix:// the database, for
 * redis+sentinel:// the sentinels' credentials, for the rediss schemes
 * TLS's (into @tls). Every other parameter is
 * the owner's (the broker's partitions= and min_replicas_ack=): handed
 * back in order in @parsed->params, to be parsed and refused by the owner
 * (sluice_redis_url__refuse_unknown()), so this layer needs to know
 * nothing of what is built on it. @query is the raw text after '?'. */
static gboolean
parse_params(const gchar *query, const gchar *scheme, TlsParams *tls,
             const gchar *shown, SluiceRedisUrl *parsed, GError **error)
{
  gboolean is_unix = strcmp(scheme, "unix") == 0;
  gboolean is_sentinel = strcmp(scheme, "redis+sentinel") == 0;
  g_autoptr(GArray) rest =
      g_array_new(FALSE, FALSE, sizeof(SluiceRedisUrlParam));
  GUriParamsIter iter;
  gchar *key, *value;
  GError *local = NULL;

  g_array_set_clear_func(rest, param_clear);
  g_uri_params_iter_init(&iter, query, -1, "&", G_URI_PARAMS_NONE);
  while (g_uri_params_iter_next(&iter, &key, &value, &local)) {
    gint taken = take_tls_param(tls, key, value, shown, error);

    if (taken < 0)
      return FALSE;
    if (taken > 0)
      continue;
    if (is_unix && strcmp(key, "db") == 0) {
      gboolean ok = parse_db(value, &parsed->db);

      g_free(key);
      g_free(value);
      if (!ok)
        return url_invalid(error, shown, "db=N needs a database number");
    } else if (is_sentinel && strcmp(key, "sentinel_user") == 0 &&
               value[0] != '\0') {
      g_free(parsed->sentinel_user);
      parsed->sentinel_user = value;
      g_free(key);
    } else if (is_sentinel && strcmp(key, "sentinel_password") == 0) {
      g_free(parsed->sentinel_password);
      parsed->sentinel_password = value;
      g_free(key);
    } else {
      SluiceRedisUrlParam param = {key, value};
      g_array_append_val(rest, param);
    }
  }
  if (local != NULL) {
    g_error_free(local);
    return url_invalid(error, shown,
                       "the query is malformed (a '%' that does not start "
                       "an escape %XX?)");
  }
  parsed->n_params = rest->len;
  parsed->params = (SluiceRedisUrlParam *)(void *)g_array_free(
      g_steal_pointer(&rest), FALSE);
  if (parsed->sentinel_user != NULL && parsed->sentinel_password == NULL)
    return url_invalid(error, shown,
                       "sentinel_user needs sentinel_password (an ACL user "
                       "with nopass accepts any password)");
  return TRUE;
}

/* One "host[:port]" or "[v6]:port" of a sentinel list. */
static gboolean
parse_sentinel_host(const gchar *item, gchar **out_host, gint *out_port)
{
  const gchar *colon;
  g_autofree gchar *host = NULL;
  guint64 port = 26379;

  if (item[0] == '[') {
    const gchar *end = strchr(item, ']');

    if (end == NULL || end == item + 1)
      return FALSE;
    host = g_strndup(item + 1, end - item - 1);
    for (const gchar *c = host; *c != '\0'; c++)
      if (!g_ascii_isxdigit(*c) && *c != ':' && *c != '.')
        return FALSE;
    colon = end[1] == ':' ? end + 1 : NULL;
    if (colon == NULL && end[1] != '\0')
      return FALSE;
  } else {
    colon = strchr(item, ':');
    if (colon != NULL && strchr(colon + 1, ':') != NULL)
      return FALSE; /* an IPv6 address needs brackets */
    host = colon != NULL ? g_strndup(item, colon - item) : g_strdup(item);
    if (host[0] == '\0')
      return FALSE;
    for (const gchar *c = host; *c != '\0'; c++)
      if (!g_ascii_isalnum(*c) && *c != '.' && *c != '-' && *c != '_')
        return FALSE;
  }
  if (colon != NULL &&
      !g_ascii_string_to_unsigned(colon + 1, 10, 1, 65535, &port, NULL))
    return FALSE;
  *out_host = g_steal_pointer(&host);
  *out_port = (gint)port;
  return TRUE;
}

/* What follows the userinfo of a redis+sentinel:// URL:
 * h1[:p1][,h2[:p2]...]/MASTER[/db][?query]. */
static gboolean
parse_sentinel(const gchar *rest, TlsParams *tls, const gchar *shown,
               SluiceRedisUrl *parsed, GError **error)
{
  gsize hosts_len = strcspn(rest, "/?#");
  g_autofree gchar *hosts = g_strndup(rest, hosts_len);
  g_auto(GStrv) items = NULL;
  const gchar *path = rest + hosts_len;
  const gchar *query = NULL;
  g_autofree gchar *path_text = NULL;
  g_auto(GStrv) segments = NULL;
  GPtrArray *names;
  GArray *ports;

  if (strchr(rest, '#') != NULL)
    return url_invalid(error, shown, "a fragment (#...) has no meaning here");
  if (hosts[0] == '\0')
    return url_invalid(error, shown,
                       "the sentinels are missing: list them as "
                       "host1:port1,host2:port2 after redis+sentinel://");
  items = g_strsplit(hosts, ",", -1);
  names = g_ptr_array_new_with_free_func(g_free);
  ports = g_array_new(FALSE, FALSE, sizeof(gint));
  for (guint i = 0; items[i] != NULL; i++) {
    gchar *host = NULL;
    gint port = 0;

    if (!parse_sentinel_host(items[i], &host, &port)) {
      g_autofree gchar *item = sluice_text__escape(items[i], -1, 80);
      g_autofree gchar *why = g_strdup_printf(
          "“%s” is not a sentinel address: write host:port (port 1 to "
          "65535, default 26379; an IPv6 address in brackets, [::1]:26379), "
          "and separate sentinels with ',' only",
          item);
      g_ptr_array_unref(names);
      g_array_unref(ports);
      return url_invalid(error, shown, why);
    }
    g_ptr_array_add(names, host);
    g_array_append_val(ports, port);
  }
  parsed->n_sentinels = names->len;
  g_ptr_array_add(names, NULL);
  parsed->sentinels = (gchar **)g_ptr_array_free(names, FALSE);
  parsed->sentinel_ports = (gint *)(void *)g_array_free(ports, FALSE);

  query = strchr(path, '?');
  path_text = query != NULL ? g_strndup(path, query - path) : g_strdup(path);
  if (path_text[0] != '/' || path_text[1] == '\0' || path_text[1] == '/')
    return url_invalid(error, shown,
                       "the master's name is missing: write "
                       "redis+sentinel://host:port/MASTERNAME (the name the "
                       "sentinels monitor it under, SENTINEL MASTERS)");
  segments = g_strsplit(path_text + 1, "/", -1);
  parsed->master_name = g_uri_unescape_string(segments[0], NULL);
  if (parsed->master_name == NULL)
    return url_invalid(error, shown,
                       "the master's name holds a bad escape (%XX) or an "
                       "escaped NUL");
  if (segments[1] != NULL &&
      ((segments[1][0] != '\0' && !parse_db(segments[1], &parsed->db)) ||
       segments[2] != NULL))
    return url_invalid(error, shown,
                       "after the master's name comes only a database "
                       "number: /MASTERNAME/N");
  if (query != NULL &&
      !parse_params(query + 1, "redis+sentinel", tls, shown, parsed, error))
    return FALSE;
  parsed->is_sentinel = TRUE;
  return TRUE;
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
parse_cluster_nodes(const gchar *rest, TlsParams *tls, const gchar *shown,
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
  if (query != NULL &&
      !parse_params(query + 1, "redis+cluster", tls, shown, parsed, error))
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
                            &parsed->seed_ports[i]))
      return url_invalid(error, shown,
                         "each node of a redis+cluster:// URL is host[:port] "
                         "or [IPv6]:port, separated by commas");
  }
  parsed->host = g_strdup(parsed->seed_hosts[0]);
  parsed->port = parsed->seed_ports[0];
  return TRUE;
}

/* Fills @parsed (zeroed by the caller, cleared by it on failure). */
static gboolean
parse_into(const gchar *text, SluiceRedisUrl *parsed, GError **error)
{
  g_autoptr(GUri) uri = NULL;
  g_autofree gchar *shown = NULL;
  g_autofree gchar *scheme = NULL;
  g_autofree gchar *hostpart = NULL;
  g_auto(TlsParams) tls = {0};
  UrlParts parts;
  const gchar *host;
  const gchar *query;

  split_url(text, &parts);
  shown = shown_url(&parts);
  if (parts.scheme == NULL)
    return url_invalid(error, shown,
                       "it does not start with redis://, redis+sentinel://, "
                       "redis+cluster://, unix:// or rediss://");
  scheme = g_ascii_strdown(parts.scheme, (gssize)parts.scheme_len);
  /* A rediss scheme is its plain one over TLS: parsed as that. */
  if (strcmp(scheme, "rediss") == 0 || strcmp(scheme, "rediss+sentinel") == 0 ||
      strcmp(scheme, "rediss+cluster") == 0) {
    gchar *plain = g_strconcat("redis", scheme + strlen("rediss"), NULL);

    g_free(scheme);
    scheme = plain;
    tls.on = TRUE;
  }
  if (strcmp(scheme, "unix") != 0 && strcmp(scheme, "redis") != 0 &&
      strcmp(scheme, "redis+sentinel") != 0 &&
      strcmp(scheme, "redis+cluster") != 0)
    return url_invalid(error, shown,
                       "the scheme must be redis://, redis+sentinel://, "
                       "redis+cluster://, unix://, or rediss://, "
                       "rediss+sentinel://, rediss+cluster:// for TLS");
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

  if (strcmp(scheme, "redis+sentinel") == 0) {
    if (!parse_sentinel(parts.rest, &tls, shown, parsed, error))
      return FALSE;
    goto userinfo;
  }
  if (strcmp(scheme, "redis+cluster") == 0) {
    if (!parse_cluster_nodes(parts.rest, &tls, shown, parsed, error))
      return FALSE;
    goto userinfo;
  }

  /* Only what follows the userinfo goes to GUri: it holds no password.
   * The query is kept as written, escapes and all, for parse_params()
   * to split at '&' and then decode, as the Sentinel and Cluster forms'
   * is: decoded here, a value's %26 would split it and its %25 be read
   * as an escape again. */
  hostpart = g_strconcat(scheme, "://", parts.rest, NULL);
  uri = g_uri_parse(hostpart, G_URI_FLAGS_NON_DNS | G_URI_FLAGS_ENCODED_QUERY,
                    NULL);
  if (uri == NULL)
    return url_invalid(error, shown,
                       "it is not a well-formed URL; percent-encode special "
                       "characters of the host and the path");
  if (g_uri_get_fragment(uri) != NULL)
    return url_invalid(error, shown, "a fragment (#...) has no meaning here");
  host = g_uri_get_host(uri);
  query = g_uri_get_query(uri);

  if (strcmp(scheme, "unix") == 0) {
    parsed->is_unix = TRUE;
    if (host != NULL && host[0] != '\0')
      return url_invalid(error, shown,
                         "a unix URL has no host: write unix:///path (three "
                         "slashes)");
    if (g_uri_get_path(uri)[0] != '/')
      return url_invalid(error, shown,
                         "the socket path is missing or not absolute");
    if (query != NULL &&
        !parse_params(query, scheme, &tls, shown, parsed, error))
      return FALSE;
    parsed->path = g_strdup(g_uri_get_path(uri));
  } else {
    const gchar *path = g_uri_get_path(uri);

    if (host == NULL || host[0] == '\0')
      return url_invalid(error, shown,
                         "the host is missing (redis://host[:port][/db])");
    if (query != NULL &&
        !parse_params(query, scheme, &tls, shown, parsed, error))
      return FALSE;
    if (path[0] != '\0' && strcmp(path, "/") != 0 &&
        !parse_db(path + 1, &parsed->db))
      return url_invalid(error, shown,
                         "the path must be a database number (/0 ... /15)");
    parsed->host = g_strdup(host);
    parsed->port = g_uri_get_port(uri) > 0 ? g_uri_get_port(uri) : 6379;
  }

userinfo:
  if (parts.userinfo != NULL) {
    gsize user_len = (gsize)(parts.colon - parts.userinfo);
    const gchar *pw = parts.colon + 1;
    gsize pw_len = parts.userinfo_len - user_len - 1;
    gchar *user = unescape_part(parts.userinfo, user_len);

    parsed->password = unescape_part(pw, pw_len);
    if (user == NULL || parsed->password == NULL) {
      g_free(user);
      return url_invalid(error, shown,
                         "the user or the password holds a '%' that does not "
                         "start an escape (%XX) or an escaped NUL; write '%' "
                         "as %25");
    }
    if (user[0] != '\0')
      parsed->user = user;
    else
      g_free(user);
  }
  parsed->conn_type = parsed->is_unix ? "unix" : tls.on ? "tls" : "tcp";
  if (tls.on) {
    SluiceRedisTlsConfig config = {
        .ca_file = tls.ca_file,
        .ca_dir = tls.ca_dir,
        .cert = tls.cert,
        .key = tls.key,
        .server_name = tls.server_name,
        .min_version = tls.min_version,
        .insecure = tls.insecure,
    };
    parsed->tls = sluice_redis_tls__new(&config);
  }
  parsed->display = make_display(parsed);
  parsed->shown = g_steal_pointer(&shown);
  return TRUE;
}

gboolean
sluice_redis_url__parse(const gchar *text, SluiceRedisUrl *url, GError **error)
{
  SluiceRedisUrl parsed = {0};

  g_return_val_if_fail(text != NULL && url != NULL, FALSE);
  if (!parse_into(text, &parsed, error)) {
    sluice_redis_url__clear(&parsed);
    return FALSE;
  }
  *url = parsed;
  return TRUE;
}

static void
wipe(gchar *secret)
{
  if (secret != NULL)
    memset(secret, 0, strlen(secret));
  g_free(secret);
}

void
sluice_redis_url__clear(SluiceRedisUrl *url)
{
  if (url == NULL)
    return;
  g_clear_pointer(&url->host, g_free);
  g_clear_pointer(&url->path, g_free);
  g_clear_pointer(&url->user, g_free);
  g_clear_pointer(&url->password, wipe);
  g_clear_pointer(&url->display, g_free);
  g_clear_pointer(&url->sentinels, g_strfreev);
  g_clear_pointer(&url->sentinel_ports, g_free);
  g_clear_pointer(&url->master_name, g_free);
  g_clear_pointer(&url->sentinel_user, g_free);
  g_clear_pointer(&url->sentinel_password, wipe);
  url->n_sentinels = 0;
  g_clear_pointer(&url->seed_hosts, g_strfreev);
  g_clear_pointer(&url->seed_ports, g_free);
  url->n_seeds = 0;
  url->is_cluster = FALSE;
  g_clear_pointer(&url->shown, g_free);
  g_clear_pointer(&url->tls, sluice_redis_tls__unref);
  for (guint i = 0; i < url->n_params; i++)
    param_clear(&url->params[i]);
  g_clear_pointer(&url->params, g_free);
  url->n_params = 0;
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
  to->is_sentinel = from->is_sentinel;
  to->n_sentinels = from->n_sentinels;
  to->sentinels = g_strdupv(from->sentinels);
  to->sentinel_ports =
      g_memdup2(from->sentinel_ports, sizeof(gint) * from->n_sentinels);
  to->master_name = g_strdup(from->master_name);
  to->sentinel_user = g_strdup(from->sentinel_user);
  to->sentinel_password = g_strdup(from->sentinel_password);
  to->is_cluster = from->is_cluster;
  to->n_seeds = from->n_seeds;
  to->seed_hosts = g_strdupv(from->seed_hosts);
  to->seed_ports = g_memdup2(from->seed_ports, sizeof(gint) * from->n_seeds);
  to->conn_type = from->conn_type;
  to->shown = g_strdup(from->shown);
  to->tls = sluice_redis_tls__ref(from->tls);
  to->n_params = from->n_params;
  to->params = g_new0(SluiceRedisUrlParam, MAX(from->n_params, 1));
  for (guint i = 0; i < from->n_params; i++) {
    to->params[i].name = g_strdup(from->params[i].name);
    to->params[i].value = g_strdup(from->params[i].value);
  }
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
  to->conn_type = cluster->conn_type;
  to->tls = sluice_redis_tls__ref(cluster->tls);
  to->display = make_display(to);
  to->shown = g_strdup(to->display);
}

gboolean
sluice_redis_url__refuse(const SluiceRedisUrl *url, const gchar *why,
                         GError **error)
{
  return url_invalid(error, url->shown != NULL ? url->shown : url->display,
                     why);
}

gboolean
sluice_redis_url__refuse_unknown(const SluiceRedisUrl *url, const gchar *name,
                                 const gchar *const *owner_names,
                                 GError **error)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  g_autoptr(GString) why = g_string_new(NULL);
  g_autofree gchar *shown = sluice_text__escape(name, -1, 40);

  /* This layer's own names for the scheme, then the owner's. */
  if (url->is_sentinel) {
    g_ptr_array_add(names, (gpointer) "sentinel_user");
    g_ptr_array_add(names, (gpointer) "sentinel_password");
  } else if (url->is_unix) {
    g_ptr_array_add(names, (gpointer) "db");
  }
  if (url->tls != NULL)
    for (guint i = 0; tls_param_names[i] != NULL; i++)
      g_ptr_array_add(names, (gpointer)tls_param_names[i]);
  for (guint i = 0; owner_names != NULL && owner_names[i] != NULL; i++)
    g_ptr_array_add(names, (gpointer)owner_names[i]);
  g_string_append_printf(why, "unknown query parameter “%s”: ", shown);
  if (names->len == 0)
    g_string_append(why, "the URL takes none");
  else
    g_string_append(why, "the parameters are ");
  for (guint i = 0; i < names->len; i++) {
    if (i > 0)
      g_string_append(why, i + 1 == names->len ? " and " : ", ");
    g_string_append(why, g_ptr_array_index(names, i));
  }
  if (!url->is_sentinel && !url->is_unix)
    g_string_append(why, " (the database is the path, /N)");
  return url_invalid(error, url->shown != NULL ? url->shown : url->display,
                     why->str);
}

/* ---- TLS settings from the owner ---------------------------------------- */

/* Merges one string setting: either side may give it, both only alike. */
static gboolean
merge_string(const SluiceRedisUrl *url, const gchar *name, const gchar *ours,
             const gchar *theirs, const gchar *origin, const gchar **out,
             GError **error)
{
  if (theirs != NULL && theirs[0] == '\0')
    theirs = NULL;
  if (ours != NULL && theirs != NULL && strcmp(ours, theirs) != 0) {
    g_autofree gchar *why = g_strdup_printf(
        "%s.%s differs from the URL's %s=: give it in one place only", origin,
        name, name);
    return sluice_redis_url__refuse(url, why, error);
  }
  *out = ours != NULL ? ours : theirs;
  return TRUE;
}

gboolean
sluice_redis_url__merge_tls(SluiceRedisUrl *url,
                            const SluiceRedisTlsConfig *config,
                            const gchar *origin, GError **error)
{
  const SluiceRedisTlsConfig *ours;
  SluiceRedisTlsConfig merged = {0};
  gboolean any;

  g_return_val_if_fail(url != NULL, FALSE);
  any = config != NULL &&
        ((config->ca_file != NULL && config->ca_file[0] != '\0') ||
         (config->ca_dir != NULL && config->ca_dir[0] != '\0') ||
         (config->cert != NULL && config->cert[0] != '\0') ||
         (config->key != NULL && config->key[0] != '\0') ||
         (config->server_name != NULL && config->server_name[0] != '\0') ||
         config->min_version != 0 || config->insecure);
  if (!any)
    return TRUE;
  if (url->tls == NULL) {
    g_autofree gchar *why = g_strdup_printf(
        "%s has tls_* settings but the URL is not a TLS one: write rediss:// "
        "(or rediss+sentinel://, rediss+cluster://)",
        origin);
    return sluice_redis_url__refuse(url, why, error);
  }
  if (config->server_name != NULL && config->server_name[0] != '\0' &&
      !valid_server_name(config->server_name)) {
    g_autofree gchar *why = g_strdup_printf(
        "%s.tls_server_name must be a host name or an address", origin);
    return sluice_redis_url__refuse(url, why, error);
  }
  ours = sluice_redis_tls__get_config(url->tls);
  if (!merge_string(url, "tls_ca_file", ours->ca_file, config->ca_file, origin,
                    &merged.ca_file, error) ||
      !merge_string(url, "tls_ca_dir", ours->ca_dir, config->ca_dir, origin,
                    &merged.ca_dir, error) ||
      !merge_string(url, "tls_cert", ours->cert, config->cert, origin,
                    &merged.cert, error) ||
      !merge_string(url, "tls_key", ours->key, config->key, origin, &merged.key,
                    error) ||
      !merge_string(url, "tls_server_name", ours->server_name,
                    config->server_name, origin, &merged.server_name, error))
    return FALSE;
  if (ours->min_version != 0 && config->min_version != 0 &&
      ours->min_version != config->min_version) {
    g_autofree gchar *why = g_strdup_printf(
        "%s.tls_min_version differs from the URL's tls_min_version=: give it "
        "in one place only",
        origin);
    return sluice_redis_url__refuse(url, why, error);
  }
  merged.min_version =
      ours->min_version != 0 ? ours->min_version : config->min_version;
  merged.insecure = ours->insecure || config->insecure;
  {
    SluiceRedisTls *tls = sluice_redis_tls__new(&merged);

    sluice_redis_tls__unref(url->tls);
    url->tls = tls;
  }
  return TRUE;
}

gboolean
sluice_redis_url__prepare_tls(SluiceRedisUrl *url, GError **error)
{
  g_autofree gchar *reason = NULL;

  g_return_val_if_fail(url != NULL, FALSE);
  if (url->tls == NULL ||
      sluice_redis_tls__prepare(url->tls, url->display, &reason))
    return TRUE;
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "the TLS settings of %s cannot be used: %s", url->display,
              reason);
  return FALSE;
}

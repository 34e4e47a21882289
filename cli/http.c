/* http.c - the command's HTTP endpoints: the listen address, HTTPS (a
 * certificate, its key, and optionally the CA of the clients'
 * certificates), the server (libsoup's SoupServer), and the small answers
 * the endpoints give.
 *
 * An address is an IP literal and a port. A bare port means loopback:
 * metrics say what a worker does and serves, so they are not offered to
 * the network unless an address says so (0.0.0.0:PORT, [::]:PORT).
 */
#include "config.h"

#include <string.h>

#include "cli/http.h"

static gboolean
listen_error(GError **error, const gchar *what, const gchar *text,
             const gchar *why)
{
  return cli_usage_error(error,
                         "%s: “%s” %s: give HOST:PORT with an IP address, "
                         "e.g. 127.0.0.1:9464 (this host only), "
                         "0.0.0.0:9464 (every interface) or [::1]:9464; a "
                         "bare port means 127.0.0.1",
                         what, text, why);
}

gboolean
cli_parse_listen(const gchar *what, const gchar *text, GSocketAddress **out,
                 GError **error)
{
  g_autofree gchar *host = NULL;
  const gchar *port_text;
  g_autoptr(GInetAddress) ip = NULL;
  guint64 port;

  *out = NULL;
  if (text[0] == '[') {
    const gchar *close = strchr(text, ']');
    if (close == NULL || close[1] != ':')
      return listen_error(error, what, text, "has no port after the ]");
    host = g_strndup(text + 1, (gsize)(close - text - 1));
    port_text = close + 2;
  } else if (strchr(text, ':') != NULL) {
    const gchar *colon = strrchr(text, ':');
    if (colon == text)
      return listen_error(error, what, text, "names no address");
    host = g_strndup(text, (gsize)(colon - text));
    port_text = colon + 1;
  } else {
    host = g_strdup("127.0.0.1");
    port_text = text;
  }
  if (!g_ascii_string_to_unsigned(port_text, 10, 0, 65535, &port, NULL))
    return listen_error(error, what, text,
                        "has no port from 0 to 65535 (0: any free one)");
  if (g_strcmp0(host, "localhost") == 0) {
    g_free(host);
    host = g_strdup("127.0.0.1");
  }
  ip = g_inet_address_new_from_string(host);
  if (ip == NULL)
    return listen_error(error, what, text, "is not an IP address");
  *out = g_inet_socket_address_new(ip, (guint16)port);
  return TRUE;
}

/* The settings tables' type of a listen address (cli.h). */
static gboolean
parse_listen(const CliSetting *row, const CliSettingValue *v, gpointer base,
             GError **error)
{
  GSocketAddress **out = &G_STRUCT_MEMBER(GSocketAddress *, base, row->offset);

  g_clear_object(out);
  return cli_parse_listen(v->what, v->text, out, error);
}

const CliSettingType cli_setting_listen = {parse_listen, NULL};

static gboolean
parse_sourced_path(const CliSetting *row, const CliSettingValue *v,
                   gpointer base, GError **error)
{
  CliSourcedPath *out = &G_STRUCT_MEMBER(CliSourcedPath, base, row->offset);

  g_free(out->path);
  g_free(out->what);
  out->path = g_strdup(v->text);
  out->what = g_strdup(v->what);
  return TRUE;
}

const CliSettingType cli_setting_sourced_path = {parse_sourced_path, NULL};

static gboolean
given(const CliSourcedPath *file)
{
  return file->path != NULL && file->path[0] != '\0';
}

static gboolean
tls_file_error(GError **error, const CliSourcedPath *file, const gchar *what,
               const GError *why)
{
  g_autofree gchar *shown = cli_terminal_text(file->path, -1);
  g_autofree gchar *from = cli_terminal_text(file->what, -1);
  g_autofree gchar *reason = cli_terminal_text(why->message, -1);

  return cli_usage_error(error, "%s %s (from %s) cannot be used: %s", what,
                         shown, from, reason);
}

gboolean
cli_http_tls_load(CliHttpTls *tls, GError **error)
{
  g_autoptr(GError) local = NULL;

  if (!given(&tls->cert) && !given(&tls->key)) {
    if (given(&tls->client_ca))
      return cli_usage_error(
          error,
          "%s asks for client certificates, which need HTTPS: give --%s "
          "FILE and --%s FILE too",
          tls->client_ca.what, tls->cert_option, tls->key_option);
    return TRUE;
  }
  if (!given(&tls->cert) || !given(&tls->key)) {
    const CliSourcedPath *has = given(&tls->cert) ? &tls->cert : &tls->key;
    return cli_usage_error(
        error,
        "%s without --%s: HTTPS needs both the certificate (--%s FILE, PEM) "
        "and its private key (--%s FILE, PEM), or neither for clear text",
        has->what, given(&tls->cert) ? tls->key_option : tls->cert_option,
        tls->cert_option, tls->key_option);
  }
  if (!g_tls_backend_supports_tls(g_tls_backend_get_default()))
    return cli_usage_error(
        error,
        "%s: this machine's GIO has no TLS support: install the "
        "glib-networking package (apt-get install glib-networking), or "
        "serve clear text without --%s and --%s",
        tls->cert.what, tls->cert_option, tls->key_option);
  if (!cli_check_private_file(tls->key.path, "the TLS private key",
                              tls->key.what, error))
    return FALSE;
  g_clear_object(&tls->certificate);
  tls->certificate =
      g_tls_certificate_new_from_files(tls->cert.path, tls->key.path, &local);
  if (tls->certificate == NULL) {
    g_autofree gchar *cert = cli_terminal_text(tls->cert.path, -1);
    g_autofree gchar *key = cli_terminal_text(tls->key.path, -1);
    g_autofree gchar *why = cli_terminal_text(local->message, -1);
    return cli_usage_error(error,
                           "the TLS certificate %s and its key %s (--%s, "
                           "--%s) cannot be used: %s; give the server's "
                           "certificate and its own private key, both PEM",
                           cert, key, tls->cert_option, tls->key_option, why);
  }
  if (given(&tls->client_ca)) {
    /* GIO takes an absolute path only; a relative one is the working
     * directory's, as for every other file. */
    g_autofree gchar *ca = g_canonicalize_filename(tls->client_ca.path, NULL);

    g_clear_object(&tls->client_database);
    tls->client_database = g_tls_file_database_new(ca, &local);
    if (tls->client_database == NULL) {
      g_clear_object(&tls->certificate);
      return tls_file_error(error, &tls->client_ca,
                            "the CA file of the client certificates", local);
    }
  }
  return TRUE;
}

gboolean
cli_http_tls_enabled(const CliHttpTls *tls)
{
  return tls != NULL && tls->certificate != NULL;
}

void
cli_http_tls_clear(CliHttpTls *tls)
{
  g_clear_pointer(&tls->cert.path, g_free);
  g_clear_pointer(&tls->cert.what, g_free);
  g_clear_pointer(&tls->key.path, g_free);
  g_clear_pointer(&tls->key.what, g_free);
  g_clear_pointer(&tls->client_ca.path, g_free);
  g_clear_pointer(&tls->client_ca.what, g_free);
  g_clear_object(&tls->certificate);
  g_clear_object(&tls->client_database);
}

/* GIO leaves a server's verdict on a client certificate to the server,
 * even one its database found no fault with: accept exactly those. */
static gboolean
accept_client_certificate(SoupServerMessage *msg, GTlsCertificate *peer,
                          GTlsCertificateFlags errors, gpointer data)
{
  return errors == 0;
}

static void
watch_client_certificate(SoupServer *server, SoupServerMessage *msg,
                         gpointer data)
{
  g_signal_connect(msg, "accept-certificate",
                   G_CALLBACK(accept_client_certificate), NULL);
}

SoupServer *
cli_http_listen(GSocketAddress *address, const CliHttpTls *tls,
                GMainContext *context, gchar **out_url, GError **error)
{
  gboolean https = cli_http_tls_enabled(tls);
  g_autoptr(SoupServer) server =
      https ? soup_server_new("server-header", "sluice ", "tls-certificate",
                              tls->certificate, NULL)
            : soup_server_new("server-header", "sluice ", NULL);
  g_autofree gchar *where = NULL;
  g_autoptr(GError) local = NULL;
  GSList *uris;
  gboolean ok;

  /* A scraper without a certificate this CA signed is refused in the
   * handshake, before any request is read. */
  if (https && tls->client_database != NULL) {
    soup_server_set_tls_database(server, tls->client_database);
    soup_server_set_tls_auth_mode(server, G_TLS_AUTHENTICATION_REQUIRED);
    g_signal_connect(server, "request-started",
                     G_CALLBACK(watch_client_certificate), NULL);
  }

  /* The server attaches its sockets to the thread-default context. */
  g_main_context_push_thread_default(context);
  ok = soup_server_listen(server, address, https ? SOUP_SERVER_LISTEN_HTTPS : 0,
                          &local);
  g_main_context_pop_thread_default(context);
  if (!ok) {
    where = g_socket_connectable_to_string(G_SOCKET_CONNECTABLE(address));
    g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED, "cannot listen on %s: %s",
                where, local->message);
    return NULL;
  }
  uris = soup_server_get_uris(server);
  {
    GUri *uri = uris->data;
    const gchar *host = g_uri_get_host(uri);
    *out_url = g_strdup_printf(
        strchr(host, ':') != NULL ? "%s://[%s]:%d" : "%s://%s:%d",
        https ? "https" : "http", host, g_uri_get_port(uri));
  }
  g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
  if (!https && tls != NULL &&
      !g_inet_address_get_is_loopback(
          g_inet_socket_address_get_address(G_INET_SOCKET_ADDRESS(address))))
    g_warning("%s serves clear text HTTP to the network: anyone on the path "
              "can read and alter it; give --%s FILE and --%s FILE to serve "
              "HTTPS",
              *out_url, tls->cert_option, tls->key_option);
  return g_steal_pointer(&server);
}

gboolean
cli_http_accept(SoupServerMessage *msg, const gchar *path,
                const gchar *expected)
{
  const gchar *method = soup_server_message_get_method(msg);

  if (strcmp(path, expected) != 0) {
    cli_http_respond(
        msg, SOUP_STATUS_NOT_FOUND, "text/plain; charset=utf-8",
        g_strdup_printf("not found; did you mean %s?\n", expected));
    return FALSE;
  }
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
    soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                 "Allow", "GET, HEAD");
    cli_http_respond(msg, SOUP_STATUS_METHOD_NOT_ALLOWED,
                     "text/plain; charset=utf-8",
                     g_strdup("only GET and HEAD are served here\n"));
    return FALSE;
  }
  return TRUE;
}

void
cli_http_respond(SoupServerMessage *msg, guint status,
                 const gchar *content_type, gchar *body)
{
  soup_server_message_set_status(msg, status, NULL);
  soup_server_message_set_response(msg, content_type, SOUP_MEMORY_TAKE, body,
                                   strlen(body));
}

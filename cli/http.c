/* http.c - the command's HTTP endpoints: the listen address, the server
 * (libsoup's SoupServer), and the small answers both endpoints give.
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

SoupServer *
cli_http_listen(GSocketAddress *address, GMainContext *context, gchar **out_url,
                GError **error)
{
  g_autoptr(SoupServer) server =
      soup_server_new("server-header", "sluice ", NULL);
  g_autofree gchar *where = NULL;
  g_autoptr(GError) local = NULL;
  GSList *uris;
  gboolean ok;

  /* The server attaches its sockets to the thread-default context. */
  g_main_context_push_thread_default(context);
  ok = soup_server_listen(server, address, 0, &local);
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
    *out_url = g_strdup_printf(strchr(host, ':') != NULL ? "http://[%s]:%d"
                                                         : "http://%s:%d",
                               host, g_uri_get_port(uri));
  }
  g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
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

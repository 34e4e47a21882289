/* http.h - what the command's HTTP endpoints share (http.c): where they
 * listen, the server that answers, and the answers.
 *
 * The server is libsoup's SoupServer: it runs on a GMainContext, as the
 * rest of the command's GLib code does, and takes care of HTTP/1.1
 * (keep-alive, HEAD, chunking, malformed requests) so the command does
 * not. Only the files that serve (metrics-server.c, cmd-exporter.c)
 * include this header; cli.h stays free of libsoup.
 */
#pragma once

#include <libsoup/soup.h>

#include "cli/cli.h"

G_BEGIN_DECLS

/* The content type of the Prometheus text exposition format. */
#define CLI_HTTP_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"

/**
 * cli_http_listen:
 * @address: where to listen (cli_parse_listen())
 * @tls: (nullable): HTTPS, loaded (cli_http_tls_load()); without a
 *   certificate it serves clear text, and warns once when @address is not
 *   loopback, naming @tls's options
 * @context: the context the server will run on; its sources are attached
 *   to it, and the caller iterates it
 * @out_url: (out) (transfer full): "http://HOST:PORT" or "https://...",
 *   with the port actually bound (a port 0 is given one by the kernel)
 * Returns: (transfer full): a listening server without handlers, or NULL
 * and an error naming the address (in use, not permitted, ...).
 */
SoupServer *cli_http_listen(GSocketAddress *address, const CliHttpTls *tls,
                            GMainContext *context, gchar **out_url,
                            GError **error);

/**
 * cli_http_accept:
 * Answers 405 to anything but GET and HEAD, and 404 to a path other than
 * @path (a handler also sees paths below its own).
 * Returns: TRUE when the handler should answer.
 */
gboolean cli_http_accept(SoupServerMessage *msg, const gchar *path,
                         const gchar *expected);

/**
 * cli_http_respond:
 * @body: (transfer full): the response body, NUL-terminated
 */
void cli_http_respond(SoupServerMessage *msg, guint status,
                      const gchar *content_type, gchar *body);

G_END_DECLS

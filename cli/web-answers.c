/* web-answers.c - how the dashboard's API answers (JSON bodies, errors
 * with their HTTP status, the security headers every answer carries) and
 * reads its parameters; shared by the reads (web-api.c) and the writes
 * (web-writes.c).
 */
#include "config.h"

#include <string.h>

#include "cli/web-api.h"

#define PAGE_DEFAULT 50
#define PAGE_MAX 1000
#define JSON_TYPE "application/json; charset=utf-8"

/* What every answer carries: nothing from elsewhere may run, frame or be
 * sniffed into something else, and nothing is cached (figures change). */
void
web_security_headers(SoupServerMessage *msg)
{
  SoupMessageHeaders *h = soup_server_message_get_response_headers(msg);

  soup_message_headers_replace(
      h, "Content-Security-Policy",
      "default-src 'none'; script-src 'self'; style-src 'self'; "
      "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
      "form-action 'none'; frame-ancestors 'none'");
  soup_message_headers_replace(h, "X-Content-Type-Options", "nosniff");
  soup_message_headers_replace(h, "X-Frame-Options", "DENY");
  soup_message_headers_replace(h, "Referrer-Policy", "no-referrer");
  soup_message_headers_replace(h, "Cache-Control", "no-store");
}

void
web_respond_json(SoupServerMessage *msg, guint status, CliJson *json)
{
  web_security_headers(msg);
  cli_http_respond(msg, status, JSON_TYPE,
                   g_strndup(json->out->str, json->out->len));
}

void
web_respond_message(SoupServerMessage *msg, guint status, const gchar *text)
{
  g_autoptr(CliJson) json = cli_json_new();

  cli_json_begin_object(json);
  cli_json_key(json, "error");
  cli_json_string(json, text);
  cli_json_end_object(json);
  web_respond_json(msg, status, json);
}

/* The HTTP status of a failed library call. */
guint
web_status_for(const GError *error)
{
  if (error->domain == SLUICE_CLIENT_ERROR &&
      error->code == SLUICE_CLIENT_ERROR_NOT_FOUND)
    return SOUP_STATUS_NOT_FOUND;
  if (error->domain == SLUICE_BROKER_ERROR &&
      error->code == SLUICE_BROKER_ERROR_UNAVAILABLE)
    return SOUP_STATUS_SERVICE_UNAVAILABLE;
  if (cli_exit_status_for(error) == CLI_EXIT_USAGE)
    return SOUP_STATUS_BAD_REQUEST;
  return SOUP_STATUS_INTERNAL_SERVER_ERROR;
}

void
web_respond_error(SoupServerMessage *msg, const GError *error)
{
  web_respond_message(msg, web_status_for(error), error->message);
}

/* A parameter, or NULL when absent or empty. */
const gchar *
web_param(GHashTable *params, const gchar *name)
{
  const gchar *value =
      params != NULL ? g_hash_table_lookup(params, name) : NULL;

  return value != NULL && value[0] != '\0' ? value : NULL;
}

gboolean
web_param_limit(GHashTable *params, guint *out, GError **error)
{
  const gchar *text = web_param(params, "limit");
  guint64 limit = PAGE_DEFAULT;

  if (text != NULL &&
      !cli_parse_count("limit", text, 1, PAGE_MAX, &limit, error))
    return FALSE;
  *out = (guint)limit;
  return TRUE;
}

gboolean
web_param_required(GHashTable *params, const gchar *name, const gchar **out,
                   GError **error)
{
  *out = web_param(params, name);
  if (*out == NULL)
    return cli_usage_error(error, "give %s=", name);
  return TRUE;
}

gboolean
web_dead_filters(GHashTable *params, const gchar **reason, const gchar **task,
                 GError **error)
{
  *reason = web_param(params, "reason");
  *task = web_param(params, "task");
  return cli_check_reason("reason", *reason, error);
}

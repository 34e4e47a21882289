/* web-events.c - GET /api/events: a page of the namespace's lifecycle
 * events (sluice-events.h) for the dashboard's events view.
 *
 *   GET /api/events?cursor=C&limit=N
 *     {"events": [...oldest first...], "cursor": "where to read next"}
 *
 * The page follows the stream by asking again with the cursor it was
 * given. The read never blocks: every request of the dashboard is
 * answered on one main context, and a read that waited for events would
 * hold all the others up.
 */
#include "config.h"

#include "cli/web-api.h"

void
web_get_events(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) events = NULL;
  g_autoptr(CliJson) json = NULL;
  g_autofree gchar *next = NULL;
  guint limit;

  if (!web_param_limit(query, &limit, &error)) {
    web_respond_error(msg, error);
    return;
  }
  events = sluice_client_read_events(web->client, web_param(query, "cursor"),
                                     limit, 0, &next, &error);
  if (events == NULL) {
    if (g_error_matches(error, SLUICE_BROKER_ERROR,
                        SLUICE_BROKER_ERROR_UNSUPPORTED)) {
      g_autofree gchar *text = g_strdup_printf(
          "this broker keeps no events (%s): use one that does (Redis, "
          "SQLite) and run workers with --events",
          error->message);
      web_respond_message(msg, SOUP_STATUS_NOT_IMPLEMENTED, text);
    } else {
      web_respond_error(msg, error);
    }
    return;
  }
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "events");
  cli_json_begin_array(json);
  for (guint i = 0; i < events->len; i++)
    cli_event_to_json(json, events->pdata[i]);
  cli_json_end_array(json);
  cli_json_key(json, "cursor");
  cli_json_string(json, next);
  cli_json_end_object(json);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

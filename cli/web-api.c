/* web-api.c - what `sluice web` serves: its pages (embedded with GResource
 * from cli/web/) and the JSON API they read and act through.
 *
 *   GET  /api/overview       the stats as `sluice stats --json` has them
 *                            (records.c writes both: queues, the schedule,
 *                            dead letters by reason, workers and their
 *                            health, concurrency slots), and the
 *                            dashboard's own: the broker, writes, every
 *                            reason there is (dead_letter_reasons)
 *   GET  /api/rates          processed/failed in the last hour (web-rates.c)
 *   GET  /api/tasks          ?state=queued|scheduled|retrying|running
 *                            &queue=&task=&cursor=&limit=  (one page)
 *   GET  /api/dead           ?reason=&task=&after=&limit=  (one page)
 *   GET  /api/dead/count     ?reason=&task=  (what a bulk action would take)
 *   GET  /api/task           ?id=[&entry=]  (record, message, dead letter)
 *   GET  /api/events         ?cursor=&limit=  (lifecycle events, web-events.c)
 *   GET  /api/workflows/ID   a workflow's counts and tree (web-workflows.c)
 *   POST /api/queues/pause|resume|purge   queue= (purge: confirm=QUEUE)
 *   POST /api/tasks/delete|run-now        id=
 *   POST /api/dead/replay|delete          entry=
 *   POST /api/dead/replay-all|delete-all  reason=&task=&expect=N
 *
 * Each is one or a few calls of the public client API, the ones the
 * command's own subcommands make (sluice ls, stats, inspect, pause, dlq
 * ...), on the main context: requests are answered one at a time.
 *
 * A GET never changes anything. A POST is refused (403) unless writes are
 * enabled (a token file, no --read-only), the request is not cross-origin
 * (Origin, when sent, is this server's; Sec-Fetch-Site, when sent, is
 * same-origin) and it carries the token in the X-Sluice-Token header,
 * compared in constant time. A cookie is never looked at, so a browser's
 * ambient credentials cannot authorise anything. POST bodies are
 * application/x-www-form-urlencoded.
 *
 * The writes and their checks are web-writes.c.
 *
 * A bulk action on dead letters takes a snapshot of the matching entries
 * and acts only if it holds as many as the page showed and the person
 * confirmed (expect=N); otherwise it answers 409 with the new count, so a
 * confirmation never covers entries nobody saw counted.
 */
#include "config.h"

#include <string.h>

#include "cli/web-api.h"
#include "cli/web-resources.h"

#define RESOURCE_PREFIX "/org/sluice/web"
/* How far the task page looks through a listing for its task. */
#define FIND_PAGES 10
#define FIND_PAGE_SIZE 1000

/* ---- GET /api/overview --------------------------------------------------- */

static const gchar *
writes_state(const Web *web)
{
  if (web->read_only)
    return "read-only";
  return web->token != NULL ? "token" : "no-token";
}

static void
get_overview(Web *web, SoupServerMessage *msg)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CliJson) json = NULL;
  CliStats stats = {0};
  gint64 now_ms;

  /* Slots the broker failed to list are shown as none known (null), as a
   * broker that cannot list them: the overview is still worth showing. */
  if (!cli_stats_read(web->client, NULL, &stats, NULL, &error)) {
    web_respond_error(msg, error);
    return;
  }
  /* As `sluice stats` shows it; a store that cannot say is null. */
  cli_stats_read_layout(web->settings, &stats, NULL);
  now_ms = g_get_real_time() / 1000;
  json = cli_json_new();
  cli_json_begin_object(json);
  /* The stats as `sluice stats --json` has them, then the dashboard's own
   * fields. */
  cli_stats_fields_to_json(json, web->settings, &stats, now_ms);
  cli_json_key(json, "broker");
  cli_json_string(json, web->shown_url);
  cli_json_key(json, "writes");
  cli_json_string(json, writes_state(web));
  cli_json_key(json, "now");
  cli_json_time(json, now_ms);
  cli_json_key(json, "started_at");
  cli_json_time(json, web->started_at_ms);
  /* Every reason there is (the library's list), for the dead letters'
   * filter: the page lists no reason of its own. */
  cli_json_key(json, "dead_letter_reasons");
  cli_json_begin_array(json);
  for (const gchar *const *r = sluice_dead_letter_reasons(); *r != NULL; r++)
    cli_json_string(json, *r);
  cli_json_end_array(json);
  cli_json_end_object(json);
  cli_stats_clear(&stats);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/rates ------------------------------------------------------ */

static void
get_rates(Web *web, SoupServerMessage *msg)
{
  g_autoptr(CliJson) json = cli_json_new();

  web_rates_to_json(web->rates, json);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/tasks ------------------------------------------------------ */

static void
get_tasks(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) tasks = NULL;
  g_autoptr(CliJson) json = NULL;
  g_autofree gchar *next = NULL;
  SluiceListOptions lo;

  sluice_list_options_init(&lo);
  lo.queue = web_param(query, "queue");
  lo.task = web_param(query, "task");
  lo.cursor = web_param(query, "cursor");
  if (!cli_parse_list_state("state", web_param(query, "state"), FALSE,
                            &lo.state, &error) ||
      !web_param_limit(query, &lo.limit, &error) ||
      (lo.state == SLUICE_STATE_QUEUED && lo.queue == NULL &&
       !cli_usage_error(&error, "queued tasks are listed a queue at a time: "
                                "give queue=")) ||
      (tasks = sluice_client_list(web->client, &lo, &next, &error)) == NULL) {
    web_respond_error(msg, error);
    return;
  }
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "state");
  cli_json_string(json, web_param(query, "state"));
  cli_json_key(json, "tasks");
  cli_json_begin_array(json);
  for (guint i = 0; i < tasks->len; i++)
    cli_listed_task_to_json(json, tasks->pdata[i]);
  cli_json_end_array(json);
  cli_json_key(json, "next_cursor");
  cli_json_string(json, next);
  cli_json_end_object(json);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/dead, /api/dead/count -------------------------------------- */

static void
get_dead(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliJson) json = NULL;
  const gchar *reason, *task;
  guint limit;

  if (!web_dead_filters(query, &reason, &task, &error) ||
      !web_param_limit(query, &limit, &error) ||
      (entries = sluice_client_dlq_list(web->client, web_param(query, "after"),
                                        limit, reason, task, &error)) == NULL) {
    web_respond_error(msg, error);
    return;
  }
  json = cli_json_new();
  cli_dead_letter_page_to_json(json, entries, limit);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

static void
get_dead_count(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliJson) json = NULL;
  const gchar *reason, *task;

  if (!web_dead_filters(query, &reason, &task, &error) ||
      (entries = cli_dead_letter_snapshot(web->client, reason, task, &error)) ==
          NULL) {
    web_respond_error(msg, error);
    return;
  }
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "count");
  cli_json_int(json, entries->len);
  cli_json_end_object(json);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/task ------------------------------------------------------- */

/* The dead letter of task @id, looked for among the entries of its task
 * name (at most FIND_PAGES pages): the newest one wins. */
static SluiceDeadLetter *
find_dead_letter(SluiceClient *client, const gchar *id, const gchar *task,
                 GError **error)
{
  g_autofree gchar *after = NULL;
  SluiceDeadLetter *found = NULL;

  for (guint n = 0; n < FIND_PAGES; n++) {
    g_autoptr(GPtrArray) page = sluice_client_dlq_list(
        client, after, FIND_PAGE_SIZE, NULL, task, error);
    if (page == NULL) {
      sluice_dead_letter_free(found);
      return NULL;
    }
    for (guint i = 0; i < page->len; i++) {
      SluiceDeadLetter *e = page->pdata[i];
      if (g_strcmp0(e->task_id, id) == 0) {
        sluice_dead_letter_free(found);
        found = g_steal_pointer(&page->pdata[i]);
      }
    }
    if (page->len < FIND_PAGE_SIZE)
      break;
    g_free(after);
    after =
        g_strdup(((SluiceDeadLetter *)page->pdata[page->len - 1])->entry_id);
  }
  return found;
}

/* Task @id in the listing of its state (at most FIND_PAGES pages). */
static SluiceListedTask *
find_listed(SluiceClient *client, const gchar *id, const SluiceResult *record,
            GError **error)
{
  g_autofree gchar *cursor = NULL;
  SluiceListOptions lo;

  sluice_list_options_init(&lo);
  lo.state = sluice_result_get_state(record);
  lo.queue = sluice_result_get_queue(record);
  lo.task = sluice_result_get_task(record);
  lo.limit = FIND_PAGE_SIZE;
  for (guint n = 0; n < FIND_PAGES; n++) {
    g_autofree gchar *next = NULL;
    g_autoptr(GPtrArray) page = NULL;

    lo.cursor = cursor;
    page = sluice_client_list(client, &lo, &next, error);
    if (page == NULL)
      return NULL;
    for (guint i = 0; i < page->len; i++)
      if (g_strcmp0(((SluiceListedTask *)page->pdata[i])->id, id) == 0)
        return g_steal_pointer(&page->pdata[i]);
    if (next == NULL)
      break;
    g_free(cursor);
    cursor = g_steal_pointer(&next);
  }
  return NULL;
}

static gboolean
listable(SluiceTaskState state)
{
  return state == SLUICE_STATE_QUEUED || state == SLUICE_STATE_SCHEDULED ||
         state == SLUICE_STATE_RETRYING || state == SLUICE_STATE_RUNNING;
}

static void
get_task(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) decode_error = NULL;
  g_autoptr(SluiceResult) record = NULL;
  g_autoptr(SluiceDeadLetter) entry = NULL;
  g_autoptr(SluiceListedTask) listed = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(CliJson) json = NULL;
  const gchar *id, *entry_id = web_param(query, "entry");

  if (!web_param_required(query, "id", &id, &error)) {
    web_respond_error(msg, error);
    return;
  }
  record = sluice_client_inspect(web->client, id, &error);
  if (record == NULL && !g_error_matches(error, SLUICE_CLIENT_ERROR,
                                         SLUICE_CLIENT_ERROR_NOT_FOUND)) {
    web_respond_error(msg, error);
    return;
  }
  g_clear_error(&error);
  if (entry_id != NULL) {
    entry = sluice_client_dlq_get(web->client, entry_id, &error);
    if (entry == NULL && !g_error_matches(error, SLUICE_CLIENT_ERROR,
                                          SLUICE_CLIENT_ERROR_NOT_FOUND)) {
      web_respond_error(msg, error);
      return;
    }
    /* An entry of another task is not this task's. */
    if (entry != NULL && g_strcmp0(entry->task_id, id) != 0)
      g_clear_pointer(&entry, sluice_dead_letter_free);
  } else if (record != NULL &&
             sluice_result_get_state(record) == SLUICE_STATE_DEAD_LETTERED) {
    entry = find_dead_letter(web->client, id, sluice_result_get_task(record),
                             &error);
  } else if (record != NULL && listable(sluice_result_get_state(record))) {
    listed = find_listed(web->client, id, record, &error);
  }
  if (error != NULL && !g_error_matches(error, SLUICE_CLIENT_ERROR,
                                        SLUICE_CLIENT_ERROR_NOT_FOUND)) {
    web_respond_error(msg, error);
    return;
  }
  if (record == NULL && entry == NULL) {
    g_autofree gchar *text = g_strdup_printf(
        "no task with id %s: it has no record (a wrong id, a record that "
        "expired after its result TTL, or a task enqueued without state "
        "tracking that has not finished)%s",
        id, entry_id != NULL ? ", and no such dead letter" : "");
    web_respond_message(msg, SOUP_STATUS_NOT_FOUND, text);
    return;
  }
  if (entry != NULL && entry->payload != NULL)
    env = sluice_envelope_decode(entry->payload, NULL, &decode_error);
  if (env != NULL)
    sluice_client_open_args(web->client, env, NULL);

  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "id");
  cli_json_string(json, id);
  cli_json_key(json, "record");
  if (record != NULL)
    cli_result_to_json(json, record);
  else
    cli_json_null(json);
  cli_json_key(json, "listed");
  if (listed != NULL)
    cli_listed_task_to_json(json, listed);
  else
    cli_json_null(json);
  cli_json_key(json, "dead_letter");
  if (entry != NULL) {
    cli_json_begin_object(json);
    cli_dead_letter_fields_to_json(json, entry);
    cli_json_key(json, "decode_error");
    cli_json_string(json, decode_error != NULL ? decode_error->message : NULL);
    cli_json_end_object(json);
  } else {
    cli_json_null(json);
  }
  cli_json_key(json, "envelope");
  if (env != NULL)
    cli_envelope_to_json(json, env);
  else
    cli_json_null(json);
  /* The task's last progress report, if it made one (and the broker keeps
   * them): a missing one is no error of the page's. */
  cli_json_key(json, "progress");
  {
    g_autoptr(SluiceProgress) p =
        sluice_client_get_progress(web->client, id, NULL);
    if (p != NULL) {
      gchar number[G_ASCII_DTOSTR_BUF_SIZE];
      cli_json_begin_object(json);
      cli_json_key(json, "fraction");
      cli_json_raw(json,
                   g_ascii_formatd(number, sizeof number, "%.4f", p->fraction));
      cli_json_key(json, "message");
      cli_json_string(json, p->message);
      cli_json_key(json, "at");
      cli_json_time(json, p->updated_at);
      cli_json_end_object(json);
    } else {
      cli_json_null(json);
    }
  }
  cli_json_end_object(json);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- Dispatch ------------------------------------------------------------ */

/* Whether the request's Host is a loopback address or "localhost" (with
 * or without a port). */
static gboolean
host_is_loopback(SoupServerMessage *msg)
{
  const gchar *host = soup_message_headers_get_one(
      soup_server_message_get_request_headers(msg), "Host");
  g_autofree gchar *name = NULL;
  g_autoptr(GInetAddress) ip = NULL;

  if (host == NULL)
    return FALSE;
  if (host[0] == '[') {
    const gchar *close = strchr(host, ']');
    if (close == NULL)
      return FALSE;
    name = g_strndup(host + 1, (gsize)(close - host - 1));
  } else {
    const gchar *colon = strchr(host, ':');
    name =
        colon != NULL ? g_strndup(host, (gsize)(colon - host)) : g_strdup(host);
  }
  if (g_ascii_strcasecmp(name, "localhost") == 0)
    return TRUE;
  ip = g_inet_address_new_from_string(name);
  return ip != NULL && g_inet_address_get_is_loopback(ip);
}

/* Answers 403 and returns FALSE for a request to a loopback server under
 * another name: a page of a site whose name now resolves to 127.0.0.1 is
 * "same-origin" to itself, and could otherwise read the dashboard. */
static gboolean
host_allowed(Web *web, SoupServerMessage *msg)
{
  if (!web->loopback || host_is_loopback(msg))
    return TRUE;
  web_security_headers(msg);
  cli_http_respond(msg, SOUP_STATUS_FORBIDDEN, "text/plain; charset=utf-8",
                   g_strdup_printf("this dashboard listens on loopback: open "
                                   "it as %s://127.0.0.1:PORT/ or "
                                   "%s://localhost:PORT/ (Host header)\n",
                                   web->https ? "https" : "http",
                                   web->https ? "https" : "http"));
  return FALSE;
}

static GHashTable *
form_of(SoupServerMessage *msg)
{
  SoupMessageBody *body = soup_server_message_get_request_body(msg);
  g_autoptr(GBytes) bytes = soup_message_body_flatten(body);
  g_autofree gchar *text =
      g_strndup(g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes));

  return soup_form_decode(text);
}

static void
serve_api(SoupServer *soup, SoupServerMessage *msg, const char *path,
          GHashTable *query, gpointer data)
{
  Web *web = data;
  const gchar *method = soup_server_message_get_method(msg);
  gboolean get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  g_autoptr(GHashTable) form = NULL;

  if (!host_allowed(web, msg))
    return;
  if (get) {
    if (strcmp(path, "/api/overview") == 0)
      get_overview(web, msg);
    else if (strcmp(path, "/api/rates") == 0)
      get_rates(web, msg);
    else if (strcmp(path, "/api/tasks") == 0)
      get_tasks(web, msg, query);
    else if (strcmp(path, "/api/dead") == 0)
      get_dead(web, msg, query);
    else if (strcmp(path, "/api/dead/count") == 0)
      get_dead_count(web, msg, query);
    else if (strcmp(path, "/api/task") == 0)
      get_task(web, msg, query);
    else if (strcmp(path, "/api/events") == 0)
      web_get_events(web, msg, query);
    else if (g_str_has_prefix(path, "/api/workflows/"))
      web_get_workflow(web, msg, path + strlen("/api/workflows/"));
    else
      web_respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such API path");
    return;
  }
  if (strcmp(method, "POST") != 0) {
    soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                 "Allow", "GET, HEAD, POST");
    web_respond_message(msg, SOUP_STATUS_METHOD_NOT_ALLOWED,
                        "GET reads, POST acts; nothing else is served");
    return;
  }
  if (!web_may_write(web, msg))
    return;
  form = form_of(msg);
  if (g_str_has_prefix(path, "/api/queues/"))
    web_post_queue(web, msg, path + strlen("/api/queues/"), form);
  else if (g_str_has_prefix(path, "/api/tasks/"))
    web_post_task(web, msg, path + strlen("/api/tasks/"), form);
  else if (strcmp(path, "/api/dead/replay") == 0)
    web_post_dead_one(web, msg, TRUE, form);
  else if (strcmp(path, "/api/dead/delete") == 0)
    web_post_dead_one(web, msg, FALSE, form);
  else if (strcmp(path, "/api/dead/replay-all") == 0)
    web_post_dead_all(web, msg, TRUE, form);
  else if (strcmp(path, "/api/dead/delete-all") == 0)
    web_post_dead_all(web, msg, FALSE, form);
  else
    web_respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such API path");
}

/* ---- Static files -------------------------------------------------------- */

static const gchar *
content_type_of(const gchar *name)
{
  if (g_str_has_suffix(name, ".html"))
    return "text/html; charset=utf-8";
  if (g_str_has_suffix(name, ".js"))
    return "text/javascript; charset=utf-8";
  if (g_str_has_suffix(name, ".css"))
    return "text/css; charset=utf-8";
  if (g_str_has_suffix(name, ".svg"))
    return "image/svg+xml";
  return "application/octet-stream";
}

static void
serve_file(SoupServer *soup, SoupServerMessage *msg, const char *path,
           GHashTable *query, gpointer data)
{
  const gchar *method = soup_server_message_get_method(msg);
  const gchar *name = strcmp(path, "/") == 0 ? "/index.html" : path;
  g_autofree gchar *resource = NULL;
  g_autoptr(GBytes) bytes = NULL;

  if (!host_allowed(data, msg))
    return;
  web_security_headers(msg);
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
    soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                 "Allow", "GET, HEAD");
    cli_http_respond(msg, SOUP_STATUS_METHOD_NOT_ALLOWED,
                     "text/plain; charset=utf-8",
                     g_strdup("only GET and HEAD are served here\n"));
    return;
  }
  /* Only the embedded files exist: a path is looked up, never opened. */
  resource = g_strconcat(RESOURCE_PREFIX, name, NULL);
  bytes = g_resource_lookup_data(web_get_resource(), resource,
                                 G_RESOURCE_LOOKUP_FLAGS_NONE, NULL);
  if (bytes == NULL) {
    cli_http_respond(msg, SOUP_STATUS_NOT_FOUND, "text/plain; charset=utf-8",
                     g_strdup("not found: the dashboard is at /\n"));
    return;
  }
  soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type(
      soup_server_message_get_response_headers(msg), content_type_of(name),
      NULL);
  soup_message_body_append_bytes(soup_server_message_get_response_body(msg),
                                 bytes);
}

void
web_add_handlers(SoupServer *server, Web *web)
{
  soup_server_add_handler(server, "/api", serve_api, web, NULL);
  soup_server_add_handler(server, "/", serve_file, web, NULL);
}

/* ---- The broker's address ------------------------------------------------ */

gchar *
web_shown_url(const gchar *url)
{
  g_autoptr(GUri) uri = g_uri_parse(url, G_URI_FLAGS_NONE, NULL);
  const gchar *host;
  GString *shown;

  if (uri == NULL)
    return g_strdup("(not shown)");
  /* Built from the parts that cannot hold credentials; the user
   * information (user, password, auth parameters) is left out whole. */
  shown = g_string_new(g_uri_get_scheme(uri));
  g_string_append(shown, "://");
  host = g_uri_get_host(uri);
  if (host != NULL)
    g_string_append_printf(shown, strchr(host, ':') != NULL ? "[%s]" : "%s",
                           host);
  if (g_uri_get_port(uri) > 0)
    g_string_append_printf(shown, ":%d", g_uri_get_port(uri));
  g_string_append(shown, g_uri_get_path(uri));
  return g_string_free(shown, FALSE);
}

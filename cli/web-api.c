/* web-api.c - what `sluice web` serves: its pages (embedded with GResource
 * from cli/web/) and the JSON API they read and act through.
 *
 *   GET  /api/overview       queues (depth, paused), the schedule, dead
 *                            letters by reason, workers and their health
 *   GET  /api/rates          processed/failed in the last hour (web-rates.c)
 *   GET  /api/tasks          ?state=queued|scheduled|retrying|running
 *                            &queue=&task=&cursor=&limit=  (one page)
 *   GET  /api/dead           ?reason=&task=&after=&limit=  (one page)
 *   GET  /api/dead/count     ?reason=&task=  (what a bulk action would take)
 *   GET  /api/task           ?id=[&entry=]  (record, message, dead letter)
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
 * A bulk action on dead letters takes a snapshot of the matching entries
 * and acts only if it holds as many as the page showed and the person
 * confirmed (expect=N); otherwise it answers 409 with the new count, so a
 * confirmation never covers entries nobody saw counted.
 */
#include "config.h"

#include <string.h>

#include "cli/web-resources.h"
#include "cli/web.h"

#define RESOURCE_PREFIX "/org/sluice/web"
#define PAGE_DEFAULT 50
#define PAGE_MAX 1000
/* How far the task page looks through a listing for its task. */
#define FIND_PAGES 10
#define FIND_PAGE_SIZE 1000
/* Entries per read while taking a snapshot of dead letters. */
#define SNAPSHOT_PAGE 500
/* A live worker announces itself every 2 s: three missed is late. */
#define WORKER_LATE_MS 6000

#define JSON_TYPE "application/json; charset=utf-8"

/* ---- Answers ------------------------------------------------------------- */

/* What every answer carries: nothing from elsewhere may run, frame or be
 * sniffed into something else, and nothing is cached (figures change). */
static void
security_headers(SoupServerMessage *msg)
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

static void
respond_json(SoupServerMessage *msg, guint status, CliJson *json)
{
  security_headers(msg);
  cli_http_respond(msg, status, JSON_TYPE,
                   g_strndup(json->out->str, json->out->len));
}

static void
respond_message(SoupServerMessage *msg, guint status, const gchar *text)
{
  g_autoptr(CliJson) json = cli_json_new();

  cli_json_begin_object(json);
  cli_json_key(json, "error");
  cli_json_string(json, text);
  cli_json_end_object(json);
  respond_json(msg, status, json);
}

/* The HTTP status of a failed library call. */
static guint
status_for(const GError *error)
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

static void
respond_error(SoupServerMessage *msg, const GError *error)
{
  respond_message(msg, status_for(error), error->message);
}

/* ---- Parameters ---------------------------------------------------------- */

/* A parameter, or NULL when absent or empty. */
static const gchar *
param(GHashTable *params, const gchar *name)
{
  const gchar *value =
      params != NULL ? g_hash_table_lookup(params, name) : NULL;

  return value != NULL && value[0] != '\0' ? value : NULL;
}

static gboolean
param_limit(GHashTable *params, guint *out, GError **error)
{
  const gchar *text = param(params, "limit");
  guint64 limit = PAGE_DEFAULT;

  if (text != NULL &&
      !cli_parse_count("limit", text, 1, PAGE_MAX, &limit, error))
    return FALSE;
  *out = (guint)limit;
  return TRUE;
}

static gboolean
param_required(GHashTable *params, const gchar *name, const gchar **out,
               GError **error)
{
  *out = param(params, name);
  if (*out == NULL)
    return cli_usage_error(error, "give %s=", name);
  return TRUE;
}

/* ---- GET /api/overview --------------------------------------------------- */

static int
compare_strings(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

static void
strv_to_json(CliJson *json, gchar **v)
{
  cli_json_begin_array(json);
  for (guint i = 0; v != NULL && v[i] != NULL; i++)
    cli_json_string(json, v[i]);
  cli_json_end_array(json);
}

static void
reasons_to_json(CliJson *json, GHashTable *by_reason)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  GHashTableIter it;
  gpointer key;

  g_hash_table_iter_init(&it, by_reason);
  while (g_hash_table_iter_next(&it, &key, NULL))
    g_ptr_array_add(names, key);
  g_ptr_array_sort(names, compare_strings);
  cli_json_begin_object(json);
  for (guint i = 0; i < names->len; i++) {
    const gint64 *n = g_hash_table_lookup(by_reason, names->pdata[i]);
    cli_json_key(json, names->pdata[i]);
    cli_json_int(json, n != NULL ? *n : 0);
  }
  cli_json_end_object(json);
}

/* "healthy", "late" (alive, but its last heartbeat is older than three
 * announcements) or "dead" (its liveness lapsed). */
static const gchar *
worker_health(const SluiceWorkerInfo *w, gint64 now_ms)
{
  if (!w->alive)
    return "dead";
  return now_ms - w->last_seen_ms > WORKER_LATE_MS ? "late" : "healthy";
}

static void
worker_to_json(CliJson *json, const SluiceWorkerInfo *w, gint64 now_ms)
{
  cli_json_begin_object(json);
  cli_json_key(json, "id");
  cli_json_string(json, w->id);
  cli_json_key(json, "health");
  cli_json_string(json, worker_health(w, now_ms));
  cli_json_key(json, "alive");
  cli_json_bool(json, w->alive);
  cli_json_key(json, "last_seen");
  cli_json_time(json, w->last_seen_ms);
  cli_json_key(json, "host");
  cli_json_string(json, w->host);
  cli_json_key(json, "pid");
  cli_json_int(json, w->pid);
  cli_json_key(json, "queues");
  strv_to_json(json, w->queues);
  cli_json_key(json, "tasks");
  strv_to_json(json, w->tasks);
  cli_json_key(json, "concurrency");
  cli_json_int(json, w->concurrency);
  cli_json_key(json, "running");
  cli_json_int(json, w->running);
  cli_json_key(json, "started_at");
  cli_json_time(json, w->started_at_ms);
  cli_json_key(json, "succeeded");
  cli_json_int(json, (gint64)w->succeeded);
  cli_json_key(json, "failed");
  cli_json_int(json, (gint64)w->failed);
  cli_json_key(json, "retried");
  cli_json_int(json, (gint64)w->retried);
  cli_json_key(json, "dead_lettered");
  cli_json_int(json, (gint64)w->dead_lettered);
  cli_json_key(json, "running_tasks");
  cli_json_begin_array(json);
  for (guint i = 0; w->running_tasks != NULL && i < w->running_tasks->len;
       i++) {
    const SluiceRunningTask *t = w->running_tasks->pdata[i];
    cli_json_begin_object(json);
    cli_json_key(json, "id");
    cli_json_string(json, t->id);
    cli_json_key(json, "task");
    cli_json_string(json, t->task);
    cli_json_key(json, "queue");
    cli_json_string(json, t->queue);
    cli_json_key(json, "started_at");
    cli_json_time(json, t->started_at_ms);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
  cli_json_end_object(json);
}

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
  SluiceBrokerStats stats;
  gint64 now_ms;

  if (!sluice_client_get_stats(web->client, NULL, &stats, &error)) {
    respond_error(msg, error);
    return;
  }
  now_ms = g_get_real_time() / 1000;
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "namespace");
  cli_json_string(json, web->settings->namespace_);
  cli_json_key(json, "mode");
  cli_json_string(json, cli_mode_name(web->settings->mode));
  cli_json_key(json, "broker");
  cli_json_string(json, web->shown_url);
  cli_json_key(json, "writes");
  cli_json_string(json, writes_state(web));
  cli_json_key(json, "now");
  cli_json_time(json, now_ms);
  cli_json_key(json, "started_at");
  cli_json_time(json, web->started_at_ms);
  cli_json_key(json, "queues");
  cli_json_begin_array(json);
  for (guint i = 0; i < stats.queues->len; i++) {
    const SluiceQueueStats *q = stats.queues->pdata[i];
    cli_json_begin_object(json);
    cli_json_key(json, "name");
    cli_json_string(json, q->name);
    cli_json_key(json, "ready");
    cli_json_int(json, q->ready);
    cli_json_key(json, "paused");
    cli_json_bool(json, q->paused);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
  cli_json_key(json, "scheduled");
  cli_json_int(json, stats.scheduled);
  cli_json_key(json, "in_flight");
  if (stats.in_flight >= 0)
    cli_json_int(json, stats.in_flight);
  else
    cli_json_null(json);
  cli_json_key(json, "dead_letters");
  cli_json_int(json, stats.dead_letters);
  cli_json_key(json, "dead_letters_by_reason");
  reasons_to_json(json, stats.dead_letters_by_reason);
  cli_json_key(json, "dead_letters_dropped");
  if (stats.dead_letters_dropped >= 0)
    cli_json_int(json, stats.dead_letters_dropped);
  else
    cli_json_null(json);
  cli_json_key(json, "workers");
  cli_json_begin_array(json);
  for (guint i = 0; i < stats.workers->len; i++)
    worker_to_json(json, stats.workers->pdata[i], now_ms);
  cli_json_end_array(json);
  cli_json_end_object(json);
  sluice_broker_stats_clear(&stats);
  respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/rates ------------------------------------------------------ */

static void
get_rates(Web *web, SoupServerMessage *msg)
{
  g_autoptr(CliJson) json = cli_json_new();

  web_rates_to_json(web->rates, json);
  respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/tasks ------------------------------------------------------ */

static gboolean
parse_state(const gchar *text, SluiceTaskState *out, GError **error)
{
  static const struct {
    const gchar *name;
    SluiceTaskState state;
  } states[] = {
      {"queued", SLUICE_STATE_QUEUED},
      {"scheduled", SLUICE_STATE_SCHEDULED},
      {"retrying", SLUICE_STATE_RETRYING},
      {"running", SLUICE_STATE_RUNNING},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(states); i++)
    if (g_strcmp0(text, states[i].name) == 0) {
      *out = states[i].state;
      return TRUE;
    }
  return cli_usage_error(error,
                         "state: give queued, scheduled, retrying or running "
                         "(dead letters are under /api/dead)");
}

static void
get_tasks(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) tasks = NULL;
  g_autoptr(CliJson) json = NULL;
  g_autofree gchar *next = NULL;
  SluiceListOptions lo;

  sluice_list_options_init(&lo);
  lo.queue = param(query, "queue");
  lo.task = param(query, "task");
  lo.cursor = param(query, "cursor");
  if (!parse_state(param(query, "state"), &lo.state, &error) ||
      !param_limit(query, &lo.limit, &error) ||
      (lo.state == SLUICE_STATE_QUEUED && lo.queue == NULL &&
       !cli_usage_error(&error, "queued tasks are listed a queue at a time: "
                                "give queue=")) ||
      (tasks = sluice_client_list(web->client, &lo, &next, &error)) == NULL) {
    respond_error(msg, error);
    return;
  }
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "state");
  cli_json_string(json, param(query, "state"));
  cli_json_key(json, "tasks");
  cli_json_begin_array(json);
  for (guint i = 0; i < tasks->len; i++)
    cli_listed_task_to_json(json, tasks->pdata[i]);
  cli_json_end_array(json);
  cli_json_key(json, "next_cursor");
  cli_json_string(json, next);
  cli_json_end_object(json);
  respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/dead, /api/dead/count -------------------------------------- */

static gboolean
dead_filters(GHashTable *params, const gchar **reason, const gchar **task,
             GError **error)
{
  *reason = param(params, "reason");
  *task = param(params, "task");
  return cli_check_reason(*reason, error);
}

static void
get_dead(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliJson) json = NULL;
  const gchar *reason, *task;
  guint limit;

  if (!dead_filters(query, &reason, &task, &error) ||
      !param_limit(query, &limit, &error) ||
      (entries = sluice_client_dlq_list(web->client, param(query, "after"),
                                        limit, reason, task, &error)) == NULL) {
    respond_error(msg, error);
    return;
  }
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "entries");
  cli_json_begin_array(json);
  for (guint i = 0; i < entries->len; i++) {
    cli_json_begin_object(json);
    cli_dead_letter_fields_to_json(json, entries->pdata[i]);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
  cli_json_key(json, "next_after");
  cli_json_string(
      json,
      entries->len == limit
          ? ((SluiceDeadLetter *)entries->pdata[entries->len - 1])->entry_id
          : NULL);
  cli_json_end_object(json);
  respond_json(msg, SOUP_STATUS_OK, json);
}

/* Every entry matching the filters, oldest first (as `sluice dlq replay
 * --all` takes them: acting on a live listing would meet its own
 * replays again). */
static GPtrArray *
snapshot(SluiceClient *client, const gchar *reason, const gchar *task,
         GError **error)
{
  g_autoptr(GPtrArray) all =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autofree gchar *after = NULL;

  for (;;) {
    g_autoptr(GPtrArray) page = sluice_client_dlq_list(
        client, after, SNAPSHOT_PAGE, reason, task, error);
    if (page == NULL)
      return NULL;
    for (guint i = 0; i < page->len; i++)
      g_ptr_array_add(all, g_steal_pointer(&page->pdata[i]));
    if (page->len < SNAPSHOT_PAGE)
      return g_steal_pointer(&all);
    g_free(after);
    after = g_strdup(((SluiceDeadLetter *)all->pdata[all->len - 1])->entry_id);
  }
}

static void
get_dead_count(Web *web, SoupServerMessage *msg, GHashTable *query)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliJson) json = NULL;
  const gchar *reason, *task;

  if (!dead_filters(query, &reason, &task, &error) ||
      (entries = snapshot(web->client, reason, task, &error)) == NULL) {
    respond_error(msg, error);
    return;
  }
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "count");
  cli_json_int(json, entries->len);
  cli_json_end_object(json);
  respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- GET /api/task ------------------------------------------------------- */

static void
envelope_to_json(CliJson *json, const SluiceEnvelope *env)
{
  g_autofree gchar *args = cli_msgpack_to_json(env->args);
  g_autoptr(GList) names =
      env->headers != NULL ? g_hash_table_get_keys(env->headers) : NULL;

  cli_json_begin_object(json);
  cli_json_key(json, "version");
  cli_json_int(json, env->version);
  cli_json_key(json, "id");
  cli_json_string(json, env->id);
  cli_json_key(json, "task");
  cli_json_string(json, env->task);
  cli_json_key(json, "queue");
  cli_json_string(json, env->queue);
  cli_json_key(json, "attempt");
  cli_json_int(json, env->attempt);
  cli_json_key(json, "enqueued_at");
  cli_json_time(json, env->enqueued_at);
  cli_json_key(json, "eta");
  cli_json_time(json, env->eta);
  cli_json_key(json, "max_attempts");
  if (env->opts.retry.max_attempts > 0)
    cli_json_int(json, env->opts.retry.max_attempts);
  else
    cli_json_null(json);
  cli_json_key(json, "timeout_ms");
  if (env->opts.timeout_ms > 0)
    cli_json_int(json, env->opts.timeout_ms);
  else
    cli_json_null(json);
  cli_json_key(json, "expires_at");
  cli_json_time(json, env->opts.expires_at);
  cli_json_key(json, "args");
  if (args != NULL)
    cli_json_raw(json, args);
  else
    cli_json_null(json);
  /* History and headers are NULL while empty (sluice-envelope.h). */
  cli_json_key(json, "history");
  cli_json_begin_array(json);
  for (guint i = 0; env->history != NULL && i < env->history->len; i++)
    cli_json_string(json, env->history->pdata[i]);
  cli_json_end_array(json);
  cli_json_key(json, "headers");
  names = g_list_sort(names, (GCompareFunc)strcmp);
  cli_json_begin_object(json);
  for (GList *k = names; k != NULL; k = k->next) {
    cli_json_key(json, k->data);
    cli_json_string(json, g_hash_table_lookup(env->headers, k->data));
  }
  cli_json_end_object(json);
  cli_json_end_object(json);
}

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
  const gchar *id, *entry_id = param(query, "entry");

  if (!param_required(query, "id", &id, &error)) {
    respond_error(msg, error);
    return;
  }
  record = sluice_client_inspect(web->client, id, &error);
  if (record == NULL && !g_error_matches(error, SLUICE_CLIENT_ERROR,
                                         SLUICE_CLIENT_ERROR_NOT_FOUND)) {
    respond_error(msg, error);
    return;
  }
  g_clear_error(&error);
  if (entry_id != NULL) {
    entry = sluice_client_dlq_get(web->client, entry_id, &error);
    if (entry == NULL && !g_error_matches(error, SLUICE_CLIENT_ERROR,
                                          SLUICE_CLIENT_ERROR_NOT_FOUND)) {
      respond_error(msg, error);
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
    respond_error(msg, error);
    return;
  }
  if (record == NULL && entry == NULL) {
    g_autofree gchar *text = g_strdup_printf(
        "no task with id %s: it has no record (a wrong id, a record that "
        "expired after its result TTL, or a task enqueued without state "
        "tracking that has not finished)%s",
        id, entry_id != NULL ? ", and no such dead letter" : "");
    respond_message(msg, SOUP_STATUS_NOT_FOUND, text);
    return;
  }
  if (entry != NULL && entry->payload != NULL)
    env = sluice_envelope_decode(entry->payload, NULL, &decode_error);

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
    envelope_to_json(json, env);
  else
    cli_json_null(json);
  cli_json_end_object(json);
  respond_json(msg, SOUP_STATUS_OK, json);
}

/* ---- Writes -------------------------------------------------------------- */

gboolean
web_token_equal(const gchar *a, const gchar *b)
{
  guint8 da[32], db[32];
  gsize la = sizeof da, lb = sizeof db;
  g_autoptr(GChecksum) ca = g_checksum_new(G_CHECKSUM_SHA256);
  g_autoptr(GChecksum) cb = g_checksum_new(G_CHECKSUM_SHA256);
  guint8 diff = 0;

  g_checksum_update(ca, (const guchar *)a, (gssize)strlen(a));
  g_checksum_update(cb, (const guchar *)b, (gssize)strlen(b));
  g_checksum_get_digest(ca, da, &la);
  g_checksum_get_digest(cb, db, &lb);
  for (gsize i = 0; i < sizeof da; i++)
    diff |= (guint8)(da[i] ^ db[i]);
  return diff == 0;
}

/* Whether the request comes from this server's own pages: a browser
 * sends Origin with every POST and Sec-Fetch-Site with every request
 * (recent ones); a client that sends neither is not a browser, and
 * needs the token all the same. */
static gboolean
same_origin(SoupServerMessage *msg)
{
  SoupMessageHeaders *h = soup_server_message_get_request_headers(msg);
  const gchar *origin = soup_message_headers_get_one(h, "Origin");
  const gchar *site = soup_message_headers_get_one(h, "Sec-Fetch-Site");
  const gchar *host = soup_message_headers_get_one(h, "Host");

  if (site != NULL && strcmp(site, "same-origin") != 0)
    return FALSE;
  if (origin != NULL) {
    g_autofree gchar *own =
        host != NULL ? g_strconcat("http://", host, NULL) : NULL;
    return own != NULL && g_ascii_strcasecmp(origin, own) == 0;
  }
  return TRUE;
}

/* Answers 403 and returns FALSE unless @msg may write. */
static gboolean
may_write(Web *web, SoupServerMessage *msg)
{
  const gchar *token = soup_message_headers_get_one(
      soup_server_message_get_request_headers(msg), WEB_TOKEN_HEADER);

  if (web->read_only) {
    respond_message(msg, SOUP_STATUS_FORBIDDEN,
                    "this dashboard is read-only (sluice web --read-only)");
    return FALSE;
  }
  if (web->token == NULL) {
    respond_message(msg, SOUP_STATUS_FORBIDDEN,
                    "write actions are disabled: start sluice web with "
                    "--token-file FILE to enable them");
    return FALSE;
  }
  if (!same_origin(msg)) {
    respond_message(msg, SOUP_STATUS_FORBIDDEN,
                    "refused: a write must come from the dashboard's own "
                    "page (cross-origin request)");
    return FALSE;
  }
  if (token != NULL && token[0] == '\0')
    token = NULL;
  if (token == NULL || !web_token_equal(token, web->token)) {
    respond_message(msg, SOUP_STATUS_FORBIDDEN,
                    token == NULL
                        ? "give the token of --token-file in the "
                          "X-Sluice-Token header"
                        : "wrong token (X-Sluice-Token): it must be the "
                          "first line of the --token-file");
    return FALSE;
  }
  return TRUE;
}

static void
respond_done(SoupServerMessage *msg, const gchar *key, const gchar *value)
{
  g_autoptr(CliJson) json = cli_json_new();

  cli_json_begin_object(json);
  cli_json_key(json, "ok");
  cli_json_bool(json, TRUE);
  if (key != NULL) {
    cli_json_key(json, key);
    cli_json_string(json, value);
  }
  cli_json_end_object(json);
  respond_json(msg, SOUP_STATUS_OK, json);
}

static void
post_queue(Web *web, SoupServerMessage *msg, const gchar *action,
           GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  const gchar *queue;
  guint64 removed = 0;
  gboolean ok;

  if (!param_required(form, "queue", &queue, &error)) {
    respond_error(msg, error);
    return;
  }
  if (strcmp(action, "pause") == 0) {
    ok = sluice_client_pause(web->client, queue, &error);
  } else if (strcmp(action, "resume") == 0) {
    ok = sluice_client_resume(web->client, queue, &error);
  } else if (strcmp(action, "purge") == 0) {
    /* Deleting a queue's tasks takes its name typed again. */
    if (g_strcmp0(param(form, "confirm"), queue) != 0) {
      respond_message(msg, SOUP_STATUS_BAD_REQUEST,
                      "purging deletes every task waiting in the queue: "
                      "confirm with confirm=QUEUE");
      return;
    }
    ok = sluice_client_purge(web->client, queue, &removed, &error);
  } else {
    respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such action");
    return;
  }
  if (!ok) {
    respond_error(msg, error);
    return;
  }
  g_info("dashboard: %s queue %s", action, queue);
  if (strcmp(action, "purge") == 0) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "ok");
    cli_json_bool(json, TRUE);
    cli_json_key(json, "removed");
    cli_json_int(json, (gint64)removed);
    cli_json_end_object(json);
    respond_json(msg, SOUP_STATUS_OK, json);
  } else {
    respond_done(msg, NULL, NULL);
  }
}

static void
post_task(Web *web, SoupServerMessage *msg, const gchar *action,
          GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  const gchar *id;

  if (!param_required(form, "id", &id, &error)) {
    respond_error(msg, error);
    return;
  }
  if (strcmp(action, "run-now") == 0) {
    if (!sluice_client_run_now(web->client, id, &error)) {
      respond_error(msg, error);
      return;
    }
    g_info("dashboard: run task %s now", id);
    respond_done(msg, NULL, NULL);
  } else if (strcmp(action, "delete") == 0) {
    static const gchar *const outcomes[] = {
        [SLUICE_DELETE_UNSCHEDULED] = "unscheduled",
        [SLUICE_DELETE_DEAD_LETTER] = "dead_letter",
        [SLUICE_DELETE_REVOKED] = "revoked",
    };
    SluiceDeleteOutcome outcome = sluice_client_delete(web->client, id, &error);
    if (outcome == SLUICE_DELETE_FAILED) {
      respond_error(msg, error);
      return;
    }
    g_info("dashboard: delete task %s (%s)", id, outcomes[outcome]);
    respond_done(msg, "outcome", outcomes[outcome]);
  } else {
    respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such action");
  }
}

static void
post_dead_one(Web *web, SoupServerMessage *msg, gboolean replay,
              GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *task_id = NULL;
  const gchar *entry;
  gboolean ok;

  if (!param_required(form, "entry", &entry, &error)) {
    respond_error(msg, error);
    return;
  }
  ok = replay ? sluice_client_dlq_replay(web->client, entry, FALSE, &task_id,
                                         &error)
              : sluice_client_dlq_delete(web->client, entry, &error);
  if (!ok) {
    respond_error(msg, error);
    return;
  }
  g_info("dashboard: %s dead letter %s", replay ? "replay" : "delete", entry);
  respond_done(msg, "task_id", task_id);
}

static void
post_dead_all(Web *web, SoupServerMessage *msg, gboolean replay,
              GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliJson) json = NULL;
  const gchar *reason, *task, *expect_text;
  guint64 expect;
  guint done = 0, gone = 0;

  if (!dead_filters(form, &reason, &task, &error) ||
      !param_required(form, "expect", &expect_text, &error) ||
      !cli_parse_count("expect", expect_text, 0, G_MAXUINT32, &expect,
                       &error) ||
      (entries = snapshot(web->client, reason, task, &error)) == NULL) {
    respond_error(msg, error);
    return;
  }
  if (entries->len != expect) {
    json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "error");
    cli_json_string(json, "the dead letters changed since they were counted: "
                          "confirm again with the new count");
    cli_json_key(json, "count");
    cli_json_int(json, entries->len);
    cli_json_end_object(json);
    respond_json(msg, SOUP_STATUS_CONFLICT, json);
    return;
  }
  for (guint i = 0; i < entries->len; i++) {
    const SluiceDeadLetter *e = entries->pdata[i];
    g_autoptr(GError) local = NULL;
    gboolean ok =
        replay ? sluice_client_dlq_replay(web->client, e->entry_id, FALSE, NULL,
                                          &local)
               : sluice_client_dlq_delete(web->client, e->entry_id, &local);
    if (ok) {
      done++;
    } else if (g_error_matches(local, SLUICE_CLIENT_ERROR,
                               SLUICE_CLIENT_ERROR_NOT_FOUND)) {
      gone++; /* replayed or deleted by someone else meanwhile */
    } else {
      g_autofree gchar *text = g_strdup_printf(
          "%s %u of %u dead letters, then: %s", replay ? "replayed" : "deleted",
          done, entries->len, local->message);
      respond_message(msg, status_for(local), text);
      return;
    }
  }
  g_info("dashboard: %s %u dead letters (reason %s, task %s)",
         replay ? "replay" : "delete", done, reason != NULL ? reason : "any",
         task != NULL ? task : "any");
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "ok");
  cli_json_bool(json, TRUE);
  cli_json_key(json, "done");
  cli_json_int(json, done);
  cli_json_key(json, "gone");
  cli_json_int(json, gone);
  cli_json_end_object(json);
  respond_json(msg, SOUP_STATUS_OK, json);
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
  security_headers(msg);
  cli_http_respond(msg, SOUP_STATUS_FORBIDDEN, "text/plain; charset=utf-8",
                   g_strdup("this dashboard listens on loopback: open it as "
                            "http://127.0.0.1:PORT/ or http://localhost:PORT/ "
                            "(Host header)\n"));
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
    else
      respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such API path");
    return;
  }
  if (strcmp(method, "POST") != 0) {
    soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                 "Allow", "GET, HEAD, POST");
    respond_message(msg, SOUP_STATUS_METHOD_NOT_ALLOWED,
                    "GET reads, POST acts; nothing else is served");
    return;
  }
  if (!may_write(web, msg))
    return;
  form = form_of(msg);
  if (g_str_has_prefix(path, "/api/queues/"))
    post_queue(web, msg, path + strlen("/api/queues/"), form);
  else if (g_str_has_prefix(path, "/api/tasks/"))
    post_task(web, msg, path + strlen("/api/tasks/"), form);
  else if (strcmp(path, "/api/dead/replay") == 0)
    post_dead_one(web, msg, TRUE, form);
  else if (strcmp(path, "/api/dead/delete") == 0)
    post_dead_one(web, msg, FALSE, form);
  else if (strcmp(path, "/api/dead/replay-all") == 0)
    post_dead_all(web, msg, TRUE, form);
  else if (strcmp(path, "/api/dead/delete-all") == 0)
    post_dead_all(web, msg, FALSE, form);
  else
    respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such API path");
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
  security_headers(msg);
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

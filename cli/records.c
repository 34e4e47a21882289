/* records.c - the records the command and its dashboard show, each read
 * and written in one place: `sluice stats --json` and /api/overview write
 * the same stats and the same worker objects, `sluice dlq list --json` and
 * /api/dead the same page of dead letters, `sluice inspect --json` and
 * /api/task the same task record, and so on. A field added here reaches
 * both at once; tests/test-web.c compares the two.
 *
 *   task records       cli_result_to_json(), cli_result_print()
 *   listed tasks       cli_listed_task_to_json()
 *   dead letters       cli_dead_letter_fields_to_json(), a page of them
 *                      (cli_dead_letter_page_to_json()), a snapshot of all
 *                      that match (cli_dead_letter_snapshot()), an entry's
 *                      message (cli_envelope_to_json(),
 *                      cli_dead_letter_show_to_json())
 *   events, workflows  cli_event_to_json(), cli_workflow_to_json()
 *   stats and workers  cli_stats_read(), cli_stats_fields_to_json(),
 *                      cli_worker_to_json()
 *
 * Each writes with CliJson (output.c), which makes every string valid
 * UTF-8, so the JSON always parses whatever a message held.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Entries per broker listing while taking a snapshot of dead letters. */
#define SNAPSHOT_PAGE 500
/* How many concurrency keys the stats list at most. */
#define STATS_SLOT_KEYS 1000
/* A live worker announces itself every 2 s: three missed is late. */
#define WORKER_LATE_MS 6000

/* ---- Task records -------------------------------------------------------- */

/* The key id of a `seal` ("aes-256-gcm:k1" -> "k1"), for what is shown
 * instead of a value that was not opened. */
static const gchar *
seal_key(const gchar *seal)
{
  const gchar *colon = seal != NULL ? strchr(seal, ':') : NULL;

  return colon != NULL ? colon + 1 : seal;
}

/* A sealed value the client could not open is no value to show. */
static gchar *
shown_value(const SluiceResult *result)
{
  return sluice_result_get_seal(result) != NULL
             ? NULL
             : cli_msgpack_to_json(sluice_result_get_value(result));
}

void
cli_result_to_json(CliJson *json, const SluiceResult *result)
{
  g_autofree gchar *value = shown_value(result);

  cli_json_begin_object(json);
  cli_json_key(json, "id");
  cli_json_string(json, sluice_result_get_id(result));
  cli_json_key(json, "state");
  cli_json_string(json,
                  sluice_task_state_to_string(sluice_result_get_state(result)));
  cli_json_key(json, "task");
  cli_json_string(json, sluice_result_get_task(result));
  cli_json_key(json, "queue");
  cli_json_string(json, sluice_result_get_queue(result));
  cli_json_key(json, "attempt");
  cli_json_int(json, sluice_result_get_attempt(result));
  cli_json_key(json, "worker");
  cli_json_string(json, sluice_result_get_worker(result));
  cli_json_key(json, "enqueued_at");
  cli_json_time(json, sluice_result_get_enqueued_at(result));
  cli_json_key(json, "started_at");
  cli_json_time(json, sluice_result_get_started_at(result));
  cli_json_key(json, "finished_at");
  cli_json_time(json, sluice_result_get_finished_at(result));
  cli_json_key(json, "result");
  if (value != NULL)
    cli_json_raw(json, value);
  else
    cli_json_null(json);
  cli_json_key(json, "error");
  cli_json_string(json, sluice_result_get_error(result));
  cli_json_key(json, "dead_letter_reason");
  cli_json_string(json, sluice_result_get_dead_letter_reason(result));
  cli_json_key(json, "due_at");
  cli_json_time(json, sluice_result_get_due_at(result));
  cli_json_key(json, "sealed_with");
  cli_json_string(json, seal_key(sluice_result_get_seal(result)));
  cli_json_end_object(json);
}

void
cli_result_print(const SluiceResult *result, gboolean json)
{
  g_autofree gchar *value = NULL;
  g_autofree gchar *attempt = NULL;
  g_autofree gchar *enqueued = NULL;
  g_autofree gchar *started = NULL;
  g_autofree gchar *finished = NULL;
  g_autofree gchar *due = NULL;
  g_autoptr(CliTable) table = NULL;

  if (json) {
    g_autoptr(CliJson) out = cli_json_new();
    cli_result_to_json(out, result);
    cli_json_print(out);
    return;
  }
  if (sluice_result_get_seal(result) != NULL)
    value = g_strdup_printf("encrypted with key %s (give --keyring with that "
                            "key to read it)",
                            seal_key(sluice_result_get_seal(result)));
  else
    value = cli_msgpack_to_json(sluice_result_get_value(result));
  attempt = g_strdup_printf("%u", sluice_result_get_attempt(result));
  enqueued = cli_format_time(sluice_result_get_enqueued_at(result));
  started = cli_format_time(sluice_result_get_started_at(result));
  finished = cli_format_time(sluice_result_get_finished_at(result));
  table = cli_table_new(NULL, 2);
  cli_table_add(table, "id", sluice_result_get_id(result));
  cli_table_add(table, "state",
                sluice_task_state_to_string(sluice_result_get_state(result)));
  cli_table_add(table, "task", sluice_result_get_task(result));
  cli_table_add(table, "queue", sluice_result_get_queue(result));
  cli_table_add(table, "attempt", attempt);
  cli_table_add(table, "worker", sluice_result_get_worker(result));
  cli_table_add(table, "enqueued at", enqueued);
  cli_table_add(table, "started at", started);
  cli_table_add(table, "finished at", finished);
  cli_table_add(table, "result", value);
  cli_table_add(table, "error", sluice_result_get_error(result));
  cli_table_add(table, "dead-letter reason",
                sluice_result_get_dead_letter_reason(result));
  if (sluice_result_get_due_at(result) > 0) {
    due = cli_format_time(sluice_result_get_due_at(result));
    cli_table_add(table, "due at", due);
  }
  cli_table_print(table);
}

/* ---- Listings ------------------------------------------------------------ */

void
cli_listed_task_to_json(CliJson *json, const SluiceListedTask *t)
{
  g_autofree gchar *args =
      t->seal == NULL ? cli_msgpack_to_json(t->args) : NULL;

  cli_json_begin_object(json);
  cli_json_key(json, "id");
  cli_json_string(json, t->id);
  cli_json_key(json, "state");
  cli_json_string(json, sluice_task_state_to_string(t->state));
  cli_json_key(json, "task");
  cli_json_string(json, t->task);
  cli_json_key(json, "queue");
  cli_json_string(json, t->queue);
  cli_json_key(json, "attempt");
  if (t->attempt > 0)
    cli_json_int(json, t->attempt);
  else
    cli_json_null(json);
  cli_json_key(json, "enqueued_at");
  cli_json_time(json, t->enqueued_at_ms);
  cli_json_key(json, "due_at");
  cli_json_time(json, t->due_at_ms);
  cli_json_key(json, "started_at");
  cli_json_time(json, t->started_at_ms);
  cli_json_key(json, "worker");
  cli_json_string(json, t->worker);
  cli_json_key(json, "error");
  cli_json_string(json, t->error);
  cli_json_key(json, "dead_letter_reason");
  cli_json_string(json, t->dead_letter_reason);
  cli_json_key(json, "entry_id");
  cli_json_string(json, t->entry_id);
  cli_json_key(json, "args");
  if (args != NULL)
    cli_json_raw(json, args);
  else
    cli_json_null(json);
  cli_json_key(json, "sealed_with");
  cli_json_string(json, seal_key(t->seal));
  cli_json_end_object(json);
}

/* ---- Dead letters ------------------------------------------------------- */

void
cli_dead_letter_fields_to_json(CliJson *json, const SluiceDeadLetter *entry)
{
  cli_json_key(json, "entry_id");
  cli_json_string(json, entry->entry_id);
  cli_json_key(json, "task_id");
  cli_json_string(json, entry->task_id);
  cli_json_key(json, "task");
  cli_json_string(json, entry->task);
  cli_json_key(json, "reason");
  cli_json_string(json, entry->reason);
  cli_json_key(json, "detail");
  cli_json_string(json, entry->detail);
  cli_json_key(json, "source");
  cli_json_string(json, entry->source);
  cli_json_key(json, "deliveries");
  cli_json_int(json, entry->deliveries);
  cli_json_key(json, "at");
  cli_json_time(json, entry->at);
}

void
cli_dead_letter_page_to_json(CliJson *json, GPtrArray *entries, guint limit)
{
  cli_json_begin_object(json);
  cli_json_key(json, "entries");
  cli_json_begin_array(json);
  for (guint i = 0; i < entries->len; i++) {
    cli_json_begin_object(json);
    cli_dead_letter_fields_to_json(json, entries->pdata[i]);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
  /* Where the next page starts, when there may be one. */
  cli_json_key(json, "next_after");
  cli_json_string(
      json,
      entries->len == limit
          ? ((SluiceDeadLetter *)entries->pdata[entries->len - 1])->entry_id
          : NULL);
  cli_json_end_object(json);
}

GPtrArray *
cli_dead_letter_snapshot(SluiceClient *client, const gchar *reason,
                         const gchar *task, GError **error)
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

/* History and headers are NULL while empty (sluice-envelope.h). */
static void
history_to_json(CliJson *json, const SluiceEnvelope *env)
{
  cli_json_begin_array(json);
  for (guint i = 0; env->history != NULL && i < env->history->len; i++)
    cli_json_string(json, env->history->pdata[i]);
  cli_json_end_array(json);
}

/* The headers in name order, so that two reads compare equal. */
static void
headers_to_json(CliJson *json, const SluiceEnvelope *env)
{
  g_autoptr(GList) names =
      env->headers != NULL ? g_hash_table_get_keys(env->headers) : NULL;

  names = g_list_sort(names, (GCompareFunc)strcmp);
  cli_json_begin_object(json);
  for (GList *k = names; k != NULL; k = k->next) {
    cli_json_key(json, k->data);
    cli_json_string(json, g_hash_table_lookup(env->headers, k->data));
  }
  cli_json_end_object(json);
}

/* "args", and "sealed_with" the key id when they are sealed: shown as
 * null then, since only a worker opens a message's args. */
static void
args_to_json(CliJson *json, const SluiceEnvelope *env)
{
  g_autofree gchar *text =
      env->seal == NULL ? cli_msgpack_to_json(env->args) : NULL;

  cli_json_key(json, "args");
  if (text != NULL)
    cli_json_raw(json, text);
  else
    cli_json_null(json);
  cli_json_key(json, "sealed_with");
  cli_json_string(json, seal_key(env->seal));
}

void
cli_envelope_to_json(CliJson *json, const SluiceEnvelope *env)
{
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
  args_to_json(json, env);
  cli_json_key(json, "history");
  history_to_json(json, env);
  cli_json_key(json, "headers");
  headers_to_json(json, env);
  cli_json_end_object(json);
}

void
cli_dead_letter_show_to_json(CliJson *json, const SluiceDeadLetter *entry,
                             const SluiceEnvelope *env)
{
  gsize size = 0;
  const guchar *data =
      entry->payload != NULL ? g_bytes_get_data(entry->payload, &size) : NULL;
  g_autofree gchar *base64 = g_base64_encode(data, size);

  cli_json_begin_object(json);
  cli_dead_letter_fields_to_json(json, entry);
  cli_json_key(json, "malformed");
  cli_json_bool(json, env == NULL);
  cli_json_key(json, "queue");
  cli_json_string(json, env != NULL ? env->queue : NULL);
  cli_json_key(json, "attempt");
  if (env != NULL)
    cli_json_int(json, env->attempt);
  else
    cli_json_null(json);
  cli_json_key(json, "enqueued_at");
  cli_json_time(json, env != NULL ? env->enqueued_at : 0);
  if (env != NULL) {
    args_to_json(json, env);
  } else {
    cli_json_key(json, "args");
    cli_json_null(json);
  }
  cli_json_key(json, "history");
  if (env != NULL)
    history_to_json(json, env);
  else
    cli_json_null(json);
  cli_json_key(json, "headers");
  if (env != NULL)
    headers_to_json(json, env);
  else
    cli_json_null(json);
  cli_json_key(json, "payload_base64");
  cli_json_string(json, base64);
  cli_json_end_object(json);
}

/* ---- Events and workflows ----------------------------------------------- */

void
cli_event_to_json(CliJson *json, const SluiceEvent *e)
{
  cli_json_begin_object(json);
  cli_json_key(json, "cursor");
  cli_json_string(json, e->cursor);
  cli_json_key(json, "kind");
  cli_json_string(json, sluice_event_kind_to_string(e->kind));
  cli_json_key(json, "id");
  cli_json_string(json, e->task_id);
  cli_json_key(json, "task");
  if (e->task != NULL)
    cli_json_string(json, e->task);
  else
    cli_json_null(json);
  cli_json_key(json, "queue");
  if (e->queue != NULL)
    cli_json_string(json, e->queue);
  else
    cli_json_null(json);
  cli_json_key(json, "attempt");
  cli_json_int(json, e->attempt);
  cli_json_key(json, "at");
  cli_json_time(json, e->at);
  cli_json_key(json, "detail");
  if (e->detail != NULL)
    cli_json_string(json, e->detail);
  else
    cli_json_null(json);
  if (e->kind == SLUICE_EVENT_PROGRESS) {
    gchar number[G_ASCII_DTOSTR_BUF_SIZE];
    cli_json_key(json, "progress");
    cli_json_raw(json,
                 g_ascii_formatd(number, sizeof number, "%.4f", e->progress));
  }
  cli_json_key(json, "worker");
  if (e->worker != NULL)
    cli_json_string(json, e->worker);
  else
    cli_json_null(json);
  cli_json_end_object(json);
}

const gchar *
cli_chord_policy_name(SluiceChordPolicy policy)
{
  switch (policy) {
  case SLUICE_CHORD_FAIL_FAST:
    return "fail fast";
  case SLUICE_CHORD_IGNORE_FAILURES:
    return "ignore failures";
  case SLUICE_CHORD_WAIT_ALL:
  default:
    return "wait for all";
  }
}

static void
node_json(CliJson *j, const SluiceWorkflowNode *node)
{
  static const gchar *const kinds[] = {"task", "group", "chain", "chord"};

  cli_json_begin_object(j);
  cli_json_key(j, "kind");
  cli_json_string(j, kinds[node->kind]);
  if (node->kind == SLUICE_WORKFLOW_NODE_TASK) {
    cli_json_key(j, "task");
    cli_json_string(j, node->task);
    cli_json_key(j, "id");
    cli_json_string(j, node->task_id);
    cli_json_key(j, "state");
    cli_json_string(j, node->state == SLUICE_STATE_UNKNOWN
                           ? "waiting"
                           : sluice_task_state_to_string(node->state));
  } else {
    if (node->kind == SLUICE_WORKFLOW_NODE_CHORD) {
      cli_json_key(j, "policy");
      cli_json_string(j, cli_chord_policy_name(node->policy));
    }
    cli_json_key(j, "children");
    cli_json_begin_array(j);
    for (guint i = 0; i < node->children->len; i++)
      node_json(j, g_ptr_array_index(node->children, i));
    cli_json_end_array(j);
  }
  cli_json_end_object(j);
}

void
cli_workflow_to_json(CliJson *j, const gchar *id,
                     const SluiceWorkflowStatus *st,
                     const SluiceWorkflowNode *root)
{
  cli_json_begin_object(j);
  cli_json_key(j, "id");
  cli_json_string(j, id);
  cli_json_key(j, "tasks");
  cli_json_int(j, st->tasks);
  cli_json_key(j, "results");
  cli_json_int(j, st->total);
  cli_json_key(j, "finished");
  cli_json_int(j, st->finished);
  cli_json_key(j, "failed");
  cli_json_int(j, st->failed);
  cli_json_key(j, "tree");
  node_json(j, root);
  cli_json_end_object(j);
}

/* ---- Stats and workers --------------------------------------------------- */

static int
compare_names(const void *a, const void *b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

static gint
compare_slot_keys(gconstpointer a, gconstpointer b)
{
  const SluiceSlotState *x = *(SluiceSlotState *const *)a;
  const SluiceSlotState *y = *(SluiceSlotState *const *)b;
  return strcmp(x->key, y->key);
}

const gchar **
cli_sorted_keys(GHashTable *table)
{
  const gchar **keys =
      (const gchar **)g_hash_table_get_keys_as_array(table, NULL);

  qsort(keys, g_strv_length((gchar **)keys), sizeof *keys, compare_names);
  return keys;
}

gboolean
cli_stats_read(SluiceClient *client, const gchar *const *queues, CliStats *out,
               GError **slots_error, GError **error)
{
  g_autoptr(GError) local = NULL;

  memset(out, 0, sizeof *out);
  out->layout_version = -1;
  if (!sluice_client_get_stats(client, queues, &out->stats, error))
    return FALSE;
  out->have_stats = TRUE;
  /* A broker that cannot list slots still has stats. */
  out->slots = sluice_client_list_slots(client, STATS_SLOT_KEYS, &local);
  if (out->slots != NULL)
    g_ptr_array_sort(out->slots, compare_slot_keys);
  else if (!g_error_matches(local, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED))
    g_propagate_error(slots_error, g_steal_pointer(&local));
  return TRUE;
}

void
cli_stats_read_layout(const CliSettings *settings, CliStats *stats,
                      GError **error)
{
  SluiceLayout layout;

  stats->layout_version = -1;
  if (!cli_layout_read(settings, &layout, error))
    return;
  stats->layout_version = layout.version;
  sluice_layout_clear(&layout);
}

void
cli_stats_clear(CliStats *stats)
{
  if (stats->have_stats)
    sluice_broker_stats_clear(&stats->stats);
  stats->have_stats = FALSE;
  g_clear_pointer(&stats->slots, g_ptr_array_unref);
}

const gchar *
cli_worker_health(const SluiceWorkerInfo *w, gint64 now_ms)
{
  if (!w->alive)
    return "dead";
  return now_ms - w->last_seen_ms > WORKER_LATE_MS ? "late" : "healthy";
}

static void
strv_to_json(CliJson *json, gchar **v)
{
  cli_json_begin_array(json);
  for (guint i = 0; v != NULL && v[i] != NULL; i++)
    cli_json_string(json, v[i]);
  cli_json_end_array(json);
}

void
cli_worker_to_json(CliJson *json, const SluiceWorkerInfo *w, gint64 now_ms)
{
  cli_json_begin_object(json);
  cli_json_key(json, "id");
  cli_json_string(json, w->id);
  cli_json_key(json, "health");
  cli_json_string(json, cli_worker_health(w, now_ms));
  cli_json_key(json, "alive");
  cli_json_bool(json, w->alive);
  cli_json_key(json, "last_seen");
  cli_json_time(json, w->last_seen_ms);
  cli_json_key(json, "host");
  cli_json_string(json, w->host);
  cli_json_key(json, "pid");
  if (w->pid > 0)
    cli_json_int(json, w->pid);
  else
    cli_json_null(json);
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
  cli_json_key(json, "limits");
  strv_to_json(json, w->limits);
  cli_json_key(json, "events");
  cli_json_bool(json, w->events);
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

/* reason -> count, in name order. */
static void
by_reason_to_json(CliJson *json, GHashTable *by_reason)
{
  g_autofree const gchar **names = cli_sorted_keys(by_reason);

  cli_json_begin_object(json);
  for (guint i = 0; names[i] != NULL; i++) {
    const gint64 *n = g_hash_table_lookup(by_reason, names[i]);
    cli_json_key(json, names[i]);
    cli_json_int(json, n != NULL ? *n : 0);
  }
  cli_json_end_object(json);
}

void
cli_stats_fields_to_json(CliJson *json, const CliSettings *settings,
                         const CliStats *cs, gint64 now_ms)
{
  const SluiceBrokerStats *stats = &cs->stats;

  cli_json_key(json, "mode");
  cli_json_string(json, cli_mode_name(settings->mode));
  cli_json_key(json, "namespace");
  cli_json_string(json, settings->namespace_);
  /* null where it could not be read (a warning says why) */
  cli_json_key(json, "layout_version");
  if (cs->layout_version >= 0)
    cli_json_int(json, cs->layout_version);
  else
    cli_json_null(json);
  cli_json_key(json, "queues");
  cli_json_begin_array(json);
  for (guint i = 0; i < stats->queues->len; i++) {
    const SluiceQueueStats *q = stats->queues->pdata[i];
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
  cli_json_int(json, stats->scheduled);
  cli_json_key(json, "in_flight");
  if (stats->in_flight >= 0)
    cli_json_int(json, stats->in_flight);
  else
    cli_json_null(json);
  cli_json_key(json, "dead_letters");
  cli_json_int(json, stats->dead_letters);
  cli_json_key(json, "dead_letters_by_reason");
  by_reason_to_json(json, stats->dead_letters_by_reason);
  /* -1 (the broker cannot tell) is shown as none dropped, as sluice(1)
   * documents an integer. */
  cli_json_key(json, "dead_letters_dropped");
  cli_json_int(json, MAX(stats->dead_letters_dropped, 0));
  cli_json_key(json, "dead_letters_dropped_by_reason");
  by_reason_to_json(json, stats->dead_letters_dropped_by_reason);
  cli_json_key(json, "workers");
  cli_json_begin_array(json);
  for (guint i = 0; i < stats->workers->len; i++)
    cli_worker_to_json(json, stats->workers->pdata[i], now_ms);
  cli_json_end_array(json);
  /* Concurrency keys with a holder or a waiter; null where the broker
   * cannot list them. */
  cli_json_key(json, "slots");
  if (cs->slots == NULL) {
    cli_json_null(json);
  } else {
    cli_json_begin_array(json);
    for (guint i = 0; i < cs->slots->len; i++) {
      const SluiceSlotState *s = cs->slots->pdata[i];
      cli_json_begin_object(json);
      cli_json_key(json, "key");
      cli_json_string(json, s->key);
      cli_json_key(json, "holders");
      cli_json_begin_array(json);
      for (guint k = 0; k < s->holders->len; k++)
        cli_json_string(json, s->holders->pdata[k]);
      cli_json_end_array(json);
      cli_json_key(json, "waiting");
      cli_json_int(json, s->waiting);
      cli_json_end_object(json);
    }
    cli_json_end_array(json);
  }
}

/* cmd-ls.c - `sluice ls [QUEUE] --state S`: page through tasks of one state
 * without taking or changing any (sluice_client_list()).
 *
 * A page ends with the cursor of the next one, when there may be one: the
 * table prints the option to give, --json its `next_cursor`. Listing never
 * blocks workers and costs about the page it prints.
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

/* The longest error a table shows; --json shows it all. */
#define ERROR_WIDTH 60

static void
print_table(SluiceTaskState state, GPtrArray *tasks)
{
  static const gchar *const queued[] = {"ID",       "TASK", "ATTEMPT",
                                        "ENQUEUED", "ARGS", NULL};
  static const gchar *const scheduled[] = {"ID",       "TASK", "QUEUE", "DUE",
                                           "ENQUEUED", "NOTE", NULL};
  static const gchar *const retrying[] = {
      "ID", "TASK", "QUEUE", "ATTEMPT", "NEXT ATTEMPT", "LAST ERROR", NULL};
  static const gchar *const running[] = {"ID",     "TASK",    "QUEUE",
                                         "WORKER", "STARTED", NULL};
  static const gchar *const dead[] = {"ENTRY",  "ID",     "TASK",
                                      "REASON", "DETAIL", NULL};
  const gchar *const *header = state == SLUICE_STATE_QUEUED      ? queued
                               : state == SLUICE_STATE_SCHEDULED ? scheduled
                               : state == SLUICE_STATE_RETRYING  ? retrying
                               : state == SLUICE_STATE_RUNNING   ? running
                                                                 : dead;
  g_autoptr(CliTable) table =
      cli_table_new(header, g_strv_length((gchar **)header));

  for (guint i = 0; i < tasks->len; i++) {
    const SluiceListedTask *t = tasks->pdata[i];
    g_autofree gchar *attempt =
        t->attempt > 0 ? g_strdup_printf("%u", t->attempt) : NULL;
    g_autofree gchar *enqueued = cli_format_time(t->enqueued_at_ms);
    g_autofree gchar *due = cli_format_time(t->due_at_ms);
    g_autofree gchar *started = cli_format_time(t->started_at_ms);
    g_autofree gchar *error = cli_shorten(t->error, ERROR_WIDTH);
    g_autofree gchar *json = t->seal != NULL
                                 ? g_strdup_printf("encrypted (%s)", t->seal)
                                 : cli_msgpack_to_json(t->args);
    g_autofree gchar *args = cli_shorten(json, ERROR_WIDTH);

    switch (state) {
    case SLUICE_STATE_QUEUED:
      cli_table_add(table, t->id, t->task, attempt, enqueued, args);
      break;
    case SLUICE_STATE_SCHEDULED:
      cli_table_add(table, t->id, t->task, t->queue, due, enqueued, error);
      break;
    case SLUICE_STATE_RETRYING:
      cli_table_add(table, t->id, t->task, t->queue, attempt, due, error);
      break;
    case SLUICE_STATE_RUNNING:
      cli_table_add(table, t->id, t->task, t->queue, t->worker, started);
      break;
    default:
      cli_table_add(table, t->entry_id, t->id, t->task, t->dead_letter_reason,
                    error);
      break;
    }
  }
  cli_table_print(table);
}

int
cli_cmd_ls(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  g_autofree gchar *state_text = NULL;
  g_autofree gchar *task = NULL;
  g_autofree gchar *cursor = NULL;
  g_autofree gchar *limit_text = NULL;
  g_autofree gchar *next = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GPtrArray) tasks = NULL;
  SluiceListOptions lo;
  guint64 limit = SLUICE_LIST_DEFAULT_LIMIT;
  int status = CLI_EXIT_OK;
  const GOptionEntry options[] = {
      {"state", 's', 0, G_OPTION_ARG_STRING, &state_text,
       "queued (default), scheduled, retrying, running or dead", "STATE"},
      {"task", 0, 0, G_OPTION_ARG_STRING, &task, "Only tasks of this task name",
       "T"},
      {"limit", 'n', 0, G_OPTION_ARG_STRING, &limit_text,
       "At most N tasks (default 100)", "N"},
      {"cursor", 0, 0, G_OPTION_ARG_STRING, &cursor,
       "Go on where the previous page ended (its cursor)", "CURSOR"},
      {NULL}};

  sluice_list_options_init(&lo);
  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, options,
          "[QUEUE]",
          "List tasks of one state, a page at a time, without taking them: "
          "queued (in the\norder workers take them), scheduled (with their "
          "due time), retrying (with\ntheir next attempt and last error), "
          "running (with their worker) or dead.",
          "QUEUE is required for queued tasks; for the others it keeps that "
          "queue's\nonly (default: every queue). With --task, or for "
          "scheduled and retrying\ntasks (they share the schedule), a page "
          "may hold fewer than --limit tasks:\ngo on with its cursor. "
          "Running tasks are what the workers announced, at\nmost 2 s ago.",
          &argc, &argv, &error) ||
      (state_text != NULL &&
       !cli_parse_list_state("--state", state_text, TRUE, &lo.state, &error)) ||
      (limit_text != NULL &&
       !cli_parse_count("--limit", limit_text, 1, SLUICE_LIST_MAX_LIMIT, &limit,
                        &error))) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 2) {
    cli_usage_error(&error, "unexpected argument “%s”: give one queue",
                    argv[2]);
    status = cli_report(error);
    goto out;
  }
  if (argc < 2 && lo.state == SLUICE_STATE_QUEUED) {
    cli_usage_error(&error,
                    "which queue? give one: sluice ls QUEUE (queued tasks "
                    "are listed a queue at a time)");
    status = cli_report(error);
    goto out;
  }
  lo.queue = argc == 2 ? argv[1] : NULL;
  lo.task = task;
  lo.cursor = cursor;
  lo.limit = (guint)limit;
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      (tasks = sluice_client_list(client, &lo, &next, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }

  if (common.json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "state");
    cli_json_string(json, sluice_task_state_to_string(lo.state));
    cli_json_key(json, "queue");
    cli_json_string(json, lo.queue);
    cli_json_key(json, "tasks");
    cli_json_begin_array(json);
    for (guint i = 0; i < tasks->len; i++)
      cli_listed_task_to_json(json, tasks->pdata[i]);
    cli_json_end_array(json);
    cli_json_key(json, "next_cursor");
    cli_json_string(json, next);
    cli_json_end_object(json);
    cli_json_print(json);
  } else {
    if (tasks->len == 0)
      printf("no %s tasks%s%s%s\n",
             lo.state == SLUICE_STATE_DEAD_LETTERED
                 ? "dead"
                 : sluice_task_state_to_string(lo.state),
             lo.queue != NULL ? " in queue " : "",
             lo.queue != NULL ? lo.queue : "",
             cursor != NULL ? " on this page" : "");
    else
      print_table(lo.state, tasks);
    if (next != NULL)
      printf("(more may follow: --cursor %s)\n", next);
  }
out:
  cli_common_clear(&common);
  return status;
}

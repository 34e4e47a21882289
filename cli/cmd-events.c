/* cmd-events.c - `sluice events`: the namespace's stream of task
 * lifecycle events (sluice-events.h), from the oldest kept or a cursor,
 * and with --follow as they come (a blocking read, not a poll).
 *
 * Each event is one line: time, kind, task id, task, attempt, detail; or
 * with --json one object per event, its cursor included, so a script can
 * resume where it stopped (--cursor).
 */
#include "config.h"

#include "cli/cli.h"

#define PAGE 100
#define FOLLOW_BLOCK_MS 1000

static void
print_event(const SluiceEvent *e, gboolean json)
{
  if (json) {
    g_autoptr(CliJson) j = cli_json_new();
    cli_event_to_json(j, e);
    cli_json_print(j);
  } else {
    g_autofree gchar *when = cli_format_time(e->at);
    g_autofree gchar *detail =
        e->detail != NULL ? g_strescape(e->detail, "") : NULL;
    g_autofree gchar *progress =
        e->kind == SLUICE_EVENT_PROGRESS
            ? g_strdup_printf(" %.0f%%", e->progress * 100)
            : NULL;

    printf("%s  %-13s %s %s attempt %u%s%s%s\n", when,
           sluice_event_kind_to_string(e->kind), e->task_id,
           e->task != NULL ? e->task : "?", e->attempt,
           progress != NULL ? progress : "", detail != NULL ? " " : "",
           detail != NULL ? detail : "");
  }
  fflush(stdout);
}

int
cli_cmd_events(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  gboolean follow = FALSE;
  g_autofree gchar *cursor = NULL;
  g_autofree gchar *task = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  int status = CLI_EXIT_OK;
  const GOptionEntry entries[] = {
      {"follow", 'f', 0, G_OPTION_ARG_NONE, &follow,
       "Keep printing events as they are written, until interrupted", NULL},
      {"cursor", 0, 0, G_OPTION_ARG_STRING, &cursor,
       "Start after this event (a cursor --json printed)", "CURSOR"},
      {"id", 0, 0, G_OPTION_ARG_STRING, &task, "Only the events of this task",
       "ID"},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, entries, NULL,
          "Print the namespace's task lifecycle events (enqueued, started, "
          "progress,\nretried, succeeded, failed, dead_lettered, cancelled), "
          "oldest first.",
          "Events are written by workers started with --events (and "
          "producers with the\nevents option); the stream keeps the newest "
          "100000, none older than a day.",
          &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    g_set_error(&error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "sluice events takes no arguments (use --id ID for one "
                "task's)");
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  for (;;) {
    gchar *next = NULL;
    g_autoptr(GPtrArray) page = sluice_client_read_events(
        client, cursor, PAGE, follow ? FOLLOW_BLOCK_MS : 0, &next, &error);

    if (page == NULL) {
      status = cli_report(error);
      goto out;
    }
    g_free(cursor);
    cursor = next;
    for (guint i = 0; i < page->len; i++) {
      SluiceEvent *e = g_ptr_array_index(page, i);
      if (task == NULL || g_strcmp0(task, e->task_id) == 0)
        print_event(e, common.json);
    }
    if (page->len == 0 && !follow)
      break;
  }
out:
  cli_common_clear(&common);
  return status;
}

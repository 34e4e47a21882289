/* cmd-events.c - `sluice events`: the namespace's stream of task
 * lifecycle events (sluice-events.h), and with --follow as they come (a
 * blocking read, not a poll).
 *
 * Where it starts: after --cursor; else, without --follow, at the oldest
 * event kept; with --follow, at the end (what happens from now), unless
 * -n N (the last N events first) or --since TIME (those from TIME on)
 * say otherwise. Starting anywhere but at a cursor reads the stream from
 * its oldest event (it is bounded: SLUICE_EVENTS_MAX_LEN, a day), since a
 * cursor is the broker's own string and only it can make one.
 *
 * Each event is one line: time, kind, task id, task, attempt, detail; or
 * with --json one object per event, its cursor included, so a script can
 * resume where it stopped (--cursor). With --follow it says once, on
 * stderr, when no live worker writes events (they are written by workers
 * started with --events), so that an empty screen is not a mystery.
 */
#include "config.h"

#include "cli/cli.h"

#define PAGE 100
/* Events read per round trip while looking for where to start. */
#define SCAN_PAGE 1000
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

/* Says on stderr, once, why a follow may show nothing: no live worker
 * announces that it writes events. What producers write ("enqueued" with
 * --events) still comes. */
static void
warn_if_nobody_writes(SluiceClient *client, const gchar *ns)
{
  static const gchar *const no_queues[] = {NULL};
  SluiceBrokerStats stats;
  guint alive = 0, writing = 0;

  if (!sluice_client_get_stats(client, no_queues, &stats, NULL))
    return;
  for (guint i = 0; i < stats.workers->len; i++) {
    const SluiceWorkerInfo *w = stats.workers->pdata[i];
    alive += w->alive ? 1 : 0;
    writing += w->alive && w->events ? 1 : 0;
  }
  sluice_broker_stats_clear(&stats);
  if (writing > 0)
    return;
  if (alive == 0)
    fprintf(stderr,
            "%s: no worker of namespace %s is running; workers started "
            "with --events (or SLUICE_EVENTS=1) write events: following "
            "anyway\n",
            g_get_prgname(), ns);
  else
    fprintf(stderr,
            "%s: none of the %u live workers of namespace %s writes events: "
            "start them with --events (or SLUICE_EVENTS=1); following "
            "anyway\n",
            g_get_prgname(), alive, ns);
}

typedef struct {
  const gchar *task; /* --id, or NULL */
  gint64 since;      /* --since, or G_MININT64 */
  guint last;        /* -n: keep the last this many; 0 = print as read */
  gboolean discard;  /* skipping to the end: print nothing */
  gboolean json;
  GQueue kept; /* -n: the last ones, oldest first */
} Scan;

static gboolean
wanted(const Scan *scan, const SluiceEvent *e)
{
  return (scan->task == NULL || g_strcmp0(scan->task, e->task_id) == 0) &&
         e->at >= scan->since;
}

/* Reads from @inout_cursor to the end of the stream, doing with each
 * event what @scan says. */
static gboolean
scan_to_end(SluiceClient *client, gchar **inout_cursor, Scan *scan,
            GError **error)
{
  for (;;) {
    gchar *next = NULL;
    g_autoptr(GPtrArray) page = sluice_client_read_events(
        client, *inout_cursor,
        scan->discard || scan->last > 0 ? SCAN_PAGE : PAGE, 0, &next, error);

    if (page == NULL)
      return FALSE;
    g_free(*inout_cursor);
    *inout_cursor = next;
    for (guint i = 0; i < page->len; i++) {
      SluiceEvent *e = g_ptr_array_index(page, i);

      if (scan->discard || !wanted(scan, e))
        continue;
      if (scan->last == 0) {
        print_event(e, scan->json);
        continue;
      }
      g_queue_push_tail(&scan->kept, g_steal_pointer(&page->pdata[i]));
      if (g_queue_get_length(&scan->kept) > scan->last)
        sluice_event_free(g_queue_pop_head(&scan->kept));
    }
    if (page->len == 0)
      break;
  }
  for (GList *l = scan->kept.head; l != NULL; l = l->next)
    print_event(l->data, scan->json);
  g_queue_clear_full(&scan->kept, (GDestroyNotify)sluice_event_free);
  return TRUE;
}

int
cli_cmd_events(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  gboolean follow = FALSE;
  g_autofree gchar *cursor = NULL;
  g_autofree gchar *task = NULL;
  g_autofree gchar *limit_text = NULL;
  g_autofree gchar *since_text = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_auto(CliSettings) settings = {0};
  Scan scan = {.since = G_MININT64, .kept = G_QUEUE_INIT};
  guint64 limit = 0;
  int status = CLI_EXIT_OK;
  const GOptionEntry entries[] = {
      {"follow", 'f', 0, G_OPTION_ARG_NONE, &follow,
       "Keep printing events as they are written, until interrupted; from "
       "now on, unless -n or --since say otherwise",
       NULL},
      {"limit", 'n', 0, G_OPTION_ARG_STRING, &limit_text,
       "Only the last N events (with --follow: first, then the new ones)", "N"},
      {"since", 0, 0, G_OPTION_ARG_STRING, &since_text,
       "Only events from this time on: an ISO 8601 time, or a duration ago "
       "(10m)",
       "TIME"},
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
          "Events are written by workers started with --events, and by "
          "`sluice enqueue\n--events` (SLUICE_EVENTS=1 turns both on); the "
          "stream keeps the newest\n100000, none older than a day.",
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
  if ((limit_text != NULL &&
       !cli_parse_count("--limit", limit_text, 1, SLUICE_EVENTS_MAX_LEN, &limit,
                        &error)) ||
      (since_text != NULL &&
       !cli_parse_since("--since", since_text, &scan.since, &error))) {
    status = cli_report(error);
    goto out;
  }
  if (cursor != NULL && (limit_text != NULL || since_text != NULL)) {
    cli_usage_error(&error, "--cursor says where to start: give it without "
                            "-n and --since");
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, &settings, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  scan.task = task;
  scan.last = (guint)limit;
  scan.json = common.json;
  /* Following from now: what is in the stream already is skipped. */
  scan.discard = follow && limit == 0 && since_text == NULL && cursor == NULL;
  if (follow)
    warn_if_nobody_writes(client, settings.namespace_);
  if (!scan_to_end(client, &cursor, &scan, &error)) {
    status = cli_report(error);
    goto out;
  }
  while (follow) {
    gchar *next = NULL;
    g_autoptr(GPtrArray) page = sluice_client_read_events(
        client, cursor, PAGE, FOLLOW_BLOCK_MS, &next, &error);

    if (page == NULL) {
      status = cli_report(error);
      goto out;
    }
    g_free(cursor);
    cursor = next;
    for (guint i = 0; i < page->len; i++) {
      SluiceEvent *e = g_ptr_array_index(page, i);
      if (wanted(&scan, e))
        print_event(e, common.json);
    }
  }
out:
  cli_common_clear(&common);
  return status;
}

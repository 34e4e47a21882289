/* cmd-queue.c - steering: `sluice pause|resume QUEUE...`, `sluice purge
 * QUEUE`, `sluice delete ID`, `sluice run-now ID`.
 *
 * Each is one call of the client API (sluice_client_pause/resume/purge/
 * delete/run_now). A pause is stored in the broker, which reads it in the
 * step that takes a message, so it holds for every worker as soon as it is
 * stored, and outlives them. Purging more than one
 * task takes --yes (cli_confirm_many()); the queue's ready count, read
 * first, says how many it would touch.
 */
#include "config.h"

#include "cli/cli.h"

/* ---- sluice pause / resume ----------------------------------------------- */

static int
pause_or_resume(int argc, char **argv, gboolean pause)
{
  CliCommon common = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(CliJson) json = NULL;
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, NULL, "QUEUE...",
          pause ? "Pause queues until `sluice resume`: once this returns, "
                  "no worker takes a task of\nthem in a new fetch, and "
                  "within about a second each gives back what it had\n"
                  "fetched and not started; what runs runs on. Producers "
                  "still enqueue. The pause\nis kept in the broker: it "
                  "outlives worker restarts."
                : "Resume paused queues: workers take from them again "
                  "within about a second.",
          NULL, &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc < 2) {
    cli_usage_error(&error, "which queue? give one or more: sluice %s QUEUE...",
                    pause ? "pause" : "resume");
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  if (common.json) {
    json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, pause ? "paused" : "resumed");
    cli_json_begin_array(json);
  }
  for (int i = 1; i < argc; i++) {
    gboolean ok = pause ? sluice_client_pause(client, argv[i], &error)
                        : sluice_client_resume(client, argv[i], &error);
    if (!ok) {
      status = cli_report(error);
      g_clear_error(&error);
      continue;
    }
    if (json != NULL)
      cli_json_string(json, argv[i]);
    else if (pause)
      printf("paused queue %s: no worker takes from it any more (producers "
             "still enqueue)\n",
             argv[i]);
    else
      printf("resumed queue %s\n", argv[i]);
  }
  if (json != NULL) {
    cli_json_end_array(json);
    cli_json_end_object(json);
    cli_json_print(json);
  }
out:
  cli_common_clear(&common);
  return status;
}

int
cli_cmd_pause(int argc, char **argv)
{
  return pause_or_resume(argc, argv, TRUE);
}

int
cli_cmd_resume(int argc, char **argv)
{
  return pause_or_resume(argc, argv, FALSE);
}

/* ---- sluice purge -------------------------------------------------------- */

static gint64
ready_count(SluiceClient *client, const gchar *queue, GError **error)
{
  const gchar *const one[] = {queue, NULL};
  SluiceBrokerStats stats;
  gint64 ready = 0;

  if (!sluice_client_get_stats(client, one, &stats, error))
    return -1;
  for (guint i = 0; i < stats.queues->len; i++) {
    const SluiceQueueStats *q = stats.queues->pdata[i];
    if (g_strcmp0(q->name, queue) == 0)
      ready = q->ready;
  }
  sluice_broker_stats_clear(&stats);
  return ready;
}

int
cli_cmd_purge(int argc, char **argv)
{
  CliCommon common = {0};
  gboolean yes = FALSE, dry_run = FALSE;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree gchar *doing = NULL;
  guint64 removed = 0;
  gint64 ready;
  int status = CLI_EXIT_OK;
  const GOptionEntry options[] = {
      {"yes", 'y', 0, G_OPTION_ARG_NONE, &yes,
       "Delete them (needed when there is more than one)", NULL},
      {"dry-run", 0, 0, G_OPTION_ARG_NONE, &dry_run,
       "Count what would be deleted, and delete nothing", NULL},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, options, "QUEUE",
          "Delete every task waiting in a queue, in one atomic step. Running "
          "and scheduled\ntasks are not touched. More than one task takes "
          "--yes.",
          "Exit status: 0 purged (or nothing to purge); 2 more than one task "
          "and no --yes.",
          &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc != 2) {
    cli_usage_error(&error, argc < 2 ? "which queue? sluice purge QUEUE"
                                     : "purge takes one queue");
    status = cli_report(error);
    goto out;
  }
  doing = g_strdup_printf("purging queue “%s”", argv[1]);
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      (ready = ready_count(client, argv[1], &error)) < 0 ||
      !cli_confirm_many((guint64)ready, yes, dry_run, doing, "ready tasks",
                        &error) ||
      (!dry_run && !sluice_client_purge(client, argv[1], &removed, &error))) {
    status = cli_report(error);
    goto out;
  }
  if (dry_run)
    removed = (guint64)ready;
  if (common.json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "queue");
    cli_json_string(json, argv[1]);
    cli_json_key(json, "dry_run");
    cli_json_bool(json, dry_run);
    cli_json_key(json, "purged");
    cli_json_int(json, (gint64)removed);
    cli_json_end_object(json);
    cli_json_print(json);
  } else {
    printf("%s %" G_GUINT64_FORMAT " ready task%s of queue %s\n",
           dry_run ? "would purge" : "purged", removed, removed == 1 ? "" : "s",
           argv[1]);
  }
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice delete ------------------------------------------------------- */

int
cli_cmd_delete(int argc, char **argv)
{
  CliCommon common = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  SluiceDeleteOutcome outcome;
  const gchar *name, *said;
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, NULL, "ID",
          "Delete one task wherever it is: off the schedule or out of its "
          "queue (certain:\nits record says cancelled), out of the dead "
          "letters, or, running, by a\nrevocation (its worker cancels it).",
          "Exit status: 0 deleted or revoked; 1 no such task, already "
          "finished, or an error.",
          &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc != 2) {
    cli_usage_error(&error, "give one task id: sluice delete ID");
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      (outcome = sluice_client_delete(client, argv[1], &error)) ==
          SLUICE_DELETE_FAILED) {
    status = cli_report(error);
    goto out;
  }
  switch (outcome) {
  case SLUICE_DELETE_UNSCHEDULED:
    name = "unscheduled";
    said = "was on the schedule and is removed; it will certainly not run";
    break;
  case SLUICE_DELETE_DEAD_LETTER:
    name = "dead_letter";
    said = "was a dead letter; its entry is deleted";
    break;
  case SLUICE_DELETE_REMOVED:
    name = "removed";
    said = "was queued and is taken out of its queue; it will certainly not "
           "run";
    break;
  default:
    name = "revoked";
    said = "is running or held by a worker: a revocation is recorded, so the "
           "worker cancels it (or skips it before it starts); it may still "
           "finish first";
    break;
  }
  if (common.json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "id");
    cli_json_string(json, argv[1]);
    cli_json_key(json, "outcome");
    cli_json_string(json, name);
    cli_json_end_object(json);
    cli_json_print(json);
  } else {
    printf("deleted: task %s %s\n", argv[1], said);
  }
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice run-now ------------------------------------------------------ */

int
cli_cmd_run_now(int argc, char **argv)
{
  CliCommon common = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, NULL, "ID",
          "Run a scheduled task now: a delayed one, or one waiting for its "
          "next attempt,\nmoves from the schedule to the end of its queue "
          "(its attempt stays as it is).",
          "Exit status: 0 moved; 1 not on the schedule (the message says "
          "where it is).",
          &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc != 2) {
    cli_usage_error(&error, "give one task id: sluice run-now ID");
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      !sluice_client_run_now(client, argv[1], &error)) {
    status = cli_report(error);
    goto out;
  }
  if (common.json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "id");
    cli_json_string(json, argv[1]);
    cli_json_key(json, "moved");
    cli_json_bool(json, TRUE);
    cli_json_end_object(json);
    cli_json_print(json);
  } else {
    printf("run now: task %s left the schedule for its queue\n", argv[1]);
  }
out:
  cli_common_clear(&common);
  return status;
}

/* cmd-task.c - one task by id: `sluice result`, `sluice inspect`,
 * `sluice cancel`.
 *
 *   inspect  prints the task's record in whatever state it is.
 *   result   prints the final record; its exit status says how the task
 *            ended (0 succeeded, 3 failed/dead_lettered/cancelled) or that
 *            it has not (4), so a script can branch on it. With --follow
 *            it prints each new progress report while it waits.
 *   cancel   removes a scheduled task for certain, or records a revocation
 *            for a queued or running one, and says which.
 *
 * A task with no record at all is reported as unknown (exit status 1):
 * tasks enqueued by `sluice enqueue` have one from the start, so no record
 * means a wrong id, an expired record (24 h by default), or a task
 * enqueued by a program without state tracking that has not finished.
 */
#include "config.h"

#include "cli/cli.h"

/* The message for an id without a record. */
static void
set_unknown(GError **error, const gchar *id)
{
  g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
              "no task with id %s: it has no record (a wrong id, a record "
              "that expired after its result TTL, 24 h by default, or a task "
              "enqueued without state tracking that has not finished yet)",
              id);
}

/* Reads the record of @id; an absent record is an error naming the id. */
static SluiceResult *
inspect(SluiceClient *client, const gchar *id, GError **error)
{
  g_autoptr(GError) local = NULL;
  SluiceResult *result = sluice_client_inspect(client, id, &local);

  if (result == NULL) {
    if (g_error_matches(local, SLUICE_CLIENT_ERROR,
                        SLUICE_CLIENT_ERROR_NOT_FOUND))
      set_unknown(error, id);
    else
      g_propagate_error(error, g_steal_pointer(&local));
  }
  return result;
}

/* Checks that exactly one id was given. */
static gboolean
one_id(int argc, char **argv, const gchar *usage, GError **error)
{
  if (argc == 2)
    return TRUE;
  return cli_usage_error(error, "%s: give %s",
                         argc < 2 ? "which task?" : "too many arguments",
                         usage);
}

/* ---- sluice inspect ------------------------------------------------------ */

int
cli_cmd_inspect(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceResult) result = NULL;
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, NULL, "ID",
          "Print a task's record: its state (queued, scheduled, running, "
          "retrying,\nsucceeded, failed, dead_lettered, cancelled), attempt, "
          "times, result or error.",
          NULL, &argc, &argv, &error) ||
      !one_id(argc, argv, "one task id: sluice inspect ID", &error)) {
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      (result = inspect(client, argv[1], &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  cli_result_print(result, common.json);
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice result ------------------------------------------------------- */

/* Prints @p if it differs from what was printed last (@last). */
static void
print_progress(const SluiceProgress *p, gboolean json, gchar **last)
{
  g_autofree gchar *text = g_strdup_printf(
      "%.0f%%%s%s", p->fraction * 100, p->message != NULL ? " " : "",
      p->message != NULL ? p->message : "");

  if (g_strcmp0(text, *last) == 0)
    return;
  g_free(*last);
  *last = g_steal_pointer(&text);
  if (json) {
    g_autoptr(CliJson) j = cli_json_new();
    gchar number[G_ASCII_DTOSTR_BUF_SIZE];

    cli_json_begin_object(j);
    cli_json_key(j, "progress");
    cli_json_raw(j,
                 g_ascii_formatd(number, sizeof number, "%.4f", p->fraction));
    cli_json_key(j, "message");
    if (p->message != NULL)
      cli_json_string(j, p->message);
    else
      cli_json_null(j);
    cli_json_key(j, "at");
    cli_json_time(j, p->updated_at);
    cli_json_end_object(j);
    cli_json_print(j);
  } else {
    printf("progress %s\n", *last);
  }
  fflush(stdout);
}

/* Waits for the final record up to @wait_ms (0: for ever), printing the
 * task's progress reports as they change. A timeout is
 * SLUICE_CLIENT_ERROR_TIMEOUT, as sluice_client_get_result() says it. */
static SluiceResult *
follow(SluiceClient *client, const gchar *id, gint64 wait_ms, gboolean json,
       GError **error)
{
  gint64 end = wait_ms > 0 ? g_get_monotonic_time() + wait_ms * 1000 : 0;
  g_autofree gchar *last = NULL;

  for (;;) {
    g_autoptr(GError) local = NULL;
    g_autoptr(SluiceProgress) p = NULL;
    SluiceResult *result;
    gint64 step = SLUICE_PROGRESS_INTERVAL_MS;

    if (end > 0)
      step = MIN(step, MAX((end - g_get_monotonic_time()) / 1000, 1));
    result = sluice_client_get_result(client, id, step, NULL, &local);
    p = sluice_client_get_progress(client, id, NULL);
    if (p != NULL)
      print_progress(p, json, &last);
    if (result != NULL)
      return result;
    if (!g_error_matches(local, SLUICE_CLIENT_ERROR,
                         SLUICE_CLIENT_ERROR_TIMEOUT) ||
        (end > 0 && g_get_monotonic_time() >= end)) {
      g_propagate_error(error, g_steal_pointer(&local));
      return NULL;
    }
  }
}

int
cli_cmd_result(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  g_autofree gchar *wait = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceResult) result = NULL;
  gint64 wait_ms = 0;
  gboolean follow_progress = FALSE;
  int status;
  SluiceTaskState state;
  const GOptionEntry entries[] = {
      {"wait", 'w', 0, G_OPTION_ARG_STRING, &wait,
       "Wait up to this long for the task to finish", "DURATION"},
      {"follow", 'f', 0, G_OPTION_ARG_NONE, &follow_progress,
       "Wait for the task to finish (for ever, or up to --wait), printing "
       "its progress as it changes",
       NULL},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, entries, "ID",
          "Print a finished task's record, waiting for it with --wait.",
          "Exit status: 0 succeeded; 3 failed, dead_lettered or cancelled "
          "(the record is\nprinted); 4 not finished (within --wait); 1 no "
          "such task or another error.",
          &argc, &argv, &error) ||
      !one_id(argc, argv, "one task id: sluice result ID [--wait DURATION]",
              &error) ||
      (wait != NULL && !cli_parse_duration("--wait", wait, &wait_ms, &error))) {
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }

  if (wait_ms > 0 || follow_progress) {
    result =
        follow_progress
            ? follow(client, argv[1], wait_ms, common.json, &error)
            : sluice_client_get_result(client, argv[1], wait_ms, NULL, &error);
    if (result == NULL && g_error_matches(error, SLUICE_CLIENT_ERROR,
                                          SLUICE_CLIENT_ERROR_TIMEOUT)) {
      /* Say where it stands, or that there is nothing to wait for. */
      g_autoptr(SluiceResult) now = NULL;
      g_autofree gchar *waited = cli_format_duration(wait_ms);

      g_clear_error(&error);
      now = inspect(client, argv[1], &error);
      if (now == NULL) {
        g_prefix_error(&error, "waited %s: ", waited);
        status = cli_report(error);
        goto out;
      }
      fprintf(stderr, "%s: task %s did not finish within %s: it is %s\n",
              g_get_prgname(), argv[1], waited,
              sluice_task_state_to_string(sluice_result_get_state(now)));
      status = CLI_EXIT_NOT_FINISHED;
      goto out;
    }
  } else {
    result = inspect(client, argv[1], &error);
  }
  if (result == NULL) {
    status = cli_report(error);
    goto out;
  }

  state = sluice_result_get_state(result);
  if (!sluice_task_state_is_final(state)) {
    fprintf(stderr,
            "%s: task %s is %s, not finished: use --wait DURATION to wait "
            "for it\n",
            g_get_prgname(), argv[1], sluice_task_state_to_string(state));
    status = CLI_EXIT_NOT_FINISHED;
    goto out;
  }
  cli_result_print(result, common.json);
  status = state == SLUICE_STATE_SUCCEEDED ? CLI_EXIT_OK : CLI_EXIT_TASK_FAILED;
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice cancel ------------------------------------------------------- */

static void
print_cancel(const CliCommon *common, const gchar *id, const gchar *outcome,
             gboolean certain, const gchar *message)
{
  if (common->json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "id");
    cli_json_string(json, id);
    cli_json_key(json, "outcome");
    cli_json_string(json, outcome);
    cli_json_key(json, "certain");
    cli_json_bool(json, certain);
    cli_json_end_object(json);
    cli_json_print(json);
  } else {
    printf("%s\n", message);
  }
}

int
cli_cmd_cancel(int argc, char **argv)
{
  CliCommon common = {0};
  gboolean force = FALSE;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceResult) record = NULL;
  g_autofree gchar *message = NULL;
  SluiceCancelOutcome outcome;
  SluiceTaskState state = SLUICE_STATE_UNKNOWN;
  int status = CLI_EXIT_OK;
  const GOptionEntry entries[] = {
      {"force", 'f', 0, G_OPTION_ARG_NONE, &force,
       "Record a revocation even for a task without a record", NULL},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, entries, "ID",
          "Cancel a task.\nA scheduled task is removed: it certainly never "
          "runs. A queued or running task\ngets a revocation (kept 1 h): a "
          "worker skips it if it is still queued, or\ncancels its "
          "cancellable if it runs; a task that finishes first is "
          "unaffected.",
          "Exit status: 0 cancelled or revoked; 1 no such task, already "
          "finished, or an error.",
          &argc, &argv, &error) ||
      !one_id(argc, argv, "one task id: sluice cancel ID", &error)) {
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }

  /* Look first: a revocation for an id that never existed or a task that
   * already finished would only mislead whoever runs this. */
  record = inspect(client, argv[1], &error);
  if (record == NULL) {
    if (!g_error_matches(error, SLUICE_CLIENT_ERROR,
                         SLUICE_CLIENT_ERROR_NOT_FOUND)) {
      status = cli_report(error);
      goto out;
    }
    if (!force) {
      g_autofree gchar *text =
          g_strdup_printf("nothing cancelled: %s; --force records a "
                          "revocation anyway",
                          error->message);
      g_clear_error(&error);
      g_set_error_literal(&error, SLUICE_CLIENT_ERROR,
                          SLUICE_CLIENT_ERROR_NOT_FOUND, text);
      status = cli_report(error);
      goto out;
    }
    g_clear_error(&error);
  } else {
    state = sluice_result_get_state(record);
    if (sluice_task_state_is_final(state)) {
      g_set_error(&error, CLI_ERROR, CLI_ERROR_FAILED,
                  "nothing cancelled: task %s already finished (%s)", argv[1],
                  sluice_task_state_to_string(state));
      status = cli_report(error);
      goto out;
    }
  }

  outcome = sluice_client_cancel(client, argv[1], &error);
  switch (outcome) {
  case SLUICE_CANCEL_REMOVED:
    message = g_strdup_printf("cancelled: task %s was scheduled and is "
                              "removed; it will certainly not run",
                              argv[1]);
    print_cancel(&common, argv[1], "removed", TRUE, message);
    break;
  case SLUICE_CANCEL_REVOKED:
    message = g_strdup_printf(
        "revocation recorded: task %s (%s) will be skipped if a worker "
        "meets it queued, or its cancellable cancelled if it runs; it may "
        "still finish first",
        argv[1],
        state == SLUICE_STATE_UNKNOWN ? "no record"
                                      : sluice_task_state_to_string(state));
    print_cancel(&common, argv[1], "revoked", FALSE, message);
    break;
  case SLUICE_CANCEL_FAILED:
  default:
    status = cli_report(error);
    break;
  }
out:
  cli_common_clear(&common);
  return status;
}

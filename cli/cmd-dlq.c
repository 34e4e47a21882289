/* cmd-dlq.c - the dead-letter queue: `sluice dlq list|show|replay|purge`.
 *
 * Dead letters are read and changed only through the client API
 * (sluice_client_dlq_list/get/replay/delete). `replay --all` and `purge`
 * first take a snapshot of the matching entries and then act on exactly
 * those: a replayed task that fails again while the command runs is buried
 * as a new entry at the tail, and acting on a live listing would replay it
 * again in a loop.
 *
 * The broker contract has no slot to purge the dead-letter queue in one
 * step, so `purge` deletes entry by entry; an entry buried meanwhile is
 * kept (it was not in the snapshot).
 *
 * `replay --all` and `purge` touch many tasks: more than one takes --yes
 * (cli_confirm_many()), and they show a progress bar on a terminal and a
 * summary line in any case.
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

/* The longest detail a table shows; `dlq show` and --json show it all. */
#define DETAIL_WIDTH 60

/* Reads one entry; an unknown entry id is named in the CLI's words. */
static SluiceDeadLetter *
get_entry(SluiceClient *client, const gchar *entry_id, GError **error)
{
  g_autoptr(GError) local = NULL;
  SluiceDeadLetter *entry = sluice_client_dlq_get(client, entry_id, &local);

  if (entry != NULL)
    return entry;
  if (g_error_matches(local, SLUICE_CLIENT_ERROR,
                      SLUICE_CLIENT_ERROR_NOT_FOUND))
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
                "no dead letter with entry id %s (sluice dlq list shows "
                "them; a replayed or purged entry is gone)",
                entry_id);
  else
    g_propagate_error(error, g_steal_pointer(&local));
  return NULL;
}

/* ---- sluice dlq list ----------------------------------------------------- */

static int
dlq_list(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  g_autofree gchar *limit_text = NULL;
  g_autofree gchar *reason = NULL;
  g_autofree gchar *task = NULL;
  g_autofree gchar *after = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  guint64 limit = 100;
  int status = CLI_EXIT_OK;
  g_autofree gchar *reasons =
      g_strjoinv(", ", (gchar **)sluice_dead_letter_reasons());
  g_autofree gchar *footer = g_strdup_printf("Reasons: %s.", reasons);
  const GOptionEntry options[] = {
      {"limit", 'n', 0, G_OPTION_ARG_STRING, &limit_text,
       "At most N entries (default 100)", "N"},
      {"reason", 0, 0, G_OPTION_ARG_STRING, &reason,
       "Only entries buried for this reason", "R"},
      {"task", 0, 0, G_OPTION_ARG_STRING, &task,
       "Only entries of this task name", "T"},
      {"after", 0, 0, G_OPTION_ARG_STRING, &after,
       "Start after this entry (paging: give the last entry listed)", "ENTRY"},
      {NULL}};

  if (!cli_parse_options(&common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON,
                         options, "", "List dead letters, oldest first.",
                         footer, &argc, &argv, &error) ||
      (limit_text != NULL &&
       !cli_parse_count("--limit", limit_text, 1, 100000, &limit, &error)) ||
      !cli_check_reason("--reason", reason, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    cli_usage_error(&error, "unexpected argument “%s”", argv[1]);
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      (entries = sluice_client_dlq_list(client, after, (guint)limit, reason,
                                        task, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }

  if (common.json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_dead_letter_page_to_json(json, entries, (guint)limit);
    cli_json_print(json);
  } else if (entries->len == 0) {
    printf("no dead letters%s\n",
           reason != NULL || task != NULL || after != NULL ? " match" : "");
  } else {
    const gchar *header[] = {"ENTRY",   "BURIED", "REASON", "TASK",
                             "TASK ID", "DETAIL", NULL};
    g_autoptr(CliTable) table = cli_table_new(header, 6);
    for (guint i = 0; i < entries->len; i++) {
      const SluiceDeadLetter *e = entries->pdata[i];
      g_autofree gchar *at = cli_format_time(e->at);
      g_autofree gchar *detail = cli_shorten(e->detail, DETAIL_WIDTH);
      cli_table_add(table, e->entry_id, at, e->reason, e->task, e->task_id,
                    detail);
    }
    cli_table_print(table);
    if (entries->len == limit)
      printf("(more may follow: --after %s)\n",
             ((SluiceDeadLetter *)entries->pdata[entries->len - 1])->entry_id);
  }
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice dlq show ----------------------------------------------------- */

static void
show_json(const SluiceDeadLetter *entry, const SluiceEnvelope *env)
{
  g_autoptr(CliJson) json = cli_json_new();

  cli_dead_letter_show_to_json(json, entry, env);
  cli_json_print(json);
}

static void
show_table(const SluiceDeadLetter *entry, const SluiceEnvelope *env,
           const GError *decode_error)
{
  g_autoptr(CliTable) table = cli_table_new(NULL, 2);
  g_autofree gchar *at = cli_format_time(entry->at);
  g_autofree gchar *deliveries = g_strdup_printf("%u", entry->deliveries);
  g_autofree gchar *size = g_strdup_printf(
      "%" G_GSIZE_FORMAT " bytes%s",
      entry->payload != NULL ? g_bytes_get_size(entry->payload) : 0,
      env == NULL ? " (malformed)" : "");

  cli_table_add(table, "entry", entry->entry_id);
  cli_table_add(table, "task id", entry->task_id);
  cli_table_add(table, "task", entry->task);
  cli_table_add(table, "reason", entry->reason);
  cli_table_add(table, "detail", entry->detail);
  cli_table_add(table, "source", entry->source);
  cli_table_add(table, "deliveries", deliveries);
  cli_table_add(table, "buried at", at);
  cli_table_add(table, "payload", size);
  if (env != NULL) {
    g_autofree gchar *attempt = g_strdup_printf("%u", env->attempt);
    g_autofree gchar *enqueued = cli_format_time(env->enqueued_at);
    g_autofree gchar *args =
        env->seal != NULL
            ? g_strdup_printf("encrypted (%s); a worker with that key opens "
                              "them",
                              env->seal)
            : cli_msgpack_to_json(env->args);
    cli_table_add(table, "attempt", attempt);
    cli_table_add(table, "enqueued at", enqueued);
    cli_table_add(table, "args", args);
    g_autoptr(GString) headers = g_string_new(NULL);
    g_autoptr(GList) names =
        env->headers != NULL ? g_hash_table_get_keys(env->headers) : NULL;

    names = g_list_sort(names, (GCompareFunc)strcmp);
    for (GList *k = names; k != NULL; k = k->next)
      g_string_append_printf(
          headers, "%s%s=%s", headers->len > 0 ? ", " : "",
          (const gchar *)k->data,
          (const gchar *)g_hash_table_lookup(env->headers, k->data));
    cli_table_add(table, "headers", headers->len > 0 ? headers->str : NULL);
    if (env->history == NULL || env->history->len == 0)
      cli_table_add(table, "history", NULL);
    for (guint i = 0; env->history != NULL && i < env->history->len; i++)
      cli_table_add(table, i == 0 ? "history" : "",
                    (const gchar *)env->history->pdata[i]);
  } else {
    cli_table_add(table, "decoding", decode_error->message);
  }
  cli_table_print(table);
}

static int
dlq_show(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) decode_error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceDeadLetter) entry = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(&common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON,
                         NULL, "ENTRY",
                         "Show one dead letter: why it was buried, its "
                         "arguments and its history of failures.",
                         NULL, &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc != 2) {
    cli_usage_error(&error, "give one entry id (sluice dlq list shows them)");
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      (entry = get_entry(client, argv[1], &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  if (entry->payload != NULL)
    env = sluice_envelope_decode(entry->payload, NULL, &decode_error);
  /* With the keyring the args show in clear; without, with their key. */
  if (env != NULL)
    sluice_client_open_args(client, env, NULL);
  if (common.json)
    show_json(entry, env);
  else
    show_table(entry, env, decode_error);
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice dlq replay --------------------------------------------------- */

static int
dlq_replay(int argc, char **argv)
{
  CliCommon common = {0};
  gboolean all = FALSE, keep_attempt = FALSE, dry_run = FALSE, yes = FALSE;
  g_autofree gchar *reason = NULL;
  g_autofree gchar *task = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliJson) json = NULL;
  g_autoptr(CliProgress) progress = NULL;
  guint done = 0, failed = 0;
  int status = CLI_EXIT_OK;
  const GOptionEntry options[] = {
      {"all", 'a', 0, G_OPTION_ARG_NONE, &all,
       "Replay every dead letter (that matches --reason and --task)", NULL},
      {"reason", 0, 0, G_OPTION_ARG_STRING, &reason,
       "With --all: only entries buried for this reason", "R"},
      {"task", 0, 0, G_OPTION_ARG_STRING, &task,
       "With --all: only entries of this task name", "T"},
      {"keep-attempt", 0, 0, G_OPTION_ARG_NONE, &keep_attempt,
       "Keep the attempt count (default: start again at attempt 1)", NULL},
      {"dry-run", 0, 0, G_OPTION_ARG_NONE, &dry_run,
       "Say what would be replayed, and replay nothing", NULL},
      {"yes", 'y', 0, G_OPTION_ARG_NONE, &yes,
       "With --all: replay them (needed when more than one matches)", NULL},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, options,
          "ENTRY... | --all",
          "Re-enqueue dead letters: each entry is deleted and its original "
          "message\nenqueued again, in one atomic step, with the same task "
          "id and arguments.",
          "Exit status: 0 all replayed; 1 any entry missing or an error.",
          &argc, &argv, &error) ||
      !cli_check_reason("--reason", reason, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (all == (argc > 1) || (!all && (reason != NULL || task != NULL))) {
    cli_usage_error(&error, all ? "give entry ids or --all, not both"
                            : argc > 1
                                ? "--reason and --task go with --all"
                                : "which entries? give their ids (sluice dlq "
                                  "list shows them) or --all");
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }

  if (all) {
    entries = cli_dead_letter_snapshot(client, reason, task, &error);
    if (entries == NULL ||
        !cli_confirm_many(entries->len, yes, dry_run,
                          "replaying every matching dead letter",
                          "dead letters", &error)) {
      status = cli_report(error);
      goto out;
    }
    if (!dry_run)
      progress = cli_progress_new("replaying dead letters", entries->len);
  } else {
    entries =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
    for (int i = 1; i < argc; i++) {
      SluiceDeadLetter *entry = get_entry(client, argv[i], &error);
      if (entry == NULL) {
        cli_report(error);
        g_clear_error(&error);
        failed++;
        continue;
      }
      g_ptr_array_add(entries, entry);
    }
  }

  if (common.json) {
    json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "dry_run");
    cli_json_bool(json, dry_run);
    cli_json_key(json, "replayed");
    cli_json_begin_array(json);
  }
  for (guint i = 0; i < entries->len; i++) {
    const SluiceDeadLetter *e = entries->pdata[i];
    g_autofree gchar *id = NULL;

    if (progress != NULL)
      cli_progress_step(progress);
    if (!dry_run && !sluice_client_dlq_replay(client, e->entry_id, keep_attempt,
                                              &id, &error)) {
      cli_report(error);
      g_clear_error(&error);
      failed++;
      continue;
    }
    done++;
    if (json != NULL) {
      cli_json_begin_object(json);
      cli_json_key(json, "entry_id");
      cli_json_string(json, e->entry_id);
      cli_json_key(json, "task_id");
      cli_json_string(json, id != NULL ? id : e->task_id);
      cli_json_key(json, "task");
      cli_json_string(json, e->task);
      cli_json_end_object(json);
    } else if (!all || dry_run) {
      /* --all says it in one summary line (and a bar on a terminal). What
       * the entry says came from a message: escaped for the terminal. */
      g_autofree gchar *shown_id = cli_terminal_text(
          id != NULL ? id : (e->task_id != NULL ? e->task_id : "-"), -1);
      g_autofree gchar *shown_task =
          cli_terminal_text(e->task != NULL ? e->task : "malformed", -1);
      g_autofree gchar *shown_reason =
          cli_terminal_text(e->reason != NULL ? e->reason : "-", -1);

      printf("%s %s: task %s (%s, %s)\n", dry_run ? "would replay" : "replayed",
             e->entry_id, shown_id, shown_task, shown_reason);
    }
  }
  g_clear_pointer(&progress, cli_progress_free);
  if (json != NULL) {
    cli_json_end_array(json);
    cli_json_key(json, "failed");
    cli_json_int(json, failed);
    cli_json_end_object(json);
    cli_json_print(json);
  } else if (done == 0 && failed == 0) {
    printf("no dead letters%s\n",
           reason != NULL || task != NULL ? " match" : "");
  } else if (all) {
    printf("%s %u dead letter%s%s\n", dry_run ? "would replay" : "replayed",
           done, done == 1 ? "" : "s",
           failed > 0 ? " (see the errors above)" : "");
  }
  if (failed > 0)
    status = CLI_EXIT_FAILURE;
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice dlq purge ---------------------------------------------------- */

static int
dlq_purge(int argc, char **argv)
{
  CliCommon common = {0};
  gboolean dry_run = FALSE, yes = FALSE;
  g_autofree gchar *reason = NULL;
  g_autofree gchar *task = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliProgress) progress = NULL;
  guint done = 0;
  int status = CLI_EXIT_OK;
  const GOptionEntry options[] = {
      {"reason", 0, 0, G_OPTION_ARG_STRING, &reason,
       "Only entries buried for this reason", "R"},
      {"task", 0, 0, G_OPTION_ARG_STRING, &task,
       "Only entries of this task name", "T"},
      {"dry-run", 0, 0, G_OPTION_ARG_NONE, &dry_run,
       "Count what would be deleted, and delete nothing", NULL},
      {"yes", 'y', 0, G_OPTION_ARG_NONE, &yes,
       "Delete them (needed when more than one matches)", NULL},
      {NULL}};

  if (!cli_parse_options(&common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON,
                         options, "",
                         "Delete dead letters for good (all of them, or those "
                         "matching --reason and --task).\nMore than one takes "
                         "--yes.",
                         NULL, &argc, &argv, &error) ||
      !cli_check_reason("--reason", reason, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    cli_usage_error(&error,
                    "unexpected argument “%s”: purge takes no entry ids "
                    "(filter with --reason and --task)",
                    argv[1]);
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, NULL, &error)) == NULL ||
      (entries = cli_dead_letter_snapshot(client, reason, task, &error)) ==
          NULL ||
      !cli_confirm_many(entries->len, yes, dry_run,
                        "purging the dead-letter queue", "dead letters",
                        &error)) {
    status = cli_report(error);
    goto out;
  }
  if (!dry_run)
    progress = cli_progress_new("purging dead letters", entries->len);
  for (guint i = 0; i < entries->len && !dry_run; i++) {
    const SluiceDeadLetter *e = entries->pdata[i];
    cli_progress_step(progress);
    if (sluice_client_dlq_delete(client, e->entry_id, &error)) {
      done++;
    } else if (g_error_matches(error, SLUICE_CLIENT_ERROR,
                               SLUICE_CLIENT_ERROR_NOT_FOUND)) {
      /* Replayed or purged by someone else meanwhile: already gone. */
      g_clear_error(&error);
    } else {
      status = cli_report(error);
      break;
    }
  }
  g_clear_pointer(&progress, cli_progress_free);
  if (dry_run)
    done = entries->len;
  if (common.json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "dry_run");
    cli_json_bool(json, dry_run);
    cli_json_key(json, "purged");
    cli_json_int(json, done);
    cli_json_end_object(json);
    cli_json_print(json);
  } else {
    printf("%s %u dead letter%s\n", dry_run ? "would purge" : "purged", done,
           done == 1 ? "" : "s");
  }
out:
  cli_common_clear(&common);
  return status;
}

/* ---- sluice dlq ---------------------------------------------------------- */

int
cli_cmd_dlq(int argc, char **argv)
{
  static const CliSubcommand commands[] = {
      {"list", dlq_list, "List dead letters"},
      {"show", dlq_show, "Show one dead letter"},
      {"replay", dlq_replay, "Re-enqueue dead letters"},
      {"purge", dlq_purge, "Delete dead letters"},
  };

  return cli_run_subcommand("dlq", commands, G_N_ELEMENTS(commands), argc,
                            argv);
}

/* cmd-periodic.c - `sluice periodic ls`: the periodic schedules of the key
 * file (the workers' --config), each with its next occurrence and the
 * last one dispatched.
 *
 * The schedules are read as `sluice worker` reads them
 * (periodic-config.c); the next occurrence is computed here, from now, by
 * the library's own rule (sluice_periodic_next_occurrence()); the last one
 * is what the broker recorded, whichever worker dispatched it.
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

static int
periodic_ls(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  CliSettings settings = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GPtrArray) schedules = NULL;
  g_autoptr(GArray) next = g_array_new(FALSE, TRUE, sizeof(gint64));
  g_autoptr(GArray) last = g_array_new(FALSE, TRUE, sizeof(gint64));
  gint64 now = g_get_real_time() / 1000;
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, NULL, "",
          "List the periodic schedules of the key file (the [periodic "
          "\"NAME\"] groups the\nworkers read from --config), with the next "
          "occurrence of each and the last one\ndispatched.",
          NULL, &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    cli_usage_error(&error, "unexpected argument “%s”", argv[1]);
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, &settings, &error)) == NULL ||
      !cli_periodic_load(&settings, &schedules, &error)) {
    status = cli_report(error);
    goto out;
  }
  for (guint i = 0; i < schedules->len; i++) {
    const CliPeriodic *p = schedules->pdata[i];
    gint64 n = 0, l = 0;

    if (!sluice_periodic_next_occurrence(&p->options, now, &n, &error) ||
        !sluice_client_get_last_periodic(client, p->options.name, &l, &error)) {
      status = cli_report(error);
      goto out;
    }
    g_array_append_val(next, n);
    g_array_append_val(last, l);
  }

  if (common.json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "schedules");
    cli_json_begin_array(json);
    for (guint i = 0; i < schedules->len; i++) {
      const CliPeriodic *p = schedules->pdata[i];
      cli_json_begin_object(json);
      cli_json_key(json, "name");
      cli_json_string(json, p->options.name);
      cli_json_key(json, "task");
      cli_json_string(json, p->options.task);
      cli_json_key(json, "queue");
      cli_json_string(json, p->options.queue);
      cli_json_key(json, "interval_ms");
      if (p->options.interval_ms > 0)
        cli_json_int(json, p->options.interval_ms);
      else
        cli_json_null(json);
      cli_json_key(json, "cron");
      cli_json_string(json, p->options.cron);
      cli_json_key(json, "timezone");
      cli_json_string(json, p->options.timezone);
      cli_json_key(json, "next_at");
      cli_json_time(json, g_array_index(next, gint64, i));
      cli_json_key(json, "last_at");
      cli_json_time(json, g_array_index(last, gint64, i));
      cli_json_end_object(json);
    }
    cli_json_end_array(json);
    cli_json_end_object(json);
    cli_json_print(json);
  } else if (schedules->len == 0) {
    if (settings.keyfile == NULL)
      printf("no periodic schedules: no configuration file was given "
             "(--config FILE, or SLUICE_CONFIG: the workers' key file)\n");
    else
      printf("no periodic schedules in %s (they are [periodic \"NAME\"] "
             "groups)\n",
             settings.config_path);
  } else {
    const gchar *header[] = {"NAME", "TASK", "QUEUE", "SCHEDULE",
                             "NEXT", "LAST", NULL};
    g_autoptr(CliTable) table = cli_table_new(header, 6);
    for (guint i = 0; i < schedules->len; i++) {
      const CliPeriodic *p = schedules->pdata[i];
      g_autofree gchar *n = cli_format_time(g_array_index(next, gint64, i));
      g_autofree gchar *l = cli_format_time(g_array_index(last, gint64, i));
      cli_table_add(table, p->options.name, p->options.task,
                    p->options.queue != NULL ? p->options.queue
                                             : "(the task's)",
                    p->schedule, n, l != NULL ? l : "never");
    }
    cli_table_print(table);
  }
out:
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  return status;
}

int
cli_cmd_periodic(int argc, char **argv)
{
  static const CliSubcommand commands[] = {
      {"ls", periodic_ls, "List the key file's periodic schedules"},
  };

  return cli_run_subcommand("periodic", commands, G_N_ELEMENTS(commands), argc,
                            argv);
}

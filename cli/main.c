/* main.c - `sluice`: the entry point, which hands over to a subcommand.
 *
 *   sluice COMMAND [OPTION…]
 *
 * The commands are the table below, and only it: `sluice --help` lists it
 * and the message for an unknown command names it, so a command added
 * there is offered everywhere (tests/test-cli.c checks sluice(1)'s
 * SYNOPSIS against it too). Each subcommand parses its own options (and
 * has its own --help), so this file only picks one, names the process
 * after it (messages then start with "sluice enqueue: ..."), and runs it.
 * See sluice(1).
 */
#include "config.h"

#include <locale.h>
#include <string.h>

#include "cli/cli.h"

typedef struct {
  const gchar *name;
  int (*run)(int argc, char **argv);
  const gchar *summary;
} Command;

static const Command commands[] = {
    {"worker", cli_cmd_worker, "Run a worker on the tasks of task modules"},
    {"enqueue", cli_cmd_enqueue, "Enqueue a task and print its id"},
    {"result", cli_cmd_result, "Print a task's final record (--wait for it)"},
    {"inspect", cli_cmd_inspect, "Print a task's record, in any state"},
    {"events", cli_cmd_events, "Print task lifecycle events (--follow them)"},
    {"workflow", cli_cmd_workflow, "Show a workflow as a tree, or cancel it"},
    {"cancel", cli_cmd_cancel, "Cancel a scheduled, queued or running task"},
    {"dlq", cli_cmd_dlq, "List, show, replay or purge dead letters"},
    {"stats", cli_cmd_stats, "Queue depths, dead letters and live workers"},
    {"ls", cli_cmd_ls, "List tasks of one state: queued, scheduled, ..."},
    {"pause", cli_cmd_pause, "Pause queues: workers stop taking from them"},
    {"resume", cli_cmd_resume, "Resume paused queues"},
    {"purge", cli_cmd_purge, "Delete every task waiting in a queue"},
    {"delete", cli_cmd_delete, "Delete one task, wherever it is"},
    {"run-now", cli_cmd_run_now, "Run a scheduled or retrying task now"},
    {"periodic", cli_cmd_periodic, "List the key file's periodic schedules"},
    {"exporter", cli_cmd_exporter,
     "Serve the namespace's gauges to Prometheus over HTTP"},
    {"web", cli_cmd_web, "Serve a dashboard of the namespace in a browser"},
    {"migrate", cli_cmd_migrate,
     "Migrate the store to this sluice's layout version"},
    {"keys", cli_cmd_keys, "Make or rotate the keyring that seals task data"},
    {"run", cli_cmd_run, "Run one task in this process, without Redis"},
};

static void
usage(FILE *out)
{
  fprintf(out, "Usage:\n  sluice COMMAND [OPTION…]\n\nCommands:\n");
  for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
    fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nsluice COMMAND --help describes a command and its options.\n"
               "Connection: --url, --mode, --namespace, or SLUICE_URL, "
               "SLUICE_MODE,\nSLUICE_NAMESPACE, or a key file (--config); "
               "default: the SQLite database\n"
               "$XDG_STATE_HOME/sluice/sluice.db (no server). "
               "See sluice(1).\n");
}

int
main(int argc, char **argv)
{
  setlocale(LC_ALL, "");

  if (argc < 2) {
    g_set_prgname("sluice");
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("sluice %s\n", PACKAGE_VERSION);
    return CLI_EXIT_OK;
  }
  for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
    if (strcmp(argv[1], commands[i].name) == 0) {
      /* `sluice dlq` and `sluice periodic` name themselves after their
       * own subcommands. */
      if (commands[i].run != cli_cmd_dlq &&
          commands[i].run != cli_cmd_periodic) {
        g_autofree gchar *name = g_strdup_printf("sluice %s", commands[i].name);
        g_set_prgname(name);
      }
      return commands[i].run(argc - 1, argv + 1);
    }
  if (argv[1][0] == '-') {
    fprintf(stderr,
            "sluice: unknown option %s: options go after the command (see "
            "sluice --help)\n",
            argv[1]);
    return CLI_EXIT_USAGE;
  }
  {
    /* Named from the table, so that a new command is never left out. */
    g_autoptr(GString) names = g_string_new(NULL);
    g_autofree gchar *shown = cli_terminal_text(argv[1], -1);

    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
      g_string_append_printf(names, "%s%s",
                             i == 0                            ? ""
                             : i + 1 == G_N_ELEMENTS(commands) ? " and "
                                                               : ", ",
                             commands[i].name);
    fprintf(stderr,
            "sluice: unknown command “%s”: the commands are %s (see sluice "
            "--help)\n",
            shown, names->str);
  }
  return CLI_EXIT_USAGE;
}

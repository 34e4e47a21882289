/* common.c - option parsing for every subcommand.
 *
 * Every subcommand parses its command line with its own GOptionContext
 * (so each has its own --help) built by cli_parse_options(): its own
 * entries, --json, and the connection's (from their table, settings.c).
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

void
cli_common_clear(CliCommon *common)
{
  cli_setting_args_clear(&common->connection);
}

/* Removes argv[i] by shifting the rest down. */
static void
remove_arg(int *argc, char **argv, int i)
{
  memmove(&argv[i], &argv[i + 1], (gsize)(*argc - i) * sizeof *argv);
  (*argc)--;
}

gboolean
cli_parse_options(CliCommon *common, CliOptionSets sets,
                  const GOptionEntry *entries, const gchar *parameters,
                  const gchar *summary, const gchar *description, int *argc,
                  char ***argv, GError **error)
{
  /* From the connection's table (settings.c), storing into @common. */
  g_autofree GOptionEntry *connection = cli_connection_entries(common);
  const GOptionEntry json[] = {
      {"json", 0, 0, G_OPTION_ARG_NONE, &common->json,
       "Print JSON (stable fields, see sluice(1)) instead of a table", NULL},
      {NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new(parameters);
  g_autofree gchar *full_description = NULL;
  g_autoptr(GError) local = NULL;

  g_option_context_set_summary(context, summary);
  if (sets & CLI_OPTIONS_CONNECTION)
    full_description =
        description != NULL
            ? g_strconcat(description, "\n\n", CLI_HELP_CONNECTION, NULL)
            : g_strdup(CLI_HELP_CONNECTION);
  else if (description != NULL)
    full_description = g_strdup(description);
  if (full_description != NULL)
    g_option_context_set_description(context, full_description);
  if (entries != NULL)
    g_option_context_add_main_entries(context, entries, NULL);
  if (sets & CLI_OPTIONS_JSON)
    g_option_context_add_main_entries(context, json, NULL);
  if (sets & CLI_OPTIONS_CONNECTION)
    g_option_context_add_main_entries(context, connection, NULL);

  if (!g_option_context_parse(context, argc, argv, &local)) {
    cli_usage_error(error, "%s (see %s --help)", local->message,
                    g_get_prgname());
    return FALSE;
  }

  /* GOption leaves "--" in place: drop the first one, so that
   * `sluice enqueue t -- -5` passes "-5" as the arguments. */
  for (int i = 1; i < *argc; i++)
    if (strcmp((*argv)[i], "--") == 0) {
      remove_arg(argc, *argv, i);
      break;
    }
  return TRUE;
}

int
cli_run_subcommand(const gchar *group, const CliSubcommand *commands,
                   gsize n_commands, int argc, char **argv)
{
  g_autoptr(GString) names = g_string_new(NULL);

  if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0) {
    FILE *out = argc < 2 ? stderr : stdout;

    fprintf(out, "Usage:\n  sluice %s COMMAND [OPTION…]\n\nCommands:\n", group);
    for (gsize i = 0; i < n_commands; i++)
      fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nsluice %s COMMAND --help describes each.\n", group);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  for (gsize i = 0; i < n_commands; i++) {
    if (strcmp(argv[1], commands[i].name) == 0) {
      g_autofree gchar *name =
          g_strdup_printf("sluice %s %s", group, commands[i].name);

      g_set_prgname(name);
      return commands[i].run(argc - 1, argv + 1);
    }
    g_string_append_printf(names, "%s%s",
                           i == 0               ? ""
                           : i + 1 < n_commands ? ", "
                                                : " or ",
                           commands[i].name);
  }
  {
    g_autofree gchar *shown = cli_terminal_text(argv[1], -1);

    fprintf(stderr,
            "sluice %s: unknown command “%s”: use %s (see sluice %s --help)\n",
            group, shown, names->str, group);
  }
  return CLI_EXIT_USAGE;
}

/* cmd-keys.c - `sluice keys new|rotate`: the keyring that seals task
 * args and results (sluice-seal.h).
 *
 * `new` makes a keyring with one key, `rotate` adds a key and makes it
 * current: programs that load the file afterwards seal with it and still
 * open what the older keys sealed. Key bytes are written to the file only
 * (mode 0600), never printed.
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

/* The keyring path: --keyring, else $SLUICE_KEYRING. */
static const gchar *
keyring_path(const gchar *given, GError **error)
{
  const gchar *path = given != NULL ? given : g_getenv("SLUICE_KEYRING");

  if (path == NULL || path[0] == '\0')
    cli_usage_error(error, "no keyring: give one with --keyring FILE (or "
                           "SLUICE_KEYRING)");
  return path;
}

static int
add_key_parsed(CliCommon *common, int argc, char **argv, gboolean create)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *given = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *added = NULL;
  const gchar *path;
  const GOptionEntry entries[] = {
      {"keyring", 0, 0, G_OPTION_ARG_FILENAME, &given,
       "The keyring file (default: $SLUICE_KEYRING)", "FILE"},
      {"id", 0, 0, G_OPTION_ARG_STRING, &id,
       "The new key's id (default: the time, as 20261202-131500)", "ID"},
      {NULL}};

  if (!cli_parse_options(
          common, 0, entries, "",
          create ? "Make a keyring (mode 0600) holding one new random key, "
                   "its current key."
                 : "Add a new random key to the keyring and make it current: "
                   "programs started\nafterwards seal with it, and still open "
                   "what the older keys sealed. Keep\nan old key until no "
                   "message sealed with it waits (docs/security.md).",
          "See docs/security.md, \"Encryption at rest\".", &argc, &argv,
          &error))
    return cli_report(error);
  if (argc > 1) {
    cli_usage_error(&error, "unexpected argument “%s”", argv[1]);
    return cli_report(error);
  }
  if ((path = keyring_path(given, &error)) == NULL)
    return cli_report(error);
  if (create && g_file_test(path, G_FILE_TEST_EXISTS)) {
    g_autofree gchar *shown = cli_terminal_text(path, -1);

    cli_usage_error(
        &error, "%s exists: add a key to it with sluice keys rotate", shown);
    return cli_report(error);
  }
  if (!create && !g_file_test(path, G_FILE_TEST_EXISTS)) {
    g_autofree gchar *shown = cli_terminal_text(path, -1);

    cli_usage_error(&error, "no keyring %s: make one with sluice keys new",
                    shown);
    return cli_report(error);
  }
  if (!sluice_keyring_file_add_key(path, id, &added, &error))
    return cli_report(error);
  {
    g_autofree gchar *shown = cli_terminal_text(path, -1);

    printf("%s: key %s added, now current\n", shown, added);
  }
  return CLI_EXIT_OK;
}

/* The options' storage is the caller's to free, whatever happened. */
static int
add_key(int argc, char **argv, gboolean create)
{
  CliCommon common = {0};
  int status = add_key_parsed(&common, argc, argv, create);

  cli_common_clear(&common);
  return status;
}

static int
keys_new(int argc, char **argv)
{
  return add_key(argc, argv, TRUE);
}

static int
keys_rotate(int argc, char **argv)
{
  return add_key(argc, argv, FALSE);
}

int
cli_cmd_keys(int argc, char **argv)
{
  static const CliSubcommand commands[] = {
      {"new", keys_new, "Make a keyring with one key"},
      {"rotate", keys_rotate, "Add a key to a keyring and make it current"},
  };

  return cli_run_subcommand("keys", commands, G_N_ELEMENTS(commands), argc,
                            argv);
}

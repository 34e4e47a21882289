/* cmd-keys.c - `sluice keys new|rotate|reseal`: the keyring that seals
 * task args and results (sluice-seal.h).
 *
 * `new` makes a keyring with one key, `rotate` adds a key and makes it
 * current: programs that load the file afterwards seal with it and still
 * open what the older keys sealed. `reseal` seals what waits with the
 * current key (sluice_client_reseal()), after which the older keys can
 * go. Key bytes are written to the file only (mode 0600), never printed.
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

static void
print_counts(const SluiceResealCounts *c, const gchar *key, gboolean json)
{
  if (json) {
    g_autoptr(CliJson) out = cli_json_new();

    cli_json_begin_object(out);
    cli_json_key(out, "key");
    cli_json_string(out, key);
    cli_json_key(out, "resealed");
    cli_json_int(out, (gint64)c->resealed);
    cli_json_key(out, "current");
    cli_json_int(out, (gint64)c->current);
    cli_json_key(out, "unreadable");
    cli_json_int(out, (gint64)c->unreadable);
    cli_json_key(out, "moved");
    cli_json_int(out, (gint64)c->moved);
    cli_json_end_object(out);
    cli_json_print(out);
    return;
  }
  printf("sealed with key %s: %" G_GUINT64_FORMAT
         " waiting tasks now; %" G_GUINT64_FORMAT " already were\n",
         key, c->resealed, c->current);
  if (c->moved > 0)
    printf("%" G_GUINT64_FORMAT " were taken by a worker meanwhile (a retry "
           "is sealed with the worker's current key)\n",
           c->moved);
  if (c->unreadable > 0)
    printf("%" G_GUINT64_FORMAT " could not be opened with this keyring and "
           "were left as they are: keep the keys they need (sluice ls and "
           "sluice dlq show name them)\n",
           c->unreadable);
}

static int
keys_reseal(int argc, char **argv)
{
  CliCommon common = {0};
  CliSettings settings = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  SluiceResealCounts counts = {0};
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, NULL, "",
          "Seal every task that waits (queued, scheduled, dead letters) with "
          "the keyring's\ncurrent key, after `sluice keys rotate`: once it "
          "says nothing was left as it\nwas, the older keys can leave the "
          "keyring. Tasks in clear are sealed too.\nGive the workers the "
          "new keyring first: they seal retries with their own.",
          "See docs/security.md, \"Encryption at rest\".", &argc, &argv,
          &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    cli_usage_error(&error, "unexpected argument “%s”", argv[1]);
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, &settings, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  if (settings.keyring == NULL) {
    cli_usage_error(&error, "no keyring: give one with --keyring FILE (or "
                            "SLUICE_KEYRING)");
    status = cli_report(error);
    goto out;
  }
  if (!sluice_client_reseal(client, &counts, &error)) {
    if (counts.resealed > 0)
      g_prefix_error(&error,
                     "%" G_GUINT64_FORMAT " tasks were sealed again before: ",
                     counts.resealed);
    status = cli_report(error);
    goto out;
  }
  print_counts(&counts, sluice_keyring_get_current(settings.keyring),
               common.json);
out:
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  return status;
}

int
cli_cmd_keys(int argc, char **argv)
{
  static const CliSubcommand commands[] = {
      {"new", keys_new, "Make a keyring with one key"},
      {"rotate", keys_rotate, "Add a key to a keyring and make it current"},
      {"reseal", keys_reseal,
       "Seal what waits with the current key, so old keys can go"},
  };

  return cli_run_subcommand("keys", commands, G_N_ELEMENTS(commands), argc,
                            argv);
}

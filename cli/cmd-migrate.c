/* cmd-migrate.c - `sluice migrate [--dry-run]`: the store's layout version,
 * the steps to this sluice's and what each does; then runs them.
 *
 * Any writer of this version migrates a store on its own first open
 * (SQLite) or connection (Redis), online and once; this command is for
 * doing it when the operator chooses, for seeing what would happen
 * (--dry-run), and for a store only readers use (a read-only open refuses
 * an older SQLite file and names this command). The layout is read
 * without a broker (sluice_sqlite_get_layout(), sluice_redis_get_layout()),
 * since opening one would migrate; `sluice stats` shows the version
 * through cli_layout_read() too.
 */
#include "config.h"

#include <errno.h>

#include <glib/gstdio.h>

#include "cli/cli.h"

/* The Redis options of @settings, as cli_connect() makes them. */
static void
redis_options(const CliSettings *settings, SluiceRedisOptions *options)
{
  sluice_redis_options_init(options);
  options->url = settings->url;
  options->ns = settings->namespace_;
  options->mode = settings->mode == CLI_MODE_FAST ? SLUICE_REDIS_FAST
                                                  : SLUICE_REDIS_RELIABLE;
  options->min_replicas_ack = settings->min_replicas_ack;
  options->mode_setting = "--mode, SLUICE_MODE or mode= in the [connection] "
                          "group of the configuration file";
}

/* Reads (@migrate FALSE) or migrates the store @settings name into @out. */
static gboolean
layout_op(const CliSettings *settings, gboolean migrate, SluiceLayout *out,
          GError **error)
{
  if (settings->mode == CLI_MODE_MEMORY)
    return cli_usage_error(error, "the memory broker keeps nothing between "
                                  "processes: there is no layout to migrate");
  if (settings->mode == CLI_MODE_SQLITE) {
    SluiceSqliteOptions options;
    g_autofree gchar *path = NULL;

    sluice_sqlite_options_init(&options);
    if (!sluice_sqlite_url_parse(settings->url, &options, &path, error))
      return FALSE;
    if (migrate && settings->url_is_default) {
      g_autofree gchar *dir = g_path_get_dirname(path);
      if (g_mkdir_with_parents(dir, 0700) != 0) {
        int saved = errno;
        g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                    "cannot make the directory of the default database %s: "
                    "%s",
                    dir, g_strerror(saved));
        return FALSE;
      }
    }
    return migrate ? sluice_sqlite_migrate(&options, out, error)
                   : sluice_sqlite_get_layout(&options, out, error);
  }
  {
    SluiceRedisOptions options;

    redis_options(settings, &options);
    return migrate ? sluice_redis_migrate(&options, out, error)
                   : sluice_redis_get_layout(&options, out, error);
  }
}

gboolean
cli_layout_read(const CliSettings *settings, SluiceLayout *out, GError **error)
{
  return layout_op(settings, FALSE, out, error);
}

static void
steps_text(const gchar *title, const GPtrArray *steps, gboolean applied)
{
  if (steps->len == 0)
    return;
  printf("%s\n", title);
  for (guint i = 0; i < steps->len; i++) {
    const SluiceLayoutStep *s = steps->pdata[i];
    g_autofree gchar *name = cli_terminal_text(s->name, -1);
    g_autofree gchar *summary = cli_terminal_text(s->summary, -1);
    g_autofree gchar *at = cli_format_time(s->applied_at_ms);

    printf("  %-3u %-18s %s\n", s->version, name, summary);
    if (at != NULL || s->applied_by != NULL) {
      g_autofree gchar *by =
          cli_terminal_text(s->applied_by != NULL ? s->applied_by : "?", -1);
      printf("      applied %s by %s\n", at != NULL ? at : "(time unknown)",
             by);
    } else if (applied) {
      printf("      applied before steps were recorded\n");
    }
  }
}

static void
layout_text(const SluiceLayout *layout)
{
  g_autofree gchar *store = cli_terminal_text(layout->store, -1);

  printf("%s\n", store);
  if (layout->version == 0)
    printf("layout version: none yet (this sluice makes version %u)\n",
           layout->current);
  else
    printf("layout version: %u%s (this sluice: %u)\n", layout->version,
           layout->recorded ? "" : ", not recorded yet", layout->current);
  for (guint i = 0; i < layout->notes->len; i++) {
    g_autofree gchar *note = cli_terminal_text(layout->notes->pdata[i], -1);
    printf("  %s\n", note);
  }
  steps_text("Applied:", layout->applied, TRUE);
  steps_text("Steps to this sluice's version:", layout->pending, FALSE);
}

static void
steps_json(CliJson *json, const GPtrArray *steps)
{
  cli_json_begin_array(json);
  for (guint i = 0; i < steps->len; i++) {
    const SluiceLayoutStep *s = steps->pdata[i];
    cli_json_begin_object(json);
    cli_json_key(json, "version");
    cli_json_int(json, s->version);
    cli_json_key(json, "name");
    cli_json_string(json, s->name);
    cli_json_key(json, "summary");
    cli_json_string(json, s->summary);
    cli_json_key(json, "applied_at");
    cli_json_time(json, s->applied_at_ms);
    cli_json_key(json, "applied_by");
    cli_json_string(json, s->applied_by);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
}

static void
layout_json(CliJson *json, const SluiceLayout *layout)
{
  cli_json_begin_object(json);
  cli_json_key(json, "store");
  cli_json_string(json, layout->store);
  cli_json_key(json, "version");
  cli_json_int(json, layout->version);
  cli_json_key(json, "recorded");
  cli_json_bool(json, layout->recorded);
  cli_json_key(json, "current");
  cli_json_int(json, layout->current);
  cli_json_key(json, "notes");
  cli_json_begin_array(json);
  for (guint i = 0; i < layout->notes->len; i++)
    cli_json_string(json, layout->notes->pdata[i]);
  cli_json_end_array(json);
  cli_json_key(json, "applied");
  steps_json(json, layout->applied);
  cli_json_key(json, "pending");
  steps_json(json, layout->pending);
  cli_json_end_object(json);
}

int
cli_cmd_migrate(int argc, char **argv)
{
  CliCommon common = {0};
  g_auto(CliSettings) settings = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(CliJson) json = NULL;
  SluiceLayout before = {0}, after = {0};
  gboolean have_before = FALSE, have_after = FALSE, newer, to_migrate;
  gboolean dry_run = FALSE;
  int status = CLI_EXIT_OK;
  const GOptionEntry entries[] = {
      {"dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run,
       "Show the store's version and the steps to this sluice's; change "
       "nothing",
       NULL},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, entries, "",
          "Show the layout version of the store (the SQLite database, or "
          "the Redis namespace\nand its partitions), the steps that bring "
          "it to this sluice's and what each\ndoes; then run them, "
          "atomically and once. Any worker or producer of this\nversion "
          "does the same when it opens the store; an older sluice refuses "
          "a store\na newer one migrated.",
          "See docs/upgrading.md.", &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    cli_usage_error(&error, "unexpected argument “%s”", argv[1]);
    status = cli_report(error);
    goto out;
  }
  cli_log_init(CLI_LOG_TEXT, G_LOG_LEVEL_WARNING);
  if (!cli_settings_load(&common, &settings, &error) ||
      !(have_before = cli_layout_read(&settings, &before, &error))) {
    status = cli_report(error);
    goto out;
  }
  newer = before.version > before.current;
  /* An empty store is left alone: its first writer makes it current
   * (and, on Redis, records the mode it is used in). */
  to_migrate = !newer && before.version > 0 &&
               (before.pending->len > 0 || !before.recorded);
  if (common.json) {
    json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "before");
    layout_json(json, &before);
  } else {
    layout_text(&before);
  }
  if (newer) {
    g_set_error(&error, CLI_ERROR, CLI_ERROR_FAILED,
                "%s has layout version %u, newer than this sluice's (%u): "
                "upgrade this program (sluice %s) to the Sluice that "
                "migrated it, or a later one",
                before.store, before.version, before.current, PACKAGE_VERSION);
  } else if (to_migrate && !dry_run) {
    have_after = layout_op(&settings, TRUE, &after, &error);
  }
  if (json != NULL) {
    cli_json_key(json, "migrated");
    cli_json_bool(json, have_after);
    cli_json_key(json, "after");
    if (have_after)
      layout_json(json, &after);
    else
      cli_json_null(json);
    cli_json_end_object(json);
    if (error == NULL)
      cli_json_print(json);
  } else if (error == NULL) {
    if (have_after)
      printf("\nMigrated: %s is at layout version %u.\n", before.store,
             after.version);
    else if (to_migrate)
      printf("\nDry run: nothing was changed; `sluice migrate` without "
             "--dry-run runs the steps.\n");
    else if (before.version == 0)
      printf("\nNothing to do: nothing is stored yet, and the first worker "
             "or producer makes it at version %u.\n",
             before.current);
    else
      printf("\nNothing to do: the store is at this sluice's version.\n");
  }
  if (error != NULL)
    status = cli_report(error);
out:
  if (have_before)
    sluice_layout_clear(&before);
  if (have_after)
    sluice_layout_clear(&after);
  cli_common_clear(&common);
  return status;
}

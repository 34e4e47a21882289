/* settings.c - where the command's connection settings come from, and the
 * broker they describe.
 *
 * Each setting is resolved on its own, first match wins:
 *
 *   1. the command line (--url, --mode, --namespace);
 *   2. the environment (SLUICE_URL, SLUICE_MODE, SLUICE_NAMESPACE);
 *   3. the [connection] group of the key file named by --config, else by
 *      $SLUICE_CONFIG (there is no implicit file: a command never reads a
 *      configuration nobody asked for);
 *   4. the defaults: the SQLite database in the user's state directory
 *      (cli_default_sqlite_path(): a fresh machine works without a
 *      server), reliable, "sluice" (mode and namespace are Redis's).
 *
 * A password need not be in the URL, where `ps` shows it to every user of
 * the machine: a password file (--password-file, SLUICE_PASSWORD_FILE,
 * password_file) holds it, and it is put into the URL here, escaped. No
 * message ever quotes the file's content.
 *
 * Messages about a bad value say where it came from, because "mode “fsat”
 * is unknown" is much easier to fix when it adds "(from SLUICE_MODE)".
 */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define GROUP_CONNECTION "connection"

/* ---- Settings tables ------------------------------------------------------ */

void
cli_setting_value_clear(CliSettingValue *value)
{
  g_clear_pointer(&value->owned, g_free);
  g_clear_pointer(&value->owned_list, g_strfreev);
  g_clear_pointer(&value->what, g_free);
  value->text = NULL;
  value->list = NULL;
  value->given = FALSE;
}

void
cli_setting_args_clear(CliSettingArgs *args)
{
  for (gsize i = 0; args->text != NULL && i < args->n_rows; i++) {
    g_free(args->text[i]);
    g_strfreev(args->lists[i]);
  }
  g_clear_pointer(&args->text, g_free);
  g_clear_pointer(&args->lists, g_free);
  g_clear_pointer(&args->flags, g_free);
  g_clear_pointer(&args->help, g_ptr_array_unref);
}

static gboolean
takes(const CliSetting *row, guint commands)
{
  return row->commands == 0 || commands == 0 || (row->commands & commands);
}

GOptionEntry *
cli_setting_entries(CliSettingArgs *args, const CliSetting *rows, gsize n_rows,
                    guint commands, gconstpointer defaults)
{
  GArray *entries = g_array_new(TRUE, TRUE, sizeof(GOptionEntry));

  if (args->text == NULL) {
    args->rows = rows;
    args->n_rows = n_rows;
    args->text = g_new0(gchar *, n_rows);
    args->lists = g_new0(gchar **, n_rows);
    args->flags = g_new0(gboolean, n_rows);
    args->help = g_ptr_array_new_with_free_func(g_free);
  }
  for (gsize i = 0; i < n_rows; i++) {
    const CliSetting *row = &rows[i];
    g_autofree gchar *shown = NULL;
    GOptionEntry e = {row->option, row->short_name, 0, G_OPTION_ARG_NONE, NULL,
                      NULL,        row->arg};
    gchar *help;

    if (row->option == NULL || !takes(row, commands))
      continue;
    switch (row->kind) {
    case CLI_SETTING_TEXT:
      e.arg = G_OPTION_ARG_STRING;
      e.arg_data = &args->text[i];
      break;
    case CLI_SETTING_FILENAME:
      e.arg = G_OPTION_ARG_FILENAME;
      e.arg_data = &args->text[i];
      break;
    case CLI_SETTING_LIST:
      e.arg = G_OPTION_ARG_STRING_ARRAY;
      e.arg_data = &args->lists[i];
      break;
    case CLI_SETTING_FILENAME_LIST:
      e.arg = G_OPTION_ARG_FILENAME_ARRAY;
      e.arg_data = &args->lists[i];
      break;
    case CLI_SETTING_FLAG:
    case CLI_SETTING_OFF_FLAG:
      e.arg_data = &args->flags[i];
      break;
    }
    /* The default is said where it is kept: the defaults' struct (the
     * library's own, for the worker), else the row. A flag has none to
     * say: it is what the option is not. */
    if (row->default_text != NULL)
      shown = g_strdup(row->default_text);
    else if (defaults != NULL && row->type != NULL && row->type->show != NULL &&
             row->kind != CLI_SETTING_FLAG && row->kind != CLI_SETTING_OFF_FLAG)
      shown = row->type->show(row, defaults);
    help = shown != NULL ? g_strdup_printf("%s (default %s)", row->help, shown)
                         : g_strdup(row->help);
    g_ptr_array_add(args->help, help);
    e.description = help;
    g_array_append_val(entries, e);
  }
  return (GOptionEntry *)(void *)g_array_free(entries, FALSE);
}

gboolean
cli_parse_boolean(const gchar *what, const gchar *text, gboolean *out,
                  GError **error)
{
  static const gchar *const yes[] = {"1", "true", "yes", "on", NULL};
  static const gchar *const no[] = {"0", "false", "no", "off", NULL};
  g_autofree gchar *lower = g_ascii_strdown(text, -1);

  if (g_strv_contains(yes, lower) || g_strv_contains(no, lower)) {
    *out = g_strv_contains(yes, lower);
    return TRUE;
  }
  {
    g_autofree gchar *shown = cli_terminal_text(text, -1);
    return cli_usage_error(error,
                           "%s: “%s” is not true or false (1 or 0, yes or "
                           "no, on or off)",
                           what, shown);
  }
}

gboolean
cli_setting_get(const CliSettingArgs *args, gsize i,
                const CliSettings *settings, const gchar *group,
                CliSettingValue *out, GError **error)
{
  const CliSetting *row = &args->rows[i];
  gboolean flag_kind =
      row->kind == CLI_SETTING_FLAG || row->kind == CLI_SETTING_OFF_FLAG;
  GKeyFile *keyfile = settings != NULL ? settings->keyfile : NULL;
  const gchar *env = row->env != NULL ? g_getenv(row->env) : NULL;

  memset(out, 0, sizeof *out);
  if (args->text != NULL && row->option != NULL &&
      (args->text[i] != NULL || args->lists[i] != NULL || args->flags[i])) {
    out->given = TRUE;
    out->what = g_strconcat("--", row->option, NULL);
    out->text = args->text[i];
    out->list = args->lists[i];
    out->on = row->kind != CLI_SETTING_OFF_FLAG;
    return TRUE;
  }
  if (env != NULL && *env != '\0') {
    out->given = TRUE;
    out->what = g_strdup(row->env);
    if (flag_kind)
      return cli_parse_boolean(row->env, env, &out->on, error);
    if (row->kind == CLI_SETTING_LIST || row->kind == CLI_SETTING_FILENAME_LIST)
      out->list = out->owned_list = g_strsplit(env, ";", -1);
    else
      out->text = env;
    return TRUE;
  }
  if (keyfile == NULL || row->key == NULL ||
      !g_key_file_has_key(keyfile, group, row->key, NULL))
    return TRUE;
  out->given = TRUE;
  out->what =
      g_strdup_printf("%s: [%s] %s", settings->config_path, group, row->key);
  {
    g_autoptr(GError) local = NULL;

    if (flag_kind)
      out->on = g_key_file_get_boolean(keyfile, group, row->key, &local);
    else if (row->kind == CLI_SETTING_LIST ||
             row->kind == CLI_SETTING_FILENAME_LIST)
      out->list = out->owned_list =
          g_key_file_get_string_list(keyfile, group, row->key, NULL, &local);
    else
      out->text = out->owned =
          g_key_file_get_string(keyfile, group, row->key, &local);
    /* A value GLib cannot read (not UTF-8, say) is the file's mistake:
     * said with the key, never read as absent. */
    if (local != NULL) {
      g_autofree gchar *what = cli_terminal_text(out->what, -1);
      g_autofree gchar *why = cli_terminal_text(local->message, -1);
      return cli_usage_error(error, "%s: %s", what, why);
    }
  }
  return TRUE;
}

gboolean
cli_settings_apply(const CliSettingArgs *args, guint commands,
                   const CliSettings *settings, const gchar *group,
                   gpointer base, GError **error)
{
  for (gsize i = 0; i < args->n_rows; i++) {
    const CliSetting *row = &args->rows[i];
    g_auto(CliSettingValue) value = {0};

    if (row->type == NULL || !takes(row, commands))
      continue;
    if (!cli_setting_get(args, i, settings, group, &value, error))
      return FALSE;
    if (value.given && !row->type->parse(row, &value, base, error))
      return FALSE;
  }
  return TRUE;
}

const gchar **
cli_setting_keys(const CliSetting *rows, gsize n_rows)
{
  GPtrArray *keys = g_ptr_array_new();

  for (gsize i = 0; i < n_rows; i++)
    if (rows[i].key != NULL)
      g_ptr_array_add(keys, (gpointer)rows[i].key);
  g_ptr_array_add(keys, NULL);
  return (const gchar **)g_ptr_array_free(keys, FALSE);
}

/* The common types of values. */

static gboolean
parse_count(const CliSetting *row, const CliSettingValue *v, gpointer base,
            GError **error)
{
  guint64 n;

  if (!cli_parse_count(v->what, v->text, row->min, row->max, &n, error))
    return FALSE;
  G_STRUCT_MEMBER(guint, base, row->offset) = (guint)n;
  return TRUE;
}

static gchar *
show_count(const CliSetting *row, gconstpointer base)
{
  return g_strdup_printf("%u", G_STRUCT_MEMBER(guint, base, row->offset));
}

const CliSettingType cli_setting_count = {parse_count, show_count};

static gboolean
parse_int(const CliSetting *row, const CliSettingValue *v, gpointer base,
          GError **error)
{
  guint64 n;

  g_return_val_if_fail(row->max <= G_MAXINT, FALSE);
  if (!cli_parse_count(v->what, v->text, row->min, row->max, &n, error))
    return FALSE;
  G_STRUCT_MEMBER(gint, base, row->offset) = (gint)n;
  return TRUE;
}

static gchar *
show_int(const CliSetting *row, gconstpointer base)
{
  return g_strdup_printf("%d", G_STRUCT_MEMBER(gint, base, row->offset));
}

const CliSettingType cli_setting_int = {parse_int, show_int};

static gboolean
parse_duration(const CliSetting *row, const CliSettingValue *v, gpointer base,
               GError **error)
{
  gint64 ms;

  if (!cli_parse_duration(v->what, v->text, &ms, error))
    return FALSE;
  if (ms < (gint64)row->min) {
    g_autofree gchar *least = cli_format_duration((gint64)row->min);
    return cli_usage_error(error, "%s: %s is too short; the shortest is %s",
                           v->what, v->text, least);
  }
  G_STRUCT_MEMBER(gint64, base, row->offset) = ms;
  return TRUE;
}

static gchar *
show_duration(const CliSetting *row, gconstpointer base)
{
  return cli_format_duration(G_STRUCT_MEMBER(gint64, base, row->offset));
}

const CliSettingType cli_setting_duration = {parse_duration, show_duration};

static gboolean
parse_size(const CliSetting *row, const CliSettingValue *v, gpointer base,
           GError **error)
{
  return cli_parse_size(v->what, v->text,
                        &G_STRUCT_MEMBER(guint64, base, row->offset), error);
}

const CliSettingType cli_setting_size = {parse_size, NULL};

static gboolean
parse_string(const CliSetting *row, const CliSettingValue *v, gpointer base,
             GError **error)
{
  gchar **field = &G_STRUCT_MEMBER(gchar *, base, row->offset);

  g_free(*field);
  *field = g_strdup(v->text);
  return TRUE;
}

const CliSettingType cli_setting_string = {parse_string, NULL};

static gboolean
parse_strv(const CliSetting *row, const CliSettingValue *v, gpointer base,
           GError **error)
{
  gchar ***field = &G_STRUCT_MEMBER(gchar **, base, row->offset);

  g_strfreev(*field);
  *field = g_strdupv((gchar **)v->list);
  return TRUE;
}

const CliSettingType cli_setting_strv = {parse_strv, NULL};

static gboolean
parse_boolean(const CliSetting *row, const CliSettingValue *v, gpointer base,
              GError **error)
{
  G_STRUCT_MEMBER(gboolean, base, row->offset) = v->on;
  return TRUE;
}

static gchar *
show_boolean(const CliSetting *row, gconstpointer base)
{
  return g_strdup(G_STRUCT_MEMBER(gboolean, base, row->offset) ? "on" : "off");
}

const CliSettingType cli_setting_boolean = {parse_boolean, show_boolean};

/* ---- The connection ------------------------------------------------------- */

enum {
  CONN_URL,
  CONN_MODE,
  CONN_NAMESPACE,
  CONN_CONFIG,
  CONN_PASSWORD_FILE,
  CONN_MIN_REPLICAS_ACK,
  CONN_KEYRING,
  CONN_REDIS_TLS_CA,
  CONN_REDIS_TLS_CA_DIR,
  CONN_REDIS_TLS_CERT,
  CONN_REDIS_TLS_KEY,
  CONN_REDIS_TLS_SERVER_NAME,
  CONN_REDIS_TLS_MIN_VERSION,
  CONN_REDIS_TLS_INSECURE,
  N_CONN
};

/* Read by code (cli_settings_load()): each depends on the others. Keys of
 * [connection] are spelled with underscores. */
static const CliSetting connection[N_CONN] = {
    [CONN_URL] = {.option = "url",
                  .env = "SLUICE_URL",
                  .key = "url",
                  .kind = CLI_SETTING_TEXT,
                  .arg = "URL",
                  .help = "sqlite:///PATH/TO/FILE.db, "
                          "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], "
                          "redis+sentinel://[[USER]:PASSWORD@]HOST:PORT"
                          "[,HOST:PORT...]/MASTER[/DB], "
                          "redis+cluster://[[USER]:PASSWORD@]HOST:PORT"
                          "[,HOST:PORT...] or unix:///PATH[?db=N]; a Redis "
                          "URL may end with ?partitions=N",
                  .default_text = "sqlite:// in "
                                  "$XDG_STATE_HOME/sluice/sluice.db"},
    [CONN_MODE] = {.option = "mode",
                   .env = "SLUICE_MODE",
                   .key = "mode",
                   .kind = CLI_SETTING_TEXT,
                   .arg = "fast|reliable",
                   .help = "Queue transport: reliable or fast; it must match "
                           "the workers'",
                   .default_text = "reliable"},
    [CONN_NAMESPACE] = {.option = "namespace",
                        .env = "SLUICE_NAMESPACE",
                        .key = "namespace",
                        .kind = CLI_SETTING_TEXT,
                        .arg = "NS",
                        .help = "Key namespace",
                        .default_text = SLUICE_REDIS_DEFAULT_NAMESPACE},
    [CONN_CONFIG] = {.option = "config",
                     .env = "SLUICE_CONFIG",
                     .kind = CLI_SETTING_FILENAME,
                     .arg = "FILE",
                     .help = "Read settings from this key file",
                     .default_text = "$SLUICE_CONFIG"},
    [CONN_PASSWORD_FILE] = {.option = "password-file",
                            .env = "SLUICE_PASSWORD_FILE",
                            .key = "password_file",
                            .kind = CLI_SETTING_FILENAME,
                            .arg = "FILE",
                            .help = "Read the Redis password from the first "
                                    "line of this file",
                            .default_text = "$SLUICE_PASSWORD_FILE"},
    [CONN_MIN_REPLICAS_ACK] = {.option = "min-replicas-ack",
                               .env = "SLUICE_MIN_REPLICAS_ACK",
                               .key = "min_replicas_ack",
                               .kind = CLI_SETTING_TEXT,
                               .arg = "N",
                               .help = "Redis: each enqueue and settle waits "
                                       "until N replicas have it, and fails "
                                       "if they do not confirm it within 1 s",
                               .default_text = "$SLUICE_MIN_REPLICAS_ACK, "
                                               "else 0: no waiting"},
    [CONN_KEYRING] = {.option = "keyring",
                      .env = "SLUICE_KEYRING",
                      .key = "keyring",
                      .kind = CLI_SETTING_FILENAME,
                      .arg = "FILE",
                      .help = "Seal task args and results with this "
                              "keyring's current key, and open them with "
                              "any of its keys (sluice keys rotate makes "
                              "one)",
                      .default_text = "$SLUICE_KEYRING, else none: in "
                                      "clear"},
    /* TLS to Redis: each the URL's tls_* parameter of the same meaning,
     * put into the URL's query (cli_settings_load()), so the broker's URL
     * parser checks them as it checks the URL's own. */
    [CONN_REDIS_TLS_CA] = {.option = "redis-tls-ca",
                           .env = "SLUICE_REDIS_TLS_CA",
                           .key = "redis_tls_ca",
                           .kind = CLI_SETTING_FILENAME,
                           .arg = "FILE",
                           .help = "rediss://: trust the CAs of this PEM file "
                                   "(the URL's tls_ca_file)",
                           .default_text = "the system's CAs"},
    [CONN_REDIS_TLS_CA_DIR] = {.option = "redis-tls-ca-dir",
                               .env = "SLUICE_REDIS_TLS_CA_DIR",
                               .key = "redis_tls_ca_dir",
                               .kind = CLI_SETTING_FILENAME,
                               .arg = "DIR",
                               .help = "rediss://: trust the CAs of this "
                                       "hashed directory (tls_ca_dir)"},
    [CONN_REDIS_TLS_CERT] = {.option = "redis-tls-cert",
                             .env = "SLUICE_REDIS_TLS_CERT",
                             .key = "redis_tls_cert",
                             .kind = CLI_SETTING_FILENAME,
                             .arg = "FILE",
                             .help = "rediss://: present this client "
                                     "certificate, PEM (tls_cert)"},
    [CONN_REDIS_TLS_KEY] = {.option = "redis-tls-key",
                            .env = "SLUICE_REDIS_TLS_KEY",
                            .key = "redis_tls_key",
                            .kind = CLI_SETTING_FILENAME,
                            .arg = "FILE",
                            .help = "rediss://: the private key of "
                                    "--redis-tls-cert, PEM (tls_key)"},
    [CONN_REDIS_TLS_SERVER_NAME] = {.option = "redis-tls-server-name",
                                    .env = "SLUICE_REDIS_TLS_SERVER_NAME",
                                    .key = "redis_tls_server_name",
                                    .kind = CLI_SETTING_TEXT,
                                    .arg = "NAME",
                                    .help = "rediss://: the name the server's "
                                            "certificate must hold "
                                            "(tls_server_name)",
                                    .default_text = "the URL's host"},
    [CONN_REDIS_TLS_MIN_VERSION] = {.option = "redis-tls-min-version",
                                    .env = "SLUICE_REDIS_TLS_MIN_VERSION",
                                    .key = "redis_tls_min_version",
                                    .kind = CLI_SETTING_TEXT,
                                    .arg = "1.2|1.3",
                                    .help = "rediss://: the oldest TLS "
                                            "version accepted "
                                            "(tls_min_version)",
                                    .default_text = "1.2"},
    [CONN_REDIS_TLS_INSECURE] = {.option = "redis-tls-insecure",
                                 .env = "SLUICE_REDIS_TLS_INSECURE",
                                 .key = "redis_tls_insecure",
                                 .kind = CLI_SETTING_FLAG,
                                 .help = "rediss://: do not verify the "
                                         "server's certificate, for tests "
                                         "only (tls_insecure=1)"},
};

/* The URL parameter each TLS setting stands for. */
static const gchar *const redis_tls_params[N_CONN] = {
    [CONN_REDIS_TLS_CA] = "tls_ca_file",
    [CONN_REDIS_TLS_CA_DIR] = "tls_ca_dir",
    [CONN_REDIS_TLS_CERT] = "tls_cert",
    [CONN_REDIS_TLS_KEY] = "tls_key",
    [CONN_REDIS_TLS_SERVER_NAME] = "tls_server_name",
    [CONN_REDIS_TLS_MIN_VERSION] = "tls_min_version",
    [CONN_REDIS_TLS_INSECURE] = "tls_insecure",
};

GOptionEntry *
cli_connection_entries(CliCommon *common)
{
  return cli_setting_entries(&common->connection, connection, N_CONN, 0, NULL);
}

void
cli_settings_clear(CliSettings *settings)
{
  g_clear_pointer(&settings->url, g_free);
  g_clear_pointer(&settings->namespace_, g_free);
  g_clear_pointer(&settings->keyfile, g_key_file_unref);
  g_clear_pointer(&settings->config_path, g_free);
  g_clear_pointer(&settings->keyring, sluice_keyring_unref);
}

const gchar *
cli_mode_name(CliMode mode)
{
  switch (mode) {
  case CLI_MODE_FAST:
    return "fast";
  case CLI_MODE_RELIABLE:
    return "reliable";
  case CLI_MODE_MEMORY:
    return "memory";
  case CLI_MODE_SQLITE:
    return "sqlite";
  default:
    return "?";
  }
}

gboolean
cli_events_setting(gboolean flag, const CliSettings *settings,
                   const gchar *group, gboolean *out, GError **error)
{
  /* One row, as `sluice worker`'s table has it. */
  static const CliSetting events = {.option = "events",
                                    .env = "SLUICE_EVENTS",
                                    .key = "events",
                                    .kind = CLI_SETTING_FLAG};
  gboolean flags[1] = {flag};
  gchar *none[1] = {NULL};
  gchar **no_lists[1] = {NULL};
  CliSettingArgs args = {.rows = &events,
                         .n_rows = 1,
                         .text = none,
                         .lists = no_lists,
                         .flags = flags};
  g_auto(CliSettingValue) value = {0};

  *out = FALSE;
  if (!cli_setting_get(&args, 0, settings, group, &value, error))
    return FALSE;
  *out = value.given && value.on;
  return TRUE;
}

gboolean
cli_keyfile_check_keys(const CliSettings *settings, const gchar *group,
                       const gchar *const *known, GError **error)
{
  g_auto(GStrv) keys = NULL;

  if (settings->keyfile == NULL ||
      !g_key_file_has_group(settings->keyfile, group))
    return TRUE;
  keys = g_key_file_get_keys(settings->keyfile, group, NULL, NULL);
  for (guint i = 0; keys != NULL && keys[i] != NULL; i++)
    if (!g_strv_contains(known, keys[i])) {
      g_autofree gchar *list = g_strjoinv(", ", (gchar **)known);
      /* The key is the file's: quoted for a terminal. */
      g_autofree gchar *path = cli_terminal_text(settings->config_path, -1);
      g_autofree gchar *key = cli_terminal_text(keys[i], -1);
      return cli_usage_error(error,
                             "%s: unknown key “%s” in group [%s]; the keys "
                             "of [%s] are: %s",
                             path, key, group, group, list);
    }
  return TRUE;
}

/* GLib's key file reader takes \s \n \t \r and \\ in values, and warns
 * (from inside g_key_file_get_string, whatever the caller does) about a
 * value that ends in a lone backslash after another bad escape. So every
 * value of the file is checked once, when it is loaded, and a bad one is
 * the usage error it deserves, naming its key. */
static gboolean
check_escapes(GKeyFile *keyfile, const gchar *path, GError **error)
{
  g_auto(GStrv) groups = g_key_file_get_groups(keyfile, NULL);

  for (guint g = 0; groups != NULL && groups[g] != NULL; g++) {
    g_auto(GStrv) keys = g_key_file_get_keys(keyfile, groups[g], NULL, NULL);

    for (guint k = 0; keys != NULL && keys[k] != NULL; k++) {
      g_autofree gchar *raw =
          g_key_file_get_value(keyfile, groups[g], keys[k], NULL);

      for (const gchar *p = raw; p != NULL && *p != '\0'; p++) {
        if (*p != '\\')
          continue;
        if (p[1] == '\0' || strchr("sntr\\", p[1]) == NULL) {
          g_autofree gchar *shown_path = cli_terminal_text(path, -1);
          g_autofree gchar *group = cli_terminal_text(groups[g], -1);
          g_autofree gchar *key = cli_terminal_text(keys[k], -1);
          return cli_usage_error(error,
                                 "%s: the value of %s in [%s] has a backslash "
                                 "that starts no escape (\\s \\n \\t \\r "
                                 "\\\\): write a backslash as \\\\",
                                 shown_path, key, group);
        }
        p++;
      }
    }
  }
  return TRUE;
}

/* The password: the first line of @path, without its line break. */
/* Is @path inside @dir? Both made absolute and canonical first, so that
 * "../" cannot climb out of the credentials directory. */
static gboolean
path_is_under(const gchar *path, const gchar *dir)
{
  g_autofree gchar *real_path = realpath(path, NULL);
  g_autofree gchar *real_dir = realpath(dir, NULL);
  gsize n;

  if (real_path == NULL || real_dir == NULL)
    return FALSE;
  n = strlen(real_dir);
  return strncmp(real_path, real_dir, n) == 0 &&
         (real_path[n] == '/' || real_path[n] == '\0');
}

/* Does @url carry a secret: a password in its user information
 * (scheme://user:password@host) or a password parameter (the sentinels')? */
static gboolean
url_holds_password(const gchar *url)
{
  const gchar *rest = strstr(url, "://");
  const gchar *query = strchr(url, '?');
  gsize authority;

  if (rest == NULL)
    return FALSE;
  rest += 3;
  authority = strcspn(rest, "/?#");
  for (gsize i = 0; i < authority; i++)
    if (rest[i] == '@')
      return memchr(rest, ':', i) != NULL;
  return query != NULL && strstr(query, "password=") != NULL;
}

gboolean
cli_check_private_file(const gchar *path, const gchar *what,
                       const gchar *source, GError **error)
{
  const gchar *credentials = g_getenv("CREDENTIALS_DIRECTORY");
  GStatBuf st;

  if (g_stat(path, &st) != 0)
    return TRUE; /* the read that follows says why it cannot be opened */
  if ((st.st_mode & 0077) == 0)
    return TRUE;
  if (credentials != NULL && credentials[0] != '\0' &&
      path_is_under(path, credentials))
    return TRUE;
  {
    g_autofree gchar *shown = cli_terminal_text(path, -1);
    g_autofree gchar *from = cli_terminal_text(source, -1);

    return cli_usage_error(
        error,
        "%s %s (from %s) can be read by other users (mode %04o): a secret "
        "must be readable by its owner only; run: chmod 600 %s (under "
        "systemd, hand it over with LoadCredential=: see docs/operations.md)",
        what, shown, from, (unsigned)(st.st_mode & 07777), shown);
  }
}

static gchar *
read_password(const gchar *path, const gchar *source, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autofree gchar *text = NULL;
  gsize len = 0;
  gchar *end;

  if (!cli_check_private_file(path, "the password file", source, error))
    return NULL;
  if (!g_file_get_contents(path, &text, &len, &local)) {
    g_autofree gchar *why = cli_terminal_text(local->message, -1);
    g_autofree gchar *from = cli_terminal_text(source, -1);
    cli_usage_error(error, "cannot read the password file (from %s): %s", from,
                    why);
    return NULL;
  }
  end = memchr(text, '\n', len);
  if (end != NULL)
    len = (gsize)(end - text);
  if (len > 0 && text[len - 1] == '\r')
    len--;
  if (len == 0 || memchr(text, '\0', len) != NULL) {
    g_autofree gchar *shown = cli_terminal_text(path, -1);
    g_autofree gchar *from = cli_terminal_text(source, -1);
    cli_usage_error(error,
                    "the password file %s (from %s) %s: put the password on "
                    "its first line",
                    shown, from,
                    len == 0 ? "has an empty first line" : "holds a NUL byte");
    memset(text, 0, strlen(text));
    return NULL;
  }
  {
    gchar *password = g_strndup(text, len);
    memset(text, 0, len);
    return password;
  }
}

/* @url with @password as its password: redis://[user]:<escaped>@rest. The
 * URL must not carry one already. */
static gchar *
url_with_password(const gchar *url, const gchar *password, GError **error)
{
  g_autofree gchar *escaped = NULL;
  const gchar *rest, *at, *scheme;
  g_autofree gchar *user = NULL;

  if (g_ascii_strncasecmp(url, "redis://", 8) == 0) {
    scheme = "redis://";
  } else if (g_ascii_strncasecmp(url, "redis+sentinel://", 17) == 0) {
    /* The master's password: the sentinels' goes in the URL's query. */
    scheme = "redis+sentinel://";
  } else if (g_ascii_strncasecmp(url, "redis+cluster://", 16) == 0) {
    scheme = "redis+cluster://";
  } else if (g_ascii_strncasecmp(url, "rediss://", 9) == 0) {
    scheme = "rediss://"; /* TLS, where managed services want a password */
  } else if (g_ascii_strncasecmp(url, "rediss+sentinel://", 18) == 0) {
    scheme = "rediss+sentinel://";
  } else if (g_ascii_strncasecmp(url, "rediss+cluster://", 17) == 0) {
    scheme = "rediss+cluster://";
  } else {
    cli_usage_error(error, "a password file goes with a redis://, "
                           "redis+sentinel:// or redis+cluster:// URL or "
                           "their rediss forms (a unix:// socket carries no "
                           "credentials: protect it by its file permissions)");
    return NULL;
  }
  rest = url + strlen(scheme);
  /* The same rule as the broker's: the userinfo ends at the last '@'. */
  at = strrchr(rest, '@');
  if (at != NULL) {
    if (memchr(rest, ':', (gsize)(at - rest)) != NULL) {
      cli_usage_error(error, "the URL has a password already and a password "
                             "file was given: give the password in one place "
                             "only");
      return NULL;
    }
    user = g_strndup(rest, (gsize)(at - rest));
    rest = at + 1;
  }
  escaped = g_uri_escape_string(password, NULL, FALSE);
  return g_strdup_printf("%s%s:%s@%s", scheme, user != NULL ? user : "",
                         escaped, rest);
}

/* The connection's setting @i into @out: @fallback, from "the default",
 * when none is given. */
static gboolean
conn(const CliCommon *common, const CliSettings *settings, gsize i,
     const gchar *fallback, CliSettingValue *out, GError **error)
{
  /* A zero-filled CliCommon is an empty command line: the rows are still
   * the table's. */
  const CliSettingArgs empty = {.rows = connection, .n_rows = N_CONN};
  const CliSettingArgs *args =
      common->connection.rows != NULL ? &common->connection : &empty;

  if (!cli_setting_get(args, i, settings, GROUP_CONNECTION, out, error))
    return FALSE;
  if (!out->given) {
    out->text = fallback;
    out->what = g_strdup("the default");
  }
  return TRUE;
}

/* Is @url one of Redis's TLS forms? */
static gboolean
url_is_tls(const gchar *url)
{
  return g_ascii_strncasecmp(url, "rediss://", 9) == 0 ||
         g_ascii_strncasecmp(url, "rediss+sentinel://", 18) == 0 ||
         g_ascii_strncasecmp(url, "rediss+cluster://", 17) == 0;
}

/* The query of @url from its '?', or NULL: the first '?' after the user
 * information, which ends at the last '@' (the broker's rule: a password
 * may hold '?'). */
static const gchar *
url_query(const gchar *url)
{
  const gchar *rest = strstr(url, "://");
  const gchar *at;

  if (rest == NULL)
    return NULL;
  at = strrchr(rest + 3, '@');
  return strchr(at != NULL ? at + 1 : rest + 3, '?');
}

/* Does the query of @url name the parameter @name? */
static gboolean
url_query_has(const gchar *url, const gchar *name)
{
  const gchar *query = url_query(url);
  g_auto(GStrv) pieces = NULL;
  gsize n = strlen(name);

  if (query == NULL)
    return FALSE;
  pieces = g_strsplit(query + 1, "&", -1);
  for (guint i = 0; pieces[i] != NULL; i++)
    if (strncmp(pieces[i], name, n) == 0 &&
        (pieces[i][n] == '=' || pieces[i][n] == '\0'))
      return TRUE;
  return FALSE;
}

/* The Redis TLS settings (--redis-tls-ca and the rest) put into the query
 * of @settings' URL as the tls_* parameters they stand for: the broker's
 * URL parser checks their values then, as it checks the URL's own, so
 * there is one set of rules. They go with a rediss URL only. */
static gboolean
add_redis_tls(const CliCommon *common, CliSettings *settings,
              const CliSettingValue *url, GError **error)
{
  g_autoptr(GString) with = NULL;

  for (gsize i = CONN_REDIS_TLS_CA; i <= CONN_REDIS_TLS_INSECURE; i++) {
    g_auto(CliSettingValue) v = {0};
    g_autofree gchar *what = NULL;
    g_autofree gchar *escaped = NULL;
    const gchar *value;

    if (!conn(common, settings, i, NULL, &v, error))
      return FALSE;
    if (!v.given)
      continue;
    what = cli_terminal_text(v.what, -1);
    if (!url_is_tls(settings->url)) {
      g_autofree gchar *from = cli_terminal_text(url->what, -1);
      return cli_usage_error(
          error,
          "%s is a setting of TLS to Redis, and the URL (from %s) is not "
          "one: write rediss://, rediss+sentinel:// or rediss+cluster://, "
          "or leave %s out",
          what, from, what);
    }
    if (connection[i].kind == CLI_SETTING_FLAG)
      value = v.on ? "1" : "0";
    else if (v.text[0] == '\0')
      return cli_usage_error(error, "%s is empty: give %s or leave it out",
                             what, connection[i].arg);
    else
      value = v.text;
    if (url_query_has(settings->url, redis_tls_params[i])) {
      g_autofree gchar *from = cli_terminal_text(url->what, -1);
      return cli_usage_error(error,
                             "%s and the URL's %s (from %s) say the same "
                             "thing: give it in one place",
                             what, redis_tls_params[i], from);
    }
    if (with == NULL)
      with = g_string_new(settings->url);
    /* '@' escaped too: the user information ends at the URL's last. */
    escaped = g_uri_escape_string(value, "/:", FALSE);
    g_string_append_printf(with, "%c%s=%s",
                           url_query(with->str) != NULL ? '&' : '?',
                           redis_tls_params[i], escaped);
  }
  if (with != NULL) {
    g_free(settings->url);
    settings->url = g_string_free(g_steal_pointer(&with), FALSE);
  }
  return TRUE;
}

gboolean
cli_settings_load(const CliCommon *common, CliSettings *out, GError **error)
{
  g_auto(CliSettingValue) config = {0};
  g_auto(CliSettingValue) url = {0};
  g_auto(CliSettingValue) password_file = {0};
  g_auto(CliSettingValue) ns = {0};
  g_auto(CliSettingValue) mode = {0};
  g_auto(CliSettingValue) replicas = {0};
  g_auto(CliSettingValue) keyring = {0};

  memset(out, 0, sizeof *out);
  out->read_only = common->read_only;
  /* The file first: the other settings may come from it. */
  if (!conn(common, NULL, CONN_CONFIG, NULL, &config, error))
    return FALSE;
  if (config.text != NULL) {
    g_autoptr(GError) local = NULL;
    g_autofree const gchar **keys = cli_setting_keys(connection, N_CONN);

    out->config_path = g_strdup(config.text);
    out->keyfile = g_key_file_new();
    if (!g_key_file_load_from_file(out->keyfile, config.text, G_KEY_FILE_NONE,
                                   &local)) {
      /* GLib quotes the line it could not read. */
      g_autofree gchar *shown = cli_terminal_text(config.text, -1);
      g_autofree gchar *why = cli_terminal_text(local->message, -1);
      cli_usage_error(error, "cannot read the configuration file %s: %s", shown,
                      why);
      cli_settings_clear(out);
      return FALSE;
    }
    if (!check_escapes(out->keyfile, config.text, error) ||
        !cli_keyfile_check_keys(out, GROUP_CONNECTION, keys, error)) {
      cli_settings_clear(out);
      return FALSE;
    }
  }

  if (!conn(common, out, CONN_URL, NULL, &url, error) ||
      !conn(common, out, CONN_PASSWORD_FILE, NULL, &password_file, error) ||
      !conn(common, out, CONN_NAMESPACE, SLUICE_REDIS_DEFAULT_NAMESPACE, &ns,
            error) ||
      !conn(common, out, CONN_MODE, "reliable", &mode, error) ||
      !conn(common, out, CONN_MIN_REPLICAS_ACK, NULL, &replicas, error) ||
      !conn(common, out, CONN_KEYRING, NULL, &keyring, error)) {
    cli_settings_clear(out);
    return FALSE;
  }
  if (keyring.text != NULL) {
    g_autoptr(GError) local = NULL;

    if (!cli_check_private_file(keyring.text, "the keyring", keyring.what,
                                error)) {
      cli_settings_clear(out);
      return FALSE;
    }
    out->keyring = sluice_keyring_load(keyring.text, &local);
    if (out->keyring == NULL) {
      g_autofree gchar *why = cli_terminal_text(local->message, -1);
      g_autofree gchar *from = cli_terminal_text(keyring.what, -1);

      cli_usage_error(error, "%s (from %s)", why, from);
      cli_settings_clear(out);
      return FALSE;
    }
  }
  /* A key file may be world-readable, as /etc files are, until it holds
   * the password itself. */
  if (url.text != NULL && out->config_path != NULL && url.what != NULL &&
      g_str_has_prefix(url.what, out->config_path) &&
      url_holds_password(url.text) &&
      !cli_check_private_file(out->config_path,
                              "the configuration file, whose url holds a "
                              "password,",
                              "--config", error)) {
    cli_settings_clear(out);
    return FALSE;
  }
  if (url.text == NULL) {
    g_autofree gchar *path = cli_default_sqlite_path();
    g_autofree gchar *escaped =
        g_uri_escape_string(path, G_URI_RESERVED_CHARS_ALLOWED_IN_PATH, FALSE);

    out->url = g_strconcat("sqlite://", escaped, NULL);
    out->url_is_default = TRUE;
  } else {
    out->url = g_strdup(url.text);
  }
  if (password_file.text != NULL) {
    g_autofree gchar *password =
        read_password(password_file.text, password_file.what, error);
    gchar *with =
        password != NULL ? url_with_password(out->url, password, error) : NULL;

    if (password != NULL)
      memset(password, 0, strlen(password));
    if (with == NULL) {
      cli_settings_clear(out);
      return FALSE;
    }
    g_free(out->url);
    out->url = with;
  }
  if (!add_redis_tls(common, out, &url, error)) {
    cli_settings_clear(out);
    return FALSE;
  }
  out->namespace_ = g_strdup(ns.text);
  if (g_strcmp0(mode.text, "fast") == 0) {
    out->mode = CLI_MODE_FAST;
  } else if (g_strcmp0(mode.text, "reliable") == 0) {
    out->mode = CLI_MODE_RELIABLE;
  } else if (g_strcmp0(mode.text, "memory") == 0) {
    out->mode = CLI_MODE_MEMORY;
  } else {
    g_autofree gchar *shown = cli_terminal_text(mode.text, -1);
    g_autofree gchar *from = cli_terminal_text(mode.what, -1);
    cli_usage_error(error,
                    "unknown mode “%s” (from %s): use fast or reliable, the "
                    "same as the workers of the namespace",
                    shown, from);
    cli_settings_clear(out);
    return FALSE;
  }
  if (sluice_url_is_sqlite(out->url) && out->mode != CLI_MODE_MEMORY)
    out->mode = CLI_MODE_SQLITE;
  {
    guint64 n = 0;

    if (replicas.text != NULL &&
        !g_ascii_string_to_unsigned(replicas.text, 10, 0, 100, &n, NULL)) {
      g_autofree gchar *shown = cli_terminal_text(replicas.text, -1);
      g_autofree gchar *from = cli_terminal_text(replicas.what, -1);
      cli_usage_error(error,
                      "min_replicas_ack “%s” (from %s) is not a number of "
                      "replicas from 0 to 100",
                      shown, from);
      cli_settings_clear(out);
      return FALSE;
    }
    if (n > 0 && out->mode == CLI_MODE_SQLITE) {
      g_autofree gchar *from = cli_terminal_text(replicas.what, -1);
      cli_usage_error(error,
                      "min_replicas_ack (from %s) waits for Redis replicas; "
                      "a SQLite database has none: drop it or use a Redis "
                      "URL",
                      from);
      cli_settings_clear(out);
      return FALSE;
    }
    out->min_replicas_ack = (guint)n;
  }
  return TRUE;
}

gchar *
cli_default_sqlite_path(void)
{
  const gchar *state = g_getenv("STATE_DIRECTORY");

  /* systemd's StateDirectory=: a colon-separated list, ours first. */
  if (state != NULL && g_path_is_absolute(state)) {
    g_auto(GStrv) dirs = g_strsplit(state, ":", 2);
    return g_build_filename(dirs[0], "sluice.db", NULL);
  }
  state = g_getenv("XDG_STATE_HOME");
  if (state != NULL && g_path_is_absolute(state))
    return g_build_filename(state, "sluice", "sluice.db", NULL);
  return g_build_filename(g_get_home_dir(), ".local", "state", "sluice",
                          "sluice.db", NULL);
}

/* What the command does before it opens a SQLite database: the default
 * database's directory is made on first use, a database this user may
 * read but not write is opened read-only by a command that only reads
 * (@read_only) and refused otherwise, and the first log line names the
 * file, so that a user who gave no URL knows where their tasks are. */
static gboolean
prepare_sqlite(const CliSettings *settings, gboolean *read_only, GError **error)
{
  SluiceSqliteOptions options;
  g_autofree gchar *path = NULL;
  g_autofree gchar *shown = NULL;

  sluice_sqlite_options_init(&options);
  if (!sluice_sqlite_url_parse(settings->url, &options, &path, error))
    return FALSE;
  shown = cli_terminal_text(path, -1);
  /* Root writes any file, so it never gets here. */
  if (g_file_test(path, G_FILE_TEST_EXISTS) && g_access(path, W_OK) != 0 &&
      (errno == EACCES || errno == EROFS || errno == EPERM)) {
    if (!settings->read_only) {
      g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                  "the SQLite database %s is read-only for this user: give "
                  "this user write permission on it and on its directory, "
                  "or run this command as its owner; the commands that only "
                  "read (stats, ls, inspect, result, events, dlq list, dlq "
                  "show, workflow show, periodic ls, exporter) work without "
                  "it",
                  shown);
      return FALSE;
    }
    *read_only = TRUE;
  }
  if (settings->url_is_default) {
    g_autofree gchar *dir = g_path_get_dirname(path);

    if (g_mkdir_with_parents(dir, 0700) != 0) {
      int saved = errno;
      g_autofree gchar *shown_dir = cli_terminal_text(dir, -1);
      g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                  "cannot make the directory of the default database %s: %s; "
                  "give one with --url sqlite:///PATH or a Redis URL",
                  shown_dir, g_strerror(saved));
      return FALSE;
    }
  }
  g_info("using the SQLite database %s%s", shown,
         settings->url_is_default
             ? " (the default: no --url, SLUICE_URL or url in a "
               "configuration file)"
             : "");
  return TRUE;
}

SluiceBroker *
cli_connect(const CliSettings *settings, guint dead_letter_max,
            gboolean check_now, GError **error)
{
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(GError) local = NULL;
  SluiceBrokerUrlOptions options;

  if (settings->mode == CLI_MODE_MEMORY ||
      g_ascii_strncasecmp(settings->url, "memory:", 7) == 0) {
    cli_usage_error(error,
                    "%s is refused: the memory broker keeps its messages "
                    "inside one process, so `%s` could not share them with "
                    "workers or other commands. Use a SQLite database or a "
                    "Redis server (--url), or `sluice run` to run a task in "
                    "this process",
                    settings->mode == CLI_MODE_MEMORY ? "the memory mode"
                                                      : "a memory: URL",
                    g_get_prgname());
    return NULL;
  }

  /* The library opens what the URL names (sluice_broker_new_for_url()),
   * as it would for any program; the command adds its settings. */
  sluice_broker_url_options_init(&options);
  options.ns = settings->namespace_;
  options.mode = settings->mode == CLI_MODE_FAST ? SLUICE_REDIS_FAST
                                                 : SLUICE_REDIS_RELIABLE;
  options.dead_letter_max = dead_letter_max;
  options.min_replicas_ack = settings->min_replicas_ack;
  /* A namespace of the other mode is refused with a message for a
   * command-line user, not a C programmer. */
  options.mode_setting = "--mode, SLUICE_MODE or mode= in the [connection] "
                         "group of the configuration file";
  if (settings->mode == CLI_MODE_SQLITE &&
      !prepare_sqlite(settings, &options.read_only, error))
    return NULL;
  broker = sluice_broker_new_for_url(settings->url, &options, NULL, &local);
  if (broker == NULL) {
    if (settings->mode == CLI_MODE_RELIABLE &&
        g_error_matches(local, SLUICE_BROKER_ERROR,
                        SLUICE_BROKER_ERROR_UNSUPPORTED))
      g_set_error_literal(
          error, CLI_ERROR, CLI_ERROR_FAILED,
          "the reliable mode (Redis streams) is not available in this build "
          "of Sluice yet: use --mode fast (or SLUICE_MODE=fast, or mode=fast "
          "in the [connection] group of the configuration file)");
    else
      g_propagate_error(error, g_steal_pointer(&local));
    return NULL;
  }
  /* Fail now, with the URL (password hidden) in the message, rather than
   * on the first real operation. The warnings the first connection logs
   * (an eviction policy that loses messages) are for the user too. A
   * SQLite database was opened and checked above. */
  if (check_now && settings->mode != CLI_MODE_SQLITE &&
      !sluice_redis_broker_ping(broker, error))
    return NULL;
  return g_steal_pointer(&broker);
}

SluiceClient *
cli_client_new(SluiceBroker *broker, const CliSettings *settings,
               GError **error)
{
  SluiceClientOptions options;

  sluice_client_options_init(&options);
  options.track_state = TRUE;
  options.keyring = settings != NULL ? settings->keyring : NULL;
  return sluice_client_new(broker, &options, error);
}

SluiceClient *
cli_open_client(const CliCommon *common, CliSettings *out_settings,
                GError **error)
{
  CliSettings settings = {0};
  g_autoptr(SluiceBroker) broker = NULL;
  SluiceClient *client = NULL;

  cli_log_init(CLI_LOG_TEXT, G_LOG_LEVEL_WARNING);
  if (cli_settings_load(common, &settings, error) &&
      (broker = cli_connect(&settings, 0, TRUE, error)) != NULL)
    client = cli_client_new(broker, &settings, error);
  if (client != NULL && out_settings != NULL)
    *out_settings = settings;
  else
    cli_settings_clear(&settings);
  return client;
}

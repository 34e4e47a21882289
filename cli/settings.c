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
#include <string.h>

#include "cli/cli.h"

#define GROUP_CONNECTION "connection"

static const gchar *const connection_keys[] = {
    "url", "mode", "namespace", "password_file", "min_replicas_ack", NULL};

void
cli_settings_clear(CliSettings *settings)
{
  g_clear_pointer(&settings->url, g_free);
  g_clear_pointer(&settings->namespace_, g_free);
  g_clear_pointer(&settings->keyfile, g_key_file_unref);
  g_clear_pointer(&settings->config_path, g_free);
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
  static const gchar *const yes[] = {"1", "true", "yes", "on", NULL};
  static const gchar *const no[] = {"0", "false", "no", "off", NULL};
  const gchar *env = g_getenv("SLUICE_EVENTS");
  g_autoptr(GError) local = NULL;

  *out = FALSE;
  if (flag) {
    *out = TRUE;
    return TRUE;
  }
  if (env != NULL && *env != '\0') {
    g_autofree gchar *lower = g_ascii_strdown(env, -1);

    if (g_strv_contains(yes, lower) || g_strv_contains(no, lower)) {
      *out = g_strv_contains(yes, lower);
      return TRUE;
    }
    {
      g_autofree gchar *shown = cli_terminal_text(env, -1);
      return cli_usage_error(error,
                             "SLUICE_EVENTS: “%s” is not true or false (1 "
                             "or 0, yes or no, on or off)",
                             shown);
    }
  }
  if (settings == NULL || settings->keyfile == NULL ||
      !g_key_file_has_key(settings->keyfile, group, "events", NULL))
    return TRUE;
  *out = g_key_file_get_boolean(settings->keyfile, group, "events", &local);
  if (local != NULL) {
    g_autofree gchar *path = cli_terminal_text(settings->config_path, -1);
    g_autofree gchar *why = cli_terminal_text(local->message, -1);
    return cli_usage_error(error, "%s: [%s] events: %s", path, group, why);
  }
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

/* Returns (transfer full) the first of: @flag (the option @option), the
 * environment variable @env, the key @key of [connection], @fallback; sets
 * @out_source (transfer full) to where it came from, for messages. */
static gchar *
pick(const gchar *flag, const gchar *option, const gchar *env,
     const CliSettings *settings, const gchar *key, const gchar *fallback,
     gchar **out_source)
{
  const gchar *value;

  if (flag != NULL) {
    *out_source = g_strdup(option);
    return g_strdup(flag);
  }
  value = g_getenv(env);
  if (value != NULL && *value != '\0') {
    *out_source = g_strdup(env);
    return g_strdup(value);
  }
  if (settings->keyfile != NULL) {
    gchar *from_file =
        g_key_file_get_string(settings->keyfile, GROUP_CONNECTION, key, NULL);
    if (from_file != NULL) {
      *out_source = g_strdup_printf("%s, [%s] %s", settings->config_path,
                                    GROUP_CONNECTION, key);
      return from_file;
    }
  }
  *out_source = g_strdup("the default");
  return g_strdup(fallback);
}

/* The password: the first line of @path, without its line break. */
static gchar *
read_password(const gchar *path, const gchar *source, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autofree gchar *text = NULL;
  gsize len = 0;
  gchar *end;

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
  } else if (g_ascii_strncasecmp(url, "rediss://", 9) == 0) {
    scheme = "rediss://"; /* TLS, where managed services want a password */
  } else if (g_ascii_strncasecmp(url, "rediss+sentinel://", 18) == 0) {
    scheme = "rediss+sentinel://";
  } else {
    cli_usage_error(error, "a password file goes with a redis://, "
                           "redis+sentinel:// or rediss:// URL (a unix:// "
                           "socket carries no credentials: protect it by its "
                           "file permissions)");
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

gboolean
cli_settings_load(const CliCommon *common, CliSettings *out, GError **error)
{
  const gchar *config = common->config;
  g_autofree gchar *mode = NULL;
  g_autofree gchar *source = NULL;

  memset(out, 0, sizeof *out);
  out->read_only = common->read_only;
  if (config == NULL) {
    config = g_getenv("SLUICE_CONFIG");
    if (config != NULL && *config == '\0')
      config = NULL;
  }
  if (config != NULL) {
    g_autoptr(GError) local = NULL;

    out->config_path = g_strdup(config);
    out->keyfile = g_key_file_new();
    if (!g_key_file_load_from_file(out->keyfile, config, G_KEY_FILE_NONE,
                                   &local)) {
      /* GLib quotes the line it could not read. */
      g_autofree gchar *shown = cli_terminal_text(config, -1);
      g_autofree gchar *why = cli_terminal_text(local->message, -1);
      cli_usage_error(error, "cannot read the configuration file %s: %s", shown,
                      why);
      cli_settings_clear(out);
      return FALSE;
    }
    if (!check_escapes(out->keyfile, config, error) ||
        !cli_keyfile_check_keys(out, GROUP_CONNECTION, connection_keys,
                                error)) {
      cli_settings_clear(out);
      return FALSE;
    }
  }

  out->url =
      pick(common->url, "--url", "SLUICE_URL", out, "url", NULL, &source);
  g_clear_pointer(&source, g_free);
  if (out->url == NULL) {
    g_autofree gchar *path = cli_default_sqlite_path();
    g_autofree gchar *escaped =
        g_uri_escape_string(path, G_URI_RESERVED_CHARS_ALLOWED_IN_PATH, FALSE);

    out->url = g_strconcat("sqlite://", escaped, NULL);
    out->url_is_default = TRUE;
  }
  {
    g_autofree gchar *path =
        pick(common->password_file, "--password-file", "SLUICE_PASSWORD_FILE",
             out, "password_file", NULL, &source);

    if (path != NULL) {
      g_autofree gchar *password = read_password(path, source, error);
      gchar *url = password != NULL
                       ? url_with_password(out->url, password, error)
                       : NULL;

      if (password != NULL)
        memset(password, 0, strlen(password));
      if (url == NULL) {
        cli_settings_clear(out);
        return FALSE;
      }
      g_free(out->url);
      out->url = url;
    }
    g_clear_pointer(&source, g_free);
  }
  out->namespace_ =
      pick(common->namespace_, "--namespace", "SLUICE_NAMESPACE", out,
           "namespace", SLUICE_REDIS_DEFAULT_NAMESPACE, &source);
  g_clear_pointer(&source, g_free);
  mode = pick(common->mode, "--mode", "SLUICE_MODE", out, "mode", "reliable",
              &source);
  if (g_strcmp0(mode, "fast") == 0) {
    out->mode = CLI_MODE_FAST;
  } else if (g_strcmp0(mode, "reliable") == 0) {
    out->mode = CLI_MODE_RELIABLE;
  } else if (g_strcmp0(mode, "memory") == 0) {
    out->mode = CLI_MODE_MEMORY;
  } else {
    g_autofree gchar *shown = cli_terminal_text(mode, -1);
    g_autofree gchar *from = cli_terminal_text(source, -1);
    cli_usage_error(error,
                    "unknown mode “%s” (from %s): use fast or reliable, the "
                    "same as the workers of the namespace",
                    shown, from);
    cli_settings_clear(out);
    return FALSE;
  }
  if (sluice_url_is_sqlite(out->url) && out->mode != CLI_MODE_MEMORY)
    out->mode = CLI_MODE_SQLITE;
  g_clear_pointer(&source, g_free);
  {
    g_autofree gchar *text =
        pick(common->min_replicas_ack, "--min-replicas-ack",
             "SLUICE_MIN_REPLICAS_ACK", out, "min_replicas_ack", NULL, &source);
    guint64 n = 0;

    if (text != NULL &&
        !g_ascii_string_to_unsigned(text, 10, 0, 100, &n, NULL)) {
      g_autofree gchar *shown = cli_terminal_text(text, -1);
      g_autofree gchar *from = cli_terminal_text(source, -1);
      cli_usage_error(error,
                      "min_replicas_ack “%s” (from %s) is not a number of "
                      "replicas from 0 to 100",
                      shown, from);
      cli_settings_clear(out);
      return FALSE;
    }
    if (n > 0 && out->mode == CLI_MODE_SQLITE) {
      g_autofree gchar *from = cli_terminal_text(source, -1);
      cli_usage_error(error,
                      "min_replicas_ack (from %s) waits for Redis replicas; "
                      "a SQLite database has none: drop it or use a Redis "
                      "URL",
                      from);
      cli_settings_clear(out);
      return FALSE;
    }
    out->min_replicas_ack = (guint)n;
    g_clear_pointer(&source, g_free);
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

/* The SQLite broker of @settings: the default database's directory is
 * made on first use, and the first log line names the file, so that a
 * user who gave no URL knows where their tasks are. */
static SluiceBroker *
connect_sqlite(const CliSettings *settings, guint dead_letter_max,
               GError **error)
{
  SluiceSqliteOptions options;
  g_autofree gchar *path = NULL;

  sluice_sqlite_options_init(&options);
  if (!sluice_sqlite_url_parse(settings->url, &options, &path, error))
    return NULL;
  options.dead_letter_max = dead_letter_max;
  /* A database this user may read but not write (an operator looking at a
   * service's queues): a command that only reads opens it read-only, and
   * one that writes is refused before SQLite says less. Root writes any
   * file, so it never gets here. */
  if (g_file_test(path, G_FILE_TEST_EXISTS) && g_access(path, W_OK) != 0 &&
      (errno == EACCES || errno == EROFS || errno == EPERM)) {
    g_autofree gchar *shown = cli_terminal_text(path, -1);

    if (!settings->read_only) {
      g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                  "the SQLite database %s is read-only for this user: give "
                  "this user write permission on it and on its directory, "
                  "or run this command as its owner; the commands that only "
                  "read (stats, ls, inspect, result, events, dlq list, dlq "
                  "show, workflow show, periodic ls, exporter) work without "
                  "it",
                  shown);
      return NULL;
    }
    options.read_only = TRUE;
  }
  if (settings->url_is_default) {
    g_autofree gchar *dir = g_path_get_dirname(path);

    if (g_mkdir_with_parents(dir, 0700) != 0) {
      int saved = errno;
      g_autofree gchar *shown = cli_terminal_text(dir, -1);
      g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                  "cannot make the directory of the default database %s: %s; "
                  "give one with --url sqlite:///PATH or a Redis URL",
                  shown, g_strerror(saved));
      return NULL;
    }
  }
  {
    g_autofree gchar *shown = cli_terminal_text(path, -1);
    g_info("using the SQLite database %s%s", shown,
           settings->url_is_default
               ? " (the default: no --url, SLUICE_URL or url in a "
                 "configuration file)"
               : "");
  }
  return sluice_sqlite_broker_new(&options, NULL, error);
}

SluiceBroker *
cli_connect(const CliSettings *settings, guint dead_letter_max,
            gboolean check_now, GError **error)
{
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(GError) local = NULL;
  SluiceRedisOptions options;

  if (settings->mode == CLI_MODE_MEMORY) {
    cli_usage_error(error,
                    "the memory mode is refused: the memory broker keeps its "
                    "messages inside one process, so `%s` could not share "
                    "them with workers or other commands. Use --mode fast or "
                    "reliable with a Redis server, or `sluice run` to run a "
                    "task in this process",
                    g_get_prgname());
    return NULL;
  }

  if (settings->mode == CLI_MODE_SQLITE)
    return connect_sqlite(settings, dead_letter_max, error);

  sluice_redis_options_init(&options);
  options.url = settings->url;
  options.ns = settings->namespace_;
  options.mode = settings->mode == CLI_MODE_FAST ? SLUICE_REDIS_FAST
                                                 : SLUICE_REDIS_RELIABLE;
  options.dead_letter_max = dead_letter_max;
  options.min_replicas_ack = settings->min_replicas_ack;
  /* A namespace of the other mode is refused with a message for a
   * command-line user, not a C programmer. */
  options.mode_setting = "--mode, SLUICE_MODE or mode= in the [connection] "
                         "group of the configuration file";
  broker = sluice_redis_broker_new(&options, NULL, &local);
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
   * (an eviction policy that loses messages) are for the user too. */
  if (check_now && !sluice_redis_broker_ping(broker, error))
    return NULL;
  return g_steal_pointer(&broker);
}

SluiceClient *
cli_client_new(SluiceBroker *broker, GError **error)
{
  SluiceClientOptions options;

  sluice_client_options_init(&options);
  options.track_state = TRUE;
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
    client = cli_client_new(broker, error);
  if (client != NULL && out_settings != NULL)
    *out_settings = settings;
  else
    cli_settings_clear(&settings);
  return client;
}

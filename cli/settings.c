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
 *   4. the defaults: redis://127.0.0.1:6379/0, reliable, "sluice".
 *
 * Messages about a bad value say where it came from, because "mode “fsat”
 * is unknown" is much easier to fix when it adds "(from SLUICE_MODE)".
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

#define GROUP_CONNECTION "connection"

static const gchar *const connection_keys[] = {"url", "mode", "namespace",
                                               NULL};

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
  default:
    return "?";
  }
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
      return cli_usage_error(error,
                             "%s: unknown key “%s” in group [%s]; the keys "
                             "of [%s] are: %s",
                             settings->config_path, keys[i], group, group,
                             list);
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

gboolean
cli_settings_load(const CliCommon *common, CliSettings *out, GError **error)
{
  const gchar *config = common->config;
  g_autofree gchar *mode = NULL;
  g_autofree gchar *source = NULL;

  memset(out, 0, sizeof *out);
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
      cli_usage_error(error, "cannot read the configuration file %s: %s",
                      config, local->message);
      cli_settings_clear(out);
      return FALSE;
    }
    if (!cli_keyfile_check_keys(out, GROUP_CONNECTION, connection_keys,
                                error)) {
      cli_settings_clear(out);
      return FALSE;
    }
  }

  out->url = pick(common->url, "--url", "SLUICE_URL", out, "url",
                  SLUICE_REDIS_DEFAULT_URL, &source);
  g_clear_pointer(&source, g_free);
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
    cli_usage_error(error,
                    "unknown mode “%s” (from %s): use fast or reliable, the "
                    "same as the workers of the namespace",
                    mode, source);
    cli_settings_clear(out);
    return FALSE;
  }
  return TRUE;
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

  sluice_redis_options_init(&options);
  options.url = settings->url;
  options.namespace_ = settings->namespace_;
  options.mode = settings->mode == CLI_MODE_FAST ? SLUICE_REDIS_FAST
                                                 : SLUICE_REDIS_RELIABLE;
  options.dead_letter_max = dead_letter_max;
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

/* cmd-web.c - `sluice web`: a dashboard of the namespace in a browser.
 *
 * The pages and their JSON API are web-api.c's; this file reads the
 * options (and the [web] group of the key file), the token, connects,
 * listens, and samples the broker's stats every --sample-interval for the
 * processed/failed chart (web-rates.c), on the one main context the server
 * also runs on.
 *
 * Like the exporter it does not need the broker at start: pages say what
 * the broker answered (an outage is a 503 with the broker's message, which
 * never holds a password), and the chart has a gap until reads succeed
 * again.
 */
#include "config.h"

#include <glib-unix.h>
#include <glib/gstdio.h>
#include <string.h>

#include "cli/web.h"

#define GROUP_WEB "web"
#define DEFAULT_LISTEN "127.0.0.1:9466"
#define DEFAULT_SAMPLE_MS 10000
/* A token short enough to guess is no token. */
#define TOKEN_MIN_BYTES 16

/* What the options and [web] resolve to. */
typedef struct {
  GSocketAddress *listen;
  gboolean read_only;
  gint64 sample_interval_ms;
  CliHttpTls tls;
} WebSettings;

enum {
  WEB_LISTEN,
  WEB_TOKEN_FILE,
  WEB_READ_ONLY,
  WEB_SAMPLE_INTERVAL,
  WEB_TLS_CERT,
  WEB_TLS_KEY
};

/* `sluice web`'s settings: each an option and a key of [web] (settings.c
 * reads them; the token file by code, as it is read only without
 * --read-only). */
static const CliSetting web_settings[] = {
    [WEB_LISTEN] = {.option = "listen",
                    .key = "listen",
                    .kind = CLI_SETTING_TEXT,
                    .type = &cli_setting_listen,
                    .offset = G_STRUCT_OFFSET(WebSettings, listen),
                    .arg = "ADDR:PORT",
                    .help = "Serve the dashboard on ADDR:PORT (a bare port is "
                            "127.0.0.1)",
                    .default_text = DEFAULT_LISTEN},
    [WEB_TOKEN_FILE] = {.option = "token-file",
                        .key = "token-file",
                        .kind = CLI_SETTING_FILENAME,
                        .arg = "FILE",
                        .help = "Enable write actions (pause, replay, delete, "
                                "...) for requests that send the token on "
                                "this file's first line (X-Sluice-Token "
                                "header)"},
    [WEB_READ_ONLY] = {.option = "read-only",
                       .key = "read-only",
                       .kind = CLI_SETTING_FLAG,
                       .type = &cli_setting_boolean,
                       .offset = G_STRUCT_OFFSET(WebSettings, read_only),
                       .help = "Disable every write action, even with a token "
                               "file"},
    [WEB_SAMPLE_INTERVAL] = {.option = "sample-interval",
                             .key = "sample-interval",
                             .kind = CLI_SETTING_TEXT,
                             .type = &cli_setting_duration,
                             .offset = G_STRUCT_OFFSET(WebSettings,
                                                       sample_interval_ms),
                             .min = 1,
                             .arg = "DURATION",
                             .help = "Read the workers' counts this often for "
                                     "the processed/failed chart"},
    [WEB_TLS_CERT] = {.option = "tls-cert",
                      .key = "tls-cert",
                      .kind = CLI_SETTING_FILENAME,
                      .type = &cli_setting_sourced_path,
                      .offset = G_STRUCT_OFFSET(WebSettings, tls.cert),
                      .arg = "FILE",
                      .help = "Serve HTTPS with this certificate (PEM; needs "
                              "--tls-key)",
                      .default_text = "clear text HTTP"},
    [WEB_TLS_KEY] = {.option = "tls-key",
                     .key = "tls-key",
                     .kind = CLI_SETTING_FILENAME,
                     .type = &cli_setting_sourced_path,
                     .offset = G_STRUCT_OFFSET(WebSettings, tls.key),
                     .arg = "FILE",
                     .help = "The private key of --tls-cert (PEM, readable by "
                             "its owner only)"},
};

/* The token: the first line of @path, without its line break. */
static gchar *
read_token(const gchar *path, const gchar *what, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autofree gchar *text = NULL;
  gsize len = 0;
  gchar *end;

  if (!cli_check_private_file(path, "the token file", what, error))
    return NULL;
  if (!g_file_get_contents(path, &text, &len, &local)) {
    g_autofree gchar *why = cli_terminal_text(local->message, -1);
    cli_usage_error(error, "%s: cannot read the token file: %s", what, why);
    return NULL;
  }
  end = memchr(text, '\n', len);
  if (end != NULL)
    len = (gsize)(end - text);
  if (len > 0 && text[len - 1] == '\r')
    len--;
  if (len < TOKEN_MIN_BYTES || memchr(text, '\0', len) != NULL) {
    memset(text, 0, strlen(text));
    cli_usage_error(error,
                    "%s: the token file's first line must hold a token of at "
                    "least %d bytes (no NUL); make one with: head -c 32 "
                    "/dev/urandom | base64 > FILE; chmod 600 FILE",
                    what, TOKEN_MIN_BYTES);
    return NULL;
  }
  {
    gchar *token = g_strndup(text, len);
    memset(text, 0, strlen(text));
    return token;
  }
}

static gboolean
quit_on_signal(gpointer data)
{
  g_main_loop_quit(data);
  return G_SOURCE_CONTINUE;
}

typedef struct {
  Web *web;
  gboolean ok; /* the last read succeeded */
} Sampler;

static gboolean
sample(gpointer data)
{
  Sampler *s = data;
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats stats;

  if (!sluice_client_get_stats(s->web->client, NULL, &stats, &error)) {
    if (s->ok)
      g_warning("cannot read the broker's stats: %s; the chart has a gap "
                "until a read succeeds",
                error->message);
    s->ok = FALSE;
    return G_SOURCE_CONTINUE;
  }
  if (!s->ok)
    g_message("the broker can be read again");
  s->ok = TRUE;
  web_rates_sample(s->web->rates, &stats, g_get_real_time() / 1000);
  sluice_broker_stats_clear(&stats);
  return G_SOURCE_CONTINUE;
}

static int
serve(const CliSettings *settings, GSocketAddress *address,
      const CliHttpTls *tls, Web *web)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SoupServer) soup = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
  g_autofree gchar *url = NULL;
  Sampler sampler = {web, TRUE};
  guint term, interrupt, tick;

  broker = cli_connect(settings, 0, FALSE, &error);
  if (broker == NULL ||
      (web->client = cli_client_new(broker, settings, &error)) == NULL)
    return cli_report(error);
  soup = cli_http_listen(address, tls, NULL, &url, &error);
  if (soup == NULL)
    return cli_report(error);
  web_add_handlers(soup, web);
  web->started_at_ms = g_get_real_time() / 1000;
  sample(&sampler);
  tick = g_timeout_add((guint)web->sample_interval_ms, sample, &sampler);
  term = g_unix_signal_add(SIGTERM, quit_on_signal, loop);
  interrupt = g_unix_signal_add(SIGINT, quit_on_signal, loop);
  g_info("dashboard of namespace %s (%s mode) serving on %s/ (%s), sampling "
         "the broker every %" G_GINT64_FORMAT " ms",
         settings->namespace_, cli_mode_name(settings->mode), url,
         web->read_only       ? "read-only"
         : web->token != NULL ? "writes need the token"
                              : "read-only: no --token-file",
         web->sample_interval_ms);
  g_main_loop_run(loop);
  g_source_remove(tick);
  g_source_remove(term);
  g_source_remove(interrupt);
  soup_server_disconnect(soup);
  g_info("dashboard stops");
  return CLI_EXIT_OK;
}

int
cli_cmd_web(int argc, char **argv)
{
  CliCommon common = {0};
  CliSettings settings = {0};
  Web web = {0};
  CliSettingArgs args = {0};
  WebSettings set = {
      .sample_interval_ms = DEFAULT_SAMPLE_MS,
      .tls = {.cert_option = "tls-cert", .key_option = "tls-key"}};
  g_auto(CliSettingValue) token_file = {0};
  g_autofree const gchar **keys =
      cli_setting_keys(web_settings, G_N_ELEMENTS(web_settings));
  g_autofree GOptionEntry *entries = cli_setting_entries(
      &args, web_settings, G_N_ELEMENTS(web_settings), 0, &set);
  g_autoptr(GError) error = NULL;
  int status;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION, entries, "",
          "Serve a dashboard of the namespace: queues (depth, paused, "
          "pause/resume),\nprocessed and failed tasks per second over the "
          "last hour, scheduled,\nretrying, running and dead tasks, each "
          "task's record and message, dead\nletters (replay, delete) and "
          "workers. Without --token-file it only shows.\nSIGTERM or SIGINT "
          "stops it.",
          "Example:\n  sluice web --listen 127.0.0.1:9466 --token-file "
          "~/.config/sluice/web-token",
          &argc, &argv, &error) ||
      !cli_settings_load(&common, &settings, &error) ||
      !cli_keyfile_check_keys(&settings, GROUP_WEB, keys, &error)) {
    status = cli_report(error);
    goto out;
  }
  cli_log_init(CLI_LOG_TEXT, G_LOG_LEVEL_INFO);
  if (argc > 1) {
    cli_usage_error(&error, "unexpected argument “%s”", argv[1]);
    status = cli_report(error);
    goto out;
  }
  if (!cli_settings_apply(&args, 0, &settings, GROUP_WEB, &set, &error) ||
      (set.listen == NULL &&
       !cli_parse_listen("the default listen address", DEFAULT_LISTEN,
                         &set.listen, &error)) ||
      !cli_setting_get(&args, WEB_TOKEN_FILE, &settings, GROUP_WEB, &token_file,
                       &error) ||
      !cli_http_tls_load(&set.tls, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (token_file.text != NULL && !set.read_only &&
      (web.token = read_token(token_file.text, token_file.what, &error)) ==
          NULL) {
    status = cli_report(error);
    goto out;
  }
  web.settings = &settings;
  web.shown_url = web_shown_url(settings.url);
  web.read_only = set.read_only;
  /* A dashboard that only shows may run as a user who may only read. */
  settings.read_only = set.read_only || web.token == NULL;
  web.sample_interval_ms = set.sample_interval_ms;
  web.loopback = g_inet_address_get_is_loopback(
      g_inet_socket_address_get_address(G_INET_SOCKET_ADDRESS(set.listen)));
  web.https = cli_http_tls_enabled(&set.tls);
  web.rates = web_rates_new(set.sample_interval_ms);
  status = serve(&settings, set.listen, &set.tls, &web);
out:
  g_clear_pointer(&web.client, sluice_client_unref);
  g_clear_pointer(&web.rates, web_rates_free);
  if (web.token != NULL)
    memset(web.token, 0, strlen(web.token));
  g_free(web.token);
  g_free(web.shown_url);
  g_clear_object(&set.listen);
  cli_http_tls_clear(&set.tls);
  cli_setting_args_clear(&args);
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  return status;
}

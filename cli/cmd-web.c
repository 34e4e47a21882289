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

static const gchar *const web_keys[] = {"listen", "token-file", "read-only",
                                        "sample-interval", NULL};

/* The token: the first line of @path, without its line break. */
static gchar *
read_token(const gchar *path, const gchar *what, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autofree gchar *text = NULL;
  gsize len = 0;
  gchar *end;
  GStatBuf st;

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
  if (g_stat(path, &st) == 0 && (st.st_mode & 0077) != 0)
    g_warning("%s: the token file can be read by other users (mode %04o): "
              "chmod 600 it",
              what, (unsigned)(st.st_mode & 07777));
  {
    gchar *token = g_strndup(text, len);
    memset(text, 0, strlen(text));
    return token;
  }
}

/* The value of @option, else of @key in [web], else NULL; @what names
 * where it came from. */
static gchar *
web_setting(const gchar *option, const CliSettings *settings, const gchar *key,
            gchar **what)
{
  g_free(*what);
  if (option != NULL) {
    *what = g_strconcat("--", key, NULL);
    return g_strdup(option);
  }
  *what = settings->keyfile != NULL
              ? g_strdup_printf("%s: [%s] %s", settings->config_path, GROUP_WEB,
                                key)
              : NULL;
  return settings->keyfile != NULL
             ? g_key_file_get_string(settings->keyfile, GROUP_WEB, key, NULL)
             : NULL;
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
serve(const CliSettings *settings, GSocketAddress *address, Web *web)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SoupServer) soup = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
  g_autofree gchar *url = NULL;
  Sampler sampler = {web, TRUE};
  guint term, interrupt, tick;

  broker = cli_connect(settings, 0, FALSE, &error);
  if (broker == NULL || (web->client = cli_client_new(broker, &error)) == NULL)
    return cli_report(error);
  soup = cli_http_listen(address, NULL, &url, &error);
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
  g_autofree gchar *listen = NULL;
  g_autofree gchar *token_file = NULL;
  g_autofree gchar *sample_interval = NULL;
  gboolean read_only = FALSE;
  g_autofree gchar *value = NULL;
  g_autofree gchar *what = NULL;
  g_autoptr(GSocketAddress) address = NULL;
  g_autoptr(GError) error = NULL;
  gint64 interval_ms = DEFAULT_SAMPLE_MS;
  int status;
  const GOptionEntry entries[] = {
      {"listen", 0, 0, G_OPTION_ARG_STRING, &listen,
       "Serve the dashboard on ADDR:PORT (default " DEFAULT_LISTEN
       "; a bare port is 127.0.0.1)",
       "ADDR:PORT"},
      {"token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
       "Enable write actions (pause, replay, delete, ...) for requests that "
       "send the token on this file's first line (X-Sluice-Token header)",
       "FILE"},
      {"read-only", 0, 0, G_OPTION_ARG_NONE, &read_only,
       "Disable every write action, even with a token file", NULL},
      {"sample-interval", 0, 0, G_OPTION_ARG_STRING, &sample_interval,
       "Read the workers' counts this often for the processed/failed chart "
       "(default 10s)",
       "DURATION"},
      {NULL}};

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
      !cli_keyfile_check_keys(&settings, GROUP_WEB, web_keys, &error)) {
    status = cli_report(error);
    goto out;
  }
  cli_log_init(CLI_LOG_TEXT, G_LOG_LEVEL_INFO);
  if (argc > 1) {
    cli_usage_error(&error, "unexpected argument “%s”", argv[1]);
    status = cli_report(error);
    goto out;
  }
  value = web_setting(listen, &settings, "listen", &what);
  if (value == NULL) {
    value = g_strdup(DEFAULT_LISTEN);
    g_free(what);
    what = g_strdup("the default listen address");
  }
  if (!cli_parse_listen(what, value, &address, &error)) {
    status = cli_report(error);
    goto out;
  }
  g_clear_pointer(&value, g_free);
  value = web_setting(sample_interval, &settings, "sample-interval", &what);
  if (value != NULL &&
      (!cli_parse_duration(what, value, &interval_ms, &error) ||
       (interval_ms < 1 &&
        !cli_usage_error(&error, "%s: the interval must be at least 1ms",
                         what)))) {
    status = cli_report(error);
    goto out;
  }
  g_clear_pointer(&value, g_free);
  if (!read_only && settings.keyfile != NULL &&
      g_key_file_has_key(settings.keyfile, GROUP_WEB, "read-only", NULL)) {
    g_autoptr(GError) local = NULL;
    read_only = g_key_file_get_boolean(settings.keyfile, GROUP_WEB, "read-only",
                                       &local);
    if (local != NULL) {
      cli_usage_error(&error, "%s: [%s] read-only: give true or false",
                      settings.config_path, GROUP_WEB);
      status = cli_report(error);
      goto out;
    }
  }
  value = web_setting(token_file, &settings, "token-file", &what);
  if (value != NULL && !read_only &&
      (web.token = read_token(value, what, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  web.settings = &settings;
  web.shown_url = web_shown_url(settings.url);
  web.read_only = read_only;
  /* A dashboard that only shows may run as a user who may only read. */
  settings.read_only = read_only || web.token == NULL;
  web.sample_interval_ms = interval_ms;
  web.loopback = g_inet_address_get_is_loopback(
      g_inet_socket_address_get_address(G_INET_SOCKET_ADDRESS(address)));
  web.rates = web_rates_new(interval_ms);
  status = serve(&settings, address, &web);
out:
  g_clear_pointer(&web.client, sluice_client_unref);
  g_clear_pointer(&web.rates, web_rates_free);
  if (web.token != NULL)
    memset(web.token, 0, strlen(web.token));
  g_free(web.token);
  g_free(web.shown_url);
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  return status;
}

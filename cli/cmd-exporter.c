/* cmd-exporter.c - `sluice exporter`: the namespace's gauges over HTTP,
 * for Prometheus.
 *
 * A worker's /metrics (`sluice worker --metrics-listen`) says what that
 * worker did. What the namespace holds, queue depths, the schedule, dead
 * letters, the workers alive, is the broker's, the same for every worker:
 * served by each of them it would cost a broker read per worker per
 * scrape. One exporter serves it for all, and reads the broker at most
 * once per --interval (one sluice_client_get_stats(): one Lua script on
 * Redis), whatever the number of scrapers; scrapes within an interval get
 * the figures of the last read. The server runs on the main context, so
 * scrapes are answered one at a time and concurrent ones share a read.
 *
 * A broker that cannot be read is not a reason to stop: the exporter
 * answers with sluice_exporter_broker_up 0 and no gauges (stale figures
 * would look current), says so in one log line, and one more when a read
 * succeeds again. /healthz is 200 while the last read succeeded.
 */
#include "config.h"

#include <glib-unix.h>

#include "cli/http.h"

#define GROUP_EXPORTER "exporter"
#define DEFAULT_INTERVAL_MS 15000

/* What the options and [exporter] resolve to. */
typedef struct {
  GSocketAddress *listen;
  gint64 interval_ms;
  gchar **queues;
  CliHttpTls tls;
} ExporterSettings;

/* `sluice exporter`'s settings: each an option and a key of [exporter]
 * (settings.c reads them). */
static const CliSetting exporter_settings[] = {
    {.option = "listen",
     .key = "listen",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_listen,
     .offset = G_STRUCT_OFFSET(ExporterSettings, listen),
     .arg = "ADDR:PORT",
     .help = "Serve /metrics and /healthz on ADDR:PORT (a bare port is "
             "127.0.0.1)"},
    {.option = "interval",
     .key = "interval",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = G_STRUCT_OFFSET(ExporterSettings, interval_ms),
     .min = 1,
     .arg = "DURATION",
     .help = "Read the broker at most this often; scrapes in between get the "
             "last figures"},
    {.option = "queue",
     .short_name = 'q',
     .key = "queues",
     .kind = CLI_SETTING_LIST,
     .type = &cli_setting_strv,
     .offset = G_STRUCT_OFFSET(ExporterSettings, queues),
     .arg = "Q",
     .help = "Only this queue (repeat it)",
     .default_text = "every queue"},
    {.option = "tls-cert",
     .key = "tls-cert",
     .kind = CLI_SETTING_FILENAME,
     .type = &cli_setting_sourced_path,
     .offset = G_STRUCT_OFFSET(ExporterSettings, tls.cert),
     .arg = "FILE",
     .help = "Serve HTTPS with this certificate (PEM; needs --tls-key)",
     .default_text = "clear text HTTP"},
    {.option = "tls-key",
     .key = "tls-key",
     .kind = CLI_SETTING_FILENAME,
     .type = &cli_setting_sourced_path,
     .offset = G_STRUCT_OFFSET(ExporterSettings, tls.key),
     .arg = "FILE",
     .help = "The private key of --tls-cert (PEM, readable by its owner "
             "only)"},
    {.option = "tls-client-ca",
     .key = "tls-client-ca",
     .kind = CLI_SETTING_FILENAME,
     .type = &cli_setting_sourced_path,
     .offset = G_STRUCT_OFFSET(ExporterSettings, tls.client_ca),
     .arg = "FILE",
     .help = "With HTTPS, refuse scrapers without a client certificate "
             "signed by a CA of this PEM file",
     .default_text = "no client certificate asked"},
};

typedef struct {
  SluiceClient *client;
  gchar **queues; /* NULL = every queue */
  gint64 interval_us;
  gint64 read_at_us; /* monotonic; 0 = never read */
  gboolean ok;       /* the last read succeeded */
  gchar *stats_text; /* its figures, rendered */
  gchar *error;      /* or why it failed */
  gdouble read_seconds;
  guint64 reads;
  guint64 read_errors;
} Exporter;

/* Reads the broker if the figures are older than the interval. */
static void
refresh(Exporter *e)
{
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats stats;
  gint64 now = g_get_monotonic_time();
  gboolean was_ok = e->ok || e->read_at_us == 0;

  if (e->read_at_us > 0 && now - e->read_at_us < e->interval_us)
    return;
  e->reads++;
  e->ok = sluice_client_get_stats(e->client, (const gchar *const *)e->queues,
                                  &stats, &error);
  e->read_at_us = g_get_monotonic_time();
  e->read_seconds = (e->read_at_us - now) / 1e6;
  g_clear_pointer(&e->stats_text, g_free);
  g_clear_pointer(&e->error, g_free);
  if (e->ok) {
    e->stats_text = sluice_broker_stats_to_prometheus(&stats);
    sluice_broker_stats_clear(&stats);
    if (!was_ok)
      g_message("the broker can be read again");
    return;
  }
  e->read_errors++;
  e->error = g_strdup(error->message);
  if (was_ok)
    g_warning("cannot read the broker's stats: %s; serving "
              "sluice_exporter_broker_up 0 until a read succeeds",
              error->message);
}

static void
serve_metrics(SoupServer *soup, SoupServerMessage *msg, const char *path,
              GHashTable *query, gpointer data)
{
  Exporter *e = data;
  GString *out;
  gchar number[G_ASCII_DTOSTR_BUF_SIZE];

  if (!cli_http_accept(msg, path, "/metrics"))
    return;
  refresh(e);
  out = g_string_new(NULL);
  g_string_append_printf(
      out,
      "# HELP sluice_exporter_broker_up 1 if the last read of the broker's "
      "stats succeeded.\n# TYPE sluice_exporter_broker_up gauge\n"
      "sluice_exporter_broker_up %d\n"
      "# HELP sluice_exporter_reads_total Reads of the broker's stats.\n"
      "# TYPE sluice_exporter_reads_total counter\n"
      "sluice_exporter_reads_total %" G_GUINT64_FORMAT "\n"
      "# HELP sluice_exporter_read_errors_total Reads of the broker's stats "
      "that failed.\n# TYPE sluice_exporter_read_errors_total counter\n"
      "sluice_exporter_read_errors_total %" G_GUINT64_FORMAT "\n",
      e->ok ? 1 : 0, e->reads, e->read_errors);
  g_string_append_printf(
      out,
      "# HELP sluice_exporter_read_duration_seconds How long the last read "
      "took.\n# TYPE sluice_exporter_read_duration_seconds gauge\n"
      "sluice_exporter_read_duration_seconds %s\n",
      cli_format_number(number, e->read_seconds));
  g_string_append_printf(
      out,
      "# HELP sluice_exporter_read_age_seconds How old the figures served "
      "are.\n# TYPE sluice_exporter_read_age_seconds gauge\n"
      "sluice_exporter_read_age_seconds %s\n",
      cli_format_number(number,
                        (g_get_monotonic_time() - e->read_at_us) / 1e6));
  if (e->ok)
    g_string_append(out, e->stats_text);
  cli_http_respond(msg, SOUP_STATUS_OK, CLI_HTTP_PROMETHEUS,
                   g_string_free(out, FALSE));
}

static void
serve_health(SoupServer *soup, SoupServerMessage *msg, const char *path,
             GHashTable *query, gpointer data)
{
  Exporter *e = data;

  if (!cli_http_accept(msg, path, "/healthz"))
    return;
  refresh(e);
  if (e->ok)
    cli_http_respond(msg, SOUP_STATUS_OK, "text/plain; charset=utf-8",
                     g_strdup("ok\n"));
  else
    cli_http_respond(msg, SOUP_STATUS_SERVICE_UNAVAILABLE,
                     "text/plain; charset=utf-8",
                     g_strdup_printf("cannot read the broker: %s\n", e->error));
}

static gboolean
quit_on_signal(gpointer data)
{
  g_main_loop_quit(data);
  return G_SOURCE_CONTINUE;
}

static int export(const CliSettings *settings, GSocketAddress *address,
                  const CliHttpTls *tls, Exporter *e)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SoupServer) soup = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
  g_autofree gchar *url = NULL;
  guint term, interrupt;

  /* Not checked now: an exporter that starts before its Redis serves
   * sluice_exporter_broker_up 0 until it is there. */
  broker = cli_connect(settings, 0, FALSE, &error);
  if (broker == NULL ||
      (e->client = cli_client_new(broker, settings, &error)) == NULL)
    return cli_report(error);
  soup = cli_http_listen(address, tls, NULL, &url, &error);
  if (soup == NULL)
    return cli_report(error);
  soup_server_add_handler(soup, "/metrics", serve_metrics, e, NULL);
  soup_server_add_handler(soup, "/healthz", serve_health, e, NULL);
  term = g_unix_signal_add(SIGTERM, quit_on_signal, loop);
  interrupt = g_unix_signal_add(SIGINT, quit_on_signal, loop);
  g_info("exporter of namespace %s (%s mode) serving on %s/metrics, reading "
         "the broker at most every %" G_GINT64_FORMAT " ms",
         settings->namespace_, cli_mode_name(settings->mode), url,
         e->interval_us / 1000);
  g_main_loop_run(loop);
  g_source_remove(term);
  g_source_remove(interrupt);
  soup_server_disconnect(soup);
  g_info("exporter stops");
  return CLI_EXIT_OK;
}

int
cli_cmd_exporter(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  CliSettings settings = {0};
  Exporter e = {0};
  CliSettingArgs args = {0};
  ExporterSettings set = {.interval_ms = DEFAULT_INTERVAL_MS,
                          .tls = {.cert_option = "tls-cert",
                                  .key_option = "tls-key",
                                  .client_ca_option = "tls-client-ca"}};
  g_autofree const gchar **keys =
      cli_setting_keys(exporter_settings, G_N_ELEMENTS(exporter_settings));
  g_autofree GOptionEntry *entries = cli_setting_entries(
      &args, exporter_settings, G_N_ELEMENTS(exporter_settings), 0, &set);
  g_autoptr(GError) error = NULL;
  int status;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION, entries, "",
          "Serve the namespace's gauges (queue depths, scheduled and "
          "in-flight tasks,\ndead letters by reason, workers alive) to "
          "Prometheus over HTTP.\nOne exporter serves a namespace for every "
          "scraper; workers serve their own\ncounters with sluice worker "
          "--metrics-listen. SIGTERM or SIGINT stops it.",
          "Example:\n  sluice exporter --listen 127.0.0.1:9465 --interval "
          "15s\n  sluice exporter --listen 0.0.0.0:9465 --tls-cert "
          "exporter.pem --tls-key exporter.key",
          &argc, &argv, &error) ||
      !cli_settings_load(&common, &settings, &error) ||
      !cli_keyfile_check_keys(&settings, GROUP_EXPORTER, keys, &error)) {
    status = cli_report(error);
    goto out;
  }
  cli_log_init(CLI_LOG_TEXT, G_LOG_LEVEL_INFO);
  if (argc > 1) {
    cli_usage_error(&error,
                    "unexpected argument “%s” (queues are given "
                    "with --queue)",
                    argv[1]);
    status = cli_report(error);
    goto out;
  }
  if (!cli_settings_apply(&args, 0, &settings, GROUP_EXPORTER, &set, &error) ||
      !cli_http_tls_load(&set.tls, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (set.listen == NULL) {
    cli_usage_error(&error, "where should it listen? give --listen "
                            "ADDR:PORT, e.g. --listen 127.0.0.1:9465, or "
                            "listen= in the [exporter] group of --config");
    status = cli_report(error);
    goto out;
  }
  e.interval_us = set.interval_ms * 1000;
  e.queues = g_steal_pointer(&set.queues);
  status = export(&settings, set.listen, &set.tls, &e);
out:
  g_clear_pointer(&e.client, sluice_client_unref);
  g_strfreev(e.queues);
  g_free(e.stats_text);
  g_free(e.error);
  g_clear_object(&set.listen);
  g_strfreev(set.queues);
  cli_http_tls_clear(&set.tls);
  cli_setting_args_clear(&args);
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  return status;
}

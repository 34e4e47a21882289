/* without-web.c - the command's HTTP parts in a build configured
 * --disable-web (no libsoup): `sluice web`, `sluice exporter` and the
 * worker's --metrics-listen (metrics_listen in a configuration file) are
 * refused with what to do, as a usage error (exit status 2) before
 * anything starts. The rest of the command is the same in both builds.
 */
#include "config.h"

#include "cli/cli.h"

static gboolean
not_built(GError **error, const gchar *what)
{
  return cli_usage_error(
      error,
      "%s needs the command's HTTP parts, which this sluice was built without "
      "(configure --disable-web); install libsoup-3.0-dev and build it again",
      what);
}

static int
refuse(const gchar *what)
{
  g_autoptr(GError) error = NULL;

  not_built(&error, what);
  return cli_report(error);
}

int
cli_cmd_exporter(int argc, char **argv)
{
  return refuse("sluice exporter");
}

int
cli_cmd_web(int argc, char **argv)
{
  return refuse("sluice web");
}

/* The settings tables' type of a listen address: a value is refused where
 * it is read, so the worker never starts with an address it cannot serve. */
static gboolean
parse_listen(const CliSetting *row, const CliSettingValue *v, gpointer base,
             GError **error)
{
  return not_built(error, v->what);
}

const CliSettingType cli_setting_listen = {parse_listen, NULL};

/* The TLS files are the HTTP parts' only: refused the same way. */
const CliSettingType cli_setting_sourced_path = {parse_listen, NULL};

gboolean
cli_http_tls_load(CliHttpTls *tls, GError **error)
{
  /* cli_setting_sourced_path refused every file: there is none to read. */
  return TRUE;
}

gboolean
cli_http_tls_enabled(const CliHttpTls *tls)
{
  return FALSE;
}

void
cli_http_tls_clear(CliHttpTls *tls)
{
}

CliMetricsServer *
cli_metrics_server_start(SluiceWorker *worker, GSocketAddress *address,
                         const CliHttpTls *tls, GError **error)
{
  /* parse_listen() refused every address, so no caller gets here. */
  not_built(error, "--metrics-listen");
  return NULL;
}

void
cli_metrics_server_stopping(CliMetricsServer *server)
{
}

void
cli_metrics_server_free(CliMetricsServer *server)
{
}

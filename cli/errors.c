/* errors.c - errors and exit statuses for every subcommand.
 *
 * A subcommand reports a failure with cli_report(): one line on stderr,
 * then an exit status that tells usage errors (2) from runtime failures
 * (1). Every other file of the command reports through here, and this one
 * calls none of them.
 */
#include "config.h"

#include "cli/cli.h"

GQuark
cli_error_quark(void)
{
  return g_quark_from_static_string("sluice-cli-error-quark");
}

int
cli_exit_status_for(const GError *error)
{
  if (error == NULL)
    return CLI_EXIT_FAILURE;
  /* What the user typed or configured is wrong: the task name, queue or id
   * (the client refuses them), the URL or namespace (the broker does). */
  if (g_error_matches(error, CLI_ERROR, CLI_ERROR_USAGE) ||
      error->domain == G_OPTION_ERROR ||
      g_error_matches(error, SLUICE_BROKER_ERROR,
                      SLUICE_BROKER_ERROR_INVALID) ||
      g_error_matches(error, SLUICE_CLIENT_ERROR,
                      SLUICE_CLIENT_ERROR_INVALID) ||
      g_error_matches(error, SLUICE_CLIENT_ERROR,
                      SLUICE_CLIENT_ERROR_TOO_LARGE))
    return CLI_EXIT_USAGE;
  return CLI_EXIT_FAILURE;
}

int
cli_report(const GError *error)
{
  g_autofree gchar *line = NULL;

  line = g_strdup(error != NULL ? error->message : "failed for no reason");
  /* One line per error: scripts and log collectors split on newlines. */
  g_strdelimit(line, "\r\n", ' ');
  fprintf(stderr, "%s: %s\n", g_get_prgname(), line);
  return cli_exit_status_for(error);
}

gboolean
cli_usage_error(GError **error, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_set_error_literal(error, CLI_ERROR, CLI_ERROR_USAGE, message);
  return FALSE;
}

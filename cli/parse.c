/* parse.c - the values a user types: durations, times, counts, reasons and
 * JSON arguments.
 *
 * Every parser refuses what it does not understand with a usage error
 * (exit status 2) that names the option and shows a valid example:
 * guessing ("5" meaning seconds? milliseconds?) is how a 5 ms timeout
 * ends up in production.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "cli/cli.h"

/* Durations above this are refused: no timeout or delay needs more than a
 * year, and it keeps every multiplication far from overflowing. */
#define DURATION_MAX_MS (G_GINT64_CONSTANT(366) * 24 * 3600 * 1000)

gboolean
cli_parse_duration(const gchar *what, const gchar *text, gint64 *out_ms,
                   GError **error)
{
  static const struct {
    const gchar *suffix;
    gint64 ms;
  } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 3600 * 1000}};
  const gchar *end = text;
  guint64 number;

  while (g_ascii_isdigit(*end))
    end++;
  if (end != text && end - text <= 12) {
    g_autofree gchar *digits = g_strndup(text, (gsize)(end - text));

    number = g_ascii_strtoull(digits, NULL, 10);
    if (*end == '\0' && number == 0) {
      *out_ms = 0;
      return TRUE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(units); i++)
      if (strcmp(end, units[i].suffix) == 0) {
        if (number > (guint64)(DURATION_MAX_MS / units[i].ms))
          return cli_usage_error(error,
                                 "%s: %s is too long; the longest duration "
                                 "is 366 days (8784h)",
                                 what, text);
        *out_ms = (gint64)number * units[i].ms;
        return TRUE;
      }
  }
  return cli_usage_error(error,
                         "%s: “%s” is not a duration: write a whole number "
                         "followed by ms, s, m or h (500ms, 30s, 5m, 1h)",
                         what, text);
}

gboolean
cli_parse_rate_period(const gchar *what, const gchar *text, gint64 *out_ms,
                      GError **error)
{
  /* "10/s" is Celery's spelling of "10/1s": a bare unit is one of it. */
  static const gchar *const bare[] = {"ms", "s", "m", "h", NULL};
  g_autofree gchar *one = NULL;

  if (g_strv_contains(bare, text))
    text = one = g_strconcat("1", text, NULL);
  if (!cli_parse_duration(what, text, out_ms, NULL)) {
    g_autofree gchar *shown = cli_terminal_text(text, -1);
    return cli_usage_error(error,
                           "%s: “%s” is not a period: write a unit (s, m, "
                           "h, ms) or a whole number followed by one (10s, "
                           "5m), as in 10/s or 100/5m",
                           what, shown);
  }
  return TRUE;
}

gboolean
cli_parse_time(const gchar *what, const gchar *text, gint64 *out_ms,
               GError **error)
{
  g_autoptr(GTimeZone) local = g_time_zone_new_local();
  g_autoptr(GDateTime) time = g_date_time_new_from_iso8601(text, local);

  if (time == NULL)
    return cli_usage_error(error,
                           "%s: “%s” is not an ISO 8601 date and time: write "
                           "e.g. 2030-06-01T12:00:00Z, "
                           "2030-06-01T14:00:00+02:00, or "
                           "2030-06-01T12:00:00 for local time",
                           what, text);
  *out_ms = g_date_time_to_unix(time) * 1000 +
            g_date_time_get_microsecond(time) / 1000;
  return TRUE;
}

gboolean
cli_parse_since(const gchar *what, const gchar *text, gint64 *out_ms,
                GError **error)
{
  gint64 ago;

  if (g_ascii_isdigit(text[0]) && cli_parse_duration(what, text, &ago, NULL)) {
    *out_ms = g_get_real_time() / 1000 - ago;
    return TRUE;
  }
  if (cli_parse_time(what, text, out_ms, NULL))
    return TRUE;
  return cli_usage_error(error,
                         "%s: “%s” is neither a time nor a duration: write an "
                         "ISO 8601 time (2030-06-01T12:00:00Z, or "
                         "2030-06-01T12:00:00 for local time) or how long "
                         "ago (30s, 10m, 2h)",
                         what, text);
}

gboolean
cli_parse_count(const gchar *what, const gchar *text, guint64 min, guint64 max,
                guint64 *out, GError **error)
{
  g_autoptr(GError) local = NULL;

  if (!g_ascii_string_to_unsigned(text, 10, min, max, out, &local))
    return cli_usage_error(
        error,
        "%s: “%s” is not a whole number from %" G_GUINT64_FORMAT
        " to %" G_GUINT64_FORMAT,
        what, text, min, max);
  return TRUE;
}

gboolean
cli_parse_size(const gchar *what, const gchar *text, guint64 *out_bytes,
               GError **error)
{
  static const struct {
    const gchar *suffix;
    guint64 bytes;
  } units[] = {{"", 1},         {"K", 1 << 10},   {"M", 1 << 20},
               {"G", 1 << 30},  {"KiB", 1 << 10}, {"MiB", 1 << 20},
               {"GiB", 1 << 30}};
  const gchar *end = text;

  while (g_ascii_isdigit(*end))
    end++;
  if (end != text && end - text <= 15) {
    g_autofree gchar *digits = g_strndup(text, (gsize)(end - text));
    guint64 number = g_ascii_strtoull(digits, NULL, 10);

    for (gsize i = 0; i < G_N_ELEMENTS(units); i++)
      if (strcmp(end, units[i].suffix) == 0 &&
          number <= G_MAXUINT64 / units[i].bytes) {
        *out_bytes = number * units[i].bytes;
        return TRUE;
      }
  }
  return cli_usage_error(error,
                         "%s: “%s” is not a size: write a whole number of "
                         "bytes, or one followed by K, M or G (512M, 2G)",
                         what, text);
}

gboolean
cli_check_reason(const gchar *what, const gchar *reason, GError **error)
{
  g_autofree gchar *all = NULL;
  g_autofree gchar *shown = NULL;

  if (reason == NULL || sluice_dead_letter_reason_describe(reason) != NULL)
    return TRUE;
  all = g_strjoinv(", ", (gchar **)sluice_dead_letter_reasons());
  shown = cli_terminal_text(reason, -1);
  return cli_usage_error(error,
                         "%s: unknown dead-letter reason “%s”; the "
                         "reasons are %s",
                         what, shown, all);
}

/* What `sluice ls --state` and /api/tasks?state= take: the states
 * sluice_client_list() lists, in the order messages name them; dead
 * letters last, as the dashboard lists them apart (/api/dead). */
static const struct {
  const gchar *name;
  SluiceTaskState state;
} list_states[] = {
    {"queued", SLUICE_STATE_QUEUED},      {"scheduled", SLUICE_STATE_SCHEDULED},
    {"retrying", SLUICE_STATE_RETRYING},  {"running", SLUICE_STATE_RUNNING},
    {"dead", SLUICE_STATE_DEAD_LETTERED},
};

gboolean
cli_parse_list_state(const gchar *what, const gchar *text, gboolean dead_too,
                     SluiceTaskState *out, GError **error)
{
  gsize n = G_N_ELEMENTS(list_states) - (dead_too ? 0 : 1);
  g_autoptr(GString) names = g_string_new(NULL);
  g_autofree gchar *shown = NULL;

  /* The record's own name for the state is taken too. */
  if (dead_too && g_strcmp0(text, "dead_lettered") == 0) {
    *out = SLUICE_STATE_DEAD_LETTERED;
    return TRUE;
  }
  for (gsize i = 0; i < n; i++) {
    if (g_strcmp0(text, list_states[i].name) == 0) {
      *out = list_states[i].state;
      return TRUE;
    }
    g_string_append_printf(names, "%s%s",
                           i == 0       ? ""
                           : i + 1 == n ? " or "
                                        : ", ",
                           list_states[i].name);
  }
  shown = cli_terminal_text(text != NULL ? text : "", -1);
  return cli_usage_error(error,
                         "%s: “%s” is not a state that can be listed: %s%s",
                         what, shown, names->str,
                         dead_too ? ""
                                  : " (dead letters are listed apart, under "
                                    "/api/dead)");
}

GBytes *
cli_read_args(const gchar *text, GError **error)
{
  g_autofree gchar *from_stdin = NULL;
  g_autoptr(GError) local = NULL;
  gssize length = -1;
  GBytes *args;

  if (strcmp(text, "-") == 0) {
    g_autoptr(GIOChannel) in = g_io_channel_unix_new(0);
    gsize read = 0;

    /* Raw bytes: the JSON parser checks the UTF-8 and says where it breaks,
     * which is more useful than the channel's "invalid byte sequence". */
    g_io_channel_set_encoding(in, NULL, NULL);
    if (g_io_channel_read_to_end(in, &from_stdin, &read, &local) !=
        G_IO_STATUS_NORMAL) {
      g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                  "cannot read the JSON arguments from standard input: %s",
                  local->message);
      return NULL;
    }
    text = from_stdin != NULL ? from_stdin : "";
    length = (gssize)read;
  }
  args = sluice_args_from_json(text, length, &local);
  if (args == NULL)
    cli_usage_error(error, "the arguments are not valid JSON: %s",
                    local->message);
  return args;
}

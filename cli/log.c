/* log.c - the command's log writer: the journal when stderr is connected to
 * it, otherwise one line per record on stderr, as text or as JSON.
 *
 * The library logs through g_log_structured_array() with the fields
 * SLUICE_TASK_ID, SLUICE_TASK, SLUICE_QUEUE and SLUICE_ATTEMPT. The journal
 * keeps them as they are (`journalctl SLUICE_TASK=demo.flaky`); the text
 * and JSON lines carry them as task_id, task, queue and attempt:
 *
 *   2030-06-01T12:00:00.123Z warning: task failed ... task_id=5c0e... \
 *     task=demo.flaky queue=default attempt=1
 *   {"time":"2030-06-01T12:00:00.123Z","level":"warning","domain":"sluice",
 *    "message":"task failed ...","task_id":"5c0e...","task":"demo.flaky",
 *    "queue":"default","attempt":1}
 *
 * Each record is written with one write(2) of the whole line, so records
 * from the worker's threads never interleave within a line.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* The writer's configuration. Allocated once by cli_log_init() and handed
 * to GLib with the writer, which keeps it for the life of the process
 * (GLib has no way to remove a writer). */
struct _CliLog {
  CliLogFormat format;
  gint threshold;        /* GLogLevelFlags; atomic: any thread may log */
  gchar **debug_domains; /* from G_MESSAGES_DEBUG; NULL = none */
  gboolean journald;
};

gboolean
cli_parse_log_format(const gchar *text, CliLogFormat *out, GError **error)
{
  if (text == NULL || strcmp(text, "text") == 0) {
    *out = CLI_LOG_TEXT;
    return TRUE;
  }
  if (strcmp(text, "json") == 0) {
    *out = CLI_LOG_JSON;
    return TRUE;
  }
  return cli_usage_error(
      error, "--log-format: unknown format “%s”: use text or json", text);
}

/* The most severe level in @level (levels are bits, most severe lowest). */
static GLogLevelFlags
level_of(GLogLevelFlags level)
{
  guint bits = level & G_LOG_LEVEL_MASK;

  return bits == 0 ? G_LOG_LEVEL_MESSAGE : (GLogLevelFlags)(bits & -bits);
}

static const gchar *
level_name(GLogLevelFlags level)
{
  switch (level_of(level)) {
  case G_LOG_LEVEL_ERROR:
    return "error";
  case G_LOG_LEVEL_CRITICAL:
    return "critical";
  case G_LOG_LEVEL_WARNING:
    return "warning";
  case G_LOG_LEVEL_MESSAGE:
    return "notice";
  case G_LOG_LEVEL_INFO:
    return "info";
  case G_LOG_LEVEL_DEBUG:
  default:
    return "debug";
  }
}

static gboolean
shown(const CliLog *config, GLogLevelFlags level, const gchar *domain)
{
  GLogLevelFlags bit = level_of(level);

  if (bit <= (GLogLevelFlags)g_atomic_int_get(&config->threshold))
    return TRUE;
  if (bit != G_LOG_LEVEL_DEBUG || config->debug_domains == NULL)
    return FALSE;
  return g_strv_contains((const gchar *const *)config->debug_domains, "all") ||
         (domain != NULL &&
          g_strv_contains((const gchar *const *)config->debug_domains, domain));
}

/* The name a field has in text and JSON lines, or NULL to leave it out. */
static const gchar *
field_name(const gchar *key, gchar *buffer, gsize size)
{
  static const struct {
    const gchar *key, *name;
  } known[] = {{"SLUICE_TASK_ID", "task_id"},
               {"SLUICE_TASK", "task"},
               {"SLUICE_QUEUE", "queue"},
               {"SLUICE_ATTEMPT", "attempt"}};

  for (gsize i = 0; i < G_N_ELEMENTS(known); i++)
    if (strcmp(key, known[i].key) == 0)
      return known[i].name;
  /* Fields the library may add later keep their name, in lower case. */
  if (g_str_has_prefix(key, "SLUICE_") && strlen(key) - 7 < size) {
    for (gsize i = 0; key[7 + i] != '\0'; i++)
      buffer[i] = g_ascii_tolower(key[7 + i]);
    buffer[strlen(key) - 7] = '\0';
    return buffer;
  }
  return NULL;
}

static gchar *
field_text(const GLogField *field)
{
  return g_utf8_make_valid(field->value, field->length);
}

static void
write_line(const GString *line)
{
  gsize done = 0;

  while (done < line->len) {
    gssize n = write(STDERR_FILENO, line->str + done, line->len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return; /* nowhere left to report it */
    done += (gsize)n;
  }
}

static void
append_now(GString *line)
{
  cli_append_time(line, g_get_real_time() / 1000);
}

/* A field's value in a text line: escaped for the terminal, and without
 * spaces, so that "key=value" pairs split on spaces. Appended in place: a
 * worker writes a line per task, and a copy per field showed up in its
 * profile. */
static void
append_field_value(GString *line, const GLogField *field)
{
  gsize from = line->len;

  cli_append_terminal_text(line, field->value, field->length);
  for (gsize i = from; i < line->len; i++)
    if (line->str[i] == ' ')
      line->str[i] = '_';
}

static void
format_text(GString *line, GLogLevelFlags level, const GLogField *fields,
            gsize n_fields)
{
  const GLogField *message = NULL;

  append_now(line);
  g_string_append_c(line, ' ');
  g_string_append(line, level_name(level));
  g_string_append(line, ": ");
  for (gsize i = 0; i < n_fields; i++)
    if (strcmp(fields[i].key, "MESSAGE") == 0)
      message = &fields[i];
  if (message != NULL)
    cli_append_terminal_text(line, message->value, message->length);
  for (gsize i = 0; i < n_fields; i++) {
    gchar buffer[64];
    const gchar *name;

    if (strcmp(fields[i].key, "MESSAGE") == 0)
      continue;
    if (strcmp(fields[i].key, "GLIB_DOMAIN") == 0) {
      gssize len = fields[i].length;
      const gchar *value = fields[i].value;

      if (len < 0 ? strcmp(value, G_LOG_DOMAIN) != 0
                  : (gsize)len != strlen(G_LOG_DOMAIN) ||
                        memcmp(value, G_LOG_DOMAIN, (gsize)len) != 0) {
        g_string_append(line, " domain=");
        cli_append_terminal_text(line, value, len);
      }
      continue;
    }
    name = field_name(fields[i].key, buffer, sizeof buffer);
    if (name != NULL) {
      g_string_append_c(line, ' ');
      g_string_append(line, name);
      g_string_append_c(line, '=');
      append_field_value(line, &fields[i]);
    }
  }
  g_string_append_c(line, '\n');
}

static void
format_json(GString *line, GLogLevelFlags level, const GLogField *fields,
            gsize n_fields)
{
  g_string_append(line, "{\"time\":\"");
  append_now(line);
  g_string_append_printf(line, "\",\"level\":\"%s\"", level_name(level));
  for (gsize i = 0; i < n_fields; i++) {
    gchar buffer[64];
    const gchar *name;

    if (strcmp(fields[i].key, "MESSAGE") == 0)
      name = "message";
    else if (strcmp(fields[i].key, "GLIB_DOMAIN") == 0)
      name = "domain";
    else
      name = field_name(fields[i].key, buffer, sizeof buffer);
    if (name == NULL)
      continue;
    g_string_append_printf(line, ",\"%s\":", name);
    if (strcmp(name, "attempt") == 0) {
      g_autofree gchar *value = field_text(&fields[i]);
      guint64 n;
      if (g_ascii_string_to_unsigned(value, 10, 0, G_MAXUINT32, &n, NULL)) {
        g_string_append_printf(line, "%" G_GUINT64_FORMAT, n);
        continue;
      }
    }
    cli_json_append_string(line, fields[i].value, fields[i].length);
  }
  g_string_append(line, "}\n");
}

static GLogWriterOutput
writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
       gpointer user_data)
{
  CliLog *config = user_data;
  const gchar *domain = NULL;
  g_autoptr(GString) line = NULL;

  for (gsize i = 0; i < n_fields; i++)
    if (strcmp(fields[i].key, "GLIB_DOMAIN") == 0 && fields[i].length < 0)
      domain = fields[i].value;
  if (!shown(config, level, domain))
    return G_LOG_WRITER_HANDLED;
  if (config->journald && g_log_writer_journald(level, fields, n_fields,
                                                NULL) == G_LOG_WRITER_HANDLED)
    return G_LOG_WRITER_HANDLED;

  line = g_string_sized_new(256);
  if (config->format == CLI_LOG_JSON)
    format_json(line, level, fields, n_fields);
  else
    format_text(line, level, fields, n_fields);
  write_line(line);
  return G_LOG_WRITER_HANDLED;
}

CliLog *
cli_log_init(CliLogFormat format, GLogLevelFlags threshold)
{
  CliLog *config = g_new0(CliLog, 1);
  const gchar *debug = g_getenv("G_MESSAGES_DEBUG");

  config->format = format;
  config->threshold = (gint)threshold;
  config->journald = g_log_writer_is_journald(fileno(stderr));
  if (debug != NULL && *debug != '\0')
    config->debug_domains = g_strsplit_set(debug, " ,", -1);
  g_log_set_writer_func(writer, config, NULL);
  return config;
}

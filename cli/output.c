/* output.c - what read commands print: aligned tables for people, JSON for
 * programs.
 *
 * The JSON is written by hand (CliJson) rather than with json-glib's
 * generator for two reasons: task arguments and results arrive already
 * rendered as JSON text by sluice_args_to_json(), which this writer
 * splices in as they are (re-parsing them would round-trip their numbers
 * through a generator that renders some doubles wrongly); and the output
 * is small and made only of strings, integers, booleans and nulls.
 *
 * Every string is made valid UTF-8 before it is printed (error messages
 * come from task code and may hold anything), so the JSON always parses;
 * text for a terminal also has its control characters escaped (a task
 * name or a detail from a message could otherwise send escape sequences
 * to whoever reads a table or a log).
 */
#include "config.h"

#include <string.h>

#include <sluice/sys/broker.h>

#include "cli/cli.h"

#define JSON_MAX_DEPTH 31

/* ---- JSON ---------------------------------------------------------------- */

CliJson *
cli_json_new(void)
{
  CliJson *json = g_new0(CliJson, 1);

  json->out = g_string_new(NULL);
  return json;
}

void
cli_json_free(CliJson *json)
{
  if (json == NULL)
    return;
  g_string_free(json->out, TRUE);
  g_free(json);
}

static void
json_indent(CliJson *json)
{
  g_string_append_c(json->out, '\n');
  for (guint i = 0; i < json->depth; i++)
    g_string_append(json->out, "  ");
}

/* Called before every value and key: a comma and a new line inside a
 * container, nothing after a key. */
static void
json_separate(CliJson *json)
{
  if (json->after_key) {
    json->after_key = FALSE;
    return;
  }
  if (json->depth == 0)
    return;
  if (!json->first[json->depth])
    g_string_append_c(json->out, ',');
  json->first[json->depth] = FALSE;
  json_indent(json);
}

static void
json_open(CliJson *json, gchar bracket)
{
  json_separate(json);
  g_return_if_fail(json->depth < JSON_MAX_DEPTH);
  g_string_append_c(json->out, bracket);
  json->depth++;
  json->first[json->depth] = TRUE;
}

static void
json_close(CliJson *json, gchar bracket)
{
  gboolean empty;

  g_return_if_fail(json->depth > 0);
  empty = json->first[json->depth];
  json->depth--;
  if (!empty)
    json_indent(json);
  g_string_append_c(json->out, bracket);
}

void
cli_json_begin_object(CliJson *json)
{
  json_open(json, '{');
}

void
cli_json_end_object(CliJson *json)
{
  json_close(json, '}');
}

void
cli_json_begin_array(CliJson *json)
{
  json_open(json, '[');
}

void
cli_json_end_array(CliJson *json)
{
  json_close(json, ']');
}

void
cli_json_append_string(GString *out, const gchar *text, gssize length)
{
  g_autofree gchar *valid = g_utf8_make_valid(text, length);

  g_string_append_c(out, '"');
  for (const guchar *p = (const guchar *)valid; *p != '\0'; p++) {
    switch (*p) {
    case '"':
      g_string_append(out, "\\\"");
      break;
    case '\\':
      g_string_append(out, "\\\\");
      break;
    case '\n':
      g_string_append(out, "\\n");
      break;
    case '\r':
      g_string_append(out, "\\r");
      break;
    case '\t':
      g_string_append(out, "\\t");
      break;
    default:
      if (*p < 0x20)
        g_string_append_printf(out, "\\u%04x", *p);
      else
        g_string_append_c(out, (gchar)*p);
    }
  }
  g_string_append_c(out, '"');
}

void
cli_json_key(CliJson *json, const gchar *key)
{
  json_separate(json);
  cli_json_append_string(json->out, key, -1);
  g_string_append(json->out, ": ");
  json->after_key = TRUE;
}

void
cli_json_string(CliJson *json, const gchar *value)
{
  if (value == NULL) {
    cli_json_null(json);
    return;
  }
  json_separate(json);
  cli_json_append_string(json->out, value, -1);
}

void
cli_json_int(CliJson *json, gint64 value)
{
  json_separate(json);
  g_string_append_printf(json->out, "%" G_GINT64_FORMAT, value);
}

void
cli_json_bool(CliJson *json, gboolean value)
{
  json_separate(json);
  g_string_append(json->out, value ? "true" : "false");
}

void
cli_json_null(CliJson *json)
{
  json_separate(json);
  g_string_append(json->out, "null");
}

void
cli_json_raw(CliJson *json, const gchar *text)
{
  json_separate(json);
  g_string_append(json->out, text);
}

void
cli_json_time(CliJson *json, gint64 ms)
{
  if (ms == 0)
    cli_json_null(json);
  else
    cli_json_int(json, ms);
}

void
cli_json_print(CliJson *json)
{
  g_warn_if_fail(json->depth == 0);
  fwrite(json->out->str, 1, json->out->len, stdout);
  fputc('\n', stdout);
}

/* ---- Tables -------------------------------------------------------------- */

CliTable *
cli_table_new(const gchar *const *header, guint columns)
{
  CliTable *table = g_new0(CliTable, 1);

  table->rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
  table->columns = columns;
  if (header != NULL)
    g_ptr_array_add(table->rows, g_strdupv((gchar **)header));
  return table;
}

void
cli_table_free(CliTable *table)
{
  if (table == NULL)
    return;
  g_ptr_array_unref(table->rows);
  g_free(table);
}

/* ---- Numbers ------------------------------------------------------------- */

const gchar *
cli_format_number(gchar *buf, gdouble value)
{
  /* %.15g reads back for every number that has a form of 15 digits or
   * fewer (%g drops the trailing zeros), so this is the shortest form of
   * any normal double; %.17g always reads back. */
  for (const gchar *const *format =
           (const gchar *const[]){"%.15g", "%.16g", "%.17g", NULL};
       *format != NULL; format++) {
    g_ascii_formatd(buf, G_ASCII_DTOSTR_BUF_SIZE, *format, value);
    if (g_ascii_strtod(buf, NULL) == value)
      break;
  }
  return buf;
}

/* ---- Text for terminals -------------------------------------------------- */

gchar *
cli_terminal_text(const gchar *text, gssize length)
{
  gsize len = length < 0 ? strlen(text) : (gsize)length;
  GString *out = g_string_sized_new(len);

  cli_append_terminal_text(out, text, length);
  return g_string_free(out, FALSE);
}

/* The escaping rules (C0, DEL and C1 controls, bytes that are not UTF-8)
 * are the library's, sluice_broker_escape_text(): what a log line, a table
 * and a broker's error message show of the same bytes is the same. This
 * adds only what a line of output needs: tabs and line breaks become
 * spaces, so a value never splits a line, and plain ASCII is copied a run
 * at a time without a call (a worker writes a line per task). */
void
cli_append_terminal_text(GString *out, const gchar *text, gssize length)
{
  const guchar *p = (const guchar *)text;
  gsize len = length < 0 ? strlen(text) : (gsize)length;

  for (gsize i = 0; i < len;) {
    gsize n;

    for (n = 0; i + n < len && p[i + n] >= 0x20 && p[i + n] < 0x7f; n++)
      ;
    if (n > 0) {
      g_string_append_len(out, (const gchar *)p + i, (gssize)n);
      i += n;
      continue;
    }
    if (p[i] == '\t' || p[i] == '\r' || p[i] == '\n') {
      g_string_append_c(out, ' ');
      i++;
      continue;
    }
    /* The rest up to the next plain character or line break: a run of
     * bytes >= 0x80 holds whole UTF-8 characters, so none is cut. */
    for (n = 1; i + n < len && (p[i + n] < 0x20 || p[i + n] >= 0x7f) &&
                p[i + n] != '\t' && p[i + n] != '\r' && p[i + n] != '\n';
         n++)
      ;
    {
      g_autofree gchar *escaped =
          sluice_broker_escape_text((const gchar *)p + i, (gssize)n, 0);
      g_string_append(out, escaped);
    }
    i += n;
  }
}

/* A cell on one line, in valid UTF-8 without control characters: what a
 * terminal shows in a column. */
static gchar *
cell_text(const gchar *value)
{
  return cli_terminal_text(value != NULL ? value : "-", -1);
}

void
cli_table_add(CliTable *table, ...)
{
  va_list ap;
  gchar **row = g_new0(gchar *, table->columns + 1);

  va_start(ap, table);
  for (guint i = 0; i < table->columns; i++)
    row[i] = cell_text(va_arg(ap, const gchar *));
  va_end(ap);
  g_ptr_array_add(table->rows, row);
}

void
cli_table_print(CliTable *table)
{
  g_autofree glong *widths = g_new0(glong, table->columns);
  g_autoptr(GString) line = g_string_new(NULL);

  for (guint r = 0; r < table->rows->len; r++) {
    gchar **row = table->rows->pdata[r];
    for (guint c = 0; c < table->columns && row[c] != NULL; c++)
      widths[c] = MAX(widths[c], g_utf8_strlen(row[c], -1));
  }
  for (guint r = 0; r < table->rows->len; r++) {
    gchar **row = table->rows->pdata[r];
    g_string_truncate(line, 0);
    for (guint c = 0; c < table->columns && row[c] != NULL; c++) {
      g_string_append(line, row[c]);
      /* No padding after the last column: no trailing blanks. */
      if (c + 1 < table->columns)
        for (glong pad = g_utf8_strlen(row[c], -1); pad < widths[c] + 2; pad++)
          g_string_append_c(line, ' ');
    }
    g_string_append_c(line, '\n');
    fputs(line->str, stdout);
  }
}

/* ---- Values -------------------------------------------------------------- */

gchar *
cli_format_time(gint64 ms)
{
  GString *out;

  if (ms == 0)
    return NULL;
  out = g_string_sized_new(32);
  cli_append_time(out, ms);
  return g_string_free(out, FALSE);
}

/* @v as exactly @digits decimal digits, zero-padded. */
static void
put_digits(gchar *at, gint64 v, guint digits)
{
  while (digits-- > 0) {
    at[digits] = (gchar)('0' + v % 10);
    v /= 10;
  }
}

void
cli_append_time(GString *out, gint64 ms)
{
  /* By hand, from days since the epoch to the civil date (the proleptic
   * Gregorian calendar, in 400-year eras): a worker logs a line per task,
   * and a GDateTime, gmtime_r() or printf per line cost it thousands of
   * instructions. */
  static const gint64 first_ms = G_GINT64_CONSTANT(-62135596800000);
  static const gint64 end_ms = G_GINT64_CONSTANT(253402300800000);
  gint64 days, ms_of_day, era, doe, yoe, doy, mp, year, month, day;
  gchar text[24];

  if (ms < first_ms || ms >= end_ms) {
    g_string_append_printf(out, "%" G_GINT64_FORMAT " ms", ms);
    return;
  }
  days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
  ms_of_day = ms - days * 86400000;
  days += 719468; /* from 0000-03-01 */
  era = (days >= 0 ? days : days - 146096) / 146097;
  doe = days - era * 146097;
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  day = doy - (153 * mp + 2) / 5 + 1;
  month = mp < 10 ? mp + 3 : mp - 9;
  year = yoe + era * 400 + (month <= 2);
  put_digits(text, year, 4);
  text[4] = '-';
  put_digits(text + 5, month, 2);
  text[7] = '-';
  put_digits(text + 8, day, 2);
  text[10] = 'T';
  put_digits(text + 11, ms_of_day / 3600000, 2);
  text[13] = ':';
  put_digits(text + 14, ms_of_day / 60000 % 60, 2);
  text[16] = ':';
  put_digits(text + 17, ms_of_day / 1000 % 60, 2);
  text[19] = '.';
  put_digits(text + 20, ms_of_day % 1000, 3);
  text[23] = 'Z';
  g_string_append_len(out, text, 24);
}

gchar *
cli_format_age(gint64 then_ms, gint64 now_ms)
{
  gint64 s = (now_ms - then_ms) / 1000;

  if (s < 0)
    return g_strdup("now");
  if (s < 120)
    return g_strdup_printf("%" G_GINT64_FORMAT "s ago", s);
  if (s < 120 * 60)
    return g_strdup_printf("%" G_GINT64_FORMAT "m ago", s / 60);
  if (s < 48 * 3600)
    return g_strdup_printf("%" G_GINT64_FORMAT "h ago", s / 3600);
  return g_strdup_printf("%" G_GINT64_FORMAT "d ago", s / 86400);
}

gchar *
cli_format_duration(gint64 ms)
{
  if (ms != 0 && ms % (3600 * 1000) == 0)
    return g_strdup_printf("%" G_GINT64_FORMAT "h", ms / (3600 * 1000));
  if (ms != 0 && ms % (60 * 1000) == 0)
    return g_strdup_printf("%" G_GINT64_FORMAT "m", ms / (60 * 1000));
  if (ms != 0 && ms % 1000 == 0)
    return g_strdup_printf("%" G_GINT64_FORMAT "s", ms / 1000);
  return g_strdup_printf("%" G_GINT64_FORMAT "ms", ms);
}

gchar *
cli_msgpack_to_json(GBytes *value)
{
  g_autofree gchar *base64 = NULL;
  gchar *json;
  gsize size = 0;
  const guchar *data;
  GString *out;

  if (value == NULL)
    return NULL;
  json = sluice_args_to_json(value, NULL);
  if (json != NULL)
    return json;
  /* msgpack ext values have no JSON form: keep the bytes, base64. */
  data = g_bytes_get_data(value, &size);
  base64 = g_base64_encode(data, size);
  out = g_string_new("{\"$msgpack\": ");
  cli_json_append_string(out, base64, -1);
  g_string_append_c(out, '}');
  return g_string_free(out, FALSE);
}

/* ---- Cells --------------------------------------------------------------- */

gchar *
cli_shorten(const gchar *text, glong width)
{
  g_autofree gchar *valid = NULL;
  g_autofree gchar *head = NULL;

  if (text == NULL)
    return NULL;
  valid = g_utf8_make_valid(text, -1);
  if (g_utf8_strlen(valid, -1) <= width)
    return g_steal_pointer(&valid);
  head = g_utf8_substring(valid, 0, width - 1);
  return g_strconcat(head, "…", NULL);
}

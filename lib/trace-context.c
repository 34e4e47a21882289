/* trace-context.c - the W3C trace context headers: checked when a message
 * is enqueued, read for the worker's log lines (see sluice-trace.h).
 *
 * The check follows the W3C Trace Context recommendation (level 1). It is
 * strict where a bad value would break a trace (the ids, their case, the
 * separators) and lenient where the format may grow (later traceparent
 * versions, digits at the start of tracestate keys).
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

#define TRACEPARENT_LEN 55
#define TRACESTATE_MAX_MEMBERS 32

static gboolean
is_lower_hex(gchar c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* @n lower-case hex digits at @s; FALSE if not, or if they are all "0"
 * and @nonzero. */
static gboolean
hex_field(const gchar *s, gsize n, gboolean nonzero)
{
  gboolean zero = TRUE;

  for (gsize i = 0; i < n; i++) {
    if (!is_lower_hex(s[i]))
      return FALSE;
    zero = zero && s[i] == '0';
  }
  return !(nonzero && zero);
}

static gboolean
invalid(GError **error, const gchar *what, const gchar *value, const gchar *why)
{
  gsize len = strlen(value);
  /* Cut long values, and keep the message valid UTF-8 where the cut
   * falls inside a character. */
  g_autofree gchar *shown = g_utf8_make_valid(value, MIN(len, 80));

  g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
              "header %s “%s%s” is not a W3C trace context: %s", what, shown,
              len > 80 ? "…" : "", why);
  return FALSE;
}

static gboolean
check_traceparent(const gchar *tp, GError **error)
{
  gsize len = strlen(tp);
  static const gchar *const form =
      "expected 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lower "
      "case, e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

  if (len < TRACEPARENT_LEN || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' ||
      !hex_field(tp, 2, FALSE) || !hex_field(tp + 3, 32, FALSE) ||
      !hex_field(tp + 36, 16, FALSE) || !hex_field(tp + 53, 2, FALSE))
    return invalid(error, SLUICE_HEADER_TRACEPARENT, tp, form);
  if (strncmp(tp, "ff", 2) == 0)
    return invalid(error, SLUICE_HEADER_TRACEPARENT, tp,
                   "version ff is forbidden");
  if (!hex_field(tp + 3, 32, TRUE))
    return invalid(error, SLUICE_HEADER_TRACEPARENT, tp,
                   "the trace id is all zeros");
  if (!hex_field(tp + 36, 16, TRUE))
    return invalid(error, SLUICE_HEADER_TRACEPARENT, tp,
                   "the parent id is all zeros");
  /* Version 00 is exactly this long; a later one may append fields. */
  if (strncmp(tp, "00", 2) == 0
          ? len != TRACEPARENT_LEN
          : len > TRACEPARENT_LEN && tp[TRACEPARENT_LEN] != '-')
    return invalid(error, SLUICE_HEADER_TRACEPARENT, tp,
                   "extra characters after the flags");
  return TRUE;
}

static gboolean
is_key_char(gchar c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '*' || c == '/';
}

/* A tracestate key: simple-key, or tenant-id "@" system-id. */
static gboolean
valid_key(const gchar *key, gsize len)
{
  const gchar *at = memchr(key, '@', len);
  gsize first_len = at != NULL ? (gsize)(at - key) : len;

  if (first_len == 0 || first_len > (at != NULL ? 241 : 256) ||
      !g_ascii_isalnum(key[0]) || g_ascii_isupper(key[0]))
    return FALSE;
  for (gsize i = 1; i < first_len; i++)
    if (!is_key_char(key[i]))
      return FALSE;
  if (at != NULL) {
    gsize system_len = len - first_len - 1;
    if (system_len == 0 || system_len > 14 || !g_ascii_islower(at[1]))
      return FALSE;
    for (gsize i = 2; i <= system_len; i++)
      if (!is_key_char(at[i]))
        return FALSE;
  }
  return TRUE;
}

/* A tracestate value: printable ASCII but ',' and '=', not ending in a
 * space, 1 to 256 characters. */
static gboolean
valid_value(const gchar *value, gsize len)
{
  if (len == 0 || len > 256 || value[len - 1] == ' ')
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (value[i] < 0x20 || value[i] > 0x7e || value[i] == ',' ||
        value[i] == '=')
      return FALSE;
  return TRUE;
}

static gboolean
check_tracestate(const gchar *ts, GError **error)
{
  g_auto(GStrv) members = g_strsplit(ts, ",", -1);
  guint n = 0;

  for (guint i = 0; members[i] != NULL; i++) {
    const gchar *m = members[i];
    gsize len = strlen(m);
    const gchar *eq;

    /* Optional white space around members; empty members are allowed. */
    while (len > 0 && (*m == ' ' || *m == '\t'))
      m++, len--;
    while (len > 0 && (m[len - 1] == ' ' || m[len - 1] == '\t'))
      len--;
    if (len == 0)
      continue;
    if (++n > TRACESTATE_MAX_MEMBERS)
      return invalid(error, SLUICE_HEADER_TRACESTATE, ts,
                     "more than 32 members");
    eq = memchr(m, '=', len);
    if (eq == NULL || !valid_key(m, (gsize)(eq - m)) ||
        !valid_value(eq + 1, len - (gsize)(eq - m) - 1)) {
      g_autofree gchar *member = g_utf8_make_valid(m, MIN(len, 80));
      g_autofree gchar *why = g_strdup_printf(
          "member “%s” is not key=value (a key of lower-case letters, "
          "digits and _-*/, optionally tenant@system; a value of printable "
          "ASCII without , and =)",
          member);
      return invalid(error, SLUICE_HEADER_TRACESTATE, ts, why);
    }
  }
  return TRUE;
}

gboolean
sluice_trace_context_check(const gchar *traceparent, const gchar *tracestate,
                           GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  if (traceparent != NULL && !check_traceparent(traceparent, error))
    return FALSE;
  if (tracestate == NULL)
    return TRUE;
  if (traceparent == NULL) {
    g_set_error_literal(
        error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
        "header tracestate without a traceparent: a trace state belongs to "
        "the trace a traceparent names; set both, or neither");
    return FALSE;
  }
  return check_tracestate(tracestate, error);
}

gboolean
sluice_trace__check_envelope(const SluiceEnvelope *env, GError **error)
{
  return sluice_trace_context_check(
      sluice_envelope_get_header(env, SLUICE_HEADER_TRACEPARENT),
      sluice_envelope_get_header(env, SLUICE_HEADER_TRACESTATE), error);
}

const gchar *
sluice_trace__traceparent(const SluiceEnvelope *env, gchar trace_id[33])
{
  const gchar *tp;

  if (env == NULL || env->headers == NULL)
    return NULL;
  tp = g_hash_table_lookup(env->headers, SLUICE_HEADER_TRACEPARENT);
  /* Producers in other languages are not checked by this client: a value
   * that is not a trace context stays out of the logs. */
  if (tp == NULL || !check_traceparent(tp, NULL))
    return NULL;
  memcpy(trace_id, tp + 3, 32);
  trace_id[32] = '\0';
  return tp;
}

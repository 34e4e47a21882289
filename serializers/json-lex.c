/* json-lex.c - the tokens of strict JSON (see json-lex.h). */
#include "config.h"

#include <sluice/sluice-envelope.h>

#include "serializers/json-lex.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- Positions ----------------------------------------------------------- */

/* 1-based line and column (in characters) of byte @offset of @text. */
static void
text_position(const gchar *text, gsize offset, guint *line, guint *column)
{
  guint l = 1, c = 1;

  for (gsize i = 0; i < offset; i++) {
    if (text[i] == '\n') {
      l++;
      c = 1;
    } else if (((guchar)text[i] & 0xc0) != 0x80) {
      c++;
    }
  }
  *line = l;
  *column = c;
}

gboolean G_GNUC_PRINTF(5, 6)
    sluice_json_lex__error(GError **error, gint code, const gchar *text,
                           gsize offset, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *what = NULL;
  guint line, column;

  va_start(ap, format);
  what = g_strdup_vprintf(format, ap);
  va_end(ap);
  text_position(text, offset, &line, &column);
  g_set_error(error, SLUICE_CODEC_ERROR, code, "line %u, column %u: %s", line,
              column, what);
  return FALSE;
}

/* ---- Tokens ------------------------------------------------------------- */

static gboolean
truncated(SluiceJsonLexer *lx, const gchar *inside)
{
  return sluice_json_lex__error(lx->error, SLUICE_CODEC_ERROR_TRUNCATED, lx->t,
                                lx->len, "the input ends inside %s", inside);
}

/* Describes the character at @offset for a message: 'x' (a single quote
 * in double ones: "'") or U+XXXX. The text is valid UTF-8 (checked
 * first). */
static gchar *
describe_char(const gchar *t, gsize offset)
{
  gunichar c = g_utf8_get_char(t + offset);

  if (c == '\'')
    return g_strdup("\"'\"");
  if (c > 0x20 && c < 0x7f)
    return g_strdup_printf("'%c'", (gchar)c);
  return g_strdup_printf("U+%04X", c);
}

/* What the user most likely meant, for what other notations (Python,
 * JavaScript) allow where JSON does not. */
static const gchar *
hint_for(const SluiceJsonLexer *lx, gsize offset)
{
  const gchar *at = lx->t + offset;
  gsize left = lx->len - offset;

  if (*at == '\'')
    return "; JSON strings and keys take double quotes: {\"a\": \"x\"}";
  if ((left >= 3 && strncmp(at, "NaN", 3) == 0) ||
      (left >= 8 && strncmp(at, "Infinity", 8) == 0))
    return "; JSON has no NaN or Infinity: use null or a string";
  return "";
}

gboolean
sluice_json_lex__unexpected(SluiceJsonLexer *lx, gsize offset,
                            const gchar *expected)
{
  g_autofree gchar *found = describe_char(lx->t, offset);

  return sluice_json_lex__error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t,
                                offset, "unexpected %s, expected %s%s", found,
                                expected, hint_for(lx, offset));
}

static gint
hex_value(gchar c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Reads the 4 hex digits of a \u escape whose backslash is at lx->i. */
static gboolean
lex_u_escape(SluiceJsonLexer *lx, guint *out)
{
  guint cp = 0;

  for (gsize k = 2; k < 6; k++) {
    gint h;

    if (lx->i + k >= lx->len)
      return truncated(lx, "a \\u escape");
    h = hex_value(lx->t[lx->i + k]);
    if (h < 0)
      return sluice_json_lex__unexpected(lx, lx->i + k,
                                         "a hex digit in a \\u escape");
    cp = cp << 4 | (guint)h;
  }
  *out = cp;
  return TRUE;
}

/* A string token at lx->i (its opening quote). With @out, its decoded
 * bytes are appended to it. */
gboolean
sluice_json_lex__string(SluiceJsonLexer *lx, GString *out)
{
  gsize run;

  lx->i++; /* the opening quote */
  run = lx->i;
  for (;;) {
    guchar c;
    gchar esc;

    if (lx->i >= lx->len)
      return truncated(lx, "a string");
    c = (guchar)lx->t[lx->i];
    if (c == '"') {
      if (out != NULL)
        g_string_append_len(out, lx->t + run, (gssize)(lx->i - run));
      lx->i++;
      return TRUE;
    }
    if (c < 0x20)
      return sluice_json_lex__error(
          lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, lx->i,
          "raw control character U+%04X in a string (write it "
          "as an escape)",
          c);
    if (c != '\\') {
      lx->i++;
      continue;
    }
    if (out != NULL)
      g_string_append_len(out, lx->t + run, (gssize)(lx->i - run));
    if (lx->i + 1 >= lx->len)
      return truncated(lx, "an escape");
    esc = 0;
    switch (lx->t[lx->i + 1]) {
    case '"':
    case '\\':
    case '/':
      esc = lx->t[lx->i + 1];
      break;
    case 'b':
      esc = '\b';
      break;
    case 'f':
      esc = '\f';
      break;
    case 'n':
      esc = '\n';
      break;
    case 'r':
      esc = '\r';
      break;
    case 't':
      esc = '\t';
      break;
    case 'u': {
      guint cp, low;
      gsize start = lx->i;

      if (!lex_u_escape(lx, &cp))
        return FALSE;
      if (cp == 0)
        return sluice_json_lex__error(
            lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
            "\\u0000 is not supported (strings cannot hold NUL)");
      if (cp >= 0xdc00 && cp <= 0xdfff)
        return sluice_json_lex__error(lx->error, SLUICE_CODEC_ERROR_INVALID,
                                      lx->t, start,
                                      "\\u%04X is a lone low surrogate", cp);
      lx->i += 6;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        /* A high surrogate must be followed by an escaped low one: the
         * input ends inside the pair only when nothing else follows. */
        if (lx->i >= lx->len || (lx->t[lx->i] == '\\' && lx->i + 1 >= lx->len))
          return truncated(lx, "a surrogate pair");
        if (lx->t[lx->i] != '\\' || lx->t[lx->i + 1] != 'u')
          return sluice_json_lex__error(lx->error, SLUICE_CODEC_ERROR_INVALID,
                                        lx->t, start,
                                        "\\u%04X is a lone high surrogate", cp);
        if (!lex_u_escape(lx, &low))
          return FALSE;
        if (low < 0xdc00 || low > 0xdfff)
          return sluice_json_lex__error(lx->error, SLUICE_CODEC_ERROR_INVALID,
                                        lx->t, start,
                                        "\\u%04X is a lone high surrogate", cp);
        lx->i += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      }
      if (out != NULL)
        g_string_append_unichar(out, cp);
      run = lx->i;
      continue;
    }
    default:
      return sluice_json_lex__unexpected(lx, lx->i + 1,
                                         "an escape (\\\" \\\\ \\/ \\b \\f \\n "
                                         "\\r \\t \\uXXXX)");
    }
    if (out != NULL)
      g_string_append_c(out, esc);
    lx->i += 2;
    run = lx->i;
  }
}

/* RFC 8259 numbers only. Integers must fit int64 and other numbers must be
 * finite as float64. @is_float tells which. */
gboolean
sluice_json_lex__number(SluiceJsonLexer *lx, gboolean *out_is_float)
{
  gsize start = lx->i;
  gboolean negative = FALSE, is_float = FALSE;

  if (lx->t[lx->i] == '-') {
    negative = TRUE;
    lx->i++;
  }
  if (lx->i >= lx->len)
    return truncated(lx, "a number");
  if (lx->t[lx->i] == '0') {
    lx->i++;
    if (lx->i < lx->len && sluice_json_lex__is_digit(lx->t[lx->i]))
      return sluice_json_lex__error(
          lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
          "a number with a leading 0 (write 7, not 07, or quote it as a "
          "string: \"07\")");
  } else if (sluice_json_lex__is_digit(lx->t[lx->i])) {
    while (lx->i < lx->len && sluice_json_lex__is_digit(lx->t[lx->i]))
      lx->i++;
  } else {
    return sluice_json_lex__unexpected(lx, lx->i, "a digit");
  }
  if (lx->i < lx->len && lx->t[lx->i] == '.') {
    is_float = TRUE;
    lx->i++;
    if (lx->i >= lx->len)
      return truncated(lx, "a number");
    if (!sluice_json_lex__is_digit(lx->t[lx->i]))
      return sluice_json_lex__unexpected(lx, lx->i, "a digit after '.'");
    while (lx->i < lx->len && sluice_json_lex__is_digit(lx->t[lx->i]))
      lx->i++;
  }
  if (lx->i < lx->len && (lx->t[lx->i] == 'e' || lx->t[lx->i] == 'E')) {
    is_float = TRUE;
    lx->i++;
    if (lx->i < lx->len && (lx->t[lx->i] == '+' || lx->t[lx->i] == '-'))
      lx->i++;
    if (lx->i >= lx->len)
      return truncated(lx, "a number");
    if (!sluice_json_lex__is_digit(lx->t[lx->i]))
      return sluice_json_lex__unexpected(lx, lx->i, "a digit in the exponent");
    while (lx->i < lx->len && sluice_json_lex__is_digit(lx->t[lx->i]))
      lx->i++;
  }
  if (lx->i < lx->len &&
      (g_ascii_isalnum(lx->t[lx->i]) || lx->t[lx->i] == '.' ||
       lx->t[lx->i] == '-' || lx->t[lx->i] == '+'))
    return sluice_json_lex__unexpected(lx, lx->i, "the end of the number");

  if (!is_float) {
    guint64 limit = negative ? (guint64)G_MAXINT64 + 1 : (guint64)G_MAXINT64;
    guint64 value = 0;

    for (gsize k = start + negative; k < lx->i; k++) {
      guint digit = (guint)(lx->t[k] - '0');

      if (value > (limit - digit) / 10)
        return sluice_json_lex__error(
            lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
            "integer %.*s does not fit a signed 64-bit integer",
            (gint)MIN(lx->i - start, 40), lx->t + start);
      value = value * 10 + digit;
    }
  } else {
    gchar small[64];
    gsize n = lx->i - start;
    gchar *copy = n < sizeof small ? small : g_malloc(n + 1);
    gdouble d;

    /* strtod needs a terminator; the text may have none. */
    memcpy(copy, lx->t + start, n);
    copy[n] = '\0';
    d = g_ascii_strtod(copy, NULL);
    if (copy != small)
      g_free(copy);
    if (!isfinite(d))
      return sluice_json_lex__error(
          lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
          "number %.*s is out of the range of a float64", (gint)MIN(n, 40),
          lx->t + start);
  }
  if (out_is_float != NULL)
    *out_is_float = is_float;
  return TRUE;
}

gboolean
sluice_json_lex__literal(SluiceJsonLexer *lx)
{
  const gchar *word;

  switch (lx->t[lx->i]) {
  case 't':
    word = "true";
    break;
  case 'f':
    word = "false";
    break;
  default:
    word = "null";
    break;
  }
  for (gsize k = 0; word[k] != '\0'; k++) {
    if (lx->i + k >= lx->len)
      return truncated(lx, word);
    if (lx->t[lx->i + k] != word[k])
      return sluice_json_lex__unexpected(lx, lx->i + k, "true, false or null");
  }
  lx->i += strlen(word);
  if (lx->i < lx->len && g_ascii_isalnum(lx->t[lx->i]))
    return sluice_json_lex__unexpected(lx, lx->i, "the end of a literal");
  return TRUE;
}

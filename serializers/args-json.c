/* args-json.c - JSON <-> msgpack for task arguments, and the strict JSON
 * front end the JSON codec shares.
 *
 * Task arguments are one msgpack value. Humans and producers without a
 * msgpack library write them as JSON (`sluice enqueue TASK '{"n": 1}'`, the
 * JSON codec), so the two must convert both ways without losing anything a
 * JSON text can say:
 *
 *   JSON                         msgpack
 *   null / true / false          nil / true / false
 *   integer (fits int64)         the smallest int or uint encoding
 *   other numbers                float64 (a float32 comes back as float64)
 *   string                       str
 *   array / object               array / map with string keys
 *   {"$bin": "<base64>"}         bin (an object with that one member only)
 *
 * What JSON cannot carry is an error, never a silent change: ext values,
 * non-string or duplicate map keys, a map that would read back as a binary,
 * integers above 2^63-1, NaN and infinities, strings holding U+0000 or
 * invalid UTF-8.
 *
 * Parsing uses json-glib, behind a lexical pre-pass (json_prescan). The
 * pre-pass exists because json-glib, as shipped in Debian 12 (1.6), is both
 * recursive and lenient: it would overflow the stack on a deeply nested
 * input before any limit could be checked, and it accepts comments, single
 * quotes, hex and leading-zero numbers, raw control characters and `\x`
 * escapes, wraps integers that do not fit 64 bits, turns 1e400 into
 * infinity and cuts strings at \u0000. The pre-pass tokenizes the text
 * exactly as RFC 8259 does and refuses all of that, so json-glib is only
 * ever handed strict JSON of bounded depth, and only the grammar (commas,
 * colons, bracket pairs) is left to it.
 *
 * Writing does not use JsonGenerator: json-glib 1.6 writes 1e20 as
 * "1e+20.0", which is not JSON, and cannot write a string holding U+0000.
 * The writer below is small and emits compact RFC 8259 text whose numbers
 * read back as the same values.
 */
#include "config.h"

#include "core/sluice-private.h"
#include "serializers/codec-private.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Positions ------------------------------------------------------------
 */

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

static gboolean G_GNUC_PRINTF(5, 6)
    json_error(GError **error, gint code, const gchar *text, gsize offset,
               const gchar *format, ...)
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

/* ---- The strict lexical pre-pass ------------------------------------------
 */

typedef struct {
  const gchar *t;
  gsize len;
  gsize i;
  GError **error;
} Lexer;

static inline gboolean
is_space(gchar c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline gboolean
is_digit(gchar c)
{
  return c >= '0' && c <= '9';
}

static gboolean
truncated(Lexer *lx, const gchar *inside)
{
  return json_error(lx->error, SLUICE_CODEC_ERROR_TRUNCATED, lx->t, lx->len,
                    "the input ends inside %s", inside);
}

/* Describes the character at @offset for a message: 'x' or U+XXXX. */
static gchar *
describe_char(const gchar *t, gsize offset)
{
  gunichar c = g_utf8_get_char(t + offset);

  if (c > 0x20 && c < 0x7f)
    return g_strdup_printf("'%c'", (gchar)c);
  return g_strdup_printf("U+%04X", c);
}

static gboolean
unexpected(Lexer *lx, gsize offset, const gchar *expected)
{
  g_autofree gchar *found = describe_char(lx->t, offset);

  return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, offset,
                    "unexpected %s, expected %s", found, expected);
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
lex_u_escape(Lexer *lx, guint *out)
{
  guint cp = 0;

  for (gsize k = 2; k < 6; k++) {
    gint h;

    if (lx->i + k >= lx->len)
      return truncated(lx, "a \\u escape");
    h = hex_value(lx->t[lx->i + k]);
    if (h < 0)
      return unexpected(lx, lx->i + k, "a hex digit in a \\u escape");
    cp = cp << 4 | (guint)h;
  }
  *out = cp;
  return TRUE;
}

static gboolean
lex_string(Lexer *lx)
{
  lx->i++; /* the opening quote */
  for (;;) {
    guchar c;

    if (lx->i >= lx->len)
      return truncated(lx, "a string");
    c = (guchar)lx->t[lx->i];
    if (c == '"') {
      lx->i++;
      return TRUE;
    }
    if (c < 0x20)
      return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, lx->i,
                        "raw control character U+%04X in a string (write it "
                        "as an escape)",
                        c);
    if (c != '\\') {
      lx->i++;
      continue;
    }
    if (lx->i + 1 >= lx->len)
      return truncated(lx, "an escape");
    switch (lx->t[lx->i + 1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
      lx->i += 2;
      break;
    case 'u': {
      guint cp, low;
      gsize start = lx->i;

      if (!lex_u_escape(lx, &cp))
        return FALSE;
      if (cp == 0)
        return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
                          "\\u0000 is not supported (strings cannot hold NUL)");
      if (cp >= 0xdc00 && cp <= 0xdfff)
        return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
                          "\\u%04X is a lone low surrogate", cp);
      lx->i += 6;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        /* A high surrogate must be followed by an escaped low one. */
        if (lx->i + 1 >= lx->len)
          return truncated(lx, "a surrogate pair");
        if (lx->t[lx->i] != '\\' || lx->t[lx->i + 1] != 'u')
          return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
                            "\\u%04X is a lone high surrogate", cp);
        if (!lex_u_escape(lx, &low))
          return FALSE;
        if (low < 0xdc00 || low > 0xdfff)
          return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
                            "\\u%04X is a lone high surrogate", cp);
        lx->i += 6;
      }
      break;
    }
    default:
      return unexpected(lx, lx->i + 1,
                        "an escape (\\\" \\\\ \\/ \\b \\f \\n "
                        "\\r \\t \\uXXXX)");
    }
  }
}

/* RFC 8259 numbers only. Integers must fit int64 (json-glib would wrap
 * them) and other numbers must be finite as float64 (json-glib would give
 * infinity). */
static gboolean
lex_number(Lexer *lx)
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
    if (lx->i < lx->len && is_digit(lx->t[lx->i]))
      return unexpected(lx, lx->i, "no digit after a leading 0");
  } else if (is_digit(lx->t[lx->i])) {
    while (lx->i < lx->len && is_digit(lx->t[lx->i]))
      lx->i++;
  } else {
    return unexpected(lx, lx->i, "a digit");
  }
  if (lx->i < lx->len && lx->t[lx->i] == '.') {
    is_float = TRUE;
    lx->i++;
    if (lx->i >= lx->len)
      return truncated(lx, "a number");
    if (!is_digit(lx->t[lx->i]))
      return unexpected(lx, lx->i, "a digit after '.'");
    while (lx->i < lx->len && is_digit(lx->t[lx->i]))
      lx->i++;
  }
  if (lx->i < lx->len && (lx->t[lx->i] == 'e' || lx->t[lx->i] == 'E')) {
    is_float = TRUE;
    lx->i++;
    if (lx->i < lx->len && (lx->t[lx->i] == '+' || lx->t[lx->i] == '-'))
      lx->i++;
    if (lx->i >= lx->len)
      return truncated(lx, "a number");
    if (!is_digit(lx->t[lx->i]))
      return unexpected(lx, lx->i, "a digit in the exponent");
    while (lx->i < lx->len && is_digit(lx->t[lx->i]))
      lx->i++;
  }
  if (lx->i < lx->len &&
      (g_ascii_isalnum(lx->t[lx->i]) || lx->t[lx->i] == '.' ||
       lx->t[lx->i] == '-' || lx->t[lx->i] == '+'))
    return unexpected(lx, lx->i, "the end of the number");

  if (!is_float) {
    guint64 limit = negative ? (guint64)G_MAXINT64 + 1 : (guint64)G_MAXINT64;
    guint64 value = 0;

    for (gsize k = start + negative; k < lx->i; k++) {
      guint digit = (guint)(lx->t[k] - '0');

      if (value > (limit - digit) / 10)
        return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
                          "integer %.*s does not fit a signed 64-bit integer",
                          (gint)(lx->i - start), lx->t + start);
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
      return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
                        "number %.*s is out of the range of a float64",
                        (gint)MIN(n, 40), lx->t + start);
  }
  return TRUE;
}

static gboolean
lex_literal(Lexer *lx)
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
      return unexpected(lx, lx->i + k, "true, false or null");
  }
  lx->i += strlen(word);
  if (lx->i < lx->len && g_ascii_isalnum(lx->t[lx->i]))
    return unexpected(lx, lx->i, "the end of a literal");
  return TRUE;
}

static gboolean
json_prescan(const gchar *t, gsize len, guint max_depth, GError **error)
{
  Lexer lx = {t, len, 0, error};
  guint depth = 0;
  gboolean done = FALSE; /* a whole top-level value has been seen */
  const gchar *bad;

  if (!g_utf8_validate_len(t, len, &bad)) {
    /* A text cut inside a character is cut, not garbled. */
    if (g_utf8_get_char_validated(bad, (gssize)(len - (gsize)(bad - t))) ==
        (gunichar)-2)
      return json_error(error, SLUICE_CODEC_ERROR_TRUNCATED, t,
                        (gsize)(bad - t),
                        "the input ends inside a UTF-8 character");
    return json_error(error, SLUICE_CODEC_ERROR_INVALID, t, (gsize)(bad - t),
                      "not valid UTF-8 (or a NUL byte)");
  }

  while (lx.i < len) {
    gchar c = t[lx.i];

    if (is_space(c)) {
      lx.i++;
      continue;
    }
    if (done)
      return json_error(error, SLUICE_CODEC_ERROR_TRAILING, t, lx.i,
                        "more data after the JSON value");
    switch (c) {
    case '{':
    case '[':
      if (depth >= max_depth)
        return json_error(error, SLUICE_CODEC_ERROR_TOO_DEEP, t, lx.i,
                          "nesting deeper than the limit of %u", max_depth);
      depth++;
      lx.i++;
      break;
    case '}':
    case ']':
      if (depth == 0)
        return unexpected(&lx, lx.i, "a value");
      depth--;
      lx.i++;
      done = depth == 0;
      break;
    case ':':
    case ',':
      if (depth == 0)
        return unexpected(&lx, lx.i, "a value");
      lx.i++;
      break;
    case '"':
      if (!lex_string(&lx))
        return FALSE;
      done = depth == 0;
      break;
    case 't':
    case 'f':
    case 'n':
      if (!lex_literal(&lx))
        return FALSE;
      done = depth == 0;
      break;
    default:
      if (c != '-' && !is_digit(c))
        return unexpected(&lx, lx.i, "a JSON value or punctuation");
      if (!lex_number(&lx))
        return FALSE;
      done = depth == 0;
      break;
    }
  }
  if (depth > 0)
    return json_error(error, SLUICE_CODEC_ERROR_TRUNCATED, t, len,
                      "the input ends inside an object or array (%u still "
                      "open)",
                      depth);
  if (!done)
    return json_error(error, SLUICE_CODEC_ERROR_TRUNCATED, t, len,
                      "no JSON value (the input is empty)");
  return TRUE;
}

/* ---- Parsing --------------------------------------------------------------
 *
 * json-glib keeps the last of duplicate keys without a word. Its signals
 * tell us each member as it is added: an object that reports more members
 * than it holds has a duplicate. Objects nest, so the counts are a stack.
 */

typedef struct {
  GArray *counts;
  gchar *duplicate;
  guint line, column;
} DuplicateCheck;

static void
on_object_start(JsonParser *parser, gpointer data)
{
  DuplicateCheck *dc = data;
  guint zero = 0;

  g_array_append_val(dc->counts, zero);
}

static void
on_object_member(JsonParser *parser, JsonObject *object, const gchar *name,
                 gpointer data)
{
  DuplicateCheck *dc = data;
  guint *count;

  if (dc->counts->len == 0)
    return;
  count = &g_array_index(dc->counts, guint, dc->counts->len - 1);
  (*count)++;
  if (*count != json_object_get_size(object) && dc->duplicate == NULL) {
    dc->duplicate = g_strdup(name);
    dc->line = json_parser_get_current_line(parser);
    dc->column = json_parser_get_current_pos(parser);
  }
}

static void
on_object_end(JsonParser *parser, JsonObject *object, gpointer data)
{
  DuplicateCheck *dc = data;

  if (dc->counts->len > 0)
    g_array_set_size(dc->counts, dc->counts->len - 1);
}

/* json-glib says "<data>:3:2: Parse error: ..."; say it our way. */
static void
set_parser_error(GError **error, const GError *parse_error)
{
  const gchar *msg = parse_error->message;
  guint line, column;
  gint n = 0;

  if (g_str_has_prefix(msg, "<data>:") &&
      sscanf(msg + 7, "%u:%u: %n", &line, &column, &n) == 2 && n > 0) {
    const gchar *rest = msg + 7 + n;

    if (g_str_has_prefix(rest, "Parse error: "))
      rest += strlen("Parse error: ");
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "line %u, column %u: %s", line, column, rest);
  } else {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "JSON syntax error: %s", msg);
  }
}

JsonNode *
sluice_json__parse(const gchar *text, gsize len, guint max_depth,
                   GError **error)
{
  JsonParser *parser;
  DuplicateCheck dc = {NULL, NULL, 0, 0};
  GError *parse_error = NULL;
  JsonNode *root = NULL;

  max_depth = MIN(max_depth, SLUICE_JSON_MAX_DEPTH);
  if (!json_prescan(text, len, max_depth, error))
    return NULL;

  parser = json_parser_new_immutable();
  dc.counts = g_array_new(FALSE, FALSE, sizeof(guint));
  g_signal_connect(parser, "object-start", G_CALLBACK(on_object_start), &dc);
  g_signal_connect(parser, "object-member", G_CALLBACK(on_object_member), &dc);
  g_signal_connect(parser, "object-end", G_CALLBACK(on_object_end), &dc);

  if (!json_parser_load_from_data(parser, text, (gssize)len, &parse_error)) {
    set_parser_error(error, parse_error);
    g_error_free(parse_error);
  } else if (dc.duplicate != NULL) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "line %u, column %u: duplicate key \"%s\"", dc.line, dc.column,
                dc.duplicate);
  } else {
    root = json_parser_steal_root(parser);
  }

  g_free(dc.duplicate);
  g_array_unref(dc.counts);
  g_object_unref(parser);
  return root;
}

/* ---- JSON -> msgpack ------------------------------------------------------
 */

/* Strict base64: the alphabet of RFC 4648 section 4, padded. g_base64_decode
 * skips what it does not know, which would turn a typo into other bytes. */
static gboolean
is_base64(const gchar *s, gsize len)
{
  if (len % 4 != 0)
    return FALSE;
  for (gsize i = 0; i < len; i++) {
    gchar c = s[i];

    if (g_ascii_isalnum(c) || c == '+' || c == '/')
      continue;
    if (c == '=' && (i == len - 1 || (i == len - 2 && s[len - 1] == '=')))
      continue;
    return FALSE;
  }
  return TRUE;
}

/* Returns: (transfer none) (nullable): the base64 text when @object is
 * exactly {"$bin": "<string>"}. */
static const gchar *
bin_text(JsonObject *object)
{
  JsonNode *member;

  if (json_object_get_size(object) != 1)
    return NULL;
  member = json_object_get_member(object, "$bin");
  if (member == NULL || !JSON_NODE_HOLDS_VALUE(member) ||
      json_node_get_value_type(member) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string(member);
}

/* Recursion is bounded by sluice_json__parse()'s depth limit. */
static gboolean
pack_node(msgpack_packer *pk, JsonNode *node, GError **error)
{
  int rc = 0;

  switch (json_node_get_node_type(node)) {
  case JSON_NODE_NULL:
    rc = msgpack_pack_nil(pk);
    break;
  case JSON_NODE_VALUE: {
    GType type = json_node_get_value_type(node);

    if (type == G_TYPE_INT64) {
      rc = msgpack_pack_int64(pk, json_node_get_int(node));
    } else if (type == G_TYPE_DOUBLE) {
      rc = msgpack_pack_double(pk, json_node_get_double(node));
    } else if (type == G_TYPE_BOOLEAN) {
      rc = json_node_get_boolean(node) ? msgpack_pack_true(pk)
                                       : msgpack_pack_false(pk);
    } else {
      const gchar *s = json_node_get_string(node);
      gsize len = strlen(s);

      rc = msgpack_pack_str(pk, len) | msgpack_pack_str_body(pk, s, len);
    }
    break;
  }
  case JSON_NODE_ARRAY: {
    JsonArray *array = json_node_get_array(node);
    guint n = json_array_get_length(array);

    rc = msgpack_pack_array(pk, n);
    for (guint i = 0; i < n && rc == 0; i++) {
      if (!pack_node(pk, json_array_get_element(array, i), error))
        return FALSE;
    }
    break;
  }
  case JSON_NODE_OBJECT: {
    JsonObject *object = json_node_get_object(node);
    const gchar *b64 = bin_text(object);
    JsonObjectIter iter;
    const gchar *name;
    JsonNode *member;

    if (b64 != NULL) {
      gsize len = strlen(b64), n = 0;
      guchar *bin;

      if (!is_base64(b64, len)) {
        g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                    "{\"$bin\": ...} must hold padded base64 text (RFC 4648), "
                    "found \"%.40s\"",
                    b64);
        return FALSE;
      }
      bin = len > 0 ? g_base64_decode(b64, &n) : NULL;
      rc = msgpack_pack_bin(pk, n) | msgpack_pack_bin_body(pk, bin, n);
      g_free(bin);
      break;
    }
    rc = msgpack_pack_map(pk, json_object_get_size(object));
    /* Insertion order, so that msgpack -> JSON -> msgpack gives the same
     * bytes back. */
    json_object_iter_init_ordered(&iter, object);
    while (rc == 0 && json_object_iter_next_ordered(&iter, &name, &member)) {
      gsize len = strlen(name);

      rc = msgpack_pack_str(pk, len) | msgpack_pack_str_body(pk, name, len);
      if (!pack_node(pk, member, error))
        return FALSE;
    }
    break;
  }
  }
  if (rc != 0)
    g_error("sluice: out of memory while packing JSON arguments");
  return TRUE;
}

static void
free_malloced(gpointer data)
{
  free(data);
}

GBytes *
sluice_args__from_json_node(JsonNode *node, GError **error)
{
  msgpack_sbuffer sbuf;
  msgpack_packer pk;
  gchar *data;
  gsize size;

  msgpack_sbuffer_init(&sbuf);
  msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
  if (!pack_node(&pk, node, error)) {
    msgpack_sbuffer_destroy(&sbuf);
    return NULL;
  }
  /* The sbuffer's malloc'd block becomes the GBytes' data: no copy. */
  size = sbuf.size;
  data = msgpack_sbuffer_release(&sbuf);
  return g_bytes_new_with_free_func(data, size, free_malloced, data);
}

/* ---- msgpack -> JSON ------------------------------------------------------
 */

void
sluice_json__append_string(GString *out, const gchar *s, gsize len)
{
  static const gchar hex[] = "0123456789abcdef";
  gsize run = 0; /* start of the bytes not yet copied */

  g_string_append_c(out, '"');
  for (gsize i = 0; i < len; i++) {
    guchar c = (guchar)s[i];
    gchar esc;

    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    g_string_append_len(out, s + run, (gssize)(i - run));
    run = i + 1;
    switch (c) {
    case '"':
      esc = '"';
      break;
    case '\\':
      esc = '\\';
      break;
    case '\b':
      esc = 'b';
      break;
    case '\f':
      esc = 'f';
      break;
    case '\n':
      esc = 'n';
      break;
    case '\r':
      esc = 'r';
      break;
    case '\t':
      esc = 't';
      break;
    default:
      esc = 0;
      break;
    }
    if (esc != 0) {
      g_string_append_c(out, '\\');
      g_string_append_c(out, esc);
    } else {
      g_string_append(out, "\\u00");
      g_string_append_c(out, hex[c >> 4]);
      g_string_append_c(out, hex[c & 0xf]);
    }
  }
  g_string_append_len(out, s + run, (gssize)(len - run));
  g_string_append_c(out, '"');
}

void
sluice_json__append_double(GString *out, gdouble d)
{
  static const gchar *const formats[] = {"%.15g", "%.16g", "%.17g"};
  gchar buf[G_ASCII_DTOSTR_BUF_SIZE];

  g_return_if_fail(isfinite(d));

  /* The shortest of these that reads back exactly: 0.1 stays "0.1" rather
   * than "0.10000000000000001", and %.17g always round-trips. */
  for (guint i = 0; i < G_N_ELEMENTS(formats); i++) {
    g_ascii_formatd(buf, sizeof buf, formats[i], d);
    if (g_ascii_strtod(buf, NULL) == d)
      break;
  }
  g_string_append(out, buf);
  /* "2" would read back as an integer; keep it a float. */
  if (strpbrk(buf, ".eE") == NULL)
    g_string_append(out, ".0");
}

static gboolean
cannot_express(GError **error, const SluiceMpValue *v, const gchar *what)
{
  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
              "byte offset %" G_GSIZE_FORMAT ": %s, which JSON cannot express",
              v->offset, what);
  return FALSE;
}

static gboolean
same_key(const SluiceMpValue *a, const SluiceMpValue *b)
{
  return a->raw.len == b->raw.len &&
         memcmp(a->raw.data, b->raw.data, a->raw.len) == 0;
}

/* Maps up to this size find duplicate keys by comparing each pair; bigger
 * ones use a hash set, so a large map cannot make this quadratic. */
#define SMALL_MAP 8

static gboolean write_value(GString *out, SluiceMpReader *r, guint depth,
                            guint max_depth, GError **error);

static gboolean
write_map(GString *out, SluiceMpReader *r, const SluiceMpValue *map,
          guint depth, guint max_depth, GError **error)
{
  SluiceMpValue seen[SMALL_MAP];
  GHashTable *set = NULL;
  gboolean ok = TRUE;

  g_string_append_c(out, '{');
  for (guint32 i = 0; i < map->count && ok; i++) {
    SluiceMpValue key;

    if (!sluice_mp_reader__next(r, &key, error)) {
      ok = FALSE;
      break;
    }
    if (key.type != SLUICE_MP_STR) {
      g_autofree gchar *what =
          g_strdup_printf("a map key is a(n) %s (JSON object keys are strings)",
                          sluice_mp__type_name(key.type));
      ok = cannot_express(error, &key, what);
      break;
    }
    if (!g_utf8_validate_len(key.raw.data, key.raw.len, NULL)) {
      ok =
          cannot_express(error, &key, "a map key is not UTF-8 or holds U+0000");
      break;
    }
    /* {"$bin": "..."} reads back as a binary, not as this map. */
    if (map->count == 1 && key.raw.len == 4 &&
        memcmp(key.raw.data, "$bin", 4) == 0 && r->pos < r->len) {
      guint8 m = r->data[r->pos];

      if ((m >= 0xa0 && m <= 0xbf) || (m >= 0xd9 && m <= 0xdb)) {
        ok = cannot_express(error, &key,
                            "a map whose only key is \"$bin\" holds a string "
                            "(it would read back as a binary)");
        break;
      }
    }
    if (map->count <= SMALL_MAP) {
      for (guint32 k = 0; k < i && ok; k++) {
        if (same_key(&seen[k], &key))
          ok = FALSE;
      }
      seen[i] = key;
    } else {
      gchar *name = g_strndup(key.raw.data, key.raw.len);

      if (set == NULL)
        set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
      ok = g_hash_table_add(set, name);
    }
    if (!ok) {
      g_autofree gchar *what =
          g_strdup_printf("the map key \"%.*s\" appears twice",
                          (gint)MIN(key.raw.len, 64), key.raw.data);
      cannot_express(error, &key, what);
      break;
    }

    if (i > 0)
      g_string_append_c(out, ',');
    sluice_json__append_string(out, key.raw.data, key.raw.len);
    g_string_append_c(out, ':');
    ok = write_value(out, r, depth + 1, max_depth, error);
  }
  if (set != NULL)
    g_hash_table_unref(set);
  g_string_append_c(out, '}');
  return ok;
}

/* @depth: the depth a container read here has. Recursion is bounded by
 * @max_depth, which callers keep at or below SLUICE_JSON_MAX_DEPTH. */
static gboolean
write_value(GString *out, SluiceMpReader *r, guint depth, guint max_depth,
            GError **error)
{
  SluiceMpValue v;

  if (!sluice_mp_reader__next(r, &v, error))
    return FALSE;

  switch (v.type) {
  case SLUICE_MP_NIL:
    g_string_append(out, "null");
    return TRUE;
  case SLUICE_MP_BOOL:
    g_string_append(out, v.b ? "true" : "false");
    return TRUE;
  case SLUICE_MP_UINT:
    if (v.u > G_MAXINT64)
      return cannot_express(error, &v,
                            "an integer above 2^63-1 (JSON integers here are "
                            "signed 64-bit)");
    g_string_append_printf(out, "%" G_GUINT64_FORMAT, v.u);
    return TRUE;
  case SLUICE_MP_INT:
    g_string_append_printf(out, "%" G_GINT64_FORMAT, v.i);
    return TRUE;
  case SLUICE_MP_FLOAT32:
  case SLUICE_MP_FLOAT64:
    if (!isfinite(v.f))
      return cannot_express(error, &v, "a NaN or infinite float");
    sluice_json__append_double(out, v.f);
    return TRUE;
  case SLUICE_MP_STR:
    if (!g_utf8_validate_len(v.raw.data, v.raw.len, NULL))
      return cannot_express(error, &v,
                            "a string that is not UTF-8 or holds U+0000");
    sluice_json__append_string(out, v.raw.data, v.raw.len);
    return TRUE;
  case SLUICE_MP_BIN: {
    gchar *b64 = g_base64_encode((const guchar *)v.raw.data, v.raw.len);

    g_string_append(out, "{\"$bin\":\"");
    g_string_append(out, b64);
    g_string_append(out, "\"}");
    g_free(b64);
    return TRUE;
  }
  case SLUICE_MP_EXT: {
    g_autofree gchar *what =
        g_strdup_printf("an ext value (type %d)", v.raw.ext_type);
    return cannot_express(error, &v, what);
  }
  case SLUICE_MP_ARRAY:
  case SLUICE_MP_MAP:
    if (depth > max_depth) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP,
                  "byte offset %" G_GSIZE_FORMAT
                  ": nesting deeper than the limit of %u",
                  v.offset, max_depth);
      return FALSE;
    }
    if (v.type == SLUICE_MP_MAP)
      return write_map(out, r, &v, depth, max_depth, error);
    g_string_append_c(out, '[');
    for (guint32 i = 0; i < v.count; i++) {
      if (i > 0)
        g_string_append_c(out, ',');
      if (!write_value(out, r, depth + 1, max_depth, error))
        return FALSE;
    }
    g_string_append_c(out, ']');
    return TRUE;
  }
  g_return_val_if_reached(FALSE);
}

gboolean
sluice_args__append_json(GString *out, gconstpointer data, gsize len,
                         guint max_depth, GError **error)
{
  SluiceMpReader r;

  sluice_mp_reader_init(&r, data, len);
  if (!write_value(out, &r, 1, MIN(max_depth, SLUICE_JSON_MAX_DEPTH), error))
    return FALSE;
  if (r.pos != r.len) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRAILING,
                "byte offset %" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT
                " bytes follow the value (exactly one value was expected)",
                r.pos, r.len - r.pos);
    return FALSE;
  }
  return TRUE;
}

/* ---- Public API -----------------------------------------------------------
 */

GBytes *
sluice_args_from_json(const gchar *json, gssize length, GError **error)
{
  JsonNode *root;
  GBytes *bytes;

  g_return_val_if_fail(json != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  root = sluice_json__parse(json, length < 0 ? strlen(json) : (gsize)length,
                            SLUICE_ARGS_FROM_JSON_MAX_DEPTH, error);
  if (root == NULL)
    return NULL;
  bytes = sluice_args__from_json_node(root, error);
  json_node_unref(root);
  return bytes;
}

gchar *
sluice_args_to_json(GBytes *msgpack, GError **error)
{
  GString *out;
  gconstpointer data;
  gsize len;

  g_return_val_if_fail(msgpack != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  data = g_bytes_get_data(msgpack, &len);
  out = g_string_sized_new(len * 2 + 16);
  if (!sluice_args__append_json(out, data, len, SLUICE_JSON_MAX_DEPTH, error)) {
    g_string_free(out, TRUE);
    return NULL;
  }
  return g_string_free(out, FALSE);
}

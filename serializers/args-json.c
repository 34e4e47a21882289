/* args-json.c - JSON <-> msgpack for task arguments, and the strict JSON
 * reader the JSON codec shares.
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
 * Reading is two passes over the text and builds no tree:
 *
 *   1. sluice_json__scan() checks the whole text against RFC 8259, strictly
 *      (no comments, single quotes, hex or leading-zero numbers, raw control
 *      characters, \u0000, lone surrogates, integers beyond 64 bits, numbers
 *      beyond float64, duplicate keys), enforces the depth limit, and
 *      records one number per container: how many elements or members it
 *      has. It keeps an explicit stack, so no input can exhaust the C stack.
 *   2. A cursor (SluiceJsonCursor) walks the checked text again and hands
 *      out values: the args converter writes msgpack straight from it
 *      (container headers need the counts of pass 1), and the JSON codec
 *      reads the envelope's fields from it.
 *
 * A tree (json-glib's JsonParser, which this replaced) costs 40 to 120
 * bytes per value, so a 1 MiB text of tiny values cost a worker 50 MB to
 * look at. Here a text of n bytes costs at most what PROTOCOL.md states
 * (about 7n at the peak: the counts, the keys of the objects open at a time
 * for the duplicate check, and the msgpack written), and the test suite
 * measures it.
 *
 * Writing does not use a generator either: the writer below emits compact
 * RFC 8259 text whose numbers read back as the same values.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/text.h"
#include "serializers/codec-private.h"

#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
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

/* ---- Tokens ---------------------------------------------------------------
 *
 * The lexer reads one token at lx->i. Pass 1 runs it on any text; pass 2
 * runs the same functions on text pass 1 accepted, to decode strings.
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

/* Describes the character at @offset for a message: 'x' or U+XXXX. The
 * text is valid UTF-8 (checked first). */
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

/* A string token at lx->i (its opening quote). With @out, its decoded
 * bytes are appended to it. */
static gboolean
lex_string(Lexer *lx, GString *out)
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
      return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, lx->i,
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
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      }
      if (out != NULL)
        g_string_append_unichar(out, cp);
      run = lx->i;
      continue;
    }
    default:
      return unexpected(lx, lx->i + 1,
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
static gboolean
lex_number(Lexer *lx, gboolean *out_is_float)
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
      return json_error(lx->error, SLUICE_CODEC_ERROR_INVALID, lx->t, start,
                        "number %.*s is out of the range of a float64",
                        (gint)MIN(n, 40), lx->t + start);
  }
  if (out_is_float != NULL)
    *out_is_float = is_float;
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

/* ---- Pass 1: the check --------------------------------------------------- */

struct _SluiceJsonDoc {
  const gchar *text;
  gsize len;
  GArray *counts; /* guint32 per container, in the order they open */
};

/* A key of an object still open, for the duplicate check: 12 bytes, as
 * texts are shorter than 4 GiB. */
typedef struct {
  guint32 arena_offset; /* its decoded bytes, in Scan.arena */
  guint32 length;
  guint32 offset; /* where it is in the text */
} KeyRecord;

typedef struct {
  gboolean is_object;
  /* Opened one level beyond the depth limit, which only {"$bin": "..."}
   * may do: it stands for a msgpack bin, a scalar (see PROTOCOL.md). */
  gboolean bin_leaf;
  guint32 count;
  guint index;       /* in counts */
  gsize keys_start;  /* its first KeyRecord */
  gsize arena_start; /* where its keys start in the arena */
  gsize offset;      /* of its bracket */
} Frame;

typedef enum {
  EXPECT_VALUE,          /* at the top, after ':' or after ',' in an array */
  EXPECT_VALUE_OR_CLOSE, /* after '[' */
  EXPECT_KEY_OR_CLOSE,   /* after '{' */
  EXPECT_KEY,            /* after ',' in an object */
  EXPECT_COLON,          /* after a key */
  EXPECT_COMMA_OR_CLOSE, /* after a value inside a container */
} Expect;

typedef struct {
  Lexer lx;
  guint max_depth;
  GArray *stack; /* Frame */
  GArray *counts;
  GArray *keys; /* KeyRecord */
  GString *arena;
  gsize last_comma;
} Scan;

static gint
compare_keys(gconstpointer a, gconstpointer b, gpointer arena)
{
  const KeyRecord *x = a, *y = b;
  const gchar *base = ((GString *)arena)->str;
  gint c = memcmp(base + x->arena_offset, base + y->arena_offset,
                  MIN(x->length, y->length));

  if (c != 0)
    return c;
  if (x->length != y->length)
    return x->length < y->length ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static gboolean
same_key_bytes(const Scan *sc, const KeyRecord *a, const KeyRecord *b)
{
  return a->length == b->length &&
         memcmp(sc->arena->str + a->arena_offset,
                sc->arena->str + b->arena_offset, a->length) == 0;
}

/* Fails when the object @f closes with a key twice, naming the earliest
 * repeat; then forgets its keys. Small objects compare each pair; larger
 * ones sort, so that no object can make this quadratic. */
static gboolean
check_duplicates(Scan *sc, const Frame *f)
{
  gsize n = sc->keys->len - f->keys_start;
  const KeyRecord *repeat = NULL;
  KeyRecord *keys;
  gboolean ok = TRUE;

  /* An empty GArray has no data at all: no pointer to take into it. */
  if (n < 2)
    goto out;
  keys = &g_array_index(sc->keys, KeyRecord, f->keys_start);
  if (n <= 8) {
    for (gsize j = 1; j < n; j++)
      for (gsize i = 0; i < j; i++)
        if ((repeat == NULL || keys[j].offset < repeat->offset) &&
            same_key_bytes(sc, &keys[i], &keys[j]))
          repeat = &keys[j];
  } else {
    g_qsort_with_data(keys, (gint)n, sizeof *keys, compare_keys, sc->arena);
    for (gsize j = 1; j < n; j++)
      if ((repeat == NULL || keys[j].offset < repeat->offset) &&
          same_key_bytes(sc, &keys[j - 1], &keys[j]))
        repeat = &keys[j];
  }
  if (repeat != NULL) {
    g_autofree gchar *name = sluice_text__escape(
        sc->arena->str + repeat->arena_offset, (gssize)repeat->length, 64);
    ok = json_error(sc->lx.error, SLUICE_CODEC_ERROR_INVALID, sc->lx.t,
                    repeat->offset, "duplicate key \"%s\"", name);
  }
out:
  g_array_set_size(sc->keys, f->keys_start);
  g_string_truncate(sc->arena, f->arena_start);
  return ok;
}

static gboolean
too_deep(Scan *sc, gsize offset)
{
  return json_error(sc->lx.error, SLUICE_CODEC_ERROR_TOO_DEEP, sc->lx.t, offset,
                    "nesting deeper than the limit of %u", sc->max_depth);
}

static Frame *
top_frame(Scan *sc)
{
  return sc->stack->len > 0
             ? &g_array_index(sc->stack, Frame, sc->stack->len - 1)
             : NULL;
}

/* A container opens at lx.i. */
static gboolean
open_container(Scan *sc, gboolean is_object)
{
  Frame f = {0};
  guint32 zero = 0;
  guint depth = sc->stack->len + 1;

  f.is_object = is_object;
  f.offset = sc->lx.i;
  if (depth > sc->max_depth) {
    Frame *parent = top_frame(sc);

    if (!is_object || depth > sc->max_depth + 1 ||
        (parent != NULL && parent->bin_leaf))
      return too_deep(sc, sc->lx.i);
    f.bin_leaf = TRUE;
  }
  f.index = sc->counts->len;
  f.keys_start = sc->keys->len;
  f.arena_start = sc->arena->len;
  g_array_append_val(sc->counts, zero);
  g_array_append_val(sc->stack, f);
  sc->lx.i++;
  return TRUE;
}

static gboolean
close_container(Scan *sc)
{
  Frame f = *top_frame(sc);

  /* {} or {"$bin": "..."} cut short is a map, too deep here. */
  if (f.bin_leaf && f.count != 1)
    return too_deep(sc, f.offset);
  g_array_set_size(sc->stack, sc->stack->len - 1);
  g_array_index(sc->counts, guint32, f.index) = f.count;
  sc->lx.i++;
  if (f.is_object)
    return check_duplicates(sc, &f);
  return TRUE;
}

/* One more element or member in the container on top. */
static gboolean
count_one(Scan *sc)
{
  Frame *f = top_frame(sc);

  if (f->count == G_MAXUINT32)
    return json_error(sc->lx.error, SLUICE_CODEC_ERROR_TOO_LARGE, sc->lx.t,
                      sc->lx.i, "more than %u elements in one container",
                      G_MAXUINT32);
  f->count++;
  return TRUE;
}

static gboolean
scan_key(Scan *sc)
{
  Frame *f = top_frame(sc);
  KeyRecord k;

  k.offset = (guint32)sc->lx.i;
  k.arena_offset = (guint32)sc->arena->len;
  if (!lex_string(&sc->lx, sc->arena))
    return FALSE;
  k.length = (guint32)(sc->arena->len - k.arena_offset);
  if (f->bin_leaf) {
    /* Only {"$bin": "..."} may stand one level beyond the limit. */
    if (f->count > 0 || k.length != 4 ||
        memcmp(sc->arena->str + k.arena_offset, "$bin", 4) != 0)
      return too_deep(sc, f->offset);
  }
  g_array_append_val(sc->keys, k);
  return count_one(sc);
}

static gboolean
scan_scalar(Scan *sc)
{
  gchar c = sc->lx.t[sc->lx.i];

  if (c == '"')
    return lex_string(&sc->lx, NULL);
  if (c == 't' || c == 'f' || c == 'n')
    return lex_literal(&sc->lx);
  if (c == '-' || is_digit(c))
    return lex_number(&sc->lx, NULL);
  return unexpected(&sc->lx, sc->lx.i, "a JSON value");
}

static void
scan_clear(Scan *sc)
{
  g_array_unref(sc->stack);
  g_array_unref(sc->keys);
  g_string_free(sc->arena, TRUE);
  if (sc->counts != NULL)
    g_array_unref(sc->counts);
}

SluiceJsonDoc *
sluice_json__scan(const gchar *text, gsize len, guint max_depth, GError **error)
{
  Scan sc;
  Expect expect = EXPECT_VALUE;
  gboolean done = FALSE; /* a whole top-level value has been seen */
  const gchar *bad;
  SluiceJsonDoc *doc;

  if (!g_utf8_validate_len(text, len, &bad)) {
    /* A text cut inside a character is cut, not garbled. */
    if (g_utf8_get_char_validated(bad, (gssize)(len - (gsize)(bad - text))) ==
        (gunichar)-2)
      json_error(error, SLUICE_CODEC_ERROR_TRUNCATED, text, (gsize)(bad - text),
                 "the input ends inside a UTF-8 character");
    else
      json_error(error, SLUICE_CODEC_ERROR_INVALID, text, (gsize)(bad - text),
                 "not valid UTF-8 (or a NUL byte)");
    return NULL;
  }

  /* Offsets are kept in 32 bits (KeyRecord). */
  if (len > G_MAXUINT32) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE,
                "a JSON text of %" G_GSIZE_FORMAT
                " bytes: the reader takes at most 4 GiB",
                len);
    return NULL;
  }
  sc.lx = (Lexer){text, len, 0, error};
  sc.max_depth = MIN(max_depth, SLUICE_JSON_MAX_DEPTH);
  sc.stack = g_array_new(FALSE, FALSE, sizeof(Frame));
  sc.counts = g_array_new(FALSE, FALSE, sizeof(guint32));
  sc.keys = g_array_new(FALSE, FALSE, sizeof(KeyRecord));
  sc.arena = g_string_new(NULL);
  sc.last_comma = 0;

  while (sc.lx.i < len) {
    gchar c = text[sc.lx.i];
    Frame *top;
    gboolean value_done = FALSE;

    if (is_space(c)) {
      sc.lx.i++;
      continue;
    }
    if (done) {
      json_error(error, SLUICE_CODEC_ERROR_TRAILING, text, sc.lx.i,
                 "more data after the JSON value");
      goto fail;
    }
    top = top_frame(&sc);
    switch (expect) {
    case EXPECT_KEY_OR_CLOSE:
    case EXPECT_KEY:
      if (c == '"') {
        if (!scan_key(&sc))
          goto fail;
        expect = EXPECT_COLON;
        break;
      }
      if (c == '}' && expect == EXPECT_KEY) {
        json_error(error, SLUICE_CODEC_ERROR_INVALID, text, sc.last_comma,
                   "a comma before '}' (no member follows it)");
        goto fail;
      }
      if (c == '}') {
        if (!close_container(&sc))
          goto fail;
        value_done = TRUE;
        break;
      }
      unexpected(&sc.lx, sc.lx.i,
                 expect == EXPECT_KEY ? "a key (a string)"
                                      : "a key (a string) or '}'");
      goto fail;
    case EXPECT_COLON:
      if (c != ':') {
        unexpected(&sc.lx, sc.lx.i, "':'");
        goto fail;
      }
      sc.lx.i++;
      expect = EXPECT_VALUE;
      break;
    case EXPECT_COMMA_OR_CLOSE:
      if (c == ',') {
        if (top->bin_leaf) {
          too_deep(&sc, top->offset);
          goto fail;
        }
        sc.last_comma = sc.lx.i++;
        expect = top->is_object ? EXPECT_KEY : EXPECT_VALUE;
        break;
      }
      if (c == (top->is_object ? '}' : ']')) {
        if (!close_container(&sc))
          goto fail;
        value_done = TRUE;
        break;
      }
      unexpected(&sc.lx, sc.lx.i, top->is_object ? "',' or '}'" : "',' or ']'");
      goto fail;
    case EXPECT_VALUE_OR_CLOSE:
    case EXPECT_VALUE:
      if (c == ']' && expect == EXPECT_VALUE_OR_CLOSE) {
        if (!close_container(&sc))
          goto fail;
        value_done = TRUE;
        break;
      }
      if (c == ']' && top != NULL && !top->is_object &&
          expect == EXPECT_VALUE) {
        json_error(error, SLUICE_CODEC_ERROR_INVALID, text, sc.last_comma,
                   "a comma before ']' (no element follows it)");
        goto fail;
      }
      if (top != NULL && top->bin_leaf && c != '"') {
        /* {"$bin": <not a string>} is a map, and a map here is too deep. */
        too_deep(&sc, top->offset);
        goto fail;
      }
      if (top != NULL && !top->is_object && !count_one(&sc))
        goto fail;
      if (c == '{' || c == '[') {
        if (!open_container(&sc, c == '{'))
          goto fail;
        expect = c == '{' ? EXPECT_KEY_OR_CLOSE : EXPECT_VALUE_OR_CLOSE;
        break;
      }
      if (!scan_scalar(&sc))
        goto fail;
      value_done = TRUE;
      break;
    }
    if (value_done) {
      if (sc.stack->len == 0)
        done = TRUE;
      else
        expect = EXPECT_COMMA_OR_CLOSE;
    }
  }
  if (sc.stack->len > 0) {
    json_error(error, SLUICE_CODEC_ERROR_TRUNCATED, text, len,
               "the input ends inside an object or array (%u still open)",
               sc.stack->len);
    goto fail;
  }
  if (!done) {
    json_error(error, SLUICE_CODEC_ERROR_TRUNCATED, text, len,
               "no JSON value (the input is empty)");
    goto fail;
  }

  doc = g_new0(SluiceJsonDoc, 1);
  doc->text = text;
  doc->len = len;
  doc->counts = g_steal_pointer(&sc.counts);
  scan_clear(&sc);
  return doc;

fail:
  scan_clear(&sc);
  return NULL;
}

void
sluice_json__doc_free(SluiceJsonDoc *doc)
{
  if (doc == NULL)
    return;
  g_array_unref(doc->counts);
  g_free(doc);
}

/* ---- Pass 2: the cursor ---------------------------------------------------
 *
 * The text was checked, so the cursor trusts its grammar: before each token
 * it steps over blanks, commas, colons and closing brackets (a container's
 * count says where it ends), and every token is well-formed.
 */

void
sluice_json__cursor_init(SluiceJsonCursor *cur, const SluiceJsonDoc *doc)
{
  cur->doc = doc;
  cur->i = 0;
  cur->next_container = 0;
  cur->scratch = g_string_new(NULL);
}

void
sluice_json__cursor_clear(SluiceJsonCursor *cur)
{
  if (cur->scratch != NULL)
    g_string_free(cur->scratch, TRUE);
  cur->scratch = NULL;
}

static gchar
cur_peek(SluiceJsonCursor *cur)
{
  const gchar *t = cur->doc->text;

  while (cur->i < cur->doc->len) {
    gchar c = t[cur->i];

    if (!is_space(c) && c != ',' && c != ':' && c != ']' && c != '}')
      return c;
    cur->i++;
  }
  return '\0';
}

/* Decodes the string at the cursor into cur->scratch. */
static void
cur_string(SluiceJsonCursor *cur)
{
  Lexer lx = {cur->doc->text, cur->doc->len, cur->i, NULL};

  g_string_truncate(cur->scratch, 0);
  (void)lex_string(&lx, cur->scratch);
  cur->i = lx.i;
}

static guint32
cur_open(SluiceJsonCursor *cur)
{
  cur->i++;
  return g_array_index(cur->doc->counts, guint32, cur->next_container++);
}

void
sluice_json__cursor_value(SluiceJsonCursor *cur, SluiceMpValue *v)
{
  const gchar *t = cur->doc->text;
  gchar c = cur_peek(cur);

  v->offset = G_MAXSIZE;
  switch (c) {
  case '{':
    v->type = SLUICE_MP_MAP;
    v->count = cur_open(cur);
    return;
  case '[':
    v->type = SLUICE_MP_ARRAY;
    v->count = cur_open(cur);
    return;
  case '"':
    cur_string(cur);
    v->type = SLUICE_MP_STR;
    v->raw.data = cur->scratch->str;
    /* A SluiceMpValue string holds at most 4 GiB; a longer one (only
     * possible with a max_bytes above that) is cut, never read past. */
    v->raw.len = (guint32)MIN(cur->scratch->len, G_MAXUINT32);
    return;
  case 't':
  case 'f':
    v->type = SLUICE_MP_BOOL;
    v->b = c == 't';
    cur->i += c == 't' ? 4 : 5;
    return;
  case 'n':
    v->type = SLUICE_MP_NIL;
    cur->i += 4;
    return;
  default: {
    Lexer lx = {t, cur->doc->len, cur->i, NULL};
    gboolean is_float = FALSE;
    gsize start = cur->i, n;

    (void)lex_number(&lx, &is_float);
    cur->i = lx.i;
    n = cur->i - start;
    if (is_float) {
      gchar small[64];
      gchar *copy = n < sizeof small ? small : g_malloc(n + 1);

      memcpy(copy, t + start, n);
      copy[n] = '\0';
      v->type = SLUICE_MP_FLOAT64;
      v->f = g_ascii_strtod(copy, NULL);
      if (copy != small)
        g_free(copy);
    } else {
      gboolean negative = t[start] == '-';
      guint64 magnitude = 0;

      /* Checked by pass 1 to fit an int64. */
      for (gsize k = start + negative; k < cur->i; k++)
        magnitude = magnitude * 10 + (guint64)(t[k] - '0');
      if (negative && magnitude > 0) {
        v->type = SLUICE_MP_INT;
        v->i = magnitude == (guint64)G_MAXINT64 + 1 ? G_MININT64
                                                    : -(gint64)magnitude;
      } else {
        v->type = SLUICE_MP_UINT;
        v->u = magnitude;
      }
    }
    return;
  }
  }
}

const gchar *
sluice_json__cursor_key(SluiceJsonCursor *cur, gsize *out_len)
{
  cur_peek(cur);
  cur_string(cur);
  *out_len = cur->scratch->len;
  return cur->scratch->str;
}

void
sluice_json__cursor_skip(SluiceJsonCursor *cur)
{
  const gchar *t = cur->doc->text;
  gchar c = cur_peek(cur);
  guint depth = 0;

  if (c != '{' && c != '[') {
    SluiceMpValue v;

    sluice_json__cursor_value(cur, &v);
    return;
  }
  /* Brackets inside strings do not count; escaped quotes do not end one. */
  do {
    c = t[cur->i];
    if (c == '"') {
      for (cur->i++; t[cur->i] != '"'; cur->i++)
        if (t[cur->i] == '\\')
          cur->i++;
    } else if (c == '{' || c == '[') {
      depth++;
      cur->next_container++;
    } else if (c == '}' || c == ']') {
      depth--;
    }
    cur->i++;
  } while (depth > 0);
}

/* ---- JSON -> msgpack ----------------------------------------------------- */

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

/* At an object of one member: if it is {"$bin": "<string>"}, packs the
 * binary and returns TRUE with *@packed set; otherwise leaves the cursor
 * where it was. */
static gboolean
try_bin(SluiceJsonCursor *cur, msgpack_packer *pk, gboolean *packed,
        GError **error)
{
  gsize at = cur->i;
  guint next = cur->next_container;
  gsize len, n = 0;
  const gchar *key;
  guchar *bin;

  *packed = FALSE;
  cur_open(cur);
  key = sluice_json__cursor_key(cur, &len);
  if (len != 4 || memcmp(key, "$bin", 4) != 0 || cur_peek(cur) != '"') {
    cur->i = at;
    cur->next_container = next;
    return TRUE;
  }
  cur_string(cur);
  if (!is_base64(cur->scratch->str, cur->scratch->len)) {
    g_autofree gchar *shown =
        sluice_text__escape(cur->scratch->str, (gssize)cur->scratch->len, 40);
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "{\"$bin\": ...} must hold padded base64 text (RFC 4648), "
                "found \"%s\"",
                shown);
    return FALSE;
  }
  bin = cur->scratch->len > 0 ? g_base64_decode(cur->scratch->str, &n) : NULL;
  if (msgpack_pack_bin(pk, n) != 0 || msgpack_pack_bin_body(pk, bin, n) != 0)
    g_error("sluice: out of memory while packing JSON arguments");
  g_free(bin);
  *packed = TRUE;
  return TRUE;
}

static void
pack_str(msgpack_packer *pk, const gchar *s, gsize len)
{
  if (msgpack_pack_str(pk, len) != 0 || msgpack_pack_str_body(pk, s, len) != 0)
    g_error("sluice: out of memory while packing JSON arguments");
}

/* Packs the value at the cursor. Recursion is bounded by the depth limit
 * pass 1 enforced (at most SLUICE_JSON_MAX_DEPTH + 1). */
static gboolean
pack_value(SluiceJsonCursor *cur, msgpack_packer *pk, guint64 *n_values,
           GError **error)
{
  SluiceMpValue v;
  int rc = 0;

  (*n_values)++;
  if (cur_peek(cur) == '{' &&
      g_array_index(cur->doc->counts, guint32, cur->next_container) == 1) {
    gboolean packed;

    if (!try_bin(cur, pk, &packed, error))
      return FALSE;
    if (packed)
      return TRUE;
  }
  sluice_json__cursor_value(cur, &v);
  switch (v.type) {
  case SLUICE_MP_NIL:
    rc = msgpack_pack_nil(pk);
    break;
  case SLUICE_MP_BOOL:
    rc = v.b ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    break;
  case SLUICE_MP_UINT:
    /* At most G_MAXINT64 (pass 1); int64 packing picks the smallest
     * encoding, as msgpack-c's own packers do. */
    rc = msgpack_pack_int64(pk, (gint64)v.u);
    break;
  case SLUICE_MP_INT:
    rc = msgpack_pack_int64(pk, v.i);
    break;
  case SLUICE_MP_FLOAT64:
    rc = msgpack_pack_double(pk, v.f);
    break;
  case SLUICE_MP_STR:
    pack_str(pk, v.raw.data, v.raw.len);
    break;
  case SLUICE_MP_ARRAY:
    rc = msgpack_pack_array(pk, v.count);
    for (guint32 i = 0; i < v.count && rc == 0; i++)
      if (!pack_value(cur, pk, n_values, error))
        return FALSE;
    break;
  case SLUICE_MP_MAP:
    rc = msgpack_pack_map(pk, v.count);
    /* In the order written, so that msgpack -> JSON -> msgpack gives the
     * same bytes back. */
    for (guint32 i = 0; i < v.count && rc == 0; i++) {
      gsize len;
      const gchar *key = sluice_json__cursor_key(cur, &len);

      (*n_values)++;
      pack_str(pk, key, len);
      if (!pack_value(cur, pk, n_values, error))
        return FALSE;
    }
    break;
  default:
    g_assert_not_reached();
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
sluice_json__cursor_to_msgpack(SluiceJsonCursor *cur, guint64 *out_n_values,
                               GError **error)
{
  msgpack_sbuffer sbuf;
  msgpack_packer pk;
  guint64 n_values = 0;
  gchar *data;
  gsize size;

  msgpack_sbuffer_init(&sbuf);
  msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
  if (!pack_value(cur, &pk, &n_values, error)) {
    msgpack_sbuffer_destroy(&sbuf);
    return NULL;
  }
  if (out_n_values != NULL)
    *out_n_values = n_values;
  /* The sbuffer's malloc'd block becomes the GBytes' data: no copy. */
  size = sbuf.size;
  data = msgpack_sbuffer_release(&sbuf);
  return g_bytes_new_with_free_func(data, size, free_malloced, data);
}

/* ---- msgpack -> JSON ----------------------------------------------------- */

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
      g_autofree gchar *name =
          sluice_text__escape(key.raw.data, key.raw.len, 64);
      g_autofree gchar *what =
          g_strdup_printf("the map key \"%s\" appears twice", name);
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

/* ---- Public API ---------------------------------------------------------- */

GBytes *
sluice_args_from_json(const gchar *json, gssize length, GError **error)
{
  g_autoptr(SluiceJsonDoc) doc = NULL;
  SluiceJsonCursor cur;
  gsize len;
  GBytes *bytes;

  g_return_val_if_fail(json != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  len = length < 0 ? strlen(json) : (gsize)length;
  doc = sluice_json__scan(json, len, SLUICE_MAX_ARGS_DEPTH, error);
  if (doc == NULL)
    return NULL;
  sluice_json__cursor_init(&cur, doc);
  bytes = sluice_json__cursor_to_msgpack(&cur, NULL, error);
  sluice_json__cursor_clear(&cur);
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

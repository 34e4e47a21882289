/* json-reader.c - the strict JSON reader: pass 1 checks a whole text and
 * counts each container's elements, pass 2 is a cursor over the checked
 * text (see args-json.c for why two passes and no tree, and
 * codec-private.h for the API).
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/codec-private.h"
#include "serializers/json-lex.h"

#include <stdarg.h>
#include <string.h>

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
  SluiceJsonLexer lx;
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
    ok = sluice_json_lex__error(sc->lx.error, SLUICE_CODEC_ERROR_INVALID,
                                sc->lx.t, repeat->offset,
                                "duplicate key \"%s\"", name);
  }
out:
  g_array_set_size(sc->keys, f->keys_start);
  g_string_truncate(sc->arena, f->arena_start);
  return ok;
}

static gboolean
too_deep(Scan *sc, gsize offset)
{
  return sluice_json_lex__error(
      sc->lx.error, SLUICE_CODEC_ERROR_TOO_DEEP, sc->lx.t, offset,
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
    return sluice_json_lex__error(
        sc->lx.error, SLUICE_CODEC_ERROR_TOO_LARGE, sc->lx.t, sc->lx.i,
        "more than %u elements in one container", G_MAXUINT32);
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
  if (!sluice_json_lex__string(&sc->lx, sc->arena))
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
    return sluice_json_lex__string(&sc->lx, NULL);
  if (c == 't' || c == 'f' || c == 'n')
    return sluice_json_lex__literal(&sc->lx);
  if (c == '-' || sluice_json_lex__is_digit(c))
    return sluice_json_lex__number(&sc->lx, NULL);
  return sluice_json_lex__unexpected(&sc->lx, sc->lx.i, "a JSON value");
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
      sluice_json_lex__error(error, SLUICE_CODEC_ERROR_TRUNCATED, text,
                             (gsize)(bad - text),
                             "the input ends inside a UTF-8 character");
    else
      sluice_json_lex__error(error, SLUICE_CODEC_ERROR_INVALID, text,
                             (gsize)(bad - text),
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
  sc.lx = (SluiceJsonLexer){text, len, 0, error};
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

    if (sluice_json_lex__is_space(c)) {
      sc.lx.i++;
      continue;
    }
    if (done) {
      sluice_json_lex__error(error, SLUICE_CODEC_ERROR_TRAILING, text, sc.lx.i,
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
        sluice_json_lex__error(error, SLUICE_CODEC_ERROR_INVALID, text,
                               sc.last_comma,
                               "a comma before '}' (no member follows it)");
        goto fail;
      }
      if (c == '}') {
        if (!close_container(&sc))
          goto fail;
        value_done = TRUE;
        break;
      }
      sluice_json_lex__unexpected(&sc.lx, sc.lx.i,
                                  expect == EXPECT_KEY
                                      ? "a key (a string)"
                                      : "a key (a string) or '}'");
      goto fail;
    case EXPECT_COLON:
      if (c != ':') {
        sluice_json_lex__unexpected(&sc.lx, sc.lx.i, "':'");
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
      sluice_json_lex__unexpected(&sc.lx, sc.lx.i,
                                  top->is_object ? "',' or '}'" : "',' or ']'");
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
        sluice_json_lex__error(error, SLUICE_CODEC_ERROR_INVALID, text,
                               sc.last_comma,
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
    sluice_json_lex__error(
        error, SLUICE_CODEC_ERROR_TRUNCATED, text, len,
        "the input ends inside an object or array (%u still open)",
        sc.stack->len);
    goto fail;
  }
  if (!done) {
    sluice_json_lex__error(error, SLUICE_CODEC_ERROR_TRUNCATED, text, len,
                           len == 0 ? "no JSON value (the input is empty)"
                                    : "no JSON value (only white space)");
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

    if (!sluice_json_lex__is_space(c) && c != ',' && c != ':' && c != ']' &&
        c != '}')
      return c;
    cur->i++;
  }
  return '\0';
}

/* Decodes the string at the cursor into cur->scratch. */
static void
cur_string(SluiceJsonCursor *cur)
{
  SluiceJsonLexer lx = {cur->doc->text, cur->doc->len, cur->i, NULL};

  g_string_truncate(cur->scratch, 0);
  (void)sluice_json_lex__string(&lx, cur->scratch);
  cur->i = lx.i;
}

static guint32
cur_open(SluiceJsonCursor *cur)
{
  cur->i++;
  return g_array_index(cur->doc->counts, guint32, cur->next_container++);
}

gboolean
sluice_json__cursor_fail(const SluiceJsonCursor *cur, gsize offset, gint code,
                         GError **error, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *what = NULL;

  va_start(ap, format);
  what = g_strdup_vprintf(format, ap);
  va_end(ap);
  return sluice_json_lex__error(error, code, cur->doc->text, offset, "%s",
                                what);
}

gboolean
sluice_json__cursor_take_bin(SluiceJsonCursor *cur, gsize *out_offset)
{
  gsize at = cur->i;
  guint next = cur->next_container;
  const gchar *key;
  gsize len;

  if (cur_peek(cur) != '{' ||
      g_array_index(cur->doc->counts, guint32, cur->next_container) != 1)
    return FALSE;
  *out_offset = cur->i;
  cur_open(cur);
  key = sluice_json__cursor_key(cur, &len);
  if (len != 4 || memcmp(key, "$bin", 4) != 0 || cur_peek(cur) != '"') {
    cur->i = at;
    cur->next_container = next;
    return FALSE;
  }
  cur_string(cur);
  return TRUE;
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
    SluiceJsonLexer lx = {t, cur->doc->len, cur->i, NULL};
    gboolean is_float = FALSE;
    gsize start = cur->i, n;

    (void)sluice_json_lex__number(&lx, &is_float);
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

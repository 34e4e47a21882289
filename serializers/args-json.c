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
 * Reading (json-reader.c, on the tokens of json-lex.c) is two passes over
 * the text and builds no tree:
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

/* At {"$bin": "<string>"}: packs the binary and returns TRUE with
 * *@packed set; at anything else leaves the cursor where it was. */
static gboolean
try_bin(SluiceJsonCursor *cur, msgpack_packer *pk, gboolean *packed,
        GError **error)
{
  gsize n = 0, at;
  guchar *bin;

  *packed = FALSE;
  if (!sluice_json__cursor_take_bin(cur, &at))
    return TRUE;
  if (!is_base64(cur->scratch->str, cur->scratch->len)) {
    g_autofree gchar *shown =
        sluice_text__escape(cur->scratch->str, (gssize)cur->scratch->len, 40);
    return sluice_json__cursor_fail(
        cur, at, SLUICE_CODEC_ERROR_INVALID, error,
        "{\"$bin\": ...} must hold padded base64 text (RFC 4648), "
        "found \"%s\"",
        shown);
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
  {
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

/* envelope-unknown.c - the keys this build does not know, carried through.
 *
 * A fleet mid-upgrade has producers newer than some of its workers. A key
 * a newer producer added to format version 1 means nothing to an older
 * worker, but the worker re-encodes the message when it retries, defers
 * or buries it, and a key it dropped then would be gone for the newer
 * worker that takes the message next. So the decoders keep every unknown
 * key, at the top level and inside `opts`, as one msgpack map of the
 * key/value bytes as they came (JSON values converted to msgpack), and
 * the encoders write them back after the known keys.
 *
 * The map is kept as bytes, never unpacked: a worker does nothing with
 * these keys but hand them on, and a slice of the input costs nothing on
 * the hot path of a message that has none.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/codec-private.h"
#include "serializers/text.h"

#include <string.h>

/* A msgpack header: @marker, then @value in @n big-endian bytes (none for
 * the fix forms, whose marker holds the value). */
static void
put_head(GByteArray *out, guint8 marker, guint32 value, guint n)
{
  guint8 head[5] = {marker};

  for (guint i = 0; i < n; i++)
    head[1 + i] = (value >> (8 * (n - 1 - i))) & 0xff;
  g_byte_array_append(out, head, 1 + n);
}

/* The shortest form, as any msgpack writer would choose, so that a
 * carried map is spelled as a producer would spell it. */
static void
put_map_header(GByteArray *out, guint32 count)
{
  if (count < 16)
    put_head(out, 0x80 | count, 0, 0);
  else if (count <= G_MAXUINT16)
    put_head(out, 0xde, count, 2);
  else
    put_head(out, 0xdf, count, 4);
}

static void
put_str_header(GByteArray *out, gsize len)
{
  if (len < 32)
    put_head(out, 0xa0 | len, 0, 0);
  else if (len <= G_MAXUINT8)
    put_head(out, 0xd9, len, 1);
  else if (len <= G_MAXUINT16)
    put_head(out, 0xda, len, 2);
  else
    put_head(out, 0xdb, len, 4);
}

/* Only a name a JSON encoder can write is carried: the same text rule as
 * every other name of the envelope (UTF-8, no 0x00). */
static gboolean
carried_name(const gchar *name, gsize len)
{
  return len > 0 && memchr(name, '\0', len) == NULL &&
         g_utf8_validate(name, len, NULL);
}

/* Whether @name is to be carried, noting it if it is. */
static gboolean
take_name(SluiceUnknownKeys *keys, const gchar *name, gsize len)
{
  gchar *copy;

  if (!carried_name(name, len))
    return FALSE;
  if (keys->names == NULL)
    keys->names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  copy = g_strndup(name, len);
  if (!g_hash_table_add(keys->names, copy))
    return FALSE;
  if (keys->pairs == NULL)
    keys->pairs = g_byte_array_new();
  return TRUE;
}

void
sluice_unknown_keys__add_pair(SluiceUnknownKeys *keys, const gchar *name,
                              gsize name_len, gconstpointer pair, gsize len)
{
  if (!take_name(keys, name, name_len))
    return;
  g_byte_array_append(keys->pairs, pair, len);
  keys->count++;
}

void
sluice_unknown_keys__add(SluiceUnknownKeys *keys, const gchar *name,
                         gsize name_len, GBytes *value)
{
  gsize len;
  gconstpointer data = g_bytes_get_data(value, &len);

  if (!take_name(keys, name, name_len))
    return;
  put_str_header(keys->pairs, name_len);
  g_byte_array_append(keys->pairs, (const guint8 *)name, name_len);
  g_byte_array_append(keys->pairs, data, len);
  keys->count++;
}

GBytes *
sluice_unknown_keys__finish(SluiceUnknownKeys *keys)
{
  GByteArray *map;

  if (keys->pairs == NULL)
    return NULL;
  map = g_byte_array_sized_new(keys->pairs->len + 5);
  put_map_header(map, keys->count);
  g_byte_array_append(map, keys->pairs->data, keys->pairs->len);
  sluice_unknown_keys__clear(keys);
  return g_byte_array_free_to_bytes(map);
}

void
sluice_unknown_keys__clear(SluiceUnknownKeys *keys)
{
  if (keys->pairs != NULL)
    g_byte_array_unref(keys->pairs);
  if (keys->names != NULL)
    g_hash_table_unref(keys->names);
  keys->pairs = NULL;
  keys->names = NULL;
  keys->count = 0;
}

gboolean
sluice_unknown_keys__open(const gchar *field, GBytes *map, gboolean in_opts,
                          SluiceMpReader *pairs, guint32 *count, GError **error)
{
  SluiceMpValue head, k;
  gsize len;
  gconstpointer data = g_bytes_get_data(map, &len);
  gsize start;

  sluice_mp_reader_init(pairs, data, len);
  if (!sluice_mp_reader__next(pairs, &head, error))
    goto bad;
  if (head.type != SLUICE_MP_MAP) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
                "%s: expected a msgpack map, found a(n) %s", field,
                sluice_mp__type_name(head.type));
    return FALSE;
  }
  start = pairs->pos;
  for (guint32 i = 0; i < head.count; i++) {
    gboolean known;

    if (!sluice_mp_reader__next(pairs, &k, error))
      goto bad;
    if (k.type != SLUICE_MP_STR || !carried_name(k.raw.data, k.raw.len)) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "%s: every key must be a UTF-8 string without 0x00", field);
      return FALSE;
    }
    known = in_opts ? sluice_envelope__option_lookup(k.raw.data, k.raw.len) !=
                          SLUICE_OPT_UNKNOWN
                    : sluice_envelope__key_lookup(k.raw.data, k.raw.len) !=
                          SLUICE_KEY_UNKNOWN;
    if (known) {
      g_autofree gchar *name = g_strndup(k.raw.data, k.raw.len);

      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "%s: “%s” is a key this build knows; set it in its own "
                  "field instead",
                  field, name);
      return FALSE;
    }
    /* No depth limit: what a decoder kept under its own limits must
     * always be written back. */
    if (!sluice_mp_reader__skip(pairs, in_opts ? 3 : 2, G_MAXUINT, error))
      goto bad;
  }
  if (pairs->pos != pairs->len) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRAILING,
                "%s: bytes follow the map", field);
    return FALSE;
  }
  *count = head.count;
  pairs->pos = start;
  return TRUE;

bad:
  g_prefix_error(error, "%s: ", field);
  return FALSE;
}

gboolean
sluice_unknown_keys__append_json(GString *out, GBytes *map, gboolean in_opts,
                                 gboolean first, GError **error)
{
  const gchar *field = in_opts ? "unknown_opts" : "unknown_fields";
  SluiceMpReader r;
  guint32 count;

  if (!sluice_unknown_keys__open(field, map, in_opts, &r, &count, error))
    return FALSE;
  for (guint32 i = 0; i < count; i++) {
    SluiceMpValue k;
    gsize start;

    /* Checked by the open: these cannot fail. */
    sluice_mp_reader__next(&r, &k, NULL);
    if (!first)
      g_string_append_c(out, ',');
    first = FALSE;
    sluice_json__append_string(out, k.raw.data, k.raw.len);
    g_string_append_c(out, ':');
    start = r.pos;
    sluice_mp_reader__skip(&r, 1, G_MAXUINT, NULL);
    if (!sluice_args__append_json(out, r.data + start, r.pos - start,
                                  SLUICE_DEFAULT_MAX_DEPTH, error)) {
      /* A key is UTF-8 but may hold control characters: quoted safely. */
      g_autofree gchar *name = sluice_text__escape(k.raw.data, k.raw.len, 64);

      g_prefix_error(error, "%s: the value of “%s”: ", field, name);
      return FALSE;
    }
  }
  return TRUE;
}

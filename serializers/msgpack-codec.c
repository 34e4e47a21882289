/* msgpack-codec.c - the default codec: one msgpack map per envelope.
 *
 * This runs on every enqueue and every delivery, so both directions are
 * built to touch each byte once and to allocate only what the envelope
 * keeps:
 *
 *   encode: sluice_envelope__validate(), then one pass that adds up an upper
 *     bound of the output size, one malloc of that size handed to a
 *     msgpack_sbuffer (so the packer never reallocates), and the sbuffer's
 *     block handed to the GBytes as is. The bound is at most a few bytes per
 *     field too generous, so a queued message does not carry the 8 KiB slack
 *     of the sbuffer's default first block.
 *   decode: the bounded reader of mp-reader.h, never msgpack_unpack() (which
 *     allocates whatever a hostile length asks for). `args` is not parsed
 *     into objects: it is validated by skipping it and kept as a slice of the
 *     input GBytes (g_bytes_new_from_bytes), which shares the input's memory.
 *
 * Field rules (types, ranges, UTF-8, required keys) are in envelope.c; this
 * file only walks the map. Keys are written in the order PROTOCOL.md lists
 * them, optional ones only when set, headers sorted by name, so that one
 * envelope always has one encoding.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/text.h"
#include "serializers/codec-private.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

/* ---- Encoding ------------------------------------------------------------ */

/* The largest str header (0xdb + 4 bytes) and int encoding (marker + 8). */
#define STR_HEAD_MAX 5
#define INT_MAX_BYTES 9
/* A key is a fixstr: every wire key is shorter than 32 bytes. */
#define KEY_BYTES(name) (1 + strlen(name))

typedef struct {
  msgpack_sbuffer sbuf;
  msgpack_packer pk;
  int rc; /* OR of every packer return value; non-zero only when out of
             memory */
} Writer;

static inline void
put_str(Writer *w, const gchar *s, gsize len)
{
  w->rc |= msgpack_pack_str(&w->pk, len);
  w->rc |= msgpack_pack_str_body(&w->pk, s, len);
}

static inline void
put_key(Writer *w, SluiceEnvelopeKey key)
{
  const gchar *name = sluice_envelope__key_name(key);

  put_str(w, name, strlen(name));
}

static inline void
put_option_key(Writer *w, SluiceOptionKey key)
{
  const gchar *name = sluice_envelope__option_name(key);

  put_str(w, name, strlen(name));
}

static gboolean
check_str_len(const gchar *field, gsize len, GError **error)
{
  if (len > G_MAXUINT32) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE,
                "%s: %" G_GSIZE_FORMAT
                " bytes long, more than a msgpack string can hold",
                field, len);
    return FALSE;
  }
  return TRUE;
}

static GBytes *
msgpack_encode(const SluiceCodec *codec, const SluiceEnvelope *env,
               GError **error)
{
  const SluiceMessageOptions *o = &env->opts;
  const SluiceRetryPolicy *retry = &o->retry;
  g_autofree const gchar **header_names = NULL;
  guint n_headers = 0, n_history, n_keys = 5, n_opts = 0;
  gconstpointer args = NULL;
  gsize args_len = 0, bound;
  gsize id_len, task_len, queue_len;
  gboolean has_opts;
  /* The keys a newer producer wrote, carried through (envelope-unknown.c):
   * their bytes are written back as they came. */
  SluiceMpReader extra_fields, extra_opts;
  guint32 n_extra_fields = 0, n_extra_opts = 0;
  Writer w;

  if (!sluice_envelope__validate(env, error))
    return NULL;
  if ((env->unknown_fields != NULL &&
       !sluice_unknown_keys__open("unknown_fields", env->unknown_fields, FALSE,
                                  &extra_fields, &n_extra_fields, error)) ||
      (env->unknown_opts != NULL &&
       !sluice_unknown_keys__open("unknown_opts", env->unknown_opts, TRUE,
                                  &extra_opts, &n_extra_opts, error)))
    return NULL;

  id_len = strlen(env->id);
  task_len = strlen(env->task);
  queue_len = strlen(env->queue);
  n_history = env->history != NULL ? env->history->len : 0;
  header_names = sluice_envelope__sorted_header_names(env, &n_headers);
  has_opts = sluice_message_options__any_set(o) || n_extra_opts > 0;
  if (env->args != NULL) {
    args = g_bytes_get_data(env->args, &args_len);
    /* A lone nil is what an absent `args` means: leave the key out. */
    if (args_len == 1 && *(const guint8 *)args == SLUICE_MP_NIL_BYTE)
      args_len = 0;
  }

  /* An upper bound of the output size, field by field. */
  bound = 1 + KEY_BYTES("v") + 1;
  bound += KEY_BYTES("id") + STR_HEAD_MAX + id_len;
  bound += KEY_BYTES("task") + STR_HEAD_MAX + task_len;
  bound += KEY_BYTES("queue") + STR_HEAD_MAX + queue_len;
  bound += KEY_BYTES("attempt") + INT_MAX_BYTES;
  if (args_len > 0) {
    n_keys++;
    bound += KEY_BYTES("args") + args_len;
  }
  if (env->enqueued_at > 0) {
    n_keys++;
    bound += KEY_BYTES("enqueued_at") + INT_MAX_BYTES;
  }
  if (env->eta > 0) {
    n_keys++;
    bound += KEY_BYTES("eta") + INT_MAX_BYTES;
  }
  if (has_opts) {
    n_keys++;
    /* Every option: its key (< 20 bytes) and a value of at most 9. */
    bound += KEY_BYTES("opts") + 5 + SLUICE_N_OPTS * (20 + INT_MAX_BYTES);
    if (n_extra_opts > 0)
      bound += sluice_mp_reader_remaining(&extra_opts);
  }
  if (n_extra_fields > 0) {
    n_keys += n_extra_fields;
    bound += sluice_mp_reader_remaining(&extra_fields);
  }
  if (env->unknown_since > 0) {
    n_keys++;
    bound += KEY_BYTES("unknown_since") + INT_MAX_BYTES;
  }
  if (env->wf != NULL) {
    n_keys++;
    bound += KEY_BYTES("wf") + STR_HEAD_MAX + strlen(env->wf);
  }
  if (n_history > 0) {
    n_keys++;
    bound += KEY_BYTES("history") + 5;
    for (guint i = 0; i < n_history; i++) {
      gsize len = strlen(g_ptr_array_index(env->history, i));

      if (!check_str_len("history", len, error))
        return NULL;
      bound += STR_HEAD_MAX + len;
    }
  }
  if (env->snoozes > 0) {
    n_keys++;
    bound += KEY_BYTES("snz") + INT_MAX_BYTES;
  }
  if (env->unique != NULL) {
    n_keys++;
    bound += KEY_BYTES("uq") + STR_HEAD_MAX + strlen(env->unique);
  }
  if (env->seal != NULL) {
    n_keys++;
    bound += KEY_BYTES("seal") + STR_HEAD_MAX + strlen(env->seal);
  }
  if (n_headers > 0) {
    n_keys++;
    bound += KEY_BYTES("headers") + 5;
    for (guint i = 0; i < n_headers; i++) {
      gsize klen = strlen(header_names[i]);
      gsize vlen = strlen(g_hash_table_lookup(env->headers, header_names[i]));

      if (!check_str_len("headers", klen, error) ||
          !check_str_len("headers", vlen, error))
        return NULL;
      bound += 2 * STR_HEAD_MAX + klen + vlen;
    }
  }

  msgpack_sbuffer_init(&w.sbuf);
  w.sbuf.data = malloc(bound);
  if (w.sbuf.data == NULL)
    g_error("sluice: out of memory (%" G_GSIZE_FORMAT " bytes)", bound);
  w.sbuf.alloc = bound;
  msgpack_packer_init(&w.pk, &w.sbuf, msgpack_sbuffer_write);
  w.rc = 0;

  w.rc |= msgpack_pack_map(&w.pk, n_keys);
  put_key(&w, SLUICE_KEY_V);
  w.rc |=
      msgpack_pack_unsigned_int(&w.pk, sluice_envelope__version_to_write(env));
  put_key(&w, SLUICE_KEY_ID);
  put_str(&w, env->id, id_len);
  put_key(&w, SLUICE_KEY_TASK);
  put_str(&w, env->task, task_len);
  put_key(&w, SLUICE_KEY_QUEUE);
  put_str(&w, env->queue, queue_len);
  if (args_len > 0) {
    put_key(&w, SLUICE_KEY_ARGS);
    /* Already one valid msgpack value: copied as is. */
    w.rc |= msgpack_sbuffer_write(&w.sbuf, args, args_len);
  }
  put_key(&w, SLUICE_KEY_ATTEMPT);
  w.rc |= msgpack_pack_uint32(&w.pk, env->attempt);
  if (env->enqueued_at > 0) {
    put_key(&w, SLUICE_KEY_ENQUEUED_AT);
    w.rc |= msgpack_pack_int64(&w.pk, env->enqueued_at);
  }
  if (env->eta > 0) {
    put_key(&w, SLUICE_KEY_ETA);
    w.rc |= msgpack_pack_int64(&w.pk, env->eta);
  }
  if (has_opts) {
    n_opts = sluice_retry__writes_max_attempts(retry) +
             (retry->initial_backoff_ms >= 0) +
             sluice_retry__writes_multiplier(retry) +
             (retry->max_backoff_ms >= 0) + (retry->jitter != SLUICE_UNSET) +
             (o->timeout_ms > 0) + (o->expires_at > 0) +
             (o->store_result != SLUICE_UNSET) + (o->result_ttl_ms > 0) +
             (o->dead_letter != SLUICE_UNSET) + (o->hard_timeout_ms > 0);
    put_key(&w, SLUICE_KEY_OPTS);
    w.rc |= msgpack_pack_map(&w.pk, n_opts + n_extra_opts);
    if (sluice_retry__writes_max_attempts(retry)) {
      put_option_key(&w, SLUICE_OPT_MAX_ATTEMPTS);
      w.rc |= msgpack_pack_uint32(&w.pk, (guint32)retry->max_attempts);
    }
    if (retry->initial_backoff_ms >= 0) {
      put_option_key(&w, SLUICE_OPT_INITIAL_BACKOFF_MS);
      w.rc |= msgpack_pack_int64(&w.pk, retry->initial_backoff_ms);
    }
    if (sluice_retry__writes_multiplier(retry)) {
      put_option_key(&w, SLUICE_OPT_MULTIPLIER);
      w.rc |= msgpack_pack_double(&w.pk, retry->multiplier);
    }
    if (retry->max_backoff_ms >= 0) {
      put_option_key(&w, SLUICE_OPT_MAX_BACKOFF_MS);
      w.rc |= msgpack_pack_int64(&w.pk, retry->max_backoff_ms);
    }
    if (retry->jitter != SLUICE_UNSET) {
      put_option_key(&w, SLUICE_OPT_JITTER);
      w.rc |= retry->jitter == SLUICE_ON ? msgpack_pack_true(&w.pk)
                                         : msgpack_pack_false(&w.pk);
    }
    if (o->timeout_ms > 0) {
      put_option_key(&w, SLUICE_OPT_TIMEOUT_MS);
      w.rc |= msgpack_pack_int64(&w.pk, o->timeout_ms);
    }
    if (o->expires_at > 0) {
      put_option_key(&w, SLUICE_OPT_EXPIRES_AT);
      w.rc |= msgpack_pack_int64(&w.pk, o->expires_at);
    }
    if (o->store_result != SLUICE_UNSET) {
      put_option_key(&w, SLUICE_OPT_STORE_RESULT);
      w.rc |= o->store_result == SLUICE_ON ? msgpack_pack_true(&w.pk)
                                           : msgpack_pack_false(&w.pk);
    }
    if (o->result_ttl_ms > 0) {
      put_option_key(&w, SLUICE_OPT_RESULT_TTL_MS);
      w.rc |= msgpack_pack_int64(&w.pk, o->result_ttl_ms);
    }
    if (o->dead_letter != SLUICE_UNSET) {
      put_option_key(&w, SLUICE_OPT_DEAD_LETTER);
      w.rc |= o->dead_letter == SLUICE_ON ? msgpack_pack_true(&w.pk)
                                          : msgpack_pack_false(&w.pk);
    }
    if (o->hard_timeout_ms > 0) {
      put_option_key(&w, SLUICE_OPT_HARD_TIMEOUT_MS);
      w.rc |= msgpack_pack_int64(&w.pk, o->hard_timeout_ms);
    }
    if (n_extra_opts > 0)
      w.rc |= msgpack_sbuffer_write(
          &w.sbuf, (const gchar *)extra_opts.data + extra_opts.pos,
          sluice_mp_reader_remaining(&extra_opts));
  }
  if (env->unknown_since > 0) {
    put_key(&w, SLUICE_KEY_UNKNOWN_SINCE);
    w.rc |= msgpack_pack_int64(&w.pk, env->unknown_since);
  }
  if (n_history > 0) {
    put_key(&w, SLUICE_KEY_HISTORY);
    w.rc |= msgpack_pack_array(&w.pk, n_history);
    for (guint i = 0; i < n_history; i++) {
      const gchar *line = g_ptr_array_index(env->history, i);

      put_str(&w, line, strlen(line));
    }
  }
  if (n_headers > 0) {
    put_key(&w, SLUICE_KEY_HEADERS);
    w.rc |= msgpack_pack_map(&w.pk, n_headers);
    for (guint i = 0; i < n_headers; i++) {
      const gchar *value = g_hash_table_lookup(env->headers, header_names[i]);

      put_str(&w, header_names[i], strlen(header_names[i]));
      put_str(&w, value, strlen(value));
    }
  }
  if (env->wf != NULL) {
    put_key(&w, SLUICE_KEY_WF);
    put_str(&w, env->wf, strlen(env->wf));
  }
  if (env->snoozes > 0) {
    put_key(&w, SLUICE_KEY_SNOOZES);
    w.rc |= msgpack_pack_uint32(&w.pk, env->snoozes);
  }
  if (env->unique != NULL) {
    put_key(&w, SLUICE_KEY_UNIQUE);
    put_str(&w, env->unique, strlen(env->unique));
  }
  if (env->seal != NULL) {
    put_key(&w, SLUICE_KEY_SEAL);
    put_str(&w, env->seal, strlen(env->seal));
  }
  if (n_extra_fields > 0)
    w.rc |= msgpack_sbuffer_write(
        &w.sbuf, (const gchar *)extra_fields.data + extra_fields.pos,
        sluice_mp_reader_remaining(&extra_fields));

  /* The bound makes a reallocation impossible; a failure is memory. */
  if (w.rc != 0)
    g_error("sluice: out of memory while encoding an envelope");
  g_assert(w.sbuf.alloc == bound);
  return g_bytes_new_with_free_func(w.sbuf.data, w.sbuf.size, free,
                                    w.sbuf.data);
}

/* ---- Decoding ------------------------------------------------------------ */

static gboolean
expect_container(const gchar *field, const SluiceMpValue *v, SluiceMpType type,
                 guint max_depth, GError **error)
{
  if (v->type != type) {
    g_set_error(
        error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
        "%s: expected a%s %s, found %s (byte offset %" G_GSIZE_FORMAT ")",
        field, type == SLUICE_MP_ARRAY ? "n" : "", sluice_mp__type_name(type),
        sluice_mp__type_name(v->type), v->offset);
    return FALSE;
  }
  /* Inside the envelope map: depth 2. */
  if (max_depth < 2) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP,
                "%s: byte offset %" G_GSIZE_FORMAT
                ": nesting deeper than the limit of %u",
                field, v->offset, max_depth);
    return FALSE;
  }
  return TRUE;
}

static gboolean
expect_string_key(const gchar *where, const SluiceMpValue *k, GError **error)
{
  if (k->type != SLUICE_MP_STR) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
                "byte offset %" G_GSIZE_FORMAT
                ": %s keys are strings, found a(n) %s",
                k->offset, where, sluice_mp__type_name(k->type));
    return FALSE;
  }
  return TRUE;
}

static gboolean
read_opts(SluiceMpReader *r, SluiceEnvelope *env, guint max_depth,
          GError **error)
{
  SluiceMpValue map, k, v;
  guint32 seen = 0;
  SluiceUnknownKeys unknown = {0};

  if (!sluice_mp_reader__next(r, &map, error) ||
      !expect_container("opts", &map, SLUICE_MP_MAP, max_depth, error))
    return FALSE;
  for (guint32 i = 0; i < map.count; i++) {
    SluiceOptionKey key;

    if (!sluice_mp_reader__next(r, &k, error) ||
        !expect_string_key("opts", &k, error))
      goto fail;
    key = sluice_envelope__option_lookup(k.raw.data, k.raw.len);
    if (key == SLUICE_OPT_UNKNOWN) {
      /* A newer producer's option: kept for the encoder to write back,
       * but only if well-formed. */
      if (!sluice_mp_reader__skip(r, 3, max_depth, error))
        goto fail;
      sluice_unknown_keys__add_pair(&unknown, k.raw.data, k.raw.len,
                                    r->data + k.offset, r->pos - k.offset);
      continue;
    }
    if (seen & (1u << key)) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "opts.%s: duplicate key (byte offset %" G_GSIZE_FORMAT ")",
                  sluice_envelope__option_name(key), k.offset);
      goto fail;
    }
    seen |= 1u << key;
    if (!sluice_mp_reader__next(r, &v, error) ||
        !sluice_envelope__set_option(&env->opts, key, &v, error))
      goto fail;
  }
  env->unknown_opts = sluice_unknown_keys__finish(&unknown);
  return TRUE;

fail:
  sluice_unknown_keys__clear(&unknown);
  return FALSE;
}

static gboolean
read_history(SluiceMpReader *r, SluiceEnvelope *env, guint max_depth,
             GError **error)
{
  SluiceMpValue array, v;
  guint32 first_kept;

  if (!sluice_mp_reader__next(r, &array, error) ||
      !expect_container("history", &array, SLUICE_MP_ARRAY, max_depth, error))
    return FALSE;
  first_kept = sluice_envelope__history_first_kept(array.count);
  for (guint32 i = 0; i < array.count; i++) {
    if (!sluice_mp_reader__next(r, &v, error) ||
        !sluice_envelope__add_history_value(env, i, &v, i >= first_kept, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_headers(SluiceMpReader *r, SluiceEnvelope *env, guint max_depth,
             GError **error)
{
  SluiceMpValue map, k, v;

  if (!sluice_mp_reader__next(r, &map, error) ||
      !expect_container("headers", &map, SLUICE_MP_MAP, max_depth, error) ||
      !sluice_envelope__check_header_count(map.count, error))
    return FALSE;
  for (guint32 i = 0; i < map.count; i++) {
    if (!sluice_mp_reader__next(r, &k, error) ||
        !sluice_mp_reader__next(r, &v, error) ||
        !sluice_envelope__add_header_value(env, &k, &v, error))
      return FALSE;
  }
  return TRUE;
}

gboolean
sluice_envelope__check_opened_args(GBytes *args,
                                   const SluiceDecodeLimits *limits,
                                   GError **error)
{
  SluiceMpReader r;
  gsize len = 0;
  gconstpointer data = g_bytes_get_data(args, &len);
  guint64 n_values = 0;

  sluice_mp_reader_init(&r, data, len);
  /* Depth 2, as args in clear are: inside the envelope's map. */
  if (!sluice_mp_reader__skip_counting(&r, 2, limits->max_depth, &n_values,
                                       error) ||
      !sluice_envelope__check_args_cost(len, n_values, error)) {
    g_prefix_error(error, "args (opened): ");
    return FALSE;
  }
  if (r.pos != r.len) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRAILING,
                "args (opened): %" G_GSIZE_FORMAT " bytes follow the one value",
                r.len - r.pos);
    return FALSE;
  }
  return TRUE;
}

static SluiceEnvelope *
decode_map(GBytes *bytes, const SluiceDecodeLimits *limits,
           gboolean header_only, GError **error)
{
  SluiceEnvelope *env;
  SluiceMpReader r;
  SluiceMpValue map, k, v;
  gconstpointer data;
  gsize len;
  guint32 seen = 0;
  SluiceUnknownKeys unknown = {0};

  data = g_bytes_get_data(bytes, &len);
  if (len > limits->max_bytes) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE,
                "the envelope is %" G_GSIZE_FORMAT
                " bytes long, over the limit of %" G_GSIZE_FORMAT,
                len, limits->max_bytes);
    return NULL;
  }

  sluice_mp_reader_init(&r, data, len);
  if (!sluice_mp_reader__next(&r, &map, error))
    return NULL;
  if (map.type != SLUICE_MP_MAP) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
                "byte offset 0: an envelope is a msgpack map, found a(n) %s",
                sluice_mp__type_name(map.type));
    return NULL;
  }
  if (limits->max_depth < 1) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP,
                "byte offset 0: nesting deeper than the limit of %u",
                limits->max_depth);
    return NULL;
  }

  env = sluice_envelope__new_for_decode();
  for (guint32 i = 0; i < map.count; i++) {
    SluiceEnvelopeKey key;
    gboolean ok;

    if (!sluice_mp_reader__next(&r, &k, error) ||
        !expect_string_key("envelope", &k, error))
      goto fail;
    key = sluice_envelope__key_lookup(k.raw.data, k.raw.len);
    if (header_only && !sluice_envelope__is_header_key(key)) {
      if (!sluice_mp_reader__skip(&r, 2, limits->max_depth, error))
        goto fail;
      continue;
    }
    if (key == SLUICE_KEY_UNKNOWN) {
      /* Fields added later in version 1 are kept for the encoder to write
       * back, if well-formed. */
      if (!sluice_mp_reader__skip(&r, 2, limits->max_depth, error)) {
        g_autofree gchar *name = sluice_text__escape(k.raw.data, k.raw.len, 64);
        g_prefix_error(error, "unknown key \"%s\": ", name);
        goto fail;
      }
      sluice_unknown_keys__add_pair(&unknown, k.raw.data, k.raw.len,
                                    r.data + k.offset, r.pos - k.offset);
      continue;
    }
    if (seen & (1u << key)) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "%s: duplicate key (byte offset %" G_GSIZE_FORMAT ")",
                  sluice_envelope__key_name(key), k.offset);
      goto fail;
    }
    seen |= 1u << key;

    switch (key) {
    case SLUICE_KEY_ARGS: {
      gsize start = r.pos;
      guint64 n_values = 0;

      ok = sluice_mp_reader__skip_counting(&r, 2, limits->max_depth, &n_values,
                                           error) &&
           sluice_envelope__check_args_cost(r.pos - start, n_values, error);
      if (ok)
        env->args = g_bytes_new_from_bytes(bytes, start, r.pos - start);
      break;
    }
    case SLUICE_KEY_OPTS:
      ok = read_opts(&r, env, limits->max_depth, error);
      break;
    case SLUICE_KEY_HISTORY:
      ok = read_history(&r, env, limits->max_depth, error);
      break;
    case SLUICE_KEY_HEADERS:
      ok = read_headers(&r, env, limits->max_depth, error);
      break;
    case SLUICE_KEY_V:
      ok = sluice_mp_reader__next(&r, &v, error) &&
           (header_only ? sluice_envelope__set_any_version(env, &v, error)
                        : sluice_envelope__set_field(env, key, &v, error));
      break;
    default:
      ok = sluice_mp_reader__next(&r, &v, error) &&
           sluice_envelope__set_field(env, key, &v, error);
      break;
    }
    if (!ok) {
      /* The reader's own messages give only the offset; name the field. */
      if (error != NULL && *error != NULL &&
          !g_str_has_prefix((*error)->message, sluice_envelope__key_name(key)))
        g_prefix_error(error, "%s: ", sluice_envelope__key_name(key));
      goto fail;
    }
  }

  if (r.pos != r.len) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRAILING,
                "byte offset %" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT
                " bytes follow the envelope",
                r.pos, r.len - r.pos);
    goto fail;
  }
  if (!(header_only ? sluice_envelope__finish_header(env, seen, error)
                    : sluice_envelope__finish_decode(env, seen, error)))
    goto fail;
  env->unknown_fields = sluice_unknown_keys__finish(&unknown);
  return env;

fail:
  sluice_unknown_keys__clear(&unknown);
  sluice_envelope_free(env);
  return NULL;
}

static SluiceEnvelope *
msgpack_decode(const SluiceCodec *codec, GBytes *bytes,
               const SluiceDecodeLimits *limits, GError **error)
{
  return decode_map(bytes, limits, FALSE, error);
}

static SluiceEnvelope *
msgpack_decode_header(const SluiceCodec *codec, GBytes *bytes,
                      const SluiceDecodeLimits *limits, GError **error)
{
  return decode_map(bytes, limits, TRUE, error);
}

static const SluiceCodec msgpack_codec = {
    .version = SLUICE_CODEC_VERSION,
    .name = "msgpack",
    .encode = msgpack_encode,
    .decode = msgpack_decode,
    .decode_header = msgpack_decode_header,
};

const SluiceCodec *
sluice_codec_msgpack(void)
{
  return &msgpack_codec;
}

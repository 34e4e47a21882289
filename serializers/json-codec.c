/* json-codec.c - the envelope as a JSON object, for humans and for
 * producers without a msgpack library.
 *
 * The keys, types and rules are the msgpack codec's (PROTOCOL.md): the same
 * key order, the same omissions, `args` written as the JSON rendering of its
 * msgpack value (args-json.c), integers as JSON integers. The two codecs
 * must agree: decoding the JSON encoding of an envelope gives what decoding
 * its msgpack encoding gives, for every envelope whose args JSON can
 * express.
 *
 * Decoding goes through args-json.c's reader: the size limit first, then
 * sluice_json__scan(), which checks the whole text (strictness, depth,
 * duplicate keys) without building a tree, then a cursor that walks the
 * envelope's members. Each field is read as a SluiceMpValue and checked by
 * the same functions the msgpack codec uses (envelope.c), so a rule cannot
 * differ between codecs; `args` is converted to msgpack straight from the
 * text.
 *
 * Encoding writes the text directly into a GString.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/text.h"
#include "serializers/codec-private.h"

#include <string.h>

/* ---- Encoding ------------------------------------------------------------ */

static void
put_key(GString *out, const gchar *name)
{
  g_string_append_c(out, ',');
  g_string_append_c(out, '"');
  g_string_append(out, name);
  g_string_append(out, "\":");
}

static void
put_string_field(GString *out, SluiceEnvelopeKey key, const gchar *value)
{
  put_key(out, sluice_envelope__key_name(key));
  sluice_json__append_string(out, value, strlen(value));
}

static void
put_int(GString *out, gint64 value)
{
  g_string_append_printf(out, "%" G_GINT64_FORMAT, value);
}

/* Like put_key, for the members of `opts` (the first has no comma). */
static void
put_option_key(GString *out, SluiceOptionKey key, gboolean *first)
{
  if (!*first)
    g_string_append_c(out, ',');
  *first = FALSE;
  g_string_append_c(out, '"');
  g_string_append(out, sluice_envelope__option_name(key));
  g_string_append(out, "\":");
}

static gboolean
put_opts(GString *out, const SluiceMessageOptions *o, GBytes *unknown_opts,
         GError **error)
{
  const SluiceRetryPolicy *retry = &o->retry;
  gboolean first = TRUE;

  put_key(out, sluice_envelope__key_name(SLUICE_KEY_OPTS));
  g_string_append_c(out, '{');
  if (sluice_retry__writes_max_attempts(retry)) {
    put_option_key(out, SLUICE_OPT_MAX_ATTEMPTS, &first);
    put_int(out, retry->max_attempts);
  }
  if (retry->initial_backoff_ms >= 0) {
    put_option_key(out, SLUICE_OPT_INITIAL_BACKOFF_MS, &first);
    put_int(out, retry->initial_backoff_ms);
  }
  if (sluice_retry__writes_multiplier(retry)) {
    put_option_key(out, SLUICE_OPT_MULTIPLIER, &first);
    sluice_json__append_double(out, retry->multiplier);
  }
  if (retry->max_backoff_ms >= 0) {
    put_option_key(out, SLUICE_OPT_MAX_BACKOFF_MS, &first);
    put_int(out, retry->max_backoff_ms);
  }
  if (retry->jitter != SLUICE_UNSET) {
    put_option_key(out, SLUICE_OPT_JITTER, &first);
    g_string_append(out, retry->jitter == SLUICE_ON ? "true" : "false");
  }
  if (o->timeout_ms > 0) {
    put_option_key(out, SLUICE_OPT_TIMEOUT_MS, &first);
    put_int(out, o->timeout_ms);
  }
  if (o->expires_at > 0) {
    put_option_key(out, SLUICE_OPT_EXPIRES_AT, &first);
    put_int(out, o->expires_at);
  }
  if (o->store_result != SLUICE_UNSET) {
    put_option_key(out, SLUICE_OPT_STORE_RESULT, &first);
    g_string_append(out, o->store_result == SLUICE_ON ? "true" : "false");
  }
  if (o->result_ttl_ms > 0) {
    put_option_key(out, SLUICE_OPT_RESULT_TTL_MS, &first);
    put_int(out, o->result_ttl_ms);
  }
  if (o->dead_letter != SLUICE_UNSET) {
    put_option_key(out, SLUICE_OPT_DEAD_LETTER, &first);
    g_string_append(out, o->dead_letter == SLUICE_ON ? "true" : "false");
  }
  if (o->hard_timeout_ms > 0) {
    put_option_key(out, SLUICE_OPT_HARD_TIMEOUT_MS, &first);
    put_int(out, o->hard_timeout_ms);
  }
  if (unknown_opts != NULL &&
      !sluice_unknown_keys__append_json(out, unknown_opts, TRUE, first, error))
    return FALSE;
  g_string_append_c(out, '}');
  return TRUE;
}

static GBytes *
json_encode(const SluiceCodec *codec, const SluiceEnvelope *env, GError **error)
{
  g_autofree const gchar **header_names = NULL;
  guint n_headers = 0;
  GString *out;

  if (!sluice_envelope__validate(env, error))
    return NULL;

  out = g_string_sized_new(256);
  g_string_append_printf(out, "{\"v\":%u",
                         sluice_envelope__version_to_write(env));
  put_string_field(out, SLUICE_KEY_ID, env->id);
  put_string_field(out, SLUICE_KEY_TASK, env->task);
  put_string_field(out, SLUICE_KEY_QUEUE, env->queue);
  if (env->args != NULL) {
    gsize len;
    const guint8 *args = g_bytes_get_data(env->args, &len);

    if (!(len == 1 && args[0] == SLUICE_MP_NIL_BYTE)) {
      put_key(out, sluice_envelope__key_name(SLUICE_KEY_ARGS));
      if (!sluice_args__append_json(out, args, len, SLUICE_JSON_MAX_DEPTH,
                                    error)) {
        g_prefix_error(error, "args: ");
        g_string_free(out, TRUE);
        return NULL;
      }
    }
  }
  put_key(out, sluice_envelope__key_name(SLUICE_KEY_ATTEMPT));
  put_int(out, env->attempt);
  if (env->enqueued_at > 0) {
    put_key(out, sluice_envelope__key_name(SLUICE_KEY_ENQUEUED_AT));
    put_int(out, env->enqueued_at);
  }
  if (env->eta > 0) {
    put_key(out, sluice_envelope__key_name(SLUICE_KEY_ETA));
    put_int(out, env->eta);
  }
  if ((sluice_message_options__any_set(&env->opts) ||
       env->unknown_opts != NULL) &&
      !put_opts(out, &env->opts, env->unknown_opts, error)) {
    g_string_free(out, TRUE);
    return NULL;
  }
  if (env->unknown_since > 0) {
    put_key(out, sluice_envelope__key_name(SLUICE_KEY_UNKNOWN_SINCE));
    put_int(out, env->unknown_since);
  }
  if (env->history != NULL && env->history->len > 0) {
    put_key(out, sluice_envelope__key_name(SLUICE_KEY_HISTORY));
    g_string_append_c(out, '[');
    for (guint i = 0; i < env->history->len; i++) {
      const gchar *line = g_ptr_array_index(env->history, i);

      if (i > 0)
        g_string_append_c(out, ',');
      sluice_json__append_string(out, line, strlen(line));
    }
    g_string_append_c(out, ']');
  }
  header_names = sluice_envelope__sorted_header_names(env, &n_headers);
  if (n_headers > 0) {
    put_key(out, sluice_envelope__key_name(SLUICE_KEY_HEADERS));
    g_string_append_c(out, '{');
    for (guint i = 0; i < n_headers; i++) {
      const gchar *value = g_hash_table_lookup(env->headers, header_names[i]);

      if (i > 0)
        g_string_append_c(out, ',');
      sluice_json__append_string(out, header_names[i], strlen(header_names[i]));
      g_string_append_c(out, ':');
      sluice_json__append_string(out, value, strlen(value));
    }
    g_string_append_c(out, '}');
  }
  if (env->wf != NULL)
    put_string_field(out, SLUICE_KEY_WF, env->wf);
  if (env->snoozes > 0) {
    put_key(out, sluice_envelope__key_name(SLUICE_KEY_SNOOZES));
    put_int(out, env->snoozes);
  }
  if (env->unique != NULL)
    put_string_field(out, SLUICE_KEY_UNIQUE, env->unique);
  if (env->seal != NULL)
    put_string_field(out, SLUICE_KEY_SEAL, env->seal);
  if (env->unknown_fields != NULL &&
      !sluice_unknown_keys__append_json(out, env->unknown_fields, FALSE, FALSE,
                                        error)) {
    g_string_free(out, TRUE);
    return NULL;
  }
  g_string_append_c(out, '}');
  return g_string_free_to_bytes(out);
}

/* ---- Decoding ------------------------------------------------------------ */

static gboolean
wrong_container(const gchar *field, const gchar *expected,
                const SluiceMpValue *v, GError **error)
{
  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
              "%s: expected %s, found %s", field, expected,
              sluice_mp__type_name(v->type));
  return FALSE;
}

/* An unknown key's value, converted to msgpack, is kept for the encoder to
 * write back (envelope-unknown.c). @name points into the cursor's scratch
 * buffer, which the conversion reuses: it is copied first. */
static gboolean
keep_unknown(SluiceJsonCursor *cur, SluiceUnknownKeys *unknown,
             const gchar *name, gsize len, GError **error)
{
  g_autofree gchar *key = g_strndup(name, len);
  g_autoptr(GBytes) value = sluice_json__cursor_to_msgpack(cur, NULL, error);

  if (value == NULL) {
    g_autofree gchar *quoted = sluice_text__escape(key, len, 64);

    g_prefix_error(error, "unknown key \"%s\": ", quoted);
    return FALSE;
  }
  sluice_unknown_keys__add(unknown, key, len, value);
  return TRUE;
}

static gboolean
read_opts(SluiceJsonCursor *cur, SluiceEnvelope *env, GError **error)
{
  SluiceMpValue map;
  SluiceUnknownKeys unknown = {0};

  sluice_json__cursor_value(cur, &map);
  if (map.type != SLUICE_MP_MAP)
    return wrong_container("opts", "a map (a JSON object)", &map, error);
  for (guint32 i = 0; i < map.count; i++) {
    gsize len;
    const gchar *name = sluice_json__cursor_key(cur, &len);
    SluiceOptionKey key = sluice_envelope__option_lookup(name, len);
    SluiceMpValue v;

    if (key == SLUICE_OPT_UNKNOWN) {
      if (!keep_unknown(cur, &unknown, name, len, error)) {
        sluice_unknown_keys__clear(&unknown);
        return FALSE;
      }
      continue;
    }
    sluice_json__cursor_value(cur, &v);
    if (!sluice_envelope__set_option(&env->opts, key, &v, error)) {
      sluice_unknown_keys__clear(&unknown);
      return FALSE;
    }
  }
  env->unknown_opts = sluice_unknown_keys__finish(&unknown);
  return TRUE;
}

static gboolean
read_history(SluiceJsonCursor *cur, SluiceEnvelope *env, GError **error)
{
  SluiceMpValue array;
  guint32 first_kept;

  sluice_json__cursor_value(cur, &array);
  if (array.type != SLUICE_MP_ARRAY)
    return wrong_container("history", "an array", &array, error);
  first_kept = sluice_envelope__history_first_kept(array.count);
  for (guint32 i = 0; i < array.count; i++) {
    SluiceMpValue v;

    sluice_json__cursor_value(cur, &v);
    if (!sluice_envelope__add_history_value(env, i, &v, i >= first_kept, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_headers(SluiceJsonCursor *cur, SluiceEnvelope *env, GError **error)
{
  SluiceMpValue map;
  g_autoptr(GString) name = g_string_new(NULL);

  sluice_json__cursor_value(cur, &map);
  if (map.type != SLUICE_MP_MAP)
    return wrong_container("headers", "a map (a JSON object)", &map, error);
  if (!sluice_envelope__check_header_count(map.count, error))
    return FALSE;
  for (guint32 i = 0; i < map.count; i++) {
    SluiceMpValue k, v;
    gsize len;
    const gchar *key = sluice_json__cursor_key(cur, &len);

    /* The value's string would take the cursor's buffer: keep a copy. */
    g_string_truncate(name, 0);
    g_string_append_len(name, key, (gssize)len);
    k.type = SLUICE_MP_STR;
    k.offset = G_MAXSIZE;
    k.raw.data = name->str;
    k.raw.len = (guint32)MIN(name->len, G_MAXUINT32);
    sluice_json__cursor_value(cur, &v);
    if (!sluice_envelope__add_header_value(env, &k, &v, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_args(SluiceJsonCursor *cur, SluiceEnvelope *env, GError **error)
{
  guint64 n_values = 0;
  gsize len;

  env->args = sluice_json__cursor_to_msgpack(cur, &n_values, error);
  if (env->args == NULL) {
    g_prefix_error(error, "args: ");
    return FALSE;
  }
  len = g_bytes_get_size(env->args);
  return sluice_envelope__check_args_cost(len, n_values, error);
}

static SluiceEnvelope *
decode_object(GBytes *bytes, const SluiceDecodeLimits *limits,
              gboolean header_only, GError **error)
{
  g_autoptr(SluiceJsonDoc) doc = NULL;
  SluiceEnvelope *env = NULL;
  SluiceJsonCursor cur;
  SluiceMpValue root;
  gconstpointer text;
  gsize len;
  guint32 seen = 0;
  SluiceUnknownKeys unknown = {0};

  text = g_bytes_get_data(bytes, &len);
  if (len > limits->max_bytes) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE,
                "the envelope is %" G_GSIZE_FORMAT
                " bytes long, over the limit of %" G_GSIZE_FORMAT,
                len, limits->max_bytes);
    return NULL;
  }
  doc = sluice_json__scan(text != NULL ? text : "", len, limits->max_depth,
                          error);
  if (doc == NULL)
    return NULL;
  sluice_json__cursor_init(&cur, doc);
  sluice_json__cursor_value(&cur, &root);
  if (root.type != SLUICE_MP_MAP) {
    wrong_container("the envelope", "a JSON object", &root, error);
    goto out;
  }

  env = sluice_envelope__new_for_decode();
  /* The scan refused duplicate keys, so each known key comes once. */
  for (guint32 i = 0; i < root.count; i++) {
    gsize name_len;
    const gchar *name = sluice_json__cursor_key(&cur, &name_len);
    SluiceEnvelopeKey key = sluice_envelope__key_lookup(name, name_len);
    SluiceMpValue v;
    gboolean ok;

    /* Unknown keys were checked by the scan (well-formed, within the
     * depth limit). */
    if (header_only && !sluice_envelope__is_header_key(key)) {
      sluice_json__cursor_skip(&cur);
      continue;
    }
    if (key == SLUICE_KEY_UNKNOWN) {
      if (!keep_unknown(&cur, &unknown, name, name_len, error))
        goto fail;
      continue;
    }
    seen |= 1u << key;
    switch (key) {
    case SLUICE_KEY_ARGS:
      ok = read_args(&cur, env, error);
      break;
    case SLUICE_KEY_OPTS:
      ok = read_opts(&cur, env, error);
      break;
    case SLUICE_KEY_HISTORY:
      ok = read_history(&cur, env, error);
      break;
    case SLUICE_KEY_HEADERS:
      ok = read_headers(&cur, env, error);
      break;
    case SLUICE_KEY_V:
      sluice_json__cursor_value(&cur, &v);
      ok = header_only ? sluice_envelope__set_any_version(env, &v, error)
                       : sluice_envelope__set_field(env, key, &v, error);
      break;
    default:
      sluice_json__cursor_value(&cur, &v);
      ok = sluice_envelope__set_field(env, key, &v, error);
      break;
    }
    if (!ok)
      goto fail;
  }
  if (!(header_only ? sluice_envelope__finish_header(env, seen, error)
                    : sluice_envelope__finish_decode(env, seen, error)))
    goto fail;
  env->unknown_fields = sluice_unknown_keys__finish(&unknown);
  goto out;

fail:
  sluice_envelope_free(env);
  env = NULL;
out:
  sluice_unknown_keys__clear(&unknown);
  sluice_json__cursor_clear(&cur);
  return env;
}

static SluiceEnvelope *
json_decode(const SluiceCodec *codec, GBytes *bytes,
            const SluiceDecodeLimits *limits, GError **error)
{
  return decode_object(bytes, limits, FALSE, error);
}

static SluiceEnvelope *
json_decode_header(const SluiceCodec *codec, GBytes *bytes,
                   const SluiceDecodeLimits *limits, GError **error)
{
  return decode_object(bytes, limits, TRUE, error);
}

static const SluiceCodec json_codec = {
    .version = SLUICE_CODEC_VERSION,
    .name = "json",
    .encode = json_encode,
    .decode = json_decode,
    .decode_header = json_decode_header,
};

const SluiceCodec *
sluice_codec_json(void)
{
  return &json_codec;
}

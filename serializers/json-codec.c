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
 * Decoding goes through sluice_json__parse() (args-json.c): the size limit
 * first, then a strict lexical pass that enforces the depth limit before
 * json-glib's recursive parser sees the text, then json-glib. Each field is
 * then converted to a SluiceMpValue and checked by the same functions the
 * msgpack codec uses (envelope.c), so a rule cannot differ between codecs.
 *
 * Encoding writes the text directly into a GString (see args-json.c for why
 * JsonGenerator is not used).
 */
#include "config.h"

#include "core/sluice-private.h"
#include "serializers/codec-private.h"

#include <json-glib/json-glib.h>
#include <string.h>

/* ---- Encoding -------------------------------------------------------------
 */

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

static void
put_opts(GString *out, const SluiceMessageOptions *o)
{
  const SluiceRetryPolicy *retry = &o->retry;
  gboolean first = TRUE;

  put_key(out, sluice_envelope__key_name(SLUICE_KEY_OPTS));
  g_string_append_c(out, '{');
  if (retry->max_attempts > 0) {
    put_option_key(out, SLUICE_OPT_MAX_ATTEMPTS, &first);
    put_int(out, retry->max_attempts);
  }
  if (retry->initial_backoff_ms >= 0) {
    put_option_key(out, SLUICE_OPT_INITIAL_BACKOFF_MS, &first);
    put_int(out, retry->initial_backoff_ms);
  }
  if (retry->multiplier > 0.0) {
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
  g_string_append_c(out, '}');
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
  g_string_append_printf(out, "{\"v\":%d", SLUICE_ENVELOPE_VERSION);
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
  if (sluice_message_options__any_set(&env->opts))
    put_opts(out, &env->opts);
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
  g_string_append_c(out, '}');
  return g_string_free_to_bytes(out);
}

/* ---- Decoding -------------------------------------------------------------
 */

/* Presents a JSON node as the msgpack value it stands for, so that the
 * field rules of envelope.c apply unchanged. Strings point into @node. */
static void
node_to_value(JsonNode *node, SluiceMpValue *v)
{
  v->offset = G_MAXSIZE;
  switch (json_node_get_node_type(node)) {
  case JSON_NODE_NULL:
    v->type = SLUICE_MP_NIL;
    return;
  case JSON_NODE_OBJECT:
    v->type = SLUICE_MP_MAP;
    v->count = json_object_get_size(json_node_get_object(node));
    return;
  case JSON_NODE_ARRAY:
    v->type = SLUICE_MP_ARRAY;
    v->count = json_array_get_length(json_node_get_array(node));
    return;
  case JSON_NODE_VALUE:
    break;
  }
  switch (json_node_get_value_type(node)) {
  case G_TYPE_INT64: {
    gint64 i = json_node_get_int(node);

    if (i >= 0) {
      v->type = SLUICE_MP_UINT;
      v->u = (guint64)i;
    } else {
      v->type = SLUICE_MP_INT;
      v->i = i;
    }
    return;
  }
  case G_TYPE_DOUBLE:
    v->type = SLUICE_MP_FLOAT64;
    v->f = json_node_get_double(node);
    return;
  case G_TYPE_BOOLEAN:
    v->type = SLUICE_MP_BOOL;
    v->b = json_node_get_boolean(node);
    return;
  default: {
    gsize len;

    v->type = SLUICE_MP_STR;
    v->raw.data = json_node_get_string(node);
    /* A SluiceMpValue string holds at most 4 GiB; a longer one (only
     * possible with a max_bytes above that) is cut, never read past. */
    len = strlen(v->raw.data);
    v->raw.len = (guint32)MIN(len, G_MAXUINT32);
    return;
  }
  }
}

static gboolean
wrong_container(const gchar *field, const gchar *expected, JsonNode *node,
                GError **error)
{
  SluiceMpValue v;

  node_to_value(node, &v);
  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
              "%s: expected %s, found %s", field, expected,
              sluice_mp__type_name(v.type));
  return FALSE;
}

static gboolean
read_opts(JsonNode *node, SluiceEnvelope *env, GError **error)
{
  JsonObjectIter iter;
  const gchar *name;
  JsonNode *member;

  if (!JSON_NODE_HOLDS_OBJECT(node))
    return wrong_container("opts", "a map (a JSON object)", node, error);
  json_object_iter_init_ordered(&iter, json_node_get_object(node));
  while (json_object_iter_next_ordered(&iter, &name, &member)) {
    SluiceOptionKey key = sluice_envelope__option_lookup(name, strlen(name));
    SluiceMpValue v;

    if (key == SLUICE_OPT_UNKNOWN)
      continue;
    node_to_value(member, &v);
    if (!sluice_envelope__set_option(&env->opts, key, &v, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_history(JsonNode *node, SluiceEnvelope *env, GError **error)
{
  JsonArray *array;
  guint n;

  if (!JSON_NODE_HOLDS_ARRAY(node))
    return wrong_container("history", "an array", node, error);
  array = json_node_get_array(node);
  n = json_array_get_length(array);
  for (guint i = 0; i < n; i++) {
    SluiceMpValue v;

    node_to_value(json_array_get_element(array, i), &v);
    if (!sluice_envelope__add_history_value(env, i, &v, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_headers(JsonNode *node, SluiceEnvelope *env, GError **error)
{
  JsonObjectIter iter;
  const gchar *name;
  JsonNode *member;

  if (!JSON_NODE_HOLDS_OBJECT(node))
    return wrong_container("headers", "a map (a JSON object)", node, error);
  json_object_iter_init_ordered(&iter, json_node_get_object(node));
  while (json_object_iter_next_ordered(&iter, &name, &member)) {
    SluiceMpValue k, v;
    gsize name_len = strlen(name);

    k.type = SLUICE_MP_STR;
    k.offset = G_MAXSIZE;
    k.raw.data = name;
    k.raw.len = (guint32)MIN(name_len, G_MAXUINT32);
    node_to_value(member, &v);
    if (!sluice_envelope__add_header_value(env, &k, &v, error))
      return FALSE;
  }
  return TRUE;
}

static SluiceEnvelope *
json_decode(const SluiceCodec *codec, GBytes *bytes,
            const SluiceDecodeLimits *limits, GError **error)
{
  SluiceEnvelope *env = NULL;
  JsonNode *root;
  JsonObjectIter iter;
  const gchar *name;
  JsonNode *member;
  gconstpointer text;
  gsize len;
  guint32 seen = 0;

  text = g_bytes_get_data(bytes, &len);
  if (len > limits->max_bytes) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE,
                "the envelope is %" G_GSIZE_FORMAT
                " bytes long, over the limit of %" G_GSIZE_FORMAT,
                len, limits->max_bytes);
    return NULL;
  }
  root = sluice_json__parse(text != NULL ? text : "", len, limits->max_depth,
                            error);
  if (root == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT(root)) {
    wrong_container("the envelope", "a JSON object", root, error);
    goto out;
  }

  env = sluice_envelope__new_for_decode();
  json_object_iter_init_ordered(&iter, json_node_get_object(root));
  while (json_object_iter_next_ordered(&iter, &name, &member)) {
    SluiceEnvelopeKey key = sluice_envelope__key_lookup(name, strlen(name));
    SluiceMpValue v;
    gboolean ok;

    /* Unknown keys were checked by the parser (well-formed, within the
     * depth limit); json-glib already refused duplicates. */
    if (key == SLUICE_KEY_UNKNOWN)
      continue;
    seen |= 1u << key;
    switch (key) {
    case SLUICE_KEY_ARGS:
      env->args = sluice_args__from_json_node(member, error);
      ok = env->args != NULL;
      if (!ok)
        g_prefix_error(error, "args: ");
      break;
    case SLUICE_KEY_OPTS:
      ok = read_opts(member, env, error);
      break;
    case SLUICE_KEY_HISTORY:
      ok = read_history(member, env, error);
      break;
    case SLUICE_KEY_HEADERS:
      ok = read_headers(member, env, error);
      break;
    default:
      node_to_value(member, &v);
      ok = sluice_envelope__set_field(env, key, &v, error);
      break;
    }
    if (!ok)
      goto fail;
  }
  if (!sluice_envelope__finish_decode(env, seen, error))
    goto fail;
  goto out;

fail:
  sluice_envelope_free(env);
  env = NULL;
out:
  json_node_unref(root);
  return env;
}

static const SluiceCodec json_codec = {
    .version = SLUICE_CODEC_VERSION,
    .name = "json",
    .encode = json_encode,
    .decode = json_decode,
};

const SluiceCodec *
sluice_codec_json(void)
{
  return &json_codec;
}

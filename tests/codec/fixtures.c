/* fixtures.c - see fixtures.h. */
#include "config.h"

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"

#include <check.h>
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/fixtures.h"

/* ---- Helpers ------------------------------------------------------------- */

/* TRUE when @substr is NULL or in @message. */
gboolean
mentions(const gchar *message, const gchar *substr)
{
  return substr == NULL || strstr(message, substr) != NULL;
}

void
pk_init(Pk *p)
{
  msgpack_sbuffer_init(&p->sb);
  msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

GBytes *
pk_finish(Pk *p)
{
  GBytes *b = g_bytes_new(p->sb.data, p->sb.size);

  msgpack_sbuffer_destroy(&p->sb);
  return b;
}

void
pk_str(Pk *p, const gchar *s)
{
  msgpack_pack_str(&p->pk, strlen(s));
  msgpack_pack_str_body(&p->pk, s, strlen(s));
}

void
pk_raw(Pk *p, const void *data, gsize len)
{
  msgpack_sbuffer_write(&p->sb, data, len);
}

GBytes *
hex_bytes(const gchar *hex)
{
  GByteArray *a = g_byte_array_new();

  for (const gchar *p = hex; *p != '\0';) {
    guint8 b;

    if (*p == ' ') {
      p++;
      continue;
    }
    b = (guint8)(g_ascii_xdigit_value(p[0]) << 4 | g_ascii_xdigit_value(p[1]));
    g_byte_array_append(a, &b, 1);
    p += 2;
  }
  return g_byte_array_free_to_bytes(a);
}

GBytes *
text_bytes(const gchar *s)
{
  return g_bytes_new(s, strlen(s));
}

/* msgpack of a JSON text, for fixtures; the conversion is tested on its
 * own below. */
GBytes *
J(const gchar *json)
{
  GError *err = NULL;
  GBytes *b = sluice_args_from_json(json, -1, &err);

  assert_no_error(err);
  return b;
}

SluiceEnvelope *
codec_decode(const SluiceCodec *codec, GBytes *bytes, GError **error)
{
  SluiceDecodeLimits limits;

  sluice_decode_limits_init(&limits);
  return codec->decode(codec, bytes, &limits, error);
}

SluiceEnvelope *
decode_with(GBytes *bytes, gsize max_bytes, guint max_depth, GError **error)
{
  SluiceDecodeLimits limits = {max_bytes, max_depth};

  return sluice_envelope_decode(bytes, &limits, error);
}

void
assert_opts_equal(const SluiceMessageOptions *a, const SluiceMessageOptions *b)
{
  ck_assert_int_eq(a->retry.max_attempts, b->retry.max_attempts);
  ck_assert_int_eq(a->retry.initial_backoff_ms, b->retry.initial_backoff_ms);
  ck_assert_double_eq(a->retry.multiplier, b->retry.multiplier);
  ck_assert_int_eq(a->retry.max_backoff_ms, b->retry.max_backoff_ms);
  ck_assert_int_eq(a->retry.jitter, b->retry.jitter);
  ck_assert_int_eq(a->timeout_ms, b->timeout_ms);
  ck_assert_int_eq(a->expires_at, b->expires_at);
  ck_assert_int_eq(a->store_result, b->store_result);
  ck_assert_int_eq(a->result_ttl_ms, b->result_ttl_ms);
  ck_assert_int_eq(a->dead_letter, b->dead_letter);
  ck_assert_int_eq(a->hard_timeout_ms, b->hard_timeout_ms);
}

/* history and headers are NULL while empty. */
guint
history_len(const SluiceEnvelope *env)
{
  return env->history != NULL ? env->history->len : 0;
}

guint
header_count(const SluiceEnvelope *env)
{
  return env->headers != NULL ? g_hash_table_size(env->headers) : 0;
}

/* Carried keys are equal when their values are: through JSON a msgpack
 * integer or string may come back in a shorter encoding (a producer's
 * 0xcd 0x00 0x01 as 0x01), so they are compared as the JSON they read as,
 * and as bytes where JSON cannot say them. */
static void
assert_carried_equal(GBytes *a, GBytes *b)
{
  g_autofree gchar *ja = NULL;
  g_autofree gchar *jb = NULL;

  ck_assert((a == NULL) == (b == NULL));
  if (a == NULL)
    return;
  ja = sluice_args_to_json(a, NULL);
  jb = sluice_args_to_json(b, NULL);
  if (ja != NULL && jb != NULL)
    ck_assert_str_eq(ja, jb);
  else
    ck_assert(g_bytes_equal(a, b));
}

void
assert_envelope_equal(const SluiceEnvelope *a, const SluiceEnvelope *b)
{
  GHashTableIter iter;
  gpointer k, v;

  ck_assert_uint_eq(a->version, b->version);
  ck_assert_str_eq(a->id, b->id);
  ck_assert_str_eq(a->task, b->task);
  ck_assert_str_eq(a->queue, b->queue);
  ck_assert_msg(g_bytes_equal(a->args, b->args), "args differ");
  ck_assert_uint_eq(a->attempt, b->attempt);
  ck_assert_int_eq(a->enqueued_at, b->enqueued_at);
  ck_assert_int_eq(a->eta, b->eta);
  assert_opts_equal(&a->opts, &b->opts);
  ck_assert_int_eq(a->unknown_since, b->unknown_since);
  ck_assert_uint_eq(a->snoozes, b->snoozes);
  ck_assert_str_eq(a->unique != NULL ? a->unique : "(none)",
                   b->unique != NULL ? b->unique : "(none)");
  ck_assert_uint_eq(history_len(a), history_len(b));
  for (guint i = 0; i < history_len(a); i++)
    ck_assert_str_eq(g_ptr_array_index(a->history, i),
                     g_ptr_array_index(b->history, i));
  ck_assert_uint_eq(header_count(a), header_count(b));
  assert_carried_equal(a->unknown_fields, b->unknown_fields);
  assert_carried_equal(a->unknown_opts, b->unknown_opts);
  if (a->headers == NULL)
    return;
  g_hash_table_iter_init(&iter, a->headers);
  while (g_hash_table_iter_next(&iter, &k, &v)) {
    const gchar *other = sluice_envelope_get_header(b, k);

    ck_assert_msg(other != NULL, "header %s missing", (gchar *)k);
    ck_assert_str_eq(v, other);
  }
}

SluiceEnvelope *
minimal_envelope(void)
{
  SluiceEnvelope *env = sluice_envelope_new();

  env->id = g_strdup("t-1");
  env->task = g_strdup("tasks.add");
  env->queue = g_strdup("default");
  return env;
}

GBytes *
full_args(void)
{
  Pk p;
  static const guint8 bin[] = {0x00, 0x01, 0xff};

  pk_init(&p);
  msgpack_pack_map(&p.pk, 6);
  pk_str(&p, "to");
  pk_str(&p, "ann@example.com");
  pk_str(&p, "n");
  msgpack_pack_array(&p.pk, 3);
  msgpack_pack_int64(&p.pk, 1);
  msgpack_pack_int64(&p.pk, -2);
  msgpack_pack_double(&p.pk, 3.25);
  pk_str(&p, "ok");
  msgpack_pack_true(&p.pk);
  pk_str(&p, "none");
  msgpack_pack_nil(&p.pk);
  pk_str(&p, "bin");
  msgpack_pack_bin(&p.pk, sizeof bin);
  msgpack_pack_bin_body(&p.pk, bin, sizeof bin);
  pk_str(&p, "ünï");
  pk_str(&p, "✓ 😀");
  return pk_finish(&p);
}

SluiceEnvelope *
full_envelope(void)
{
  SluiceEnvelope *env = minimal_envelope();
  SluiceMessageOptions *o = &env->opts;

  g_bytes_unref(env->args);
  env->args = full_args();
  env->attempt = 3;
  env->enqueued_at = 1717243200000;
  env->eta = 1717243260000;
  o->retry.max_attempts = 7;
  o->retry.initial_backoff_ms = 250;
  o->retry.multiplier = 1.5;
  o->retry.max_backoff_ms = 60000;
  o->retry.jitter = SLUICE_OFF;
  o->timeout_ms = 5000;
  o->expires_at = 1717246800000;
  o->store_result = SLUICE_OFF;
  o->result_ttl_ms = 3600000;
  o->dead_letter = SLUICE_ON;
  env->unknown_since = 1717243100000;
  sluice_envelope_add_history(env, "attempt 1: connection refused");
  sluice_envelope_add_history(env, "attempt 2: délai dépassé ⏱");
  sluice_envelope_set_header(env, "traceparent",
                             "00-4bf92f3577b34da6a3ce929d0e0e4736-"
                             "00f067aa0ba902b7-01");
  sluice_envelope_set_header(env, "tenant", "acme");
  sluice_envelope_set_header(env, "empty", "");
  return env;
}

const SluiceCodec *
codec_at(guint i)
{
  return i == 0 ? sluice_codec_msgpack() : sluice_codec_json();
}

/* Encodes with @codec and decodes through the auto-detecting front door. */
SluiceEnvelope *
round_trip(const SluiceCodec *codec, const SluiceEnvelope *env)
{
  GError *err = NULL;
  GBytes *bytes = sluice_envelope_encode(codec, env, &err);
  SluiceEnvelope *back;

  assert_no_error(err);
  ck_assert_ptr_nonnull(bytes);
  back = sluice_envelope_decode(bytes, NULL, &err);
  assert_no_error(err);
  ck_assert_ptr_nonnull(back);
  g_bytes_unref(bytes);
  return back;
}

/* ---- Field lists, for malformed envelopes ---------------------------------
 *
 * A field has a JSON text and the msgpack of the same value; fields made
 * from raw msgpack that JSON cannot express have no JSON text, and tests
 * using them run against the msgpack codec only.
 */

void
field_free(gpointer data)
{
  Field *f = data;

  g_free(f->key);
  g_free(f->json);
  g_bytes_unref(f->mp);
  g_free(f);
}

GPtrArray *
fields_new(void)
{
  return g_ptr_array_new_with_free_func(field_free);
}

void
fields_add_json(GPtrArray *fields, const gchar *key, const gchar *json)
{
  Field *f = g_new0(Field, 1);

  f->key = g_strdup(key);
  f->json = g_strdup(json);
  f->mp = J(json);
  g_ptr_array_add(fields, f);
}

void
fields_add_raw(GPtrArray *fields, const gchar *key, GBytes *mp)
{
  Field *f = g_new0(Field, 1);

  f->key = g_strdup(key);
  f->mp = mp;
  g_ptr_array_add(fields, f);
}

void
fields_add_both(GPtrArray *fields, const gchar *key, const gchar *json,
                const gchar *hex)
{
  fields_add_raw(fields, key, hex_bytes(hex));
  ((Field *)g_ptr_array_index(fields, fields->len - 1))->json = g_strdup(json);
}

void
fields_remove(GPtrArray *fields, const gchar *key)
{
  for (guint i = 0; i < fields->len; i++) {
    Field *f = g_ptr_array_index(fields, i);

    if (strcmp(f->key, key) == 0) {
      g_ptr_array_remove_index(fields, i);
      return;
    }
  }
}

void
fields_set_json(GPtrArray *fields, const gchar *key, const gchar *json)
{
  fields_remove(fields, key);
  fields_add_json(fields, key, json);
}

void
fields_set_raw(GPtrArray *fields, const gchar *key, GBytes *mp)
{
  fields_remove(fields, key);
  fields_add_raw(fields, key, mp);
}

GPtrArray *
fields_valid(void)
{
  GPtrArray *fields = fields_new();

  fields_add_json(fields, "v", "1");
  fields_add_json(fields, "id", "\"t-1\"");
  fields_add_json(fields, "task", "\"tasks.add\"");
  fields_add_json(fields, "queue", "\"default\"");
  fields_add_json(fields, "attempt", "1");
  return fields;
}

gboolean
fields_have_json(GPtrArray *fields)
{
  for (guint i = 0; i < fields->len; i++) {
    if (((Field *)g_ptr_array_index(fields, i))->json == NULL)
      return FALSE;
  }
  return TRUE;
}

GBytes *
fields_msgpack(GPtrArray *fields)
{
  Pk p;

  pk_init(&p);
  msgpack_pack_map(&p.pk, fields->len);
  for (guint i = 0; i < fields->len; i++) {
    Field *f = g_ptr_array_index(fields, i);
    gsize len;
    gconstpointer data = g_bytes_get_data(f->mp, &len);

    pk_str(&p, f->key);
    pk_raw(&p, data, len);
  }
  return pk_finish(&p);
}

GBytes *
fields_json(GPtrArray *fields)
{
  GString *s = g_string_new("{");

  for (guint i = 0; i < fields->len; i++) {
    Field *f = g_ptr_array_index(fields, i);

    g_string_append_printf(s, "%s\"%s\": %s", i > 0 ? ", " : "", f->key,
                           f->json);
  }
  g_string_append_c(s, '}');
  return g_string_free_to_bytes(s);
}

/* Decodes @fields in both encodings (msgpack only if some field has no JSON
 * form) and checks both fail with @code and a message holding @substr. */
void
assert_fields_fail(GPtrArray *fields, gint code, const gchar *substr)
{
  GError *err = NULL;
  GBytes *bytes = fields_msgpack(fields);
  SluiceEnvelope *env = sluice_envelope_decode(bytes, NULL, &err);

  ck_assert_ptr_null(env);
  assert_error(err, code, substr);
  g_bytes_unref(bytes);

  if (!fields_have_json(fields))
    return;
  bytes = fields_json(fields);
  env = sluice_envelope_decode(bytes, NULL, &err);
  ck_assert_msg(env == NULL, "JSON %s decoded",
                (const gchar *)g_bytes_get_data(bytes, NULL));
  assert_error(err, code, substr);
  g_bytes_unref(bytes);
}

void
assert_fields_decode(GPtrArray *fields)
{
  GError *err = NULL;
  GBytes *bytes = fields_msgpack(fields);
  SluiceEnvelope *env = sluice_envelope_decode(bytes, NULL, &err);

  assert_no_error(err);
  sluice_envelope_free(env);
  g_bytes_unref(bytes);
  if (!fields_have_json(fields))
    return;
  bytes = fields_json(fields);
  env = sluice_envelope_decode(bytes, NULL, &err);
  assert_no_error(err);
  sluice_envelope_free(env);
  g_bytes_unref(bytes);
}

/* ---- Nesting, for depth limits ------------------------------------------ */

gchar *
nested_json(guint depth)
{
  GString *s = g_string_new(NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append_c(s, '[');
  for (guint i = 0; i < depth; i++)
    g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

GBytes *
nested_msgpack(guint depth)
{
  GByteArray *a = g_byte_array_new();
  guint8 one = 0x91, empty = 0x90;

  for (guint i = 1; i < depth; i++)
    g_byte_array_append(a, &one, 1);
  g_byte_array_append(a, &empty, 1);
  return g_byte_array_free_to_bytes(a);
}

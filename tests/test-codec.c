/* test-codec.c - the envelope codecs, args JSON and result records.
 *
 * What is tested, and why each test would fail if its feature broke:
 *   - round trips of every field and option through both codecs, compared
 *     field by field (not by re-encoding, which could hide a symmetric bug);
 *   - one test per class of malformed input, asserting the error code and
 *     that the message names the field or offset;
 *   - the two codecs agree on a set of varied envelopes;
 *   - args JSON <-> msgpack, both ways, byte for byte against msgpack-c's
 *     own packer;
 *   - a deterministic mutation test (fixed seed) that must never crash,
 *     read out of bounds or leak: CI runs it under ASan/UBSan;
 *   - the worked example of PROTOCOL.md, read from the document itself, so
 *     the document cannot drift from the code;
 *   - result records.
 *
 * Fixtures are built with msgpack-c's packer or, for malformed envelopes,
 * from a list of (key, value) fields that each test edits, so a test says
 * only what differs from a valid envelope.
 */
#include "config.h"

#include "core/sluice-private.h"
#include "serializers/codec-private.h"

#include <check.h>
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

/* ---- Helpers ------------------------------------------------------------- */

/* TRUE when @substr is NULL or in @message. */
static gboolean
mentions(const gchar *message, const gchar *substr)
{
  return substr == NULL || strstr(message, substr) != NULL;
}

#define assert_error(err, expected_code, substr)                               \
  do {                                                                         \
    ck_assert_msg((err) != NULL, "expected an error, got success");            \
    ck_assert_msg((err)->domain == SLUICE_CODEC_ERROR &&                       \
                      (err)->code == (gint)(expected_code),                    \
                  "expected code %d, got %s %d: %s", (gint)(expected_code),    \
                  g_quark_to_string((err)->domain), (err)->code,               \
                  (err)->message);                                             \
    ck_assert_msg(mentions((err)->message, (substr)),                          \
                  "message \"%s\" does not mention \"%s\"", (err)->message,    \
                  (substr) != NULL ? (const gchar *)(substr) : "");            \
    g_clear_error(&(err));                                                     \
  } while (0)

#define assert_no_error(err)                                                   \
  ck_assert_msg((err) == NULL, "unexpected error: %s",                         \
                (err) != NULL ? (err)->message : "")

typedef struct {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} Pk;

static void
pk_init(Pk *p)
{
  msgpack_sbuffer_init(&p->sb);
  msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static GBytes *
pk_finish(Pk *p)
{
  GBytes *b = g_bytes_new(p->sb.data, p->sb.size);

  msgpack_sbuffer_destroy(&p->sb);
  return b;
}

static void
pk_str(Pk *p, const gchar *s)
{
  msgpack_pack_str(&p->pk, strlen(s));
  msgpack_pack_str_body(&p->pk, s, strlen(s));
}

static void
pk_raw(Pk *p, const void *data, gsize len)
{
  msgpack_sbuffer_write(&p->sb, data, len);
}

static GBytes *
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

static GBytes *
text_bytes(const gchar *s)
{
  return g_bytes_new(s, strlen(s));
}

/* msgpack of a JSON text, for fixtures; the conversion is tested on its
 * own below. */
static GBytes *
J(const gchar *json)
{
  GError *err = NULL;
  GBytes *b = sluice_args_from_json(json, -1, &err);

  assert_no_error(err);
  return b;
}

static SluiceEnvelope *
codec_decode(const SluiceCodec *codec, GBytes *bytes, GError **error)
{
  SluiceDecodeLimits limits;

  sluice_decode_limits_init(&limits);
  return codec->decode(codec, bytes, &limits, error);
}

static SluiceEnvelope *
decode_with(GBytes *bytes, gsize max_bytes, guint max_depth, GError **error)
{
  SluiceDecodeLimits limits = {max_bytes, max_depth};

  return sluice_envelope_decode(bytes, &limits, error);
}

static void
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
static guint
history_len(const SluiceEnvelope *env)
{
  return env->history != NULL ? env->history->len : 0;
}

static guint
header_count(const SluiceEnvelope *env)
{
  return env->headers != NULL ? g_hash_table_size(env->headers) : 0;
}

static void
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
  ck_assert_uint_eq(history_len(a), history_len(b));
  for (guint i = 0; i < history_len(a); i++)
    ck_assert_str_eq(g_ptr_array_index(a->history, i),
                     g_ptr_array_index(b->history, i));
  ck_assert_uint_eq(header_count(a), header_count(b));
  if (a->headers == NULL)
    return;
  g_hash_table_iter_init(&iter, a->headers);
  while (g_hash_table_iter_next(&iter, &k, &v)) {
    const gchar *other = sluice_envelope_get_header(b, k);

    ck_assert_msg(other != NULL, "header %s missing", (gchar *)k);
    ck_assert_str_eq(v, other);
  }
}

static SluiceEnvelope *
minimal_envelope(void)
{
  SluiceEnvelope *env = sluice_envelope_new();

  env->id = g_strdup("t-1");
  env->task = g_strdup("tasks.add");
  env->queue = g_strdup("default");
  return env;
}

static GBytes *
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

static SluiceEnvelope *
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

static const SluiceCodec *
codec_at(guint i)
{
  return i == 0 ? sluice_codec_msgpack() : sluice_codec_json();
}

/* Encodes with @codec and decodes through the auto-detecting front door. */
static SluiceEnvelope *
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

typedef struct {
  gchar *key;
  gchar *json;
  GBytes *mp;
} Field;

static void
field_free(gpointer data)
{
  Field *f = data;

  g_free(f->key);
  g_free(f->json);
  g_bytes_unref(f->mp);
  g_free(f);
}

static GPtrArray *
fields_new(void)
{
  return g_ptr_array_new_with_free_func(field_free);
}

static void
fields_add_json(GPtrArray *fields, const gchar *key, const gchar *json)
{
  Field *f = g_new0(Field, 1);

  f->key = g_strdup(key);
  f->json = g_strdup(json);
  f->mp = J(json);
  g_ptr_array_add(fields, f);
}

/* A field whose JSON text and msgpack are given separately (for what
 * sluice_args_from_json() rightly refuses, like duplicate keys). */
static void fields_add_both(GPtrArray *fields, const gchar *key,
                            const gchar *json, const gchar *hex);

static void
fields_add_raw(GPtrArray *fields, const gchar *key, GBytes *mp)
{
  Field *f = g_new0(Field, 1);

  f->key = g_strdup(key);
  f->mp = mp;
  g_ptr_array_add(fields, f);
}

static void
fields_add_both(GPtrArray *fields, const gchar *key, const gchar *json,
                const gchar *hex)
{
  fields_add_raw(fields, key, hex_bytes(hex));
  ((Field *)g_ptr_array_index(fields, fields->len - 1))->json = g_strdup(json);
}

static void
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

static void
fields_set_json(GPtrArray *fields, const gchar *key, const gchar *json)
{
  fields_remove(fields, key);
  fields_add_json(fields, key, json);
}

static void
fields_set_raw(GPtrArray *fields, const gchar *key, GBytes *mp)
{
  fields_remove(fields, key);
  fields_add_raw(fields, key, mp);
}

static GPtrArray *
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

static gboolean
fields_have_json(GPtrArray *fields)
{
  for (guint i = 0; i < fields->len; i++) {
    if (((Field *)g_ptr_array_index(fields, i))->json == NULL)
      return FALSE;
  }
  return TRUE;
}

static GBytes *
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

static GBytes *
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
static void
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

static void
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

/* ---- Life cycle ---------------------------------------------------------- */

START_TEST(test_envelope_new_defaults)
{
  SluiceEnvelope *env = sluice_envelope_new();
  SluiceMessageOptions unset;
  SluiceDecodeLimits limits;
  gsize len;
  const guint8 *args = g_bytes_get_data(env->args, &len);

  ck_assert_uint_eq(env->version, SLUICE_ENVELOPE_VERSION);
  ck_assert_uint_eq(env->attempt, 1);
  ck_assert_uint_eq(len, 1);
  ck_assert_uint_eq(args[0], 0xc0);
  ck_assert_ptr_null(env->id);
  ck_assert_ptr_null(env->task);
  ck_assert_ptr_null(env->queue);
  /* Empty until something is put in them. */
  ck_assert_ptr_null(env->history);
  ck_assert_ptr_null(env->headers);
  sluice_message_options_init(&unset);
  /* One encoding of "unset" for every numeric field. */
  ck_assert_int_eq(unset.retry.max_attempts, SLUICE_RETRY_UNSET);
  ck_assert_int_eq(unset.retry.initial_backoff_ms, SLUICE_RETRY_UNSET);
  ck_assert_double_eq(unset.retry.multiplier, SLUICE_RETRY_UNSET);
  ck_assert_int_eq(unset.retry.max_backoff_ms, SLUICE_RETRY_UNSET);
  ck_assert_int_eq(unset.retry.jitter, SLUICE_UNSET);
  ck_assert_int_eq(unset.store_result, SLUICE_UNSET);
  ck_assert_int_eq(unset.dead_letter, SLUICE_UNSET);
  assert_opts_equal(&env->opts, &unset);
  sluice_decode_limits_init(&limits);
  ck_assert_uint_eq(limits.max_bytes, 1024 * 1024);
  ck_assert_uint_eq(limits.max_depth, 64);
  sluice_envelope_free(env);
  sluice_envelope_free(NULL);
}
END_TEST

START_TEST(test_envelope_copy_is_deep)
{
  SluiceEnvelope *env = full_envelope();
  SluiceEnvelope *copy = sluice_envelope_copy(env);

  assert_envelope_equal(env, copy);
  ck_assert_ptr_ne(env->id, copy->id);
  ck_assert_ptr_ne(env->history, copy->history);
  ck_assert_ptr_ne(env->headers, copy->headers);
  /* Changing the copy leaves the original alone, and both free cleanly. */
  sluice_envelope_add_history(copy, "attempt 3: boom");
  sluice_envelope_set_header(copy, "x", "y");
  ck_assert_uint_eq(env->history->len, 2);
  ck_assert_uint_eq(header_count(env), 3);
  sluice_envelope_free(env);
  ck_assert_str_eq(g_ptr_array_index(copy->history, 2), "attempt 3: boom");
  sluice_envelope_free(copy);
}
END_TEST

START_TEST(test_codec_tables)
{
  ck_assert_str_eq(sluice_codec_get_name(sluice_codec_msgpack()), "msgpack");
  ck_assert_str_eq(sluice_codec_get_name(sluice_codec_json()), "json");
  ck_assert_uint_eq(sluice_codec_msgpack()->version, SLUICE_CODEC_VERSION);
  ck_assert_uint_eq(sluice_codec_json()->version, SLUICE_CODEC_VERSION);
  ck_assert_uint_ne(SLUICE_CODEC_ERROR, 0);
  ck_assert_uint_eq(SLUICE_CODEC_ERROR,
                    g_quark_from_string("sluice-codec-error-quark"));
}
END_TEST

/* ---- History ------------------------------------------------------------- */

START_TEST(test_history_cuts_at_char_boundary)
{
  SluiceEnvelope *env = sluice_envelope_new();
  GString *line = g_string_new(NULL);
  const gchar *stored;

  /* 255 ASCII bytes, then a 4-byte character straddling the limit. */
  for (guint i = 0; i < SLUICE_HISTORY_MAX_LINE_BYTES - 1; i++)
    g_string_append_c(line, 'a');
  g_string_append(line, "😀 and more");
  sluice_envelope_add_history(env, line->str);
  stored = g_ptr_array_index(env->history, 0);
  ck_assert_uint_eq(strlen(stored), SLUICE_HISTORY_MAX_LINE_BYTES - 1);
  ck_assert(g_utf8_validate(stored, -1, NULL));

  /* Exactly the limit is kept whole. */
  g_string_truncate(line, SLUICE_HISTORY_MAX_LINE_BYTES - 2);
  g_string_append(line, "é");
  ck_assert_uint_eq(line->len, SLUICE_HISTORY_MAX_LINE_BYTES);
  sluice_envelope_add_history(env, line->str);
  ck_assert_str_eq(g_ptr_array_index(env->history, 1), line->str);

  g_string_free(line, TRUE);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_history_repairs_utf8)
{
  SluiceEnvelope *env = minimal_envelope();
  SluiceEnvelope *back;

  sluice_envelope_add_history(env, "bad \xff\xfe bytes");
  ck_assert(g_utf8_validate(g_ptr_array_index(env->history, 0), -1, NULL));
  ck_assert(g_str_has_prefix(g_ptr_array_index(env->history, 0), "bad "));
  /* And so the envelope still encodes. */
  back = round_trip(NULL, env);
  assert_envelope_equal(env, back);
  sluice_envelope_free(back);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_history_keeps_newest_lines)
{
  SluiceEnvelope *env = sluice_envelope_new();

  for (guint i = 1; i <= SLUICE_HISTORY_MAX_LINES + 5; i++) {
    g_autofree gchar *line = g_strdup_printf("attempt %u failed", i);
    sluice_envelope_add_history(env, line);
  }
  ck_assert_uint_eq(env->history->len, SLUICE_HISTORY_MAX_LINES);
  ck_assert_str_eq(g_ptr_array_index(env->history, 0), "attempt 6 failed");
  ck_assert_str_eq(
      g_ptr_array_index(env->history, SLUICE_HISTORY_MAX_LINES - 1),
      "attempt 15 failed");
  sluice_envelope_free(env);
}
END_TEST

/* ---- Round trips --------------------------------------------------------- */

START_TEST(test_round_trip_minimal)
{
  SluiceEnvelope *env = minimal_envelope();
  SluiceEnvelope *back = round_trip(codec_at(_i), env);
  SluiceMessageOptions unset;

  assert_envelope_equal(env, back);
  sluice_message_options_init(&unset);
  assert_opts_equal(&back->opts, &unset);
  ck_assert_uint_eq(history_len(back), 0);
  ck_assert_uint_eq(header_count(back), 0);
  sluice_envelope_free(back);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_round_trip_full)
{
  SluiceEnvelope *env = full_envelope();
  SluiceEnvelope *back = round_trip(codec_at(_i), env);

  assert_envelope_equal(env, back);
  ck_assert_int_eq(back->opts.retry.max_attempts, 7);
  ck_assert_int_eq(back->opts.retry.jitter, SLUICE_OFF);
  ck_assert_int_eq(back->opts.dead_letter, SLUICE_ON);
  sluice_envelope_free(back);
  sluice_envelope_free(env);
}
END_TEST

/* Each option alone, set, then the same envelope with it unset again. */
START_TEST(test_round_trip_each_option)
{
  for (guint opt = 0; opt < 14; opt++) {
    SluiceEnvelope *env = minimal_envelope();
    SluiceMessageOptions *o = &env->opts;
    SluiceEnvelope *back;

    switch (opt) {
    case 0:
      o->retry.max_attempts = 1;
      break;
    case 1:
      o->retry.initial_backoff_ms = 0; /* 0 is a real value here */
      break;
    case 2:
      o->retry.multiplier = 2.0;
      break;
    case 3:
      o->retry.max_backoff_ms = G_MAXINT64;
      break;
    case 4:
      o->retry.jitter = SLUICE_ON;
      break;
    case 5:
      o->timeout_ms = 1;
      break;
    case 6:
      o->expires_at = 1717246800000;
      break;
    case 7:
      o->store_result = SLUICE_ON;
      break;
    case 8:
      o->result_ttl_ms = 86400000;
      break;
    case 9:
      o->dead_letter = SLUICE_OFF;
      break;
    case 10:
      o->retry.jitter = SLUICE_OFF;
      break;
    case 11:
      o->retry.max_attempts = G_MAXINT32;
      break;
    case 12:
      o->retry.multiplier = 0.1;
      break;
    case 13:
      o->hard_timeout_ms = 250;
      break;
    }
    ck_assert(sluice_message_options__any_set(o));
    for (guint c = 0; c < 2; c++) {
      back = round_trip(codec_at(c), env);
      assert_envelope_equal(env, back);
      sluice_envelope_free(back);
    }
    sluice_message_options_init(o);
    for (guint c = 0; c < 2; c++) {
      back = round_trip(codec_at(c), env);
      assert_envelope_equal(env, back);
      sluice_envelope_free(back);
    }
    sluice_envelope_free(env);
  }
}
END_TEST

START_TEST(test_round_trip_field_extremes)
{
  SluiceEnvelope *env = minimal_envelope();
  SluiceEnvelope *back;

  g_free(env->id);
  env->id = g_strnfill(SLUICE_MAX_ID_BYTES, 'i');
  g_free(env->task);
  env->task = g_strnfill(SLUICE_MAX_NAME_BYTES, 't');
  g_free(env->queue);
  env->queue = g_strdup("q✓");
  env->attempt = G_MAXUINT32;
  env->enqueued_at = G_MAXINT64;
  env->eta = 1;
  env->unknown_since = G_MAXINT64 - 1;
  sluice_envelope_add_history(env, "");
  sluice_envelope_add_history(env, "quote \" backslash \\ newline \n tab \t "
                                   "bell \a");
  sluice_envelope_set_header(env, "", "empty name");
  back = round_trip(codec_at(_i), env);
  assert_envelope_equal(env, back);
  sluice_envelope_free(back);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_msgpack_omits_unset_fields)
{
  SluiceEnvelope *env = minimal_envelope();
  GError *err = NULL;
  GBytes *bytes = sluice_envelope_encode(NULL, env, &err);
  const guint8 *data = g_bytes_get_data(bytes, NULL);
  gchar *json;

  assert_no_error(err);
  /* v, id, task, queue, attempt: a fixmap of 5. */
  ck_assert_uint_eq(data[0], 0x85);
  g_bytes_unref(bytes);

  bytes = sluice_envelope_encode(sluice_codec_json(), env, &err);
  assert_no_error(err);
  json = g_strndup(g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes));
  ck_assert_str_eq(json, "{\"v\":1,\"id\":\"t-1\",\"task\":\"tasks.add\","
                         "\"queue\":\"default\",\"attempt\":1}");
  g_free(json);
  g_bytes_unref(bytes);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_msgpack_args_zero_copy)
{
  SluiceEnvelope *env = full_envelope();
  GError *err = NULL;
  GBytes *bytes = sluice_envelope_encode(NULL, env, &err);
  SluiceEnvelope *back = sluice_envelope_decode(bytes, NULL, &err);
  gsize len, args_len;
  const guint8 *data = g_bytes_get_data(bytes, &len);
  const guint8 *args = g_bytes_get_data(back->args, &args_len);

  assert_no_error(err);
  ck_assert_msg(args >= data && args + args_len <= data + len,
                "args were copied out of the input");
  sluice_envelope_free(back);
  g_bytes_unref(bytes);
  sluice_envelope_free(env);
}
END_TEST

/* Encoding the same envelope twice, or its decoded copy, gives the same
 * bytes: headers are sorted, keys in a fixed order. */
START_TEST(test_encoding_is_canonical)
{
  SluiceEnvelope *env = full_envelope();
  GError *err = NULL;
  GBytes *a = sluice_envelope_encode(codec_at(_i), env, &err);
  SluiceEnvelope *back = sluice_envelope_decode(a, NULL, &err);
  GBytes *b = sluice_envelope_encode(codec_at(_i), back, &err);

  assert_no_error(err);
  ck_assert(g_bytes_equal(a, b));
  g_bytes_unref(a);
  g_bytes_unref(b);
  sluice_envelope_free(back);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_json_leading_whitespace_detected)
{
  GError *err = NULL;
  GBytes *bytes = text_bytes(" \r\n\t{\"v\":1,\"id\":\"a\",\"task\":\"t\","
                             "\"queue\":\"q\",\"attempt\":2,\"args\":[1]} \n");
  SluiceEnvelope *env = sluice_envelope_decode(bytes, NULL, &err);

  assert_no_error(err);
  ck_assert_uint_eq(env->attempt, 2);
  sluice_envelope_free(env);
  g_bytes_unref(bytes);
}
END_TEST

START_TEST(test_multiplier_accepts_integer)
{
  GPtrArray *fields = fields_valid();
  GBytes *bytes;
  GError *err = NULL;
  SluiceEnvelope *env;

  fields_add_json(fields, "opts", "{\"multiplier\": 3}");
  bytes = fields_msgpack(fields);
  env = sluice_envelope_decode(bytes, NULL, &err);
  assert_no_error(err);
  ck_assert_double_eq(env->opts.retry.multiplier, 3.0);
  sluice_envelope_free(env);
  g_bytes_unref(bytes);
  bytes = fields_json(fields);
  env = sluice_envelope_decode(bytes, NULL, &err);
  assert_no_error(err);
  ck_assert_double_eq(env->opts.retry.multiplier, 3.0);
  sluice_envelope_free(env);
  g_bytes_unref(bytes);
  g_ptr_array_unref(fields);
}
END_TEST

START_TEST(test_unknown_keys_skipped)
{
  GPtrArray *fields = fields_valid();
  GBytes *bytes;
  GError *err = NULL;
  SluiceEnvelope *env;

  fields_add_json(fields, "priority",
                  "{\"a\": [1, 2, {\"b\": null}], "
                  "\"c\": \"x\"}");
  fields_add_json(fields, "opts",
                  "{\"future_option\": [true], "
                  "\"timeout_ms\": 10}");
  fields_add_json(fields, "zz", "\"after\"");
  for (guint c = 0; c < 2; c++) {
    bytes = c == 0 ? fields_msgpack(fields) : fields_json(fields);
    env = sluice_envelope_decode(bytes, NULL, &err);
    assert_no_error(err);
    ck_assert_int_eq(env->opts.timeout_ms, 10);
    ck_assert_str_eq(env->id, "t-1");
    sluice_envelope_free(env);
    g_bytes_unref(bytes);
  }

  /* A key that is a known name plus a NUL and more is unknown (and must
   * not make the lookup read past the known name). */
  fields_add_raw(fields, "placeholder", hex_bytes("01"));
  {
    GBytes *plain = fields_msgpack(fields);
    GByteArray *a = g_byte_array_new();
    gsize len;
    const guint8 *data = g_bytes_get_data(plain, &len);
    static const guint8 key[] = {0xa7, 't', 'a', 's', 'k', 0x00, 'z', 'z'};

    /* Swap the last key ("placeholder", 12 bytes with its header) for
     * "task\0zz". */
    g_byte_array_append(a, data, len - 13);
    g_byte_array_append(a, key, sizeof key);
    g_byte_array_append(a, data + len - 1, 1);
    bytes = g_byte_array_free_to_bytes(a);
    env = sluice_envelope_decode(bytes, NULL, &err);
    assert_no_error(err);
    ck_assert_str_eq(env->task, "tasks.add");
    sluice_envelope_free(env);
    g_bytes_unref(bytes);
    g_bytes_unref(plain);
  }
  fields_remove(fields, "placeholder");

  /* Skipped only if well-formed: an unknown value that holds 0xc1. */
  fields_set_raw(fields, "priority", hex_bytes("92 01 c1"));
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "priority");
  g_ptr_array_unref(fields);
}
END_TEST

/* ---- Malformed input, one class per test --------------------------------- */

typedef struct {
  const gchar *key; /* top-level key, or "opts.<name>", or a container */
  const gchar *json;
  const gchar *mentions;
} WrongType;

static const WrongType wrong_types[] = {
    {"v", "\"1\"", "v"},
    {"v", "1.0", "v"},
    {"id", "5", "id"},
    {"task", "true", "task"},
    {"queue", "[\"q\"]", "queue"},
    {"attempt", "\"1\"", "attempt"},
    {"attempt", "1.5", "attempt"},
    {"enqueued_at", "\"now\"", "enqueued_at"},
    {"eta", "{}", "eta"},
    {"unknown_since", "1.0", "unknown_since"},
    {"opts", "[]", "opts"},
    {"opts", "true", "opts"},
    {"history", "\"line\"", "history"},
    {"history", "[\"ok\", 1]", "history[1]"},
    {"headers", "[]", "headers"},
    {"headers", "{\"a\": 1}", "headers[\"a\"]"},
    {"opts.max_attempts", "\"3\"", "opts.max_attempts"},
    {"opts.initial_backoff_ms", "true", "opts.initial_backoff_ms"},
    {"opts.multiplier", "\"2\"", "opts.multiplier"},
    {"opts.max_backoff_ms", "1.5", "opts.max_backoff_ms"},
    {"opts.jitter", "1", "opts.jitter"},
    {"opts.timeout_ms", "\"1\"", "opts.timeout_ms"},
    {"opts.expires_at", "null", "opts.expires_at"},
    {"opts.store_result", "\"yes\"", "opts.store_result"},
    {"opts.result_ttl_ms", "[]", "opts.result_ttl_ms"},
    {"opts.dead_letter", "0", "opts.dead_letter"},
    {"opts.hard_timeout_ms", "true", "opts.hard_timeout_ms"},
};

START_TEST(test_wrong_type)
{
  const WrongType *wt = &wrong_types[_i];
  GPtrArray *fields = fields_valid();

  if (g_str_has_prefix(wt->key, "opts.")) {
    g_autofree gchar *opts =
        g_strdup_printf("{\"%s\": %s}", wt->key + 5, wt->json);
    fields_set_json(fields, "opts", opts);
  } else {
    fields_set_json(fields, wt->key, wt->json);
  }
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_WRONG_TYPE, wt->mentions);
  g_ptr_array_unref(fields);
}
END_TEST

static const gchar *const required_keys[] = {"v", "id", "task", "queue",
                                             "attempt"};

START_TEST(test_missing_required)
{
  GPtrArray *fields = fields_valid();

  fields_remove(fields, required_keys[_i]);
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_MISSING_FIELD,
                     required_keys[_i]);
  g_ptr_array_unref(fields);
}
END_TEST

START_TEST(test_every_prefix_truncated)
{
  SluiceEnvelope *env = full_envelope();
  GError *err = NULL;
  GBytes *bytes = sluice_envelope_encode(codec_at(_i), env, &err);
  gsize len;
  const guint8 *data = g_bytes_get_data(bytes, &len);

  assert_no_error(err);
  for (gsize n = 0; n < len; n++) {
    GBytes *prefix = g_bytes_new(data, n);
    SluiceEnvelope *back = sluice_envelope_decode(prefix, NULL, &err);

    ck_assert_msg(back == NULL, "prefix of %" G_GSIZE_FORMAT " bytes decoded",
                  n);
    ck_assert_msg(err->code == SLUICE_CODEC_ERROR_TRUNCATED,
                  "prefix of %" G_GSIZE_FORMAT " bytes: %s", n, err->message);
    g_clear_error(&err);
    g_bytes_unref(prefix);
  }
  g_bytes_unref(bytes);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_trailing_bytes)
{
  SluiceEnvelope *env = full_envelope();
  GError *err = NULL;
  GBytes *bytes = sluice_envelope_encode(codec_at(_i), env, &err);
  GByteArray *more = g_byte_array_new();
  GBytes *longer;
  SluiceEnvelope *back;

  g_byte_array_append(more, g_bytes_get_data(bytes, NULL),
                      g_bytes_get_size(bytes));
  if (_i == 0)
    g_byte_array_append(more, (const guint8 *)"\x00", 1);
  else
    g_byte_array_append(more, (const guint8 *)" {}", 3);
  longer = g_byte_array_free_to_bytes(more);
  back = sluice_envelope_decode(longer, NULL, &err);
  ck_assert_ptr_null(back);
  assert_error(err, SLUICE_CODEC_ERROR_TRAILING, NULL);
  g_bytes_unref(longer);
  g_bytes_unref(bytes);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_unknown_version)
{
  GPtrArray *fields = fields_valid();

  fields_set_json(fields, "v", "2");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_VERSION, "version 2");
  fields_set_json(fields, "v", "0");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_VERSION, "version 0");
  fields_set_json(fields, "v", "-1");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_VERSION, "version -1");
  g_ptr_array_unref(fields);
}
END_TEST

/* A msgpack str holding @bytes, which JSON cannot carry. */
static GBytes *
raw_str(const gchar *bytes, gsize len)
{
  Pk p;

  pk_init(&p);
  msgpack_pack_str(&p.pk, len);
  msgpack_pack_str_body(&p.pk, bytes, len);
  return pk_finish(&p);
}

START_TEST(test_bad_utf8)
{
  static const gchar *const keys[] = {"id", "task", "queue"};
  GPtrArray *fields;
  GBytes *bytes;
  GError *err = NULL;

  for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
    fields = fields_valid();
    fields_set_raw(fields, keys[i], raw_str("ab\xff", 3));
    assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, keys[i]);
    /* A NUL inside is refused too: the struct holds C strings. */
    fields_set_raw(fields, keys[i], raw_str("a\0b", 3));
    assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, keys[i]);
    g_ptr_array_unref(fields);
  }

  fields = fields_valid();
  fields_add_raw(fields, "history", hex_bytes("92 a1 61 a2 c3 28"));
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "history[1]");
  fields_set_raw(fields, "history", hex_bytes("90"));
  fields_add_raw(fields, "headers", hex_bytes("81 a1 ff a1 61"));
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "headers");
  fields_set_raw(fields, "headers", hex_bytes("81 a1 61 a1 ff"));
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "headers");
  g_ptr_array_unref(fields);

  /* JSON text that is not UTF-8. */
  bytes = text_bytes("{\"v\":1,\"id\":\"a\xc3\x28\",\"task\":\"t\","
                     "\"queue\":\"q\",\"attempt\":1}");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "UTF-8");
  g_bytes_unref(bytes);
}
END_TEST

START_TEST(test_field_ranges)
{
  GPtrArray *fields = fields_valid();
  g_autofree gchar *long_id = g_strnfill(SLUICE_MAX_ID_BYTES + 1, 'x');
  g_autofree gchar *long_name = g_strnfill(SLUICE_MAX_NAME_BYTES + 1, 'x');
  g_autofree gchar *json = NULL;

  fields_set_json(fields, "id", "\"\"");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "id");
  json = g_strdup_printf("\"%s\"", long_id);
  fields_set_json(fields, "id", json);
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "id");
  json[strlen(json) - 2] = '"';
  json[strlen(json) - 1] = '\0';
  fields_set_json(fields, "id", json);
  assert_fields_decode(fields);
  g_free(json);
  json = g_strdup_printf("\"%s\"", long_name);
  fields_set_json(fields, "task", json);
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "task");
  fields_set_json(fields, "task", "\"t\"");
  fields_set_json(fields, "queue", json);
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "queue");
  fields_set_json(fields, "queue", "\"\"");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "queue");
  fields_set_json(fields, "queue", "\"q\"");

  fields_set_json(fields, "attempt", "0");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "attempt");
  fields_set_json(fields, "attempt", "-3");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "attempt");
  fields_set_json(fields, "attempt", "4294967296");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "attempt");
  fields_set_json(fields, "attempt", "4294967295");
  assert_fields_decode(fields);

  fields_set_json(fields, "enqueued_at", "-1");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "enqueued_at");
  fields_remove(fields, "enqueued_at");
  fields_set_json(fields, "eta", "-9223372036854775808");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "eta");
  fields_remove(fields, "eta");
  /* uint64 beyond int64: msgpack only. */
  fields_set_raw(fields, "unknown_since",
                 hex_bytes("cf ff ff ff ff ff ff ff ff"));
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "unknown_since");
  fields_remove(fields, "unknown_since");

  fields_set_json(fields, "opts", "{\"timeout_ms\": -5}");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "opts.timeout_ms");
  fields_set_json(fields, "opts", "{\"multiplier\": -2.0}");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "opts.multiplier");
  fields_set_json(fields, "opts", "{\"max_attempts\": 4294967296}");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "opts.max_attempts");
  fields_set_raw(fields, "opts",
                 hex_bytes("81 aa 6d 75 6c 74 69 70 6c 69 65 72"
                           " cb 7f f8 00 00 00 00 00 00"));
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "opts.multiplier");
  g_ptr_array_unref(fields);
}
END_TEST

START_TEST(test_duplicate_key)
{
  GPtrArray *fields = fields_valid();

  fields_add_json(fields, "id", "\"t-2\"");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "duplicate");
  fields_remove(fields, "id");
  fields_remove(fields, "id");
  fields_add_json(fields, "id", "\"t-1\"");
  fields_add_both(fields, "opts", "{\"jitter\": true, \"jitter\": false}",
                  "82 a6 6a 69 74 74 65 72 c3 a6 6a 69 74 74 65 72 c2");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "jitter");
  fields_set_json(fields, "opts", "{}");
  fields_add_both(fields, "headers", "{\"a\": \"1\", \"a\": \"2\"}",
                  "82 a1 61 a1 31 a1 61 a1 32");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_INVALID, "duplicate");
  g_ptr_array_unref(fields);
}
END_TEST

START_TEST(test_huge_declared_length)
{
  static const gchar *const cases[] = {
      /* the envelope itself: a map of 2^32-1 pairs */
      "df ff ff ff ff a1 76 01",
      /* args: an array of 2^32-1 elements */
      "85 a4 61 72 67 73 dd ff ff ff ff 01",
      /* history: the same */
      "81 a7 68 69 73 74 6f 72 79 dd ff ff ff ff",
      /* headers: a map of 2^32-1 pairs */
      "81 a7 68 65 61 64 65 72 73 df ff ff ff ff",
      /* id: a 4 GiB string */
      "81 a2 69 64 db ff ff ff ff 61",
      /* args: a 4 GiB binary and a 4 GiB ext */
      "81 a4 61 72 67 73 c6 ff ff ff ff",
      "81 a4 61 72 67 73 c9 ff ff ff ff 01",
  };

  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    GBytes *bytes = hex_bytes(cases[i]);
    GError *err = NULL;
    gint64 start = g_get_monotonic_time();
    SluiceEnvelope *env = sluice_envelope_decode(bytes, NULL, &err);

    /* At once: no loop over, or allocation for, the declared count. */
    ck_assert_int_lt(g_get_monotonic_time() - start, G_USEC_PER_SEC);
    ck_assert_ptr_null(env);
    assert_error(err, SLUICE_CODEC_ERROR_TRUNCATED, NULL);
    g_bytes_unref(bytes);
  }
}
END_TEST

static gchar *
nested_json(guint depth)
{
  GString *s = g_string_new(NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append_c(s, '[');
  for (guint i = 0; i < depth; i++)
    g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

static GBytes *
nested_msgpack(guint depth)
{
  GByteArray *a = g_byte_array_new();
  guint8 one = 0x91, empty = 0x90;

  for (guint i = 1; i < depth; i++)
    g_byte_array_append(a, &one, 1);
  g_byte_array_append(a, &empty, 1);
  return g_byte_array_free_to_bytes(a);
}

START_TEST(test_depth_limit)
{
  /* The envelope map is depth 1, so args may nest max_depth - 1 deep. */
  for (guint c = 0; c < 2; c++) {
    for (guint extra = 0; extra < 2; extra++) {
      guint depth = SLUICE_DEFAULT_MAX_DEPTH - 1 + extra;
      g_autofree gchar *json = nested_json(depth);
      GPtrArray *fields = fields_valid();
      GBytes *bytes;
      GError *err = NULL;
      SluiceEnvelope *env;

      fields_add_raw(fields, "args", nested_msgpack(depth));
      if (c == 0) {
        bytes = fields_msgpack(fields);
      } else {
        Field *f = g_ptr_array_index(fields, fields->len - 1);
        f->json = g_strdup(json);
        bytes = fields_json(fields);
      }
      env = sluice_envelope_decode(bytes, NULL, &err);
      if (extra == 0) {
        assert_no_error(err);
        sluice_envelope_free(env);
      } else {
        ck_assert_ptr_null(env);
        assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, "64");
      }
      g_bytes_unref(bytes);
      g_ptr_array_unref(fields);
    }
  }
}
END_TEST

START_TEST(test_depth_limit_custom_and_huge)
{
  GPtrArray *fields = fields_valid();
  GBytes *bytes;
  GError *err = NULL;
  guint deep = 200000;
  g_autofree gchar *json = nested_json(deep);

  /* A limit of 1 allows the envelope map but not `opts` inside it. */
  fields_add_json(fields, "opts", "{}");
  for (guint c = 0; c < 2; c++) {
    bytes = c == 0 ? fields_msgpack(fields) : fields_json(fields);
    ck_assert_ptr_null(decode_with(bytes, G_MAXSIZE, 1, &err));
    assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, NULL);
    ck_assert_ptr_null(decode_with(bytes, G_MAXSIZE, 0, &err));
    assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, NULL);
    g_bytes_unref(bytes);
  }
  fields_remove(fields, "opts");

  /* 200,000 levels in an unknown key with no depth limit to speak of: the
   * msgpack reader does not recurse, and JSON never goes past its own
   * ceiling, so neither can exhaust the stack. */
  fields_add_raw(fields, "deep", nested_msgpack(deep));
  ((Field *)g_ptr_array_index(fields, fields->len - 1))->json = g_strdup(json);
  bytes = fields_msgpack(fields);
  {
    SluiceEnvelope *env = decode_with(bytes, G_MAXSIZE, G_MAXUINT, &err);
    assert_no_error(err);
    sluice_envelope_free(env);
  }
  ck_assert_ptr_null(decode_with(bytes, G_MAXSIZE, 64, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, "deep");
  g_bytes_unref(bytes);
  bytes = fields_json(fields);
  ck_assert_ptr_null(decode_with(bytes, G_MAXSIZE, G_MAXUINT, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, NULL);
  g_bytes_unref(bytes);
  g_ptr_array_unref(fields);
}
END_TEST

START_TEST(test_size_limit)
{
  SluiceEnvelope *env = full_envelope();
  GError *err = NULL;
  GBytes *bytes = sluice_envelope_encode(codec_at(_i), env, &err);
  gsize len = g_bytes_get_size(bytes);
  SluiceEnvelope *back;
  SluiceDecodeLimits limits = {len - 1, 64};
  GString *big;
  GBytes *big_bytes;

  assert_no_error(err);
  back = decode_with(bytes, len, 64, &err);
  assert_no_error(err);
  sluice_envelope_free(back);
  ck_assert_ptr_null(decode_with(bytes, len - 1, 64, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_LARGE, NULL);
  /* The codec checks too, when called directly. */
  ck_assert_ptr_null(codec_at(_i)->decode(codec_at(_i), bytes, &limits, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_LARGE, NULL);

  /* Over the 1 MiB default. */
  big = g_string_new("[\"");
  while (big->len <= SLUICE_DEFAULT_MAX_MESSAGE_BYTES)
    g_string_append(big, "0123456789abcdef");
  g_string_append(big, "\"]");
  g_bytes_unref(env->args);
  env->args = J(big->str);
  big_bytes = sluice_envelope_encode(codec_at(_i), env, &err);
  assert_no_error(err);
  ck_assert_ptr_null(sluice_envelope_decode(big_bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_LARGE, NULL);

  g_bytes_unref(big_bytes);
  g_string_free(big, TRUE);
  g_bytes_unref(bytes);
  sluice_envelope_free(env);
}
END_TEST

START_TEST(test_not_an_envelope)
{
  GError *err = NULL;
  GBytes *bytes;

  bytes = g_bytes_new(NULL, 0);
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TRUNCATED, NULL);
  ck_assert_ptr_null(codec_decode(sluice_codec_msgpack(), bytes, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TRUNCATED, NULL);
  ck_assert_ptr_null(codec_decode(sluice_codec_json(), bytes, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TRUNCATED, NULL);
  g_bytes_unref(bytes);

  bytes = hex_bytes("c1");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "byte offset 0");
  ck_assert_ptr_null(codec_decode(sluice_codec_msgpack(), bytes, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "0xc1");
  g_bytes_unref(bytes);

  /* A msgpack array, not a map. */
  bytes = hex_bytes("91 01");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, NULL);
  ck_assert_ptr_null(codec_decode(sluice_codec_msgpack(), bytes, &err));
  assert_error(err, SLUICE_CODEC_ERROR_WRONG_TYPE, "map");
  g_bytes_unref(bytes);

  /* A map whose keys are not strings. */
  bytes = hex_bytes("81 01 02");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_WRONG_TYPE, "byte offset 1");
  g_bytes_unref(bytes);

  /* 0xc1 where a value should be. */
  bytes = hex_bytes("81 a2 69 64 c1");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "byte offset 4");
  g_bytes_unref(bytes);

  bytes = text_bytes("   ");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TRUNCATED, NULL);
  g_bytes_unref(bytes);

  bytes = text_bytes(" [1]");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_WRONG_TYPE, "JSON object");
  g_bytes_unref(bytes);

  bytes = text_bytes("{\"v\":1,/* comment */\"id\":\"a\"}");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "column 8");
  g_bytes_unref(bytes);

  bytes = text_bytes("hello");
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "0x68");
  g_bytes_unref(bytes);
}
END_TEST

START_TEST(test_encode_refuses_invalid)
{
  const SluiceCodec *codec = codec_at(_i);
  SluiceEnvelope *env;
  GError *err = NULL;

  env = minimal_envelope();
  g_clear_pointer(&env->id, g_free);
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_MISSING_FIELD, "id");
  env->id = g_strdup("");
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "id");
  g_free(env->id);
  env->id = g_strdup("\xff");
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "id");
  sluice_envelope_free(env);

  env = minimal_envelope();
  g_clear_pointer(&env->task, g_free);
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_MISSING_FIELD, "task");
  sluice_envelope_free(env);

  env = minimal_envelope();
  g_clear_pointer(&env->queue, g_free);
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_MISSING_FIELD, "queue");
  sluice_envelope_free(env);

  env = minimal_envelope();
  env->attempt = 0;
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "attempt");
  env->attempt = 1;
  env->eta = -5;
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "eta");
  env->eta = 0;
  env->opts.retry.multiplier = NAN;
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "multiplier");
  env->opts.retry.multiplier = SLUICE_RETRY_UNSET;
  if (env->history == NULL)
    env->history = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(env->history, g_strdup("\xc3"));
  ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "history[0]");
  g_ptr_array_set_size(env->history, 0);

  /* args: two values, a truncated one, none at all. */
  static const gchar *const bad_args[] = {"01 02", "92 01", "a3 61", ""};
  for (guint i = 0; i < G_N_ELEMENTS(bad_args); i++) {
    g_bytes_unref(env->args);
    env->args = hex_bytes(bad_args[i]);
    ck_assert_ptr_null(sluice_envelope_encode(codec, env, &err));
    assert_error(err, SLUICE_CODEC_ERROR_INVALID, "args");
  }
  sluice_envelope_free(env);
}
END_TEST

/* Nothing the JSON codec cannot express is silently changed. */
START_TEST(test_json_encode_refuses_inexpressible_args)
{
  static const gchar *const args[] = {
      "d4 01 02",                   /* ext */
      "81 01 02",                   /* integer map key */
      "cf ff ff ff ff ff ff ff ff", /* uint64 above int64 */
      "cb 7f f0 00 00 00 00 00 00", /* infinity */
      "a3 61 00 62",                /* U+0000 in a string */
  };
  SluiceEnvelope *env = minimal_envelope();
  GError *err = NULL;

  for (guint i = 0; i < G_N_ELEMENTS(args); i++) {
    GBytes *bytes;

    g_bytes_unref(env->args);
    env->args = hex_bytes(args[i]);
    ck_assert_ptr_null(sluice_envelope_encode(sluice_codec_json(), env, &err));
    assert_error(err, SLUICE_CODEC_ERROR_INVALID, "args");
    /* msgpack carries them all. */
    bytes = sluice_envelope_encode(NULL, env, &err);
    assert_no_error(err);
    g_bytes_unref(bytes);
  }
  sluice_envelope_free(env);
}
END_TEST

/* ---- The codecs agree ---------------------------------------------------- */

static const gchar *const agree_args[] = {
    "null",
    "[]",
    "{}",
    "[1, 2, 3]",
    "{\"to\": \"ann@example.com\", \"retries\": 3}",
    "[-1, -128, -129, -32768, -2147483649, 127, 128, 255, 256, 65535, 65536]",
    "[9223372036854775807, -9223372036854775808, 4294967295, 4294967296]",
    "[0.5, -0.0, 1e+300, 2.2250738585072014e-308, 3.141592653589793]",
    "{\"nested\": {\"deeper\": [{\"x\": [true, false, null]}]}}",
    "\"ünïcödé ✓ 😀 \\\" \\\\ \\n\"",
    "{\"$bin\": \"AAECAwT/\"}",
    "{\"$bin\": \"\"}",
    "[{\"$bin\": \"aGVsbG8=\"}, {\"$bin\": 5}]",
    "{\"a\": {\"$bin\": \"aGk=\", \"b\": 1}}",
    "\"0123456789012345678901234567890123456789\"",
};

START_TEST(test_codecs_agree)
{
  GRand *rand = g_rand_new_with_seed(7);

  for (guint round = 0; round < 300; round++) {
    SluiceEnvelope *env = minimal_envelope();
    SluiceEnvelope *from_mp, *from_json;
    SluiceMessageOptions *o = &env->opts;

    g_bytes_unref(env->args);
    env->args = J(agree_args[round % G_N_ELEMENTS(agree_args)]);
    env->attempt = g_rand_int_range(rand, 1, 1000);
    if (g_rand_boolean(rand))
      env->enqueued_at = g_rand_int(rand) * (gint64)1000;
    if (g_rand_boolean(rand))
      env->eta = g_rand_int(rand);
    if (g_rand_boolean(rand))
      env->unknown_since = 1;
    if (g_rand_boolean(rand))
      o->retry.max_attempts = (gint)g_rand_int_range(rand, 1, G_MAXINT32);
    if (g_rand_boolean(rand))
      o->retry.initial_backoff_ms = g_rand_int(rand);
    if (g_rand_boolean(rand))
      o->retry.multiplier = g_rand_double_range(rand, 0.01, 1e6);
    if (g_rand_boolean(rand))
      o->retry.max_backoff_ms = g_rand_int(rand);
    o->retry.jitter = g_rand_int_range(rand, 0, 3);
    if (g_rand_boolean(rand))
      o->timeout_ms = g_rand_int(rand);
    if (g_rand_boolean(rand))
      o->expires_at = G_MAXINT64;
    o->store_result = g_rand_int_range(rand, 0, 3);
    if (g_rand_boolean(rand))
      o->result_ttl_ms = g_rand_int(rand);
    o->dead_letter = g_rand_int_range(rand, 0, 3);
    if (g_rand_boolean(rand))
      o->hard_timeout_ms = g_rand_int(rand);
    for (gint i = g_rand_int_range(rand, 0, 4); i > 0; i--)
      sluice_envelope_add_history(env,
                                  i % 2 ? "failed: \"quoted\"\n" : "échec ✗");
    for (gint i = g_rand_int_range(rand, 0, 4); i > 0; i--) {
      g_autofree gchar *name = g_strdup_printf("h%d", i);
      g_autofree gchar *value = g_strdup_printf("v\t%d", i);
      sluice_envelope_set_header(env, name, value);
    }

    from_mp = round_trip(sluice_codec_msgpack(), env);
    from_json = round_trip(sluice_codec_json(), env);
    assert_envelope_equal(from_mp, from_json);
    assert_envelope_equal(env, from_json);
    sluice_envelope_free(from_mp);
    sluice_envelope_free(from_json);
    sluice_envelope_free(env);
  }
  g_rand_free(rand);
}
END_TEST

/* ---- args JSON <-> msgpack ----------------------------------------------- */

/* Canonical texts: JSON -> msgpack -> JSON gives them back unchanged. */
static const gchar *const canonical_json[] = {
    "null",
    "true",
    "false",
    "0",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "0.1",
    "-0.0",
    "1.0",
    "1e+20",
    "1.7976931348623157e+308",
    "4.94065645841247e-324",
    "1e-07",
    "-123456.789",
    "[1,-1,1.5,-1.5,1e+100,-1e-100]",
    "\"\"",
    "\"h\\u00e9llo\"",
    "\"ünïcödé ✓ 😀\"",
    "\"esc \\\" \\\\ \\n \\t \\r \\b \\f \\u0001 \\u001f /\"",
    "[]",
    "{}",
    "[[]]",
    "[{}]",
    "{\"b\":1,\"a\":2,\"c\":[1,{\"d\":null}]}",
    "{\"$bin\":\"AAEC/w==\"}",
    "{\"$bin\":\"\"}",
    "{\"$bin\":1}",
    "{\"$bin\":\"aGk=\",\"x\":1}",
};

START_TEST(test_args_json_round_trip)
{
  const gchar *text = canonical_json[_i];
  GError *err = NULL;
  GBytes *mp = sluice_args_from_json(text, -1, &err);
  gchar *back;

  assert_no_error(err);
  back = sluice_args_to_json(mp, &err);
  assert_no_error(err);
  /* \u00e9 comes back as the character itself; everything else verbatim. */
  if (strstr(text, "\\u00e9") != NULL)
    ck_assert_str_eq(back, "\"héllo\"");
  else
    ck_assert_str_eq(back, text);
  g_free(back);
  g_bytes_unref(mp);
}
END_TEST

START_TEST(test_args_json_matches_msgpack_c)
{
  static const guint8 bin[] = {0xde, 0xad, 0x00};
  Pk p;
  GBytes *expected, *got;
  GError *err = NULL;
  gchar *json;

  /* The same value packed by msgpack-c and converted from JSON. */
  pk_init(&p);
  msgpack_pack_map(&p.pk, 8);
  pk_str(&p, "i");
  msgpack_pack_array(&p.pk, 6);
  msgpack_pack_int64(&p.pk, G_MAXINT64);
  msgpack_pack_int64(&p.pk, G_MININT64);
  msgpack_pack_int64(&p.pk, -33);
  msgpack_pack_int64(&p.pk, 0);
  msgpack_pack_int64(&p.pk, 300);
  msgpack_pack_int64(&p.pk, -70000);
  pk_str(&p, "f");
  msgpack_pack_double(&p.pk, -2.5);
  pk_str(&p, "s");
  pk_str(&p, "Grüße, 世界");
  pk_str(&p, "b");
  msgpack_pack_bin(&p.pk, sizeof bin);
  msgpack_pack_bin_body(&p.pk, bin, sizeof bin);
  pk_str(&p, "n");
  msgpack_pack_nil(&p.pk);
  pk_str(&p, "t");
  msgpack_pack_true(&p.pk);
  pk_str(&p, "e");
  msgpack_pack_array(&p.pk, 2);
  msgpack_pack_array(&p.pk, 0);
  msgpack_pack_map(&p.pk, 0);
  pk_str(&p, "long");
  pk_str(&p, "a string longer than thirty-one bytes, so str8");
  expected = pk_finish(&p);

  json = sluice_args_to_json(expected, &err);
  assert_no_error(err);
  ck_assert_str_eq(json,
                   "{\"i\":[9223372036854775807,-9223372036854775808,-33,0,"
                   "300,-70000],\"f\":-2.5,\"s\":\"Grüße, 世界\","
                   "\"b\":{\"$bin\":\"3q0A\"},\"n\":null,\"t\":true,"
                   "\"e\":[[],{}],\"long\":\"a string longer than "
                   "thirty-one bytes, so str8\"}");
  got = sluice_args_from_json(json, -1, &err);
  assert_no_error(err);
  ck_assert(g_bytes_equal(got, expected));
  g_bytes_unref(got);

  /* Whitespace and a length that stops before the NUL. */
  got = sluice_args_from_json(" [ 1 ,\n2 ]  trailing", 11, &err);
  assert_no_error(err);
  g_free(json);
  json = sluice_args_to_json(got, &err);
  ck_assert_str_eq(json, "[1,2]");
  g_free(json);
  g_bytes_unref(got);
  g_bytes_unref(expected);
}
END_TEST

START_TEST(test_args_float32_becomes_float64)
{
  Pk p;
  GBytes *f32, *back;
  GError *err = NULL;
  gchar *json;
  const guint8 *data;

  pk_init(&p);
  msgpack_pack_float(&p.pk, 1.5f);
  f32 = pk_finish(&p);
  json = sluice_args_to_json(f32, &err);
  assert_no_error(err);
  ck_assert_str_eq(json, "1.5");
  back = sluice_args_from_json(json, -1, &err);
  data = g_bytes_get_data(back, NULL);
  ck_assert_uint_eq(g_bytes_get_size(back), 9);
  ck_assert_uint_eq(data[0], 0xcb);
  g_bytes_unref(back);
  g_bytes_unref(f32);
  g_free(json);
}
END_TEST

typedef struct {
  const gchar *hex;
  gint code;
  const gchar *mentions;
} BadMsgpack;

static const BadMsgpack bad_msgpack[] = {
    {"d5 07 01 02", SLUICE_CODEC_ERROR_INVALID, "ext"},
    {"c7 01 09 00", SLUICE_CODEC_ERROR_INVALID, "ext"},
    {"81 01 02", SLUICE_CODEC_ERROR_INVALID, "map key"},
    {"81 c4 01 61 02", SLUICE_CODEC_ERROR_INVALID, "map key"},
    {"82 a1 61 01 a1 61 02", SLUICE_CODEC_ERROR_INVALID, "twice"},
    {"81 a4 24 62 69 6e a1 61", SLUICE_CODEC_ERROR_INVALID, "$bin"},
    {"cf 80 00 00 00 00 00 00 00", SLUICE_CODEC_ERROR_INVALID, "2^63"},
    {"cb 7f f8 00 00 00 00 00 00", SLUICE_CODEC_ERROR_INVALID, "NaN"},
    {"a2 c3 28", SLUICE_CODEC_ERROR_INVALID, "UTF-8"},
    {"92 01", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
    {"", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
    {"01 02", SLUICE_CODEC_ERROR_TRAILING, NULL},
    {"c1", SLUICE_CODEC_ERROR_INVALID, "0xc1"},
};

START_TEST(test_args_to_json_errors)
{
  const BadMsgpack *bad = &bad_msgpack[_i];
  GBytes *bytes = hex_bytes(bad->hex);
  GError *err = NULL;

  ck_assert_ptr_null(sluice_args_to_json(bytes, &err));
  assert_error(err, bad->code, bad->mentions);
  g_bytes_unref(bytes);
}
END_TEST

/* A large map with a duplicate key is caught too (the hash set path). */
START_TEST(test_args_to_json_duplicate_in_large_map)
{
  Pk p;
  GBytes *bytes;
  GError *err = NULL;

  pk_init(&p);
  msgpack_pack_map(&p.pk, 20);
  for (guint i = 0; i < 20; i++) {
    g_autofree gchar *key = g_strdup_printf("k%u", i == 19 ? 3 : i);
    pk_str(&p, key);
    msgpack_pack_int64(&p.pk, i);
  }
  bytes = pk_finish(&p);
  ck_assert_ptr_null(sluice_args_to_json(bytes, &err));
  assert_error(err, SLUICE_CODEC_ERROR_INVALID, "\"k3\"");
  g_bytes_unref(bytes);
}
END_TEST

typedef struct {
  const gchar *json;
  gint code;
  const gchar *mentions;
} BadJson;

static const BadJson bad_json[] = {
    {"{\n  \"a\": 1,\n  \"b\": x\n}", SLUICE_CODEC_ERROR_INVALID,
     "line 3, column 8"},
    {"[1,\n 2,\n]", SLUICE_CODEC_ERROR_INVALID, "line 2"},
    {"[1 2]", SLUICE_CODEC_ERROR_INVALID, "line 1, column"},
    {"{\"a\" 1}", SLUICE_CODEC_ERROR_INVALID, "line 1"},
    {"// comment\n1", SLUICE_CODEC_ERROR_INVALID, "line 1, column 1"},
    {"['single']", SLUICE_CODEC_ERROR_INVALID, "column 2"},
    {"[0x10]", SLUICE_CODEC_ERROR_INVALID, "column 3"},
    {"[01]", SLUICE_CODEC_ERROR_INVALID, "leading 0"},
    {"[1.]", SLUICE_CODEC_ERROR_INVALID, "column 4"},
    {"[.5]", SLUICE_CODEC_ERROR_INVALID, "column 2"},
    {"[+1]", SLUICE_CODEC_ERROR_INVALID, "column 2"},
    {"[NaN]", SLUICE_CODEC_ERROR_INVALID, "column 2"},
    {"[True]", SLUICE_CODEC_ERROR_INVALID, "column 2"},
    {"[nul]", SLUICE_CODEC_ERROR_INVALID, "column 5"},
    {"[\"tab\there\"]", SLUICE_CODEC_ERROR_INVALID, "control"},
    {"[\"\\x41\"]", SLUICE_CODEC_ERROR_INVALID, "escape"},
    {"[\"\\u0000\"]", SLUICE_CODEC_ERROR_INVALID, "NUL"},
    {"[\"\\ud800\"]", SLUICE_CODEC_ERROR_INVALID, "surrogate"},
    {"[\"\\udc00\"]", SLUICE_CODEC_ERROR_INVALID, "surrogate"},
    {"[\"\\ud800\\u0041\"]", SLUICE_CODEC_ERROR_INVALID, "surrogate"},
    {"9223372036854775808", SLUICE_CODEC_ERROR_INVALID, "64-bit"},
    {"-9223372036854775809", SLUICE_CODEC_ERROR_INVALID, "64-bit"},
    {"[1e400]", SLUICE_CODEC_ERROR_INVALID, "float64"},
    {"{\"a\": 1, \"a\": 2}", SLUICE_CODEC_ERROR_INVALID, "duplicate key \"a\""},
    {"[{\"x\": {\"y\": 1, \"y\": 1}}]", SLUICE_CODEC_ERROR_INVALID,
     "duplicate key \"y\""},
    {"{\"$bin\": \"not base64!\"}", SLUICE_CODEC_ERROR_INVALID, "base64"},
    {"{\"$bin\": \"abc\"}", SLUICE_CODEC_ERROR_INVALID, "base64"},
    {"{\"$bin\": \"a=bc\"}", SLUICE_CODEC_ERROR_INVALID, "base64"},
    {"\"caf\xc3\"", SLUICE_CODEC_ERROR_INVALID, "UTF-8"},
    {"[1] [2]", SLUICE_CODEC_ERROR_TRAILING, "column 5"},
    {"1 2", SLUICE_CODEC_ERROR_TRAILING, "column 3"},
    {"}", SLUICE_CODEC_ERROR_INVALID, "column 1"},
    {"[1", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
    {"[\"abc", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
    {"[tr", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
    {"-", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
    {"", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
    {"  \n ", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
};

START_TEST(test_args_from_json_errors)
{
  const BadJson *bad = &bad_json[_i];
  GError *err = NULL;

  ck_assert_ptr_null(sluice_args_from_json(bad->json, -1, &err));
  assert_error(err, bad->code, bad->mentions);
}
END_TEST

START_TEST(test_args_from_json_depth)
{
  g_autofree gchar *ok = nested_json(SLUICE_DEFAULT_MAX_DEPTH - 1);
  g_autofree gchar *deep = nested_json(SLUICE_DEFAULT_MAX_DEPTH);
  g_autofree gchar *huge = nested_json(1000000);
  GError *err = NULL;
  GBytes *bytes = sluice_args_from_json(ok, -1, &err);
  gchar *json;

  assert_no_error(err);
  json = sluice_args_to_json(bytes, &err);
  ck_assert_str_eq(json, ok);
  g_free(json);
  g_bytes_unref(bytes);
  ck_assert_ptr_null(sluice_args_from_json(deep, -1, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, "limit of 63");
  ck_assert_ptr_null(sluice_args_from_json(huge, -1, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, NULL);

  /* msgpack -> JSON: a million levels are refused, not recursed into. */
  bytes = nested_msgpack(1000000);
  ck_assert_ptr_null(sluice_args_to_json(bytes, &err));
  assert_error(err, SLUICE_CODEC_ERROR_TOO_DEEP, NULL);
  g_bytes_unref(bytes);
}
END_TEST

/* ---- Mutation test --------------------------------------------------------
 *
 * Valid encodings of both codecs, damaged at random (fixed seed) by byte
 * flips, bit flips, truncation, insertion, deletion and duplication, then
 * decoded. Nothing may crash, read out of bounds or leak (ASan/valgrind
 * catch those), every failure must be a SLUICE_CODEC_ERROR, and whatever
 * does decode must re-encode and decode to an equal envelope.
 */

#define MUTATION_ITERATIONS 120000

static void
insert_byte(GByteArray *a, guint pos, guint8 byte)
{
  g_byte_array_set_size(a, a->len + 1);
  memmove(a->data + pos + 1, a->data + pos, a->len - 1 - pos);
  a->data[pos] = byte;
}

static void
mutate(GByteArray *a, GRand *rand)
{
  guint ops = g_rand_int_range(rand, 1, 4);

  for (guint op = 0; op < ops; op++) {
    guint pos = a->len > 0 ? g_rand_int_range(rand, 0, a->len) : 0;
    guint8 byte = (guint8)g_rand_int_range(rand, 0, 256);

    switch (g_rand_int_range(rand, 0, 7)) {
    case 0: /* replace a byte */
      if (a->len > 0)
        a->data[pos] = byte;
      break;
    case 1: /* flip one bit */
      if (a->len > 0)
        a->data[pos] ^= (guint8)(1u << g_rand_int_range(rand, 0, 8));
      break;
    case 2: /* truncate */
      g_byte_array_set_size(a, pos);
      break;
    case 3: /* insert a byte */
      insert_byte(a, pos, byte);
      break;
    case 4: /* delete a byte */
      if (a->len > 0)
        g_byte_array_remove_index(a, pos);
      break;
    case 5: { /* duplicate a chunk in place */
      guint8 chunk[16];
      guint want = (guint)g_rand_int_range(rand, 1, 16);
      guint n = MIN(a->len - pos, want); /* MIN evaluates twice */

      memcpy(chunk, a->data + pos, n);
      for (guint k = 0; k < n; k++)
        insert_byte(a, pos + k, chunk[k]);
      break;
    }
    default: /* an interesting value: a length or marker byte */
      if (a->len > 0) {
        static const guint8 interesting[] = {
            0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xc0, 0xc1, 0xcb, 0xd9,
            0xdc, 0xdd, 0xde, 0xdf, 0xff, '{',  '}',  '[',  '"',  '\\'};
        a->data[pos] =
            interesting[g_rand_int_range(rand, 0, G_N_ELEMENTS(interesting))];
      }
      break;
    }
  }
}

START_TEST(test_mutation)
{
  GRand *rand = g_rand_new_with_seed(0x5eed);
  GPtrArray *seeds =
      g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  SluiceEnvelope *full = full_envelope();
  SluiceEnvelope *small = minimal_envelope();
  SluiceResult *result = sluice_result_new("t-1", SLUICE_STATE_SUCCEEDED);
  GBytes *value = J("{\"sum\": [1, 2.5, \"x\"]}");
  guint decoded = 0;

  sluice_result_set_task(result, "tasks.add", "default");
  sluice_result_set_value(result, value);
  sluice_result_set_error(result, "none");
  sluice_result_set_times(result, 1, 2, 3);
  for (guint c = 0; c < 2; c++) {
    GError *err = NULL;
    g_ptr_array_add(seeds, sluice_envelope_encode(codec_at(c), full, &err));
    g_ptr_array_add(seeds, sluice_envelope_encode(codec_at(c), small, &err));
    assert_no_error(err);
  }

  for (guint i = 0; i < MUTATION_ITERATIONS; i++) {
    GBytes *seed = g_ptr_array_index(seeds, i % seeds->len);
    GByteArray *a = g_byte_array_sized_new(g_bytes_get_size(seed) + 64);
    GBytes *bytes;
    GError *err = NULL;
    SluiceEnvelope *env;

    g_byte_array_append(a, g_bytes_get_data(seed, NULL),
                        g_bytes_get_size(seed));
    mutate(a, rand);
    bytes = g_byte_array_free_to_bytes(a);
    env = sluice_envelope_decode(bytes, NULL, &err);
    if (env == NULL) {
      ck_assert_ptr_nonnull(err);
      ck_assert_msg(err->domain == SLUICE_CODEC_ERROR, "iteration %u", i);
      g_clear_error(&err);
    } else {
      GBytes *again;
      SluiceEnvelope *back;

      decoded++;
      for (guint c = 0; c < 2; c++) {
        again = sluice_envelope_encode(codec_at(c), env, &err);
        if (again == NULL) {
          /* Only JSON may refuse, and only for args it cannot express. */
          ck_assert_msg(c == 1, "iteration %u: %s", i, err->message);
          ck_assert(strstr(err->message, "args") != NULL);
          g_clear_error(&err);
          continue;
        }
        back = sluice_envelope_decode(again, NULL, &err);
        ck_assert_msg(back != NULL, "iteration %u: %s", i,
                      err != NULL ? err->message : "");
        assert_envelope_equal(env, back);
        sluice_envelope_free(back);
        g_bytes_unref(again);
      }
      sluice_envelope_free(env);
    }
    g_bytes_unref(bytes);

    /* Result records, every tenth iteration. */
    if (i % 10 == 0) {
      GBytes *record = sluice_result_encode(result);
      GByteArray *r = g_byte_array_new();
      SluiceResult *back;

      g_byte_array_append(r, g_bytes_get_data(record, NULL),
                          g_bytes_get_size(record));
      mutate(r, rand);
      g_bytes_unref(record);
      record = g_byte_array_free_to_bytes(r);
      back = sluice_result_decode(record, &err);
      if (back != NULL)
        sluice_result_unref(back);
      else
        g_clear_error(&err);
      g_bytes_unref(record);
    }
  }
  /* Some mutants must survive, or the test only exercises the errors. */
  ck_assert_uint_gt(decoded, MUTATION_ITERATIONS / 100);

  g_bytes_unref(value);
  sluice_result_unref(result);
  sluice_envelope_free(small);
  sluice_envelope_free(full);
  g_ptr_array_unref(seeds);
  g_rand_free(rand);
}
END_TEST

/* ---- PROTOCOL.md's worked example ---------------------------------------- */

/* Returns: the body of the first ``` block after @marker in PROTOCOL.md. */
static gchar *
protocol_block(const gchar *marker)
{
  g_autofree gchar *path = g_build_filename(TEST_SRCDIR, "PROTOCOL.md", NULL);
  g_autofree gchar *doc = NULL;
  GError *err = NULL;
  const gchar *start, *end;

  ck_assert_msg(g_file_get_contents(path, &doc, NULL, &err), "%s",
                err != NULL ? err->message : "");
  start = strstr(doc, marker);
  ck_assert_msg(start != NULL, "PROTOCOL.md has no %s", marker);
  start = strstr(start, "```");
  ck_assert_ptr_nonnull(start);
  start = strchr(start, '\n') + 1;
  end = strstr(start, "```");
  ck_assert_ptr_nonnull(end);
  return g_strndup(start, end - start);
}

/* Hex pairs before the '#' of each line. */
static GBytes *
parse_hex_dump(const gchar *dump)
{
  GByteArray *a = g_byte_array_new();
  gchar **lines = g_strsplit(dump, "\n", -1);

  for (gchar **l = lines; *l != NULL; l++) {
    gchar *hash = strchr(*l, '#');
    gchar **words;

    if (hash != NULL)
      *hash = '\0';
    words = g_strsplit_set(*l, " \t", -1);
    for (gchar **w = words; *w != NULL; w++) {
      guint8 b;

      if (**w == '\0')
        continue;
      ck_assert_msg(strlen(*w) == 2 && g_ascii_isxdigit((*w)[0]) &&
                        g_ascii_isxdigit((*w)[1]),
                    "not a hex byte in PROTOCOL.md: \"%s\"", *w);
      b = (guint8)(g_ascii_xdigit_value((*w)[0]) << 4 |
                   g_ascii_xdigit_value((*w)[1]));
      g_byte_array_append(a, &b, 1);
    }
    g_strfreev(words);
  }
  g_strfreev(lines);
  return g_byte_array_free_to_bytes(a);
}

/* The envelope PROTOCOL.md describes in words. */
static SluiceEnvelope *
example_envelope(void)
{
  SluiceEnvelope *env = sluice_envelope_new();

  env->id = g_strdup("7f3a9c1e");
  env->task = g_strdup("email.send");
  env->queue = g_strdup("default");
  g_bytes_unref(env->args);
  env->args = J("[\"ann@example.com\", 3]");
  env->attempt = 2;
  env->enqueued_at = 1717243200000;
  env->opts.retry.max_attempts = 5;
  env->opts.timeout_ms = 30000;
  sluice_envelope_add_history(env, "smtp timeout");
  sluice_envelope_set_header(env, "tenant", "acme");
  return env;
}

START_TEST(test_protocol_example)
{
  g_autofree gchar *dump = protocol_block("<!-- worked-example-msgpack -->");
  g_autofree gchar *json = protocol_block("<!-- worked-example-json -->");
  GBytes *bytes = parse_hex_dump(dump);
  GBytes *json_bytes = text_bytes(g_strstrip(json));
  SluiceEnvelope *expected = example_envelope();
  GError *err = NULL;
  SluiceEnvelope *env = sluice_envelope_decode(bytes, NULL, &err);
  SluiceEnvelope *from_json;
  GBytes *encoded;

  assert_no_error(err);
  assert_envelope_equal(expected, env);
  /* Byte for byte: our encoder writes exactly the documented bytes. */
  encoded = sluice_envelope_encode(NULL, expected, &err);
  assert_no_error(err);
  ck_assert_uint_eq(g_bytes_get_size(encoded), g_bytes_get_size(bytes));
  ck_assert(g_bytes_equal(encoded, bytes));
  g_bytes_unref(encoded);

  from_json = sluice_envelope_decode(json_bytes, NULL, &err);
  assert_no_error(err);
  assert_envelope_equal(expected, from_json);
  encoded = sluice_envelope_encode(sluice_codec_json(), expected, &err);
  assert_no_error(err);
  ck_assert(g_bytes_equal(encoded, json_bytes));
  g_bytes_unref(encoded);

  sluice_envelope_free(from_json);
  sluice_envelope_free(env);
  sluice_envelope_free(expected);
  g_bytes_unref(json_bytes);
  g_bytes_unref(bytes);
}
END_TEST

/* ---- Result records ------------------------------------------------------ */

START_TEST(test_task_states)
{
  static const gchar *const names[] = {
      "unknown",   "queued", "scheduled",     "running",   "retrying",
      "succeeded", "failed", "dead_lettered", "cancelled",
  };

  for (guint s = 0; s < G_N_ELEMENTS(names); s++) {
    ck_assert_str_eq(sluice_task_state_to_string(s), names[s]);
    ck_assert_int_eq(sluice_task_state_from_string(names[s]), s);
    ck_assert_int_eq(sluice_task_state_is_final(s),
                     s >= SLUICE_STATE_SUCCEEDED);
  }
  ck_assert_int_eq(sluice_task_state_from_string("paused"),
                   SLUICE_STATE_UNKNOWN);
  ck_assert_int_eq(sluice_task_state_from_string("queue"),
                   SLUICE_STATE_UNKNOWN);
  ck_assert_int_eq(sluice_task_state_from_string(""), SLUICE_STATE_UNKNOWN);
  ck_assert_int_eq(sluice_task_state_from_string(NULL), SLUICE_STATE_UNKNOWN);
  ck_assert_str_eq(sluice_task_state_to_string(99), "unknown");
}
END_TEST

START_TEST(test_result_round_trip)
{
  SluiceResult *result = sluice_result_new("t-9", SLUICE_STATE_DEAD_LETTERED);
  GBytes *value = J("{\"total\": 42, \"parts\": [1.5, null, \"x\"]}");
  GBytes *bytes;
  SluiceResult *back;
  GError *err = NULL;
  gsize len, vlen;
  const guint8 *data;
  const guint8 *vdata;

  sluice_result_set_task(result, "tasks.add", "high");
  sluice_result_set_attempt(result, 3);
  sluice_result_set_value(result, value);
  sluice_result_set_error(result, "boom \xff");
  sluice_result_set_dead_letter_reason(result, "max_attempts");
  sluice_result_set_worker(result, "host-1/123");
  sluice_result_set_times(result, 1717243200000, 1717243201000, 1717243202000);
  ck_assert_ptr_eq(sluice_result_ref(result), result);
  sluice_result_unref(result);

  bytes = sluice_result_encode(result);
  back = sluice_result_decode(bytes, &err);
  assert_no_error(err);
  ck_assert_str_eq(sluice_result_get_id(back), "t-9");
  ck_assert_int_eq(sluice_result_get_state(back), SLUICE_STATE_DEAD_LETTERED);
  ck_assert_str_eq(sluice_result_get_task(back), "tasks.add");
  ck_assert_str_eq(sluice_result_get_queue(back), "high");
  ck_assert_uint_eq(sluice_result_get_attempt(back), 3);
  ck_assert(g_bytes_equal(sluice_result_get_value(back), value));
  ck_assert(g_utf8_validate(sluice_result_get_error(back), -1, NULL));
  ck_assert(g_str_has_prefix(sluice_result_get_error(back), "boom "));
  ck_assert_str_eq(sluice_result_get_dead_letter_reason(back), "max_attempts");
  ck_assert_str_eq(sluice_result_get_worker(back), "host-1/123");
  ck_assert_int_eq(sluice_result_get_enqueued_at(back), 1717243200000);
  ck_assert_int_eq(sluice_result_get_started_at(back), 1717243201000);
  ck_assert_int_eq(sluice_result_get_finished_at(back), 1717243202000);

  /* The value is embedded raw (not a bin) and read back zero-copy. */
  data = g_bytes_get_data(bytes, &len);
  vdata = g_bytes_get_data(sluice_result_get_value(back), &vlen);
  ck_assert(vdata >= data && vdata + vlen <= data + len);
  ck_assert_uint_eq(vdata[0], 0x82);

  sluice_result_unref(back);
  g_bytes_unref(bytes);
  g_bytes_unref(value);
  sluice_result_unref(result);
}
END_TEST

START_TEST(test_result_minimal)
{
  SluiceResult *result = sluice_result_new("t-1", SLUICE_STATE_QUEUED);
  GBytes *bytes = sluice_result_encode(result);
  GBytes *expected = hex_bytes("83 a1 76 01 a2 69 64 a3 74 2d 31"
                               " a5 73 74 61 74 65 a6 71 75 65 75 65 64");
  SluiceResult *back;
  GError *err = NULL;

  ck_assert(g_bytes_equal(bytes, expected));
  back = sluice_result_decode(bytes, &err);
  assert_no_error(err);
  ck_assert_ptr_null(sluice_result_get_task(back));
  ck_assert_ptr_null(sluice_result_get_queue(back));
  ck_assert_ptr_null(sluice_result_get_value(back));
  ck_assert_ptr_null(sluice_result_get_error(back));
  ck_assert_ptr_null(sluice_result_get_dead_letter_reason(back));
  ck_assert_ptr_null(sluice_result_get_worker(back));
  ck_assert_uint_eq(sluice_result_get_attempt(back), 0);
  ck_assert_int_eq(sluice_result_get_finished_at(back), 0);
  sluice_result_unref(back);
  g_bytes_unref(expected);
  g_bytes_unref(bytes);
  sluice_result_unref(result);
}
END_TEST

typedef struct {
  const gchar *hex;
  gint code; /* -1: decodes */
  const gchar *mentions;
} RecordCase;

static const RecordCase record_cases[] = {
    /* state "queued\0x": not a known name */
    {"83 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a8 71 75 65 75 65 64 00 78",
     -1, NULL},
    /* {v:1, id:"a", state:"paused"}: a newer state reads as unknown */
    {"83 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 70 61 75 73 65 64", -1,
     NULL},
    /* plus an unknown key */
    {"84 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64"
     " a3 6e 65 77 92 01 02",
     -1, NULL},
    /* missing id / state / v */
    {"82 a1 76 01 a5 73 74 61 74 65 a6 71 75 65 75 65 64",
     SLUICE_CODEC_ERROR_MISSING_FIELD, "id"},
    {"82 a1 76 01 a2 69 64 a1 61", SLUICE_CODEC_ERROR_MISSING_FIELD, "state"},
    {"82 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64",
     SLUICE_CODEC_ERROR_MISSING_FIELD, "v"},
    /* state is an integer */
    {"83 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 05",
     SLUICE_CODEC_ERROR_WRONG_TYPE, "state"},
    /* attempt is a string, negative, too big */
    {"84 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64"
     " a7 61 74 74 65 6d 70 74 a1 31",
     SLUICE_CODEC_ERROR_WRONG_TYPE, "attempt"},
    {"84 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64"
     " a7 61 74 74 65 6d 70 74 ff",
     SLUICE_CODEC_ERROR_INVALID, "attempt"},
    {"84 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64"
     " a7 61 74 74 65 6d 70 74 cf 00 00 00 01 00 00 00 00",
     SLUICE_CODEC_ERROR_INVALID, "attempt"},
    /* version 2 */
    {"83 a1 76 02 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64",
     SLUICE_CODEC_ERROR_VERSION, "version 2"},
    /* duplicate id */
    {"84 a1 76 01 a2 69 64 a1 61 a2 69 64 a1 62 a5 73 74 61 74 65 a6 71 75"
     " 65 75 65 64",
     SLUICE_CODEC_ERROR_INVALID, "duplicate"},
    /* bad UTF-8 in error */
    {"84 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64"
     " a5 65 72 72 6f 72 a1 ff",
     SLUICE_CODEC_ERROR_INVALID, "error"},
    /* trailing byte */
    {"83 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64 00",
     SLUICE_CODEC_ERROR_TRAILING, NULL},
    /* value declaring 2^32-1 elements */
    {"84 a1 76 01 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64"
     " a5 76 61 6c 75 65 dd ff ff ff ff",
     SLUICE_CODEC_ERROR_TRUNCATED, "value"},
    /* not a map */
    {"93 01 02 03", SLUICE_CODEC_ERROR_WRONG_TYPE, "map"},
    {"", SLUICE_CODEC_ERROR_TRUNCATED, NULL},
};

START_TEST(test_result_decode_cases)
{
  const RecordCase *rc = &record_cases[_i];
  GBytes *bytes = hex_bytes(rc->hex);
  GError *err = NULL;
  SluiceResult *result = sluice_result_decode(bytes, &err);

  if (rc->code < 0) {
    assert_no_error(err);
    ck_assert_str_eq(sluice_result_get_id(result), "a");
    sluice_result_unref(result);
  } else {
    ck_assert_ptr_null(result);
    assert_error(err, rc->code, rc->mentions);
  }
  g_bytes_unref(bytes);
}
END_TEST

START_TEST(test_result_every_prefix_truncated)
{
  SluiceResult *result = sluice_result_new("t-1", SLUICE_STATE_FAILED);
  GBytes *value = J("[1, \"two\", {\"three\": 3.0}]");
  GBytes *bytes;
  gsize len;
  const guint8 *data;

  sluice_result_set_task(result, "a", "b");
  sluice_result_set_value(result, value);
  sluice_result_set_attempt(result, 2);
  sluice_result_set_times(result, 10, 20, 30);
  bytes = sluice_result_encode(result);
  data = g_bytes_get_data(bytes, &len);
  for (gsize n = 0; n < len; n++) {
    GBytes *prefix = g_bytes_new(data, n);
    GError *err = NULL;

    ck_assert_ptr_null(sluice_result_decode(prefix, &err));
    assert_error(err, SLUICE_CODEC_ERROR_TRUNCATED, NULL);
    g_bytes_unref(prefix);
  }
  g_bytes_unref(bytes);
  g_bytes_unref(value);
  sluice_result_unref(result);
}
END_TEST

/* ---- Runner -------------------------------------------------------------- */

static Suite *
codec_suite(void)
{
  Suite *s = suite_create("codec");
  TCase *tc;

  tc = tcase_create("envelope");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_envelope_new_defaults);
  tcase_add_test(tc, test_envelope_copy_is_deep);
  tcase_add_test(tc, test_codec_tables);
  tcase_add_test(tc, test_history_cuts_at_char_boundary);
  tcase_add_test(tc, test_history_repairs_utf8);
  tcase_add_test(tc, test_history_keeps_newest_lines);
  suite_add_tcase(s, tc);

  /* Loop tests run once per codec: 0 = msgpack, 1 = JSON. */
  tc = tcase_create("round-trip");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_round_trip_minimal, 0, 2);
  tcase_add_loop_test(tc, test_round_trip_full, 0, 2);
  tcase_add_test(tc, test_round_trip_each_option);
  tcase_add_loop_test(tc, test_round_trip_field_extremes, 0, 2);
  tcase_add_test(tc, test_msgpack_omits_unset_fields);
  tcase_add_test(tc, test_msgpack_args_zero_copy);
  tcase_add_loop_test(tc, test_encoding_is_canonical, 0, 2);
  tcase_add_test(tc, test_json_leading_whitespace_detected);
  tcase_add_test(tc, test_multiplier_accepts_integer);
  tcase_add_test(tc, test_unknown_keys_skipped);
  tcase_add_test(tc, test_codecs_agree);
  tcase_add_test(tc, test_protocol_example);
  suite_add_tcase(s, tc);

  tc = tcase_create("malformed");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_wrong_type, 0, G_N_ELEMENTS(wrong_types));
  tcase_add_loop_test(tc, test_missing_required, 0,
                      G_N_ELEMENTS(required_keys));
  tcase_add_loop_test(tc, test_every_prefix_truncated, 0, 2);
  tcase_add_loop_test(tc, test_trailing_bytes, 0, 2);
  tcase_add_test(tc, test_unknown_version);
  tcase_add_test(tc, test_bad_utf8);
  tcase_add_test(tc, test_field_ranges);
  tcase_add_test(tc, test_duplicate_key);
  tcase_add_test(tc, test_huge_declared_length);
  tcase_add_test(tc, test_depth_limit);
  tcase_add_test(tc, test_depth_limit_custom_and_huge);
  tcase_add_loop_test(tc, test_size_limit, 0, 2);
  tcase_add_test(tc, test_not_an_envelope);
  tcase_add_loop_test(tc, test_encode_refuses_invalid, 0, 2);
  tcase_add_test(tc, test_json_encode_refuses_inexpressible_args);
  suite_add_tcase(s, tc);

  tc = tcase_create("args-json");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_args_json_round_trip, 0,
                      G_N_ELEMENTS(canonical_json));
  tcase_add_test(tc, test_args_json_matches_msgpack_c);
  tcase_add_test(tc, test_args_float32_becomes_float64);
  tcase_add_loop_test(tc, test_args_to_json_errors, 0,
                      G_N_ELEMENTS(bad_msgpack));
  tcase_add_test(tc, test_args_to_json_duplicate_in_large_map);
  tcase_add_loop_test(tc, test_args_from_json_errors, 0,
                      G_N_ELEMENTS(bad_json));
  tcase_add_test(tc, test_args_from_json_depth);
  suite_add_tcase(s, tc);

  tc = tcase_create("mutation");
  /* Minutes under ASan or valgrind. */
  tcase_set_timeout(tc, 3600);
  tcase_add_test(tc, test_mutation);
  suite_add_tcase(s, tc);

  tc = tcase_create("result");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_task_states);
  tcase_add_test(tc, test_result_round_trip);
  tcase_add_test(tc, test_result_minimal);
  tcase_add_loop_test(tc, test_result_decode_cases, 0,
                      G_N_ELEMENTS(record_cases));
  tcase_add_test(tc, test_result_every_prefix_truncated);
  suite_add_tcase(s, tc);

  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(codec_suite());
  int failed;

  srunner_run_all(sr, CK_ENV);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

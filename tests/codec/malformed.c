/* malformed.c - malformed envelopes, one class per test. */
#include "config.h"

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"

#include <check.h>
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/fixtures.h"

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

  fields_set_json(fields, "v", "3");
  assert_fields_fail(fields, SLUICE_CODEC_ERROR_VERSION, "version 3");
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

void
codec_add_malformed_tests(Suite *s)
{
  TCase *tc;

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
}

/* args-json.c - task arguments, JSON <-> msgpack. */
#include "config.h"

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"

#include <check.h>
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/fixtures.h"

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
    {"  \n ", SLUICE_CODEC_ERROR_TRUNCATED, "only white space"},
    /* What users of other notations type, and where a token ends early. */
    {"{'a': 1}", SLUICE_CODEC_ERROR_INVALID,
     "line 1, column 2: unexpected \"'\", expected a key (a string) or '}'; "
     "JSON strings and keys take double quotes"},
    {"{\"a\" 1}", SLUICE_CODEC_ERROR_INVALID,
     "line 1, column 6: unexpected '1', expected ':'"},
    {"[NaN]", SLUICE_CODEC_ERROR_INVALID, "JSON has no NaN or Infinity"},
    {"-Infinity", SLUICE_CODEC_ERROR_INVALID, "column 2"},
    {"07", SLUICE_CODEC_ERROR_INVALID,
     "line 1, column 1: a number with a "
     "leading 0"},
    {"\"\\ud800\"", SLUICE_CODEC_ERROR_INVALID,
     "column 2: \\uD800 is a lone high surrogate"},
    {"\"\\ud800", SLUICE_CODEC_ERROR_TRUNCATED, "surrogate pair"},
    {"\"\\ud800\\", SLUICE_CODEC_ERROR_TRUNCATED, "surrogate pair"},
};

START_TEST(test_args_from_json_errors)
{
  const BadJson *bad = &bad_json[_i];
  GError *err = NULL;

  ck_assert_ptr_null(sluice_args_from_json(bad->json, -1, &err));
  /* Every message says where, and names nothing of the code inside. */
  ck_assert_msg(g_str_has_prefix(err->message, "line ") &&
                    strstr(err->message, "sluice") == NULL &&
                    strstr(err->message, "__") == NULL,
                "%s: %s", bad->json, err->message);
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

void
codec_add_args_json_tests(Suite *s)
{
  TCase *tc;

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
}

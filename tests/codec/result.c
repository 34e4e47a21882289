/* result.c - result records. */
#include "config.h"

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"

#include <check.h>
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/fixtures.h"

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
    /* version 3 */
    {"83 a1 76 03 a2 69 64 a1 61 a5 73 74 61 74 65 a6 71 75 65 75 65 64",
     SLUICE_CODEC_ERROR_VERSION, "version 3"},
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

void
codec_add_result_tests(Suite *s)
{
  TCase *tc;

  tc = tcase_create("result");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_task_states);
  tcase_add_test(tc, test_result_round_trip);
  tcase_add_test(tc, test_result_minimal);
  tcase_add_loop_test(tc, test_result_decode_cases, 0,
                      G_N_ELEMENTS(record_cases));
  tcase_add_test(tc, test_result_every_prefix_truncated);
  suite_add_tcase(s, tc);
}

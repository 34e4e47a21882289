/* mutation.c - the deterministic mutation test. */
#include "config.h"

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"

#include <check.h>
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/fixtures.h"

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
          /* Only JSON may refuse, and only for args or carried keys it
           * cannot express. */
          ck_assert_msg(c == 1, "iteration %u: %s", i, err->message);
          ck_assert_msg(strstr(err->message, "args") != NULL ||
                            strstr(err->message, "unknown_") != NULL,
                        "iteration %u: %s", i, err->message);
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

void
codec_add_mutation_tests(Suite *s)
{
  TCase *tc;

  tc = tcase_create("mutation");
  /* Minutes under ASan or valgrind. */
  tcase_set_timeout(tc, 3600);
  tcase_add_test(tc, test_mutation);
  suite_add_tcase(s, tc);
}

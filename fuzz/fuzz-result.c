/* fuzz-result.c - sluice_result_decode(), the result record.
 *
 * Oracles: a failure is a SLUICE_CODEC_ERROR with a printable message; a
 * success encodes to a record that decodes to the same fields, whose value
 * is one msgpack value within the depth limit, and whose strings are UTF-8.
 */
#include "fuzz/fuzz-common.h"
#include "serializers/codec-private.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static gboolean
same_string(const gchar *a, const gchar *b)
{
  return g_strcmp0(a, b) == 0;
}

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GBytes) bytes = g_bytes_new(data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(SluiceResult) back = NULL;
  g_autoptr(GBytes) again = NULL;
  GBytes *value;

  fuzz_init();
  r = sluice_result_decode(bytes, &error);
  if (r == NULL) {
    FUZZ_ASSERT(error != NULL && error->domain == SLUICE_CODEC_ERROR,
                "failed without a codec error");
    fuzz_check_error(error);
    return 0;
  }
  FUZZ_ASSERT(g_utf8_validate(sluice_result_get_id(r), -1, NULL), "id");
  value = sluice_result_get_value(r);
  if (value != NULL) {
    gsize len;
    gconstpointer v = g_bytes_get_data(value, &len);

    FUZZ_ASSERT(sluice_mp__check_one_value(NULL, v, len,
                                           SLUICE_DEFAULT_MAX_DEPTH - 1, NULL),
                "the value is not one value within the depth limit");
  }
  again = sluice_result_encode(r);
  back = sluice_result_decode(again, &error);
  FUZZ_ASSERT(back != NULL, "the re-encoded record is refused: %s",
              error->message);
  FUZZ_ASSERT(
      same_string(sluice_result_get_id(r), sluice_result_get_id(back)) &&
          sluice_result_get_state(r) == sluice_result_get_state(back) &&
          same_string(sluice_result_get_task(r),
                      sluice_result_get_task(back)) &&
          same_string(sluice_result_get_queue(r),
                      sluice_result_get_queue(back)) &&
          same_string(sluice_result_get_error(r),
                      sluice_result_get_error(back)) &&
          same_string(sluice_result_get_dead_letter_reason(r),
                      sluice_result_get_dead_letter_reason(back)) &&
          same_string(sluice_result_get_worker(r),
                      sluice_result_get_worker(back)) &&
          sluice_result_get_attempt(r) == sluice_result_get_attempt(back) &&
          sluice_result_get_enqueued_at(r) ==
              sluice_result_get_enqueued_at(back) &&
          sluice_result_get_started_at(r) ==
              sluice_result_get_started_at(back) &&
          sluice_result_get_finished_at(r) ==
              sluice_result_get_finished_at(back),
      "the round trip changed a field");
  FUZZ_ASSERT((value == NULL) == (sluice_result_get_value(back) == NULL) &&
                  (value == NULL ||
                   g_bytes_equal(value, sluice_result_get_value(back))),
              "the round trip changed the value");
  return 0;
}

/* fuzz-args-from-json.c - sluice_args_from_json(), the JSON reader behind
 * it (sluice_json__scan and its cursor) included.
 *
 * Oracles: a failure is a SLUICE_CODEC_ERROR with a printable message; a
 * success is exactly one msgpack value nested at most SLUICE_MAX_ARGS_DEPTH
 * deep (a bin adding no level); it converts back to JSON, and that JSON
 * converts to the same bytes again (the conversion is canonical).
 */
#include "fuzz/fuzz-common.h"
#include "serializers/codec-private.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) mp = NULL;
  g_autoptr(GBytes) again = NULL;
  g_autofree gchar *json = NULL;
  gsize len;
  gconstpointer bytes;

  fuzz_init();
  mp = sluice_args_from_json((const gchar *)data, (gssize)size, &error);
  if (mp == NULL) {
    FUZZ_ASSERT(error != NULL && error->domain == SLUICE_CODEC_ERROR,
                "failed without a codec error");
    fuzz_check_error(error);
    return 0;
  }
  bytes = g_bytes_get_data(mp, &len);
  FUZZ_ASSERT(
      sluice_mp__check_one_value(NULL, bytes, len, SLUICE_MAX_ARGS_DEPTH, NULL),
      "the msgpack is not one value within the depth limit");
  json = sluice_args_to_json(mp, &error);
  FUZZ_ASSERT(json != NULL, "what came from JSON has no JSON form: %s",
              error->message);
  again = sluice_args_from_json(json, -1, &error);
  FUZZ_ASSERT(again != NULL, "the JSON written does not read back: %s (%s)",
              error->message, json);
  FUZZ_ASSERT(g_bytes_equal(mp, again), "not canonical: %s", json);
  return 0;
}

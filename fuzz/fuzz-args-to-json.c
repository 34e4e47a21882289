/* fuzz-args-to-json.c - sluice_args_to_json() on any bytes.
 *
 * Oracles: a failure is a SLUICE_CODEC_ERROR with a printable message; a
 * success is valid UTF-8 that the strict JSON reader accepts (what Sluice
 * writes, it reads). fuzz-roundtrip.c checks the values.
 */
#include "fuzz/fuzz-common.h"
#include "serializers/codec-private.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GBytes) mp = g_bytes_new(data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceJsonDoc) doc = NULL;
  g_autofree gchar *json = NULL;

  fuzz_init();
  json = sluice_args_to_json(mp, &error);
  if (json == NULL) {
    FUZZ_ASSERT(error != NULL && error->domain == SLUICE_CODEC_ERROR,
                "failed without a codec error");
    fuzz_check_error(error);
    return 0;
  }
  FUZZ_ASSERT(g_utf8_validate(json, -1, NULL), "the JSON is not UTF-8");
  doc = sluice_json__scan(json, strlen(json), SLUICE_JSON_MAX_DEPTH, &error);
  FUZZ_ASSERT(doc != NULL, "the JSON written is refused: %s (%s)",
              error->message, json);
  return 0;
}

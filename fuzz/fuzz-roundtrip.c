/* fuzz-roundtrip.c - the differential msgpack -> JSON -> msgpack round
 * trip of task arguments (and of results, which the CLI shows the same
 * way).
 *
 * Oracles: a failure is a SLUICE_CODEC_ERROR with a printable message; a
 * success is valid UTF-8 that the strict JSON reader accepts, and that
 * reads back as the same value (fuzz_same_msgpack: encodings may differ,
 * values may not) and writes the same text again.
 */
#include "fuzz/fuzz-msgpack-compare.h"
#include "serializers/codec-private.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GBytes) mp = g_bytes_new(data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceJsonDoc) doc = NULL;
  g_autoptr(GBytes) back = NULL;
  g_autofree gchar *json = NULL;
  g_autofree gchar *again = NULL;
  SluiceJsonCursor cur;

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
  sluice_json__cursor_init(&cur, doc);
  back = sluice_json__cursor_to_msgpack(&cur, NULL, &error);
  sluice_json__cursor_clear(&cur);
  FUZZ_ASSERT(back != NULL, "the JSON written does not convert: %s",
              error->message);
  FUZZ_ASSERT(fuzz_same_msgpack(mp, back),
              "msgpack -> JSON -> msgpack "
              "changed the value: %s",
              json);
  again = sluice_args_to_json(back, &error);
  FUZZ_ASSERT(again != NULL && strcmp(again, json) == 0,
              "the JSON is not stable: %s then %s", json,
              again != NULL ? again : error->message);
  return 0;
}

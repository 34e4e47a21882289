/* fuzz-envelope-json.c - the JSON envelope decoder (see fuzz-envelope.h
 * for the oracles). */
#include "fuzz/fuzz-envelope.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  fuzz_envelope(sluice_codec_json(), data, size);
  return 0;
}

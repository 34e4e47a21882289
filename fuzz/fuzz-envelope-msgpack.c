/* fuzz-envelope-msgpack.c - the msgpack envelope decoder (see
 * fuzz-envelope.h for the oracles). */
#include "fuzz/fuzz-envelope.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  fuzz_envelope(sluice_codec_msgpack(), data, size);
  return 0;
}

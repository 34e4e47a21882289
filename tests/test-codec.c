/* test-codec.c - the envelope codecs, args JSON and result records: the
 * runner. The tests live in tests/codec/, one file per topic.
 *
 * What is tested, and why each test would fail if its feature broke:
 *   - round trips of every field and option through both codecs, compared
 *     field by field (not by re-encoding, which could hide a symmetric bug);
 *   - one test per class of malformed input, asserting the error code and
 *     that the message names the field or offset;
 *   - the two codecs agree on a set of varied envelopes;
 *   - args JSON <-> msgpack, both ways, byte for byte against msgpack-c's
 *     own packer;
 *   - a deterministic mutation test (fixed seed) that must never crash,
 *     read out of bounds or leak: CI runs it under ASan/UBSan;
 *   - the worked example of PROTOCOL.md, read from the document itself, so
 *     the document cannot drift from the code;
 *   - result records.
 *
 * Fixtures are built with msgpack-c's packer or, for malformed envelopes,
 * from a list of (key, value) fields that each test edits, so a test says
 * only what differs from a valid envelope.
 */
#include "config.h"

#include "tests/codec/fixtures.h"

#include <stdlib.h>

static Suite *
codec_suite(void)
{
  Suite *s = suite_create("codec");

  codec_add_envelope_tests(s);
  codec_add_malformed_tests(s);
  codec_add_args_json_tests(s);
  codec_add_mutation_tests(s);
  codec_add_result_tests(s);
  return s;
}

int
main(void)
{
  SRunner *sr = srunner_create(codec_suite());
  int failed;

  srunner_run_all(sr, CK_ENV);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

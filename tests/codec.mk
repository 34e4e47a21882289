# The envelope codecs, args JSON conversion and result records
# (serializers/, core/result.c). test-codec includes a deterministic
# mutation test of both codecs; under ASan it takes a while, hence the
# generous Check timeouts inside the program.
check_PROGRAMS += tests/test-codec
TESTS += tests/test-codec
tests_test_codec_SOURCES = tests/test-codec.c
tests_test_codec_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_codec_LDADD = $(TEST_LIBS)

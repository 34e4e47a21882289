# The Redis broker suites. Each starts its own redis-server processes
# (tests/helpers/redis-server.c, a small library so that the conformance
# suite can link it too): without redis-server they SKIP, unless CI is set.
noinst_LTLIBRARIES += tests/libredis-server.la
tests_libredis_server_la_SOURCES = \
	tests/helpers/redis-server.c \
	tests/helpers/redis-server.h
tests_libredis_server_la_LIBADD = $(GLIB_LIBS) $(HIREDIS_LIBS)
REDIS_TEST_LIBS = tests/libredis-server.la $(TEST_LIBS)

check_PROGRAMS += tests/test-redis-fast
TESTS += tests/test-redis-fast
tests_test_redis_fast_SOURCES = tests/test-redis-fast.c
tests_test_redis_fast_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_redis_fast_LDADD = $(REDIS_TEST_LIBS)

# The broker conformance suite (tests/conformance/) against redis-fast.
check_PROGRAMS += tests/test-redis-fast-conformance
TESTS += tests/test-redis-fast-conformance
tests_test_redis_fast_conformance_SOURCES = tests/test-redis-fast-conformance.c
tests_test_redis_fast_conformance_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_redis_fast_conformance_LDADD = tests/libconformance.la \
	$(REDIS_TEST_LIBS)

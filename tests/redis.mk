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
tests_test_redis_fast_conformance_SOURCES = tests/test-redis-fast-conformance.c \
	tests/helpers/redis-conformance.c tests/helpers/redis-conformance.h
tests_test_redis_fast_conformance_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_redis_fast_conformance_LDADD = tests/libconformance.la \
	$(REDIS_TEST_LIBS)

# Producers and workers as separate processes, both modes (the process
# helpers come from tests/reliable.mk and below).
check_PROGRAMS += tests/helpers/producer-proc
tests_helpers_producer_proc_SOURCES = tests/helpers/producer-proc.c
tests_helpers_producer_proc_CPPFLAGS = $(TEST_CPPFLAGS)
tests_helpers_producer_proc_LDADD = libsluice-internal.la $(SLUICE_DEP_LIBS)

check_PROGRAMS += tests/test-redis-processes
TESTS += tests/test-redis-processes
tests_test_redis_processes_SOURCES = tests/test-redis-processes.c
tests_test_redis_processes_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_redis_processes_LDADD = $(REDIS_TEST_LIBS)

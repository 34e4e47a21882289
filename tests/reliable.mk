# redis-reliable: the conformance suite through the same test code as every
# broker, the broker-level and fault tests (tests/test-redis-reliable.c), and
# the worker program those tests start as separate processes.
check_PROGRAMS += tests/helpers/worker-proc
tests_helpers_worker_proc_SOURCES = tests/helpers/worker-proc.c
tests_helpers_worker_proc_CPPFLAGS = $(TEST_CPPFLAGS)
tests_helpers_worker_proc_LDADD = libsluice-internal.la $(SLUICE_DEP_LIBS)

check_PROGRAMS += tests/test-redis-reliable
TESTS += tests/test-redis-reliable
tests_test_redis_reliable_SOURCES = tests/test-redis-reliable.c
tests_test_redis_reliable_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_redis_reliable_LDADD = $(REDIS_TEST_LIBS)

check_PROGRAMS += tests/test-redis-reliable-conformance
TESTS += tests/test-redis-reliable-conformance
tests_test_redis_reliable_conformance_SOURCES = \
	tests/test-redis-reliable-conformance.c \
	tests/helpers/redis-conformance.c tests/helpers/redis-conformance.h
tests_test_redis_reliable_conformance_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_redis_reliable_conformance_LDADD = tests/libconformance.la \
	$(REDIS_TEST_LIBS)

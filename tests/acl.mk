# Every role under the least-privilege Redis users documented in README.md
# (read from it), both modes; it starts worker-proc processes.
check_PROGRAMS += tests/test-redis-acl
TESTS += tests/test-redis-acl
tests_test_redis_acl_SOURCES = tests/test-redis-acl.c
tests_test_redis_acl_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_redis_acl_LDADD = $(REDIS_TEST_LIBS)
EXTRA_tests_test_redis_acl_DEPENDENCIES = tests/helpers/worker-proc

# Hostile input (issue 21): each finding of a fuzzing campaign as a
# regression test. It counts the process's allocations to check memory
# bounds (tests/helpers/alloc-counter.c replaces malloc), so the counter is
# linked into this program only.
check_PROGRAMS += tests/test-hostile
TESTS += tests/test-hostile
tests_test_hostile_SOURCES = tests/test-hostile.c \
	tests/helpers/alloc-counter.c tests/helpers/alloc-counter.h
tests_test_hostile_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_hostile_LDADD = $(TEST_LIBS)

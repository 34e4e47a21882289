# Benchmarks: built by `make`, never run by `make check` (timing belongs
# here, not in tests). bench/run.sh runs them against a redis-server of its
# own and prints every figure as key=value lines; bench/compare.sh runs the
# `sluice worker` command next to other queues on one Redis.
noinst_PROGRAMS += bench/bench bench/bench-cli
bench_bench_SOURCES = bench/bench.c bench/bench-redis.c bench/bench-redis.h
bench_bench_LDADD = libsluice.la $(SLUICE_DEP_LIBS)
bench_bench_cli_SOURCES = bench/bench-cli.c bench/bench-redis.c \
	bench/bench-redis.h
bench_bench_cli_LDADD = libsluice.la $(SLUICE_DEP_LIBS)
EXTRA_DIST += bench/run.sh bench/compare.sh bench/redis-server.sh \
	bench/peers/package.json bench/peers/package-lock.json \
	bench/peers/bullmq.js bench/peers/bee.js bench/peers/common.js

# The harness itself: bench-cli against the real worker command on small
# workloads (no timing asserted), so a change that would break compare.sh
# or run.sh fails `make check`.
check_PROGRAMS += tests/test-bench-cli
TESTS += tests/test-bench-cli
tests_test_bench_cli_SOURCES = tests/test-bench-cli.c
tests_test_bench_cli_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_bench_cli_LDADD = $(REDIS_TEST_LIBS)

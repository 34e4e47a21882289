# Benchmarks: built by `make`, never run by `make check` (timing belongs
# here, not in tests). bench/run.sh runs them against a redis-server of its
# own and prints every figure as key=value lines.
noinst_PROGRAMS += bench/bench
bench_bench_SOURCES = bench/bench.c
bench_bench_LDADD = libsluice.la $(SLUICE_DEP_LIBS)
EXTRA_DIST += bench/run.sh

# The libFuzzer targets (fuzz/, see fuzz/README.md). They need clang with
# its fuzzer runtime, so they are a separate build: the library's sources
# (and the command's settings and output code) are compiled again with
# clang -fsanitize=fuzzer-no-link,address,undefined into fuzz/obj/, and
# each target links them with -fsanitize=fuzzer into fuzz/bin/.
#
#   make fuzz                   build every target, run each FUZZ_SECONDS
#   make fuzz FUZZ_SECONDS=600  longer
#   make fuzz FUZZ_TARGETS=url  one target
#
# A crash, a leak, a timeout or a failed oracle fails the run; the input is
# kept in fuzz/artifacts/ (add it to fuzz/corpus/<target>/ with the fix).
# New inputs a run finds go to fuzz/work/<target>/, not to the source tree.
FUZZ_ALL_TARGETS = envelope-msgpack envelope-json args-from-json \
	args-to-json roundtrip result dead-letter cron url keyfile
FUZZ_TARGETS = $(FUZZ_ALL_TARGETS)
FUZZ_SECONDS = 30
FUZZ_RUN_FLAGS = -jobs=1 -workers=1 -timeout=10 -rss_limit_mb=2048 \
	-max_len=16384 -print_final_stats=1

EXTRA_DIST += fuzz/README.md fuzz/fuzz.mk $(wildcard $(srcdir)/fuzz/*.[ch]) \
	$(wildcard $(srcdir)/fuzz/*.dict) fuzz/corpus
clean-local: clean-fuzz
clean-fuzz:
	rm -rf fuzz/obj fuzz/bin fuzz/work fuzz/artifacts fuzz/logs

if HAVE_FUZZ
FUZZ_SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_COMPILE_FLAGS = -g -O1 -std=gnu11 -Wall -Wno-unused-parameter $(FUZZ_SANITIZE) -fsanitize=fuzzer-no-link \
	-I$(top_builddir) $(AM_CPPFLAGS) $(HIREDIS_CFLAGS)
FUZZ_SRC_FILES = $(filter %.c,$(libsluice_internal_la_SOURCES)) \
	cli/settings.c cli/common.c cli/output.c cli/log.c
FUZZ_OBJ_FILES = $(FUZZ_SRC_FILES:%.c=fuzz/obj/%.o)
FUZZ_HEADER_DEPS = $(wildcard $(top_srcdir)/include/sluice/*.h \
	$(top_srcdir)/core/*.h $(top_srcdir)/serializers/*.h \
	$(top_srcdir)/brokers/*/*.h $(top_srcdir)/cli/*.h \
	$(top_srcdir)/fuzz/*.h) config.h

fuzz/obj/%.o: $(top_srcdir)/%.c $(FUZZ_HEADER_DEPS)
	@mkdir -p $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_COMPILE_FLAGS) -c $< -o $@

fuzz/bin/fuzz-%: fuzz/obj/fuzz/fuzz-%.o $(FUZZ_OBJ_FILES)
	@mkdir -p $(@D)
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_SANITIZE) -fsanitize=fuzzer -o $@ $^ \
	  $(SLUICE_DEP_LIBS) $(LIBS)

fuzz-build: $(FUZZ_TARGETS:%=fuzz/bin/fuzz-%)

# Each target in turn, from its own work directory (libFuzzer's -jobs mode
# writes its log, fuzz-0.log, where it runs).
fuzz: fuzz-build
	@set -e; top=$$(pwd); src=$$(cd $(srcdir) && pwd); \
	mkdir -p fuzz/artifacts fuzz/logs; \
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/work/$$t; \
	  dict=; test -f $$src/fuzz/$$t.dict && dict=-dict=$$src/fuzz/$$t.dict; \
	  echo "fuzz-$$t: $(FUZZ_SECONDS) s"; \
	  if ! (cd fuzz/work/$$t && $$top/fuzz/bin/fuzz-$$t $(FUZZ_RUN_FLAGS) \
	        -max_total_time=$(FUZZ_SECONDS) \
	        -artifact_prefix=$$top/fuzz/artifacts/$$t- $$dict \
	        . $$src/fuzz/corpus/$$t >/dev/null 2>&1); then \
	    cat fuzz/work/$$t/fuzz-0.log | tail -n 60; \
	    echo "make fuzz: fuzz-$$t failed; its input is in fuzz/artifacts/"; \
	    exit 1; \
	  fi; \
	  cp fuzz/work/$$t/fuzz-0.log fuzz/logs/$$t.log; \
	  grep -E '^stat::number_of_executed_units' fuzz/logs/$$t.log || true; \
	done
else
fuzz-build fuzz:
	@echo "make fuzz: configure found no clang with libFuzzer (Debian: apt-get install clang libclang-rt-14-dev); nothing to do"
endif
.PHONY: fuzz fuzz-build clean-fuzz

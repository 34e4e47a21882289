# The `sluice` command (cli/), its man page, the `demo` task module it is
# shown with, and its end-to-end tests.

# ---- The command ------------------------------------------------------------
# It uses only the public API: it links the exported library and is compiled
# without SLUICE_COMPILATION, as a user's program would be.
bin_PROGRAMS += cli/sluice
cli_sluice_SOURCES = \
	cli/cli.h \
	cli/main.c \
	cli/common.c \
	cli/settings.c \
	cli/parse.c \
	cli/output.c \
	cli/log.c \
	cli/modules.c \
	cli/cmd-worker.c \
	cli/cmd-enqueue.c \
	cli/cmd-task.c \
	cli/cmd-dlq.c \
	cli/cmd-stats.c
cli_sluice_CPPFLAGS = \
	-I$(top_srcdir)/include \
	-I$(top_srcdir) \
	-DG_LOG_DOMAIN=\"sluice\" \
	-DGLIB_VERSION_MIN_REQUIRED=GLIB_VERSION_2_66 \
	$(GLIB_CFLAGS) $(MSGPACK_CFLAGS)
cli_sluice_LDADD = libsluice.la $(SLUICE_DEP_LIBS)

dist_man_MANS = cli/sluice.1

# ---- The demo task module ---------------------------------------------------
# A real shared object (libtool module, never installed), built by `make` so
# that the README's session can load examples/demo-module/.libs/demo.so.
DEMO_MODULE_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-rpath /nowhere
noinst_LTLIBRARIES += examples/demo-module/demo.la
examples_demo_module_demo_la_SOURCES = examples/demo-module/demo.c
examples_demo_module_demo_la_CPPFLAGS = -I$(top_srcdir)/include \
	-DGLIB_VERSION_MIN_REQUIRED=GLIB_VERSION_2_66 \
	$(GLIB_CFLAGS) $(MSGPACK_CFLAGS)
examples_demo_module_demo_la_LDFLAGS = $(DEMO_MODULE_LDFLAGS)
examples_demo_module_demo_la_LIBADD = libsluice.la $(GLIB_LIBS) \
	$(MSGPACK_LIBS)

# ---- Tests ------------------------------------------------------------------
# A shared object without sluice_module_init, for the "not a module" error.
check_LTLIBRARIES += tests/cli/no-init.la
tests_cli_no_init_la_SOURCES = tests/cli/no-init-module.c
tests_cli_no_init_la_CPPFLAGS = $(GLIB_CFLAGS)
tests_cli_no_init_la_LDFLAGS = $(DEMO_MODULE_LDFLAGS)

# Drives the built cli/sluice against a throwaway redis-server.
check_PROGRAMS += tests/test-cli
TESTS += tests/test-cli
tests_test_cli_SOURCES = tests/test-cli.c
tests_test_cli_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_cli_LDADD = tests/libredis-server.la $(TEST_LIBS)
EXTRA_tests_test_cli_DEPENDENCIES = cli/sluice examples/demo-module/demo.la \
	tests/cli/no-init.la

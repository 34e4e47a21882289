/* report.c - what the conformance kit did not run, and why.
 *
 * A scenario that needs a feature the broker lacks (a capability, or a
 * family's table: sluice_broker_supports()) is not added to the suite at
 * all: the kit makes one broker with the factory when it builds the
 * suite, asks it what it supports, adds the scenarios it can run, and
 * lists the others with their reason. Deciding at construction, in the
 * parent, is what keeps the count under CK_FORK: a scenario that returned
 * early in its own process would count as a pass, silently, and its
 * parent would never know.
 *
 * The broker is made and asked inside a test of its own (see "The probe"
 * below). The list is printed when the suite is built, and a closing line counts
 * the scenarios not run by reason when the program ends ("3 scenarios not
 * run: no leases (2), no joins (1)"). A scenario that decides at run time
 * that it can learn nothing more (a machine too busy to tell a refusal
 * from a lapse) prints its reason from its own process; it is not counted
 * in the closing line, which only the parent prints.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/conformance/conformance.h"

static struct {
  gboolean probed;
  const gchar *name;    /* the factory's */
  guint64 supported;    /* SLUICE_CONFORMANCE_NEEDS() bits */
  guint not_run;        /* scenarios not added */
  guint by_feature[64]; /* ...by the first feature they lacked */
  pid_t pid;            /* the process that built the suite */
  gboolean exit_hooked;
} report;

static void
print_closing_line(void)
{
  GString *line;
  gboolean first = TRUE;

  if (!report.probed || getpid() != report.pid)
    return; /* a scenario's own process (CK_FORK) ends here too */
  if (report.not_run == 0) {
    printf("conformance: %s: every scenario ran\n", report.name);
    fflush(stdout);
    return;
  }
  line = g_string_new(NULL);
  g_string_printf(line, "conformance: %s: %u scenario%s not run: ", report.name,
                  report.not_run, report.not_run == 1 ? "" : "s");
  for (guint f = 0; f < G_N_ELEMENTS(report.by_feature); f++) {
    if (report.by_feature[f] == 0)
      continue;
    g_string_append_printf(line, "%sno %s (%u)", first ? "" : ", ",
                           sluice_broker_feature_name((SluiceBrokerFeature)f),
                           report.by_feature[f]);
    first = FALSE;
  }
  printf("%s\n", line->str);
  fflush(stdout);
  g_string_free(line, TRUE);
}

/* ---- The probe ------------------------------------------------------------
 *
 * A factory may use Check's assertions (the in-tree ones do), and those
 * work only inside a running test, so the probe is a test of its own, run
 * by a runner of its own before the suite is built: in a process of its
 * own under CK_FORK (it hands its answer back through a pipe), in this one
 * without.
 */

static const SluiceConformanceFactory *probe_factory;
static int probe_pipe[2] = {-1, -1};

START_TEST(probe_what_the_broker_supports)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClock) clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  SluiceBroker *broker =
      probe_factory->create(clock, 100, probe_factory->data, &error);
  guint64 supported = 0;

  ck_assert_msg(broker != NULL, "%s: cannot create the broker: %s",
                probe_factory->name, error != NULL ? error->message : "?");
  for (guint f = 0; f < G_N_ELEMENTS(report.by_feature); f++)
    if (sluice_broker_supports(broker, (SluiceBrokerFeature)f))
      supported |= SLUICE_CONFORMANCE_NEEDS(f);
  sluice_broker_unref(broker);
  ck_assert(write(probe_pipe[1], &supported, sizeof supported) ==
            (ssize_t)sizeof supported);
}
END_TEST

void
sluice_conformance__probe(const SluiceConformanceFactory *factory)
{
  Suite *suite = suite_create("probe");
  TCase *tc = tcase_create("probe");
  SRunner *runner;
  guint64 supported = 0;
  ssize_t got = 0;

  /* A program that runs several suites one after the other (one per
   * configuration of a broker) gets the closing line of each: the last
   * one's when it ends, the others' when the next one is built. */
  print_closing_line();
  report.name = factory->name;
  report.pid = getpid();
  report.supported = 0;
  report.not_run = 0;
  memset(report.by_feature, 0, sizeof report.by_feature);
  probe_factory = factory;
  if (pipe(probe_pipe) != 0)
    g_error("conformance: cannot make a pipe: %s", g_strerror(errno));
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, probe_what_the_broker_supports);
  suite_add_tcase(suite, tc);
  runner = srunner_create(suite);
  /* CK_RUN_SUITE, CK_RUN_CASE and the tag filters pick the scenarios to
   * run; they must not leave the probe out. */
  {
    static const gchar *const filters[] = {
        "CK_RUN_SUITE", "CK_RUN_CASE", "CK_INCLUDE_TAGS", "CK_EXCLUDE_TAGS"};
    gchar *saved[G_N_ELEMENTS(filters)];

    for (gsize i = 0; i < G_N_ELEMENTS(filters); i++) {
      saved[i] = g_strdup(g_getenv(filters[i]));
      g_unsetenv(filters[i]);
    }
    srunner_run_all(runner, CK_SILENT);
    for (gsize i = 0; i < G_N_ELEMENTS(filters); i++) {
      if (saved[i] != NULL)
        g_setenv(filters[i], saved[i], TRUE);
      g_free(saved[i]);
    }
  }
  srunner_free(runner);
  close(probe_pipe[1]);
  got = read(probe_pipe[0], &supported, sizeof supported);
  close(probe_pipe[0]);
  probe_pipe[0] = probe_pipe[1] = -1;
  if (got == (ssize_t)sizeof supported) {
    report.supported = supported;
  } else {
    /* Nothing to go by: add every scenario, and let each fail where it
     * makes its broker, saying why. */
    g_printerr("conformance: %s: cannot make a broker to ask what it "
               "supports: every scenario is added\n",
               factory->name);
    report.supported = G_MAXUINT64;
  }
  report.probed = TRUE;
  if (!report.exit_hooked) {
    atexit(print_closing_line);
    report.exit_hooked = TRUE;
  }
}

void
sluice_conformance__add(TCase *tc, const TTest *test, guint64 needs)
{
  guint64 missing;

  g_return_if_fail(report.probed);
  missing = needs & ~report.supported;
  if (missing == 0) {
    tcase_add_test(tc, test);
    return;
  }
  for (guint f = 0; f < G_N_ELEMENTS(report.by_feature); f++)
    if (missing & SLUICE_CONFORMANCE_NEEDS(f)) {
      report.by_feature[f]++;
      printf("conformance: %s: not run: %s (no %s)\n", report.name, test->name,
             sluice_broker_feature_name((SluiceBrokerFeature)f));
      break;
    }
  report.not_run++;
}

void
sluice_conformance__skip_now(const gchar *scenario, const gchar *reason)
{
  printf("conformance: %s: skipped at run time: %s (%s)\n",
         report.name != NULL ? report.name : "?", scenario, reason);
  fflush(stdout);
}

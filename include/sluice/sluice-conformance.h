/* sluice-conformance.h - the broker conformance kit: the scenarios every
 * broker of Sluice passes, for the author of a new one.
 *
 * Link libsluice-conformance (pkg-config sluice-conformance) into a Check
 * program, give it a factory that makes a fresh, empty broker, and run:
 *
 *     static SluiceBroker *
 *     create(SluiceClock *clock, guint dead_letter_max, gpointer data,
 *            GError **error)
 *     {
 *       return my_broker_new(clock, dead_letter_max, error);
 *     }
 *
 *     int main(void)
 *     {
 *       static const SluiceConformanceFactory f = {
 *           .name = "mine", .create = create, .scale = 0.2};
 *       return sluice_conformance_run(&f);
 *     }
 *
 * Every scenario runs in a process of its own, on a broker of its own:
 * the semantics through a client and a worker, every slot of the contract
 * (<sluice/sys/broker.h>) with its atomicity rules, and process
 * isolation's children. Scenarios that need a feature the broker lacks (a
 * capability, a family's table, or an optional slot a user can see:
 * sluice_broker_supports()) are not run: the kit makes one broker with
 * the factory when it builds the suite, asks it, and prints each scenario
 * it leaves out with the reason ("conformance: mine: not run:
 * reclaim_takes_over_only_dead_or_idle_deliveries (no leases)"), then a
 * closing line when the program ends ("conformance: mine: 12 scenarios
 * not run: no leases (4), no joins (8)"). docs/writing-a-broker.md
 * explains each.
 */
#pragma once

#include <check.h>

#include <sluice/sys/broker.h>
#include <sluice/sluice.h>

G_BEGIN_DECLS

/**
 * SluiceConformanceFactory:
 * @name: the broker's name in test names and failure messages
 * @create: makes a fresh, empty broker on @clock (a fake clock: due times
 *   and, with SLUICE_BROKER_CAP_CLOCK_TTL, TTLs must follow it) that keeps
 *   at most @dead_letter_max dead letters; runs in the scenario's process,
 *   and once when the suite is built (to ask what the broker supports).
 *   Returns: (transfer full): the broker, or NULL and @error
 * @data: passed to @create
 * @scale: the size of the load scenarios (1.0 = 100,000 tasks); a slow
 *   store may lower it, never to zero
 *
 * Must outlive the runner it is given to.
 */
typedef struct {
  const gchar *name;
  SluiceBroker *(*create)(SluiceClock *clock, guint dead_letter_max,
                          gpointer data, GError **error);
  gpointer data;
  gdouble scale;
} SluiceConformanceFactory;

/**
 * sluice_conformance_suite:
 * @factory: (transfer none): must outlive the suite's runner
 *
 * The whole suite, to add test cases of your own to before running it.
 * Call sluice_conformance_capture_logs() first in main(): some scenarios
 * check what the worker logs.
 * Returns: (transfer full): the suite, for srunner_create().
 */
SLUICE_AVAILABLE_IN_0_1
Suite *sluice_conformance_suite(const SluiceConformanceFactory *factory);

/**
 * sluice_conformance_capture_logs:
 * Installs the log writer the scenarios read (it also prints warnings and
 * errors to stderr). Call once, in main(), before running.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_conformance_capture_logs(void);

/**
 * sluice_conformance_run:
 * @factory: (transfer none)
 *
 * Captures logs, runs every scenario, each in a process of its own (even
 * with CK_FORK=no: a scenario's broker threads end with its process),
 * honouring Check's CK_RUN_SUITE / CK_RUN_CASE / CK_VERBOSITY.
 * Returns: 0 when every scenario passed, 1 otherwise: main()'s status.
 */
SLUICE_AVAILABLE_IN_0_1
int sluice_conformance_run(const SluiceConformanceFactory *factory);

G_END_DECLS

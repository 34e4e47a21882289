/* conformance.h - the broker conformance suite.
 *
 * One set of scenarios run against every broker: the memory broker, both
 * Redis brokers and the custom-broker example each link this suite into
 * their own Check program with a factory that makes a fresh, empty broker.
 * A broker is done when this passes. Its test cases:
 *  - "semantics", "stop", "load" (conformance.c): the semantics of
 *    docs/design.md, through a client and a worker;
 *  - "contract" (contract.c): every slot of <sluice/sys/broker.h>, called
 *    directly, with its atomicity rules;
 *  - "isolation" (isolation.c): process isolation's children on the
 *    broker.
 *
 * A scenario that needs a feature the broker lacks (sluice_broker_supports:
 * a capability or a family's table) is not added to the suite: the kit
 * asks a broker made by the factory when it builds the suite, and prints
 * what it did not run and why (report.c). Never by broker name.
 *
 * Installed as libsluice-conformance (<sluice/sluice-conformance.h>, the
 * factory and the runner); this header adds what only the tree uses.
 */
#pragma once

#include <check.h>

#include <sluice/sluice-conformance.h>
#include <sluice/sys/broker.h>
#include <sluice/sluice.h>

/* Scenarios that check a log line need the capture installed in main(). */
#include "tests/helpers/log-capture.h"

G_BEGIN_DECLS

/* What a scenario needs: SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_X)
 * bits, or 0. */
#define SLUICE_CONFORMANCE_NEEDS(feature) (G_GUINT64_CONSTANT(1) << (feature))

/* Makes one broker with @factory and records what it supports; call once,
 * before the first sluice_conformance__add(). */
void sluice_conformance__probe(const SluiceConformanceFactory *factory);

/* Adds @test to @tc when the broker has every feature of @needs; otherwise
 * prints it as not run, with the first feature it lacks, and counts it for
 * the closing line. */
void sluice_conformance__add(TCase *tc, const TTest *test, guint64 needs);

/* A scenario that decides while it runs that it can learn nothing more
 * (a busy machine) says so before it returns: @scenario, and why. */
void sluice_conformance__skip_now(const gchar *scenario, const gchar *reason);

/* Adds the flow-control scenarios (flow.c) to @s. */
void sluice_conformance_add_flow(Suite *s,
                                 const SluiceConformanceFactory *factory);

/* Adds the uniqueness scenarios (unique.c) to @s. */
void sluice_conformance_add_unique(Suite *s,
                                   const SluiceConformanceFactory *factory);

/* Adds the process-isolation scenarios (isolation.c) to @s. */
void sluice_conformance_add_isolation(Suite *s,
                                      const SluiceConformanceFactory *factory);

/* Adds the workflow scenarios (workflow.c) to @s. */
void sluice_conformance_add_workflow(Suite *s,
                                     const SluiceConformanceFactory *factory);

G_END_DECLS

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
 * Scenarios that need a capability the broker does not declare are skipped
 * by capability, never by broker name.
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

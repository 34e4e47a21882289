/* contract.h - the contract part of the conformance suite (contract.c),
 * for conformance.c, which adds it to the suite it returns. */
#pragma once

#include "tests/conformance/conformance.h"

G_BEGIN_DECLS

/* Returns: (transfer full): the test case of the slot-level scenarios,
 * driven through @factory (which must outlive the runner). */
TCase *
sluice_conformance__contract_tcase(const SluiceConformanceFactory *factory);

G_END_DECLS

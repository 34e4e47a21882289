/* conformance.c - the broker conformance suite: the semantics of
 * docs/design.md as Check scenarios, run against any broker through a
 * SluiceConformanceFactory, put together here from the files of their
 * topics (scenario.h lists them; contract.c, isolation.c, workflow.c,
 * flow.c and unique.c add their own test cases).
 *
 * The suite asks a broker made by the factory what it supports before it
 * adds a scenario (report.c): a scenario that needs what the broker lacks
 * is listed as not run, with its reason, never passed silently.
 */
#include "config.h"

#include "tests/conformance/contract.h"
#include "tests/conformance/scenario.h"

Suite *
sluice_conformance_suite(const SluiceConformanceFactory *f)
{
  Suite *s = suite_create(f->name);
  TCase *semantics = tcase_create("semantics");
  TCase *stop = tcase_create("stop");
  TCase *load = tcase_create("load");
  TCase *steer = tcase_create("steer");

  factory = f;
  g_mutex_init(&rec.lock);
  g_cond_init(&rec.cond);
  sluice_conformance__probe(f);

  tcase_set_timeout(semantics, 120);
  tcase_set_timeout(stop, 120);
  tcase_set_timeout(load, 900);
  tcase_set_timeout(steer, 120);
  sluice_conformance__add_retry(semantics);
  sluice_conformance__add_dead_letters(semantics);
  sluice_conformance__add_records(semantics);
  sluice_conformance__add_cancel(semantics);
  sluice_conformance__add_stop(stop);
  sluice_conformance__add_load(load);
  sluice_conformance__add_queue(semantics);
  sluice_conformance__add_periodic(semantics);
  sluice_conformance__add_workers(semantics);
  sluice_conformance__add_steering(steer);
  sluice_conformance__add_seal(semantics);

  suite_add_tcase(s, semantics);
  suite_add_tcase(s, stop);
  sluice_conformance_add_isolation(s, f);
  sluice_conformance_add_workflow(s, f);
  sluice_conformance_add_flow(s, f);
  sluice_conformance_add_unique(s, f);
  suite_add_tcase(s, load);
  suite_add_tcase(s, steer);
  suite_add_tcase(s, sluice_conformance__contract_tcase(f));
  return s;
}

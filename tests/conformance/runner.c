/* runner.c - the conformance kit's entry points of
 * <sluice/sluice-conformance.h> that are not the suite itself: the log
 * capture and the one-call runner a broker author's main() returns. */
#include "config.h"

#include "tests/conformance/conformance.h"

void
sluice_conformance_capture_logs(void)
{
  sluice_test_log_capture_install();
}

int
sluice_conformance_run(const SluiceConformanceFactory *factory)
{
  SRunner *runner;
  int failed;

  g_return_val_if_fail(factory != NULL && factory->create != NULL, 1);
  sluice_conformance_capture_logs();
  runner = srunner_create(sluice_conformance_suite(factory));
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

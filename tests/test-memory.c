/* test-memory.c - the conformance suite against the memory broker.
 *
 * The memory broker is what users test their task code with, so it must
 * pass every scenario, including those gated on SLUICE_BROKER_CAP_CLOCK_TTL.
 */
#include "config.h"

#include "tests/conformance/conformance.h"

static SluiceBroker *
create_memory(SluiceClock *clock, guint dead_letter_max, gpointer data,
              GError **error)
{
  SluiceMemoryBrokerOptions options = {.dead_letter_max = dead_letter_max};

  return sluice_memory_broker_new(&options, clock);
}

static const SluiceConformanceFactory memory_factory = {
    .name = "memory",
    .create = create_memory,
    .scale = 1.0,
};

int
main(void)
{
  SRunner *runner;
  int failed;

  sluice_test_log_capture_install();
  runner = srunner_create(sluice_conformance_suite(&memory_factory));
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

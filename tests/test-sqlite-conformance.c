/* test-sqlite-conformance.c - the broker conformance suite (semantics,
 * contract, isolation) against the SQLite broker, each scenario on a fresh
 * database file in a directory of its own. The broker declares every
 * capability (SHARED, DURABLE, LEASES, FENCING, CLOCK_TTL, IN_FLIGHT), so
 * no scenario is skipped. Waiters' safety re-check is off: "get_result
 * wakes on completion" must be woken by the settle's notification. The load
 * scenario runs at full scale (100,000 tasks: about 6 s here).
 */
#include "config.h"

#include "tests/conformance/conformance.h"
#include "tests/helpers/sqlite-fixture.h"

static SluiceBroker *
create_sqlite(SluiceClock *clock, guint dead_letter_max, gpointer data,
              GError **error)
{
  g_autofree gchar *path = sluice_test_sqlite_new_path();

  return sluice_test_sqlite_broker_new(path, dead_letter_max, clock, error);
}

static const SluiceConformanceFactory sqlite_factory = {
    .name = "sqlite",
    .create = create_sqlite,
    .scale = 1.0,
};

int
main(void)
{
  SRunner *runner;
  int failed;

  sluice_test_sqlite_setup();
  sluice_test_log_capture_install();
  runner = srunner_create(sluice_conformance_suite(&sqlite_factory));
  /* Each scenario in its own process: its broker's threads end with it. */
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  sluice_test_sqlite_teardown();
  return failed == 0 ? 0 : 1;
}

/* test-trace-broker.c - a custom broker is done when the conformance suite
 * passes against it. Here: the trace broker wrapped around the memory
 * broker, plus a check that it really saw the traffic.
 *
 * It uses only the installed conformance kit (<sluice/sluice-conformance.h>,
 * pkg-config sluice-conformance): `make distcheck` builds it out of tree
 * with this directory's Makefile, as a broker author would.
 */
#include <sluice/sluice-conformance.h>

#include "trace-broker.h"

static SluiceBroker *
create_traced_memory(SluiceClock *clock, guint dead_letter_max, gpointer data,
                     GError **error)
{
  SluiceMemoryBrokerOptions options = {.dead_letter_max = dead_letter_max};
  g_autoptr(SluiceBroker) inner = sluice_memory_broker_new(&options, clock);

  return trace_broker_new(inner);
}

static const SluiceConformanceFactory trace_factory = {
    .name = "trace(memory)",
    .create = create_traced_memory,
    .scale = 0.2,
};

START_TEST(trace_sees_every_operation_of_a_round_trip)
{
  g_autoptr(SluiceBroker) inner = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceBroker) broker = trace_broker_new(inner);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceResult) result = NULL;
  g_autofree gchar *id = NULL;

  ck_assert_str_eq(sluice_broker_get_name(broker), "trace");
  for (SluiceBrokerFeature f = SLUICE_BROKER_FEATURE_SHARED;
       f <= SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE; f++)
    ck_assert_msg(sluice_broker_supports(broker, f) ==
                      sluice_broker_supports(inner, f),
                  "trace and its inner broker differ on %s",
                  sluice_broker_feature_name(f));
  worker = sluice_worker_new(broker, registry, NULL, NULL);
  id = sluice_client_enqueue(client, "nobody.home", NULL, NULL, NULL);
  ck_assert(sluice_worker_run_until_idle(worker, 60000, NULL, NULL));
  sluice_worker_stop(worker);
  ck_assert_uint_eq(trace_broker_get_calls(broker, "enqueue"), 1);
  ck_assert_uint_ge(trace_broker_get_calls(broker, "fetch"), 1);
  /* The unknown task was deferred: one settle carried it to the schedule. */
  ck_assert_uint_ge(trace_broker_get_calls(broker, "settle"), 1);
  ck_assert_uint_ge(trace_broker_get_calls(broker, "promote_due"), 1);
}
END_TEST

int
main(void)
{
  Suite *suite = sluice_conformance_suite(&trace_factory);
  TCase *own = tcase_create("trace");
  SRunner *runner;
  int failed;

  sluice_conformance_capture_logs();
  tcase_set_timeout(own, 120); /* never Check's 4 s default: a busy machine */
  tcase_add_test(own, trace_sees_every_operation_of_a_round_trip);
  suite_add_tcase(suite, own);
  runner = srunner_create(suite);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

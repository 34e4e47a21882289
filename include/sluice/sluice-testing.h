/* sluice-testing.h - helpers to unit-test task code without sleeping.
 *
 * A harness bundles a fake clock, a broker (the memory broker unless you
 * bring one), a client and a worker, so a test reads like a story:
 *
 *     g_autoptr(SluiceTestHarness) h =
 *         sluice_test_harness_new (registry, NULL, &error);
 *     g_autofree gchar *id = sluice_client_enqueue (
 *         sluice_test_harness_get_client (h), "mail.send", args, NULL, &error);
 *     sluice_test_harness_run_until_idle (h, &error);   // attempt 1 fails
 *     sluice_test_harness_advance (h, 1500);            // the backoff passes
 *     sluice_test_harness_run_until_idle (h, &error);   // attempt 2 succeeds
 *     g_autoptr(SluiceResult) r = sluice_test_harness_get_record (h, id);
 *     g_assert_cmpint (sluice_result_get_state (r), ==,
 *                      SLUICE_STATE_SUCCEEDED);
 *
 * Unless the worker options say otherwise the harness turns jitter off and
 * track_state on, so backoffs are exact and every state is visible.
 */
#pragma once

#include <sluice/sluice-brokers.h>
#include <sluice/sluice-client.h>
#include <sluice/sluice-clock.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-result.h>
#include <sluice/sluice-task.h>
#include <sluice/sluice-worker.h>

G_BEGIN_DECLS

/* The fake clock of a harness starts here: 2030-01-01T00:00:00Z. */
#define SLUICE_TEST_EPOCH_MS G_GINT64_CONSTANT(1893456000000)

typedef struct _SluiceTestHarness SluiceTestHarness;

/**
 * sluice_test_harness_new:
 * @registry: (transfer none): the tasks under test
 * @options: (nullable): worker options; NULL = defaults with jitter off
 *   and track_state on
 * Returns: (transfer full): a harness over a new memory broker with a fake
 * clock at SLUICE_TEST_EPOCH_MS, or NULL and @error when @options are
 * invalid. The worker is not started until the first run_until_idle.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceTestHarness *sluice_test_harness_new(SluiceRegistry *registry,
                                           const SluiceWorkerOptions *options,
                                           GError **error);

/**
 * sluice_test_harness_new_with_broker:
 * @broker: (transfer none): any broker; its clock is the harness's clock
 * As sluice_test_harness_new(); NULL and @error if the worker cannot be made.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceTestHarness *sluice_test_harness_new_with_broker(
    SluiceBroker *broker, SluiceRegistry *registry,
    const SluiceWorkerOptions *options, GError **error);

/** sluice_test_harness_free: stops the worker and frees all. NULL-safe. */
SLUICE_AVAILABLE_IN_0_1
void sluice_test_harness_free(SluiceTestHarness *harness);

/* Getters: (transfer none), valid while the harness is. */
SLUICE_AVAILABLE_IN_0_1
SluiceBroker *sluice_test_harness_get_broker(SluiceTestHarness *harness);
SLUICE_AVAILABLE_IN_0_1
SluiceClient *sluice_test_harness_get_client(SluiceTestHarness *harness);
SLUICE_AVAILABLE_IN_0_1
SluiceWorker *sluice_test_harness_get_worker(SluiceTestHarness *harness);

/** sluice_test_harness_advance: moves the fake clock by @ms. */
SLUICE_AVAILABLE_IN_0_1
void sluice_test_harness_advance(SluiceTestHarness *harness, gint64 ms);

/**
 * sluice_test_harness_run_until_idle:
 * sluice_worker_run_until_idle() with a 60 s real-time safety limit.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_test_harness_run_until_idle(SluiceTestHarness *harness,
                                            GError **error);

/**
 * sluice_test_harness_get_record:
 * Returns: (transfer full) (nullable): the task's record, any state.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceResult *sluice_test_harness_get_record(SluiceTestHarness *harness,
                                             const gchar *id);

/**
 * sluice_test_harness_get_state:
 * Returns: the state of the task's record; SLUICE_STATE_UNKNOWN if none.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceTaskState sluice_test_harness_get_state(SluiceTestHarness *harness,
                                              const gchar *id);

/**
 * sluice_test_harness_dead_letters:
 * Returns: (transfer full) (element-type SluiceDeadLetter): every entry of
 * the dead-letter queue, oldest first.
 */
SLUICE_AVAILABLE_IN_0_1
GPtrArray *sluice_test_harness_dead_letters(SluiceTestHarness *harness);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceTestHarness, sluice_test_harness_free)

G_END_DECLS

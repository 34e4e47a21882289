/* harness.c - the test harness of sluice-testing.h.
 *
 * Nothing here is special-cased for tests: a harness is the ordinary client
 * and worker over a broker whose clock is fake, so a unit test of task code
 * exercises exactly the code that runs in production.
 */
#include "config.h"

#include <sluice/sluice.h>
#include <sluice/sluice-testing.h>

#define HARNESS_IDLE_TIMEOUT_MS 60000

struct _SluiceTestHarness {
  SluiceClock *clock;
  SluiceBroker *broker;
  SluiceClient *client;
  SluiceWorker *worker;
};

SluiceTestHarness *
sluice_test_harness_new_with_broker(SluiceBroker *broker,
                                    SluiceRegistry *registry,
                                    const SluiceWorkerOptions *options,
                                    GError **error)
{
  SluiceTestHarness *harness;
  SluiceWorkerOptions defaults;
  SluiceClientOptions client_options;

  g_return_val_if_fail(broker != NULL, NULL);
  g_return_val_if_fail(registry != NULL, NULL);

  if (options == NULL) {
    sluice_worker_options_init(&defaults);
    defaults.retry.jitter = SLUICE_OFF;
    defaults.track_state = TRUE;
    options = &defaults;
  }
  harness = g_new0(SluiceTestHarness, 1);
  harness->broker = sluice_broker_ref(broker);
  harness->clock = sluice_clock_ref(sluice_broker_get_clock(broker));
  sluice_client_options_init(&client_options);
  client_options.track_state = options->track_state;
  client_options.registry = registry;
  /* One program: its client seals with the keyring its worker opens with. */
  client_options.keyring = options->keyring;
  harness->client = sluice_client_new(broker, &client_options, error);
  if (harness->client != NULL)
    harness->worker = sluice_worker_new(broker, registry, options, error);
  if (harness->worker == NULL) {
    sluice_test_harness_free(harness);
    return NULL;
  }
  return harness;
}

SluiceTestHarness *
sluice_test_harness_new(SluiceRegistry *registry,
                        const SluiceWorkerOptions *options, GError **error)
{
  g_autoptr(SluiceClock) clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, clock);

  g_return_val_if_fail(registry != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  return sluice_test_harness_new_with_broker(broker, registry, options, error);
}

void
sluice_test_harness_free(SluiceTestHarness *harness)
{
  if (harness == NULL)
    return;
  if (harness->worker != NULL)
    sluice_worker_stop(harness->worker);
  g_clear_pointer(&harness->worker, sluice_worker_unref);
  g_clear_pointer(&harness->client, sluice_client_unref);
  g_clear_pointer(&harness->broker, sluice_broker_unref);
  g_clear_pointer(&harness->clock, sluice_clock_unref);
  g_free(harness);
}

SluiceBroker *
sluice_test_harness_get_broker(SluiceTestHarness *harness)
{
  g_return_val_if_fail(harness != NULL, NULL);
  return harness->broker;
}

SluiceClient *
sluice_test_harness_get_client(SluiceTestHarness *harness)
{
  g_return_val_if_fail(harness != NULL, NULL);
  return harness->client;
}

SluiceWorker *
sluice_test_harness_get_worker(SluiceTestHarness *harness)
{
  g_return_val_if_fail(harness != NULL, NULL);
  return harness->worker;
}

void
sluice_test_harness_advance(SluiceTestHarness *harness, gint64 ms)
{
  g_return_if_fail(harness != NULL);
  sluice_clock_advance(harness->clock, ms);
}

gboolean
sluice_test_harness_run_until_idle(SluiceTestHarness *harness, GError **error)
{
  g_return_val_if_fail(harness != NULL, FALSE);
  return sluice_worker_run_until_idle(harness->worker, HARNESS_IDLE_TIMEOUT_MS,
                                      NULL, error);
}

SluiceResult *
sluice_test_harness_get_record(SluiceTestHarness *harness, const gchar *id)
{
  g_autoptr(GError) error = NULL;
  SluiceResult *result;

  g_return_val_if_fail(harness != NULL && id != NULL, NULL);
  result = sluice_client_inspect(harness->client, id, &error);
  if (result == NULL && !g_error_matches(error, SLUICE_CLIENT_ERROR,
                                         SLUICE_CLIENT_ERROR_NOT_FOUND))
    g_warning("sluice_test_harness_get_record(%s): %s", id, error->message);
  return result;
}

SluiceTaskState
sluice_test_harness_get_state(SluiceTestHarness *harness, const gchar *id)
{
  g_autoptr(SluiceResult) result = sluice_test_harness_get_record(harness, id);

  return result != NULL ? sluice_result_get_state(result)
                        : SLUICE_STATE_UNKNOWN;
}

GPtrArray *
sluice_test_harness_dead_letters(SluiceTestHarness *harness)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *all;

  g_return_val_if_fail(harness != NULL, NULL);
  all = sluice_client_dlq_list(harness->client, NULL, G_MAXUINT, NULL, NULL,
                               &error);
  if (all == NULL) {
    g_warning("sluice_test_harness_dead_letters: %s", error->message);
    all =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  }
  return all;
}

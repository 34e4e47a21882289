/* test-mail-task-gtest.c - the same task as test-mail-task.c, unit-tested
 * with GLib's own test framework instead of Check.
 *
 * g_test_init() makes every warning and critical fatal, so these tests
 * also check that the library logs what it expects to happen (a retry, a
 * dead letter, a revocation, a full dead-letter queue) below warning
 * level: a test of a task that fails on purpose must not abort. Run with
 * `make check`, or alone with `-p /mail/bad-address` and friends.
 */
#include "mail-task.h"

/* A mail service that refuses the first `refusals` sends. */
typedef struct {
  MailTransport parent;
  guint refusals;
  guint sent;
} FakeTransport;

static gboolean
fake_send(MailTransport *self, const gchar *message_id, const gchar *to,
          const gchar *subject, GError **error)
{
  FakeTransport *fake = (FakeTransport *)self;

  if (fake->refusals > 0) {
    fake->refusals--;
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED,
                "mail service refused the connection");
    return FALSE;
  }
  fake->sent++;
  return TRUE;
}

static SluiceRegistry *
registry_with(FakeTransport *transport)
{
  SluiceRegistry *registry = sluice_registry_new();
  g_autoptr(GError) error = NULL;

  transport->parent.send = fake_send;
  sluice_registry_add(registry, "mail.send_welcome", mail_send_welcome,
                      transport, NULL, NULL, &error);
  g_assert_no_error(error);
  return registry;
}

static SluiceTestHarness *
harness_with(FakeTransport *transport)
{
  g_autoptr(SluiceRegistry) registry = registry_with(transport);
  g_autoptr(GError) error = NULL;
  SluiceTestHarness *h = sluice_test_harness_new(registry, NULL, &error);

  g_assert_no_error(error);
  return h;
}

static gchar *
enqueue_welcome(SluiceTestHarness *h, const gchar *to_json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = sluice_args_from_json(to_json, -1, &error);
  gchar *id = NULL;

  g_assert_no_error(error);
  id = sluice_client_enqueue(sluice_test_harness_get_client(h),
                             "mail.send_welcome", args, NULL, &error);
  g_assert_no_error(error);
  return id;
}

static void
run_until_idle(SluiceTestHarness *h)
{
  g_autoptr(GError) error = NULL;

  g_assert_true(sluice_test_harness_run_until_idle(h, &error));
  g_assert_no_error(error);
}

static void
test_refused_connection_is_retried_then_sent(void)
{
  FakeTransport transport = {.refusals = 2};
  g_autoptr(SluiceTestHarness) h = harness_with(&transport);
  g_autofree gchar *id = enqueue_welcome(h, "{\"to\": \"ada@example.org\"}");
  g_autoptr(SluiceResult) result = NULL;

  run_until_idle(h);
  g_assert_cmpint(sluice_test_harness_get_state(h, id), ==,
                  SLUICE_STATE_RETRYING);
  /* Default backoff: 1.5 s after the first failure, 3 s after the second. */
  sluice_test_harness_advance(h, 1500);
  run_until_idle(h);
  g_assert_cmpuint(transport.sent, ==, 0);
  sluice_test_harness_advance(h, 3000);
  run_until_idle(h);

  g_assert_cmpuint(transport.sent, ==, 1);
  result = sluice_test_harness_get_record(h, id);
  g_assert_cmpint(sluice_result_get_state(result), ==, SLUICE_STATE_SUCCEEDED);
  g_assert_cmpuint(sluice_result_get_attempt(result), ==, 3);
}

/* The task calls sluice_task_context_fail(): a dead letter at once. */
static void
test_bad_address_is_dead_lettered_at_once(void)
{
  FakeTransport transport = {0};
  g_autoptr(SluiceTestHarness) h = harness_with(&transport);
  g_autofree gchar *id = enqueue_welcome(h, "{\"to\": \"not-an-address\"}");
  g_autoptr(GPtrArray) dead = NULL;
  SluiceDeadLetter *entry;

  run_until_idle(h);
  dead = sluice_test_harness_dead_letters(h);
  g_assert_cmpuint(dead->len, ==, 1);
  entry = dead->pdata[0];
  g_assert_cmpstr(entry->task_id, ==, id);
  g_assert_cmpstr(entry->reason, ==, SLUICE_DLQ_NON_RETRYABLE);
  g_assert_cmpstr(entry->detail, ==, "not a mail address: not-an-address");
  g_assert_cmpint(sluice_test_harness_get_state(h, id), ==,
                  SLUICE_STATE_DEAD_LETTERED);
  g_assert_cmpuint(transport.sent, ==, 0);
}

static void
test_a_service_that_stays_down_exhausts_the_attempts(void)
{
  FakeTransport transport = {.refusals = 100};
  g_autoptr(SluiceTestHarness) h = harness_with(&transport);
  g_autofree gchar *id = enqueue_welcome(h, "{\"to\": \"bob@example.org\"}");
  g_autoptr(GPtrArray) dead = NULL;

  for (guint i = 0; i < 3; i++) {
    run_until_idle(h);
    sluice_test_harness_advance(h, 60 * 1000);
  }
  dead = sluice_test_harness_dead_letters(h);
  g_assert_cmpuint(dead->len, ==, 1);
  g_assert_cmpstr(((SluiceDeadLetter *)dead->pdata[0])->reason, ==,
                  SLUICE_DLQ_MAX_ATTEMPTS);
  g_assert_cmpint(sluice_test_harness_get_state(h, id), ==,
                  SLUICE_STATE_DEAD_LETTERED);
}

/* A task cancelled while it waits in its queue never runs. */
static void
test_a_cancelled_mail_is_not_sent(void)
{
  FakeTransport transport = {0};
  g_autoptr(SluiceTestHarness) h = harness_with(&transport);
  g_autofree gchar *id = enqueue_welcome(h, "{\"to\": \"eve@example.org\"}");
  g_autoptr(GError) error = NULL;

  g_assert_cmpint(
      sluice_client_cancel(sluice_test_harness_get_client(h), id, &error), ==,
      SLUICE_CANCEL_REVOKED);
  g_assert_no_error(error);
  run_until_idle(h);
  g_assert_cmpint(sluice_test_harness_get_state(h, id), ==,
                  SLUICE_STATE_CANCELLED);
  g_assert_cmpuint(transport.sent, ==, 0);
}

/* A full dead-letter queue drops its oldest entry, as configured. */
static void
test_a_full_dead_letter_queue_keeps_the_newest(void)
{
  FakeTransport transport = {0};
  g_autoptr(SluiceRegistry) registry = registry_with(&transport);
  g_autoptr(SluiceClock) clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  SluiceMemoryBrokerOptions options = {.dead_letter_max = 1};
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(&options, clock);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestHarness) h =
      sluice_test_harness_new_with_broker(broker, registry, NULL, &error);
  g_autofree gchar *first = NULL;
  g_autofree gchar *second = NULL;
  g_autoptr(GPtrArray) dead = NULL;

  g_assert_no_error(error);
  first = enqueue_welcome(h, "{\"to\": \"first\"}");
  run_until_idle(h);
  second = enqueue_welcome(h, "{\"to\": \"second\"}");
  run_until_idle(h);
  dead = sluice_test_harness_dead_letters(h);
  g_assert_cmpuint(dead->len, ==, 1);
  g_assert_cmpstr(((SluiceDeadLetter *)dead->pdata[0])->task_id, ==, second);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/mail/refused-connection-is-retried-then-sent",
                  test_refused_connection_is_retried_then_sent);
  g_test_add_func("/mail/bad-address-is-dead-lettered-at-once",
                  test_bad_address_is_dead_lettered_at_once);
  g_test_add_func("/mail/a-service-that-stays-down-exhausts-the-attempts",
                  test_a_service_that_stays_down_exhausts_the_attempts);
  g_test_add_func("/mail/a-cancelled-mail-is-not-sent",
                  test_a_cancelled_mail_is_not_sent);
  g_test_add_func("/mail/a-full-dead-letter-queue-keeps-the-newest",
                  test_a_full_dead_letter_queue_keeps_the_newest);
  return g_test_run();
}

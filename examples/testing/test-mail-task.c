/* test-mail-task.c - unit tests of a task function, with no server and no
 * sleeping.
 *
 * The harness runs the real worker on the memory broker with a fake clock:
 * a retry's backoff passes when the test advances the clock, not when real
 * time does. Run with `make check`.
 */
#include <check.h>

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

static SluiceTestHarness *
harness_with(FakeTransport *transport)
{
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(GError) error = NULL;
  SluiceTestHarness *h;

  transport->parent.send = fake_send;
  ck_assert(sluice_registry_add(registry, "mail.send_welcome",
                                mail_send_welcome, transport, NULL, NULL,
                                &error));
  h = sluice_test_harness_new(registry, NULL, &error);
  ck_assert_msg(h != NULL, "%s", error != NULL ? error->message : "");
  return h;
}

static gchar *
enqueue_welcome(SluiceTestHarness *h, const gchar *to_json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = sluice_args_from_json(to_json, -1, &error);
  gchar *id = sluice_client_enqueue(sluice_test_harness_get_client(h),
                                    "mail.send_welcome", args, NULL, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  return id;
}

START_TEST(refused_connection_is_retried_then_sent)
{
  FakeTransport transport = {.refusals = 2};
  g_autoptr(SluiceTestHarness) h = harness_with(&transport);
  g_autofree gchar *id = enqueue_welcome(h, "{\"to\": \"ada@example.org\"}");
  g_autoptr(SluiceResult) result = NULL;

  ck_assert(sluice_test_harness_run_until_idle(h, NULL));
  ck_assert_int_eq(sluice_test_harness_get_state(h, id), SLUICE_STATE_RETRYING);

  /* Default backoff: 1.5 s after the first failure, 3 s after the second. */
  sluice_test_harness_advance(h, 1500);
  ck_assert(sluice_test_harness_run_until_idle(h, NULL));
  ck_assert_uint_eq(transport.sent, 0);
  sluice_test_harness_advance(h, 3000);
  ck_assert(sluice_test_harness_run_until_idle(h, NULL));

  ck_assert_uint_eq(transport.sent, 1);
  result = sluice_test_harness_get_record(h, id);
  ck_assert_int_eq(sluice_result_get_state(result), SLUICE_STATE_SUCCEEDED);
  ck_assert_uint_eq(sluice_result_get_attempt(result), 3);
}
END_TEST

START_TEST(bad_address_goes_to_the_dead_letter_queue_at_once)
{
  FakeTransport transport = {0};
  g_autoptr(SluiceTestHarness) h = harness_with(&transport);
  g_autofree gchar *id = enqueue_welcome(h, "{\"to\": \"not-an-address\"}");
  g_autoptr(GPtrArray) dead = NULL;
  SluiceDeadLetter *entry;

  ck_assert(sluice_test_harness_run_until_idle(h, NULL));
  dead = sluice_test_harness_dead_letters(h);
  ck_assert_uint_eq(dead->len, 1);
  entry = dead->pdata[0];
  ck_assert_str_eq(entry->task_id, id);
  ck_assert_str_eq(entry->reason, SLUICE_DLQ_NON_RETRYABLE);
  ck_assert_str_eq(entry->detail, "not a mail address: not-an-address");
  ck_assert_uint_eq(transport.sent, 0);
}
END_TEST

START_TEST(a_service_that_stays_down_exhausts_the_attempts)
{
  FakeTransport transport = {.refusals = 100};
  g_autoptr(SluiceTestHarness) h = harness_with(&transport);
  g_autofree gchar *id = enqueue_welcome(h, "{\"to\": \"bob@example.org\"}");
  g_autoptr(GPtrArray) dead = NULL;

  for (guint i = 0; i < 3; i++) {
    ck_assert(sluice_test_harness_run_until_idle(h, NULL));
    sluice_test_harness_advance(h, 60 * 1000);
  }
  dead = sluice_test_harness_dead_letters(h);
  ck_assert_uint_eq(dead->len, 1);
  ck_assert_str_eq(((SluiceDeadLetter *)dead->pdata[0])->reason,
                   SLUICE_DLQ_MAX_ATTEMPTS);
  ck_assert_int_eq(sluice_test_harness_get_state(h, id),
                   SLUICE_STATE_DEAD_LETTERED);
}
END_TEST

int
main(void)
{
  Suite *suite = suite_create("mail-task");
  TCase *tc = tcase_create("mail.send_welcome");
  SRunner *runner;
  int failed;

  /* Generous, so a busy machine cannot fail it (Check's default is 4 s). */
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, refused_connection_is_retried_then_sent);
  tcase_add_test(tc, bad_address_goes_to_the_dead_letter_queue_at_once);
  tcase_add_test(tc, a_service_that_stays_down_exhausts_the_attempts);
  suite_add_tcase(suite, tc);
  runner = srunner_create(suite);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

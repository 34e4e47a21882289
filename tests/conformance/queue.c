/* queue.c - producing and consuming: priority across queues, delayed
 * tasks, idempotent and batch enqueues, oversized messages.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- The rest of the contract: queues, delays, idempotency, periodic ----- */

START_TEST(queues_are_served_in_priority_order)
{
  SluiceWorkerOptions o;
  SluiceEnqueueOptions low, high;
  static const gchar *const queues[] = {"high", "low", NULL};
  Env *e;
  g_autofree gchar *a = NULL, *b = NULL, *c = NULL;

  default_options(&o);
  o.queues = queues;
  o.concurrency = 1;
  o.prefetch = 0;
  e = env_new_full(100, &o);
  sluice_enqueue_options_init(&low);
  low.queue = "low";
  sluice_enqueue_options_init(&high);
  high.queue = "high";
  a = enqueue(e, "t.ok", NULL, &low);
  b = enqueue(e, "t.ok", NULL, &low);
  c = enqueue(e, "t.ok", NULL, &high);
  run_idle(e);
  ck_assert_uint_eq(rec.order->len, 3);
  if (ordered(e->broker)) {
    ck_assert_str_eq(rec.order->pdata[0], c);
    ck_assert_str_eq(rec.order->pdata[1], a);
    ck_assert_str_eq(rec.order->pdata[2], b);
  } else {
    /* Every one ran, once. */
    ck_assert_int_ge(index_of_id(rec.order, a), 0);
    ck_assert_int_ge(index_of_id(rec.order, b), 0);
    ck_assert_int_ge(index_of_id(rec.order, c), 0);
  }
  env_free(e);
}
END_TEST

START_TEST(delayed_task_runs_only_when_due)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autofree gchar *id = NULL;

  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 10000;
  id = enqueue(e, "t.ok", NULL, &eo);
  run_idle(e);
  expect_next_attempt_after(e, id, 10000);
  env_free(e);
}
END_TEST

START_TEST(enqueue_with_an_id_is_idempotent)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  gboolean existed = TRUE;
  g_autofree gchar *first = NULL, *second = NULL;

  sluice_enqueue_options_init(&eo);
  eo.id = "order-42";
  first = sluice_client_enqueue_full(e->client, "t.ok", NULL, &eo, &existed,
                                     &error);
  ck_assert_str_eq(first, "order-42");
  ck_assert(!existed);
  second = sluice_client_enqueue_full(e->client, "t.ok", NULL, &eo, &existed,
                                      &error);
  ck_assert_str_eq(second, "order-42");
  ck_assert(existed);
  run_idle(e);
  ck_assert_uint_eq(runs_of("order-42"), 1);
  env_free(e);
}
END_TEST

START_TEST(batch_enqueue_is_all_or_nothing)
{
  Env *e = env_new();
  SluiceEnqueueRequest requests[50];
  g_autoptr(GPtrArray) ids = NULL;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS(requests); i++)
    requests[i] = (SluiceEnqueueRequest){.task = "t.ok"};
  ids = sluice_client_enqueue_batch(e->client, requests, G_N_ELEMENTS(requests),
                                    &error);
  ck_assert_uint_eq(ids->len, G_N_ELEMENTS(requests));

  requests[7].task = "bad name";
  ck_assert_ptr_null(sluice_client_enqueue_batch(
      e->client, requests, G_N_ELEMENTS(requests), &error));
  ck_assert(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID));
  ck_assert_ptr_nonnull(strstr(error->message, "request 7"));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), G_N_ELEMENTS(requests));
  env_free(e);
}
END_TEST

START_TEST(oversized_message_is_refused_and_nothing_is_enqueued)
{
  Env *e = env_new();
  g_autofree gchar *big = g_strnfill(SLUICE_DEFAULT_MAX_MESSAGE_BYTES, 'a');
  g_autofree gchar *json = g_strdup_printf("\"%s\"", big);
  g_autoptr(GBytes) args = sluice_args_from_json(json, -1, NULL);
  g_autoptr(GError) error = NULL;
  gchar *id;

  id = sluice_client_enqueue(e->client, "t.ok", args, NULL, &error);
  ck_assert_ptr_null(id);
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_TOO_LARGE));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 0);
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_queue(TCase *semantics)
{
  sluice_conformance__add(semantics, queues_are_served_in_priority_order, 0);
  sluice_conformance__add(semantics, delayed_task_runs_only_when_due, 0);
  sluice_conformance__add(semantics, enqueue_with_an_id_is_idempotent, 0);
  sluice_conformance__add(semantics, batch_enqueue_is_all_or_nothing, 0);
  sluice_conformance__add(
      semantics, oversized_message_is_refused_and_nothing_is_enqueued, 0);
}

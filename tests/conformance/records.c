/* records.c - task states and result records: with and without
 * track_state, inspect, record TTLs, get_result (woken by the
 * notification, timing out, cancelled).
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- 10. states ---------------------------------------------------------- */

START_TEST(states_with_track_state)
{
  SluiceEnqueueOptions delayed, once;
  SluiceTaskOptions no_dlq;
  Env *e = env_new();
  g_autofree gchar *gate = NULL, *later = NULL, *flaky = NULL, *failed = NULL,
                   *fatal = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GPtrArray) all = NULL;

  sluice_task_options_init(&no_dlq);
  no_dlq.dead_letter = SLUICE_OFF;
  add_task(e, "t.fail_no_dlq", task_fail, &no_dlq);

  gate = enqueue(e, "t.gate", "[1, 2]", NULL);
  ck_assert_state(e, gate, SLUICE_STATE_QUEUED);
  sluice_enqueue_options_init(&delayed);
  delayed.delay_ms = 10000;
  later = enqueue(e, "t.ok", NULL, &delayed);
  ck_assert_state(e, later, SLUICE_STATE_SCHEDULED);

  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(1), 30000));
  ck_assert_state_soon(e, gate, SLUICE_STATE_RUNNING);
  open_gate();
  run_idle(e);
  r = sluice_test_harness_get_record(e->h, gate);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  {
    g_autofree gchar *json =
        sluice_args_to_json(sluice_result_get_value(r), &error);
    ck_assert_str_eq(json, "[1,2]");
  }
  ck_assert_int_gt(sluice_result_get_finished_at(r), 0);

  flaky = enqueue(e, "t.flaky", "{\"fail_times\": 1}", NULL);
  run_idle(e);
  ck_assert_state(e, flaky, SLUICE_STATE_RETRYING);
  sluice_test_harness_advance(e->h, 1500);
  run_idle(e);
  ck_assert_state(e, flaky, SLUICE_STATE_SUCCEEDED);

  sluice_enqueue_options_init(&once);
  once.options.retry.max_attempts = 1;
  failed = enqueue(e, "t.fail_no_dlq", NULL, &once);
  fatal = enqueue(e, "t.fatal", NULL, NULL);
  run_idle(e);
  ck_assert_state(e, failed, SLUICE_STATE_FAILED);
  ck_assert_state(e, fatal, SLUICE_STATE_DEAD_LETTERED);
  all = dead_letters(e);
  ck_assert_uint_eq(all->len, 1); /* the fatal one; the failed one is not */

  ck_assert_int_eq(sluice_client_cancel(e->client, later, &error),
                   SLUICE_CANCEL_REMOVED);
  ck_assert_state(e, later, SLUICE_STATE_CANCELLED);
  env_free(e);
}
END_TEST

/* The `running` records go to the broker in batches, beside the
 * settlements: each still lands before its task's final record, so a
 * final record is never overwritten. */
START_TEST(running_records_never_replace_final_ones)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  SluiceRecordWrite w[2];
  g_autoptr(GBytes) r1 = NULL;
  g_autoptr(GBytes) r2 = NULL;
  g_autoptr(SluiceResult) running =
      sluice_result_new("w-1", SLUICE_STATE_RUNNING);
  g_autoptr(SluiceResult) back = NULL;
  GBytes *raw = NULL;

  default_options(&o);
  o.concurrency = 4;
  o.prefetch = 64;
  e = env_new_full(100, &o);
  for (guint i = 0; i < 300; i++)
    g_ptr_array_add(ids, enqueue(e, "t.ok", NULL, NULL));
  run_idle(e);
  for (guint i = 0; i < ids->len; i++)
    ck_assert_state(e, (const gchar *)ids->pdata[i], SLUICE_STATE_SUCCEEDED);

  /* The slot itself (or the core's fallback through put_record). */
  r1 = sluice_result_encode(running);
  r2 = sluice_result_encode(running);
  w[0] = (SluiceRecordWrite){"w-1", r1, 60000};
  w[1] = (SluiceRecordWrite){"w-2", r2, 60000};
  ck_assert_msg(sluice_broker_put_records(e->broker, w, 2, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_broker_get_record(e->broker, "w-2", &raw, &error));
  ck_assert_ptr_nonnull(raw);
  back = sluice_result_decode(raw, &error);
  g_bytes_unref(raw);
  ck_assert_ptr_nonnull(back);
  ck_assert_int_eq(sluice_result_get_state(back), SLUICE_STATE_RUNNING);
  env_free(e);
}
END_TEST

START_TEST(states_without_track_state)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) missing = NULL;

  default_options(&o);
  o.track_state = FALSE;
  e = env_new_full(100, &o);
  id = enqueue(e, "t.flaky", "{\"fail_times\": 1}", NULL);
  missing = sluice_client_inspect(e->client, id, &error);
  ck_assert_ptr_null(missing);
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_NOT_FOUND));
  run_idle(e);
  /* A retry writes no record without track_state, but the task waits on
   * the schedule, where inspect finds it. */
  {
    g_autoptr(SluiceResult) r = sluice_client_inspect(e->client, id, &error);
    ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_RETRYING);
    ck_assert_uint_eq(sluice_result_get_attempt(r), 2);
    ck_assert_str_eq(sluice_result_get_task(r), "t.flaky");
    ck_assert_int_eq(sluice_result_get_due_at(r), e->t0 + 1500);
    ck_assert_ptr_nonnull(strstr(sluice_result_get_error(r), "attempt 1"));
  }
  sluice_test_harness_advance(e->h, 1500);
  run_idle(e);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

/* Without track_state, a delayed task, a deferred one (its name unknown)
 * and a buried one without a result record are still found by inspect:
 * the schedule and the dead letters are looked up by id. */
START_TEST(inspect_finds_scheduled_deferred_and_dead_without_records)
{
  SluiceWorkerOptions o;
  SluiceEnqueueOptions delayed, quiet;
  Env *e;
  g_autoptr(SluiceClient) plain = NULL;
  g_autofree gchar *later = NULL;
  g_autofree gchar *unknown = NULL;
  g_autofree gchar *buried = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) r1 = NULL;
  g_autoptr(SluiceResult) r2 = NULL;
  g_autoptr(SluiceResult) r3 = NULL;

  default_options(&o);
  o.track_state = FALSE;
  e = env_new_full(100, &o);
  plain = sluice_client_new(e->broker, NULL, &error);
  sluice_enqueue_options_init(&delayed);
  delayed.delay_ms = 60000;
  later = sluice_client_enqueue(plain, "t.ok", NULL, &delayed, &error);
  unknown = sluice_client_enqueue(plain, "t.nobody_knows", NULL, NULL, &error);
  sluice_enqueue_options_init(&quiet);
  quiet.options.store_result = SLUICE_OFF;
  buried = sluice_client_enqueue(plain, "t.fatal", NULL, &quiet, &error);
  ck_assert_msg(later && unknown && buried, "%s", error ? error->message : "");
  run_idle(e);

  r1 = sluice_client_inspect(plain, later, &error);
  ck_assert_msg(r1 != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_result_get_state(r1), SLUICE_STATE_SCHEDULED);
  ck_assert_int_eq(sluice_result_get_due_at(r1), e->t0 + 60000);
  ck_assert_str_eq(sluice_result_get_task(r1), "t.ok");

  r2 = sluice_client_inspect(plain, unknown, &error);
  ck_assert_msg(r2 != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_result_get_state(r2), SLUICE_STATE_SCHEDULED);
  ck_assert_ptr_nonnull(sluice_result_get_error(r2));
  ck_assert_ptr_nonnull(strstr(sluice_result_get_error(r2),
                               "no worker knows a task named "
                               "“t.nobody_knows”"));

  r3 = sluice_client_inspect(plain, buried, &error);
  ck_assert_msg(r3 != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_result_get_state(r3), SLUICE_STATE_DEAD_LETTERED);
  ck_assert_str_eq(sluice_result_get_dead_letter_reason(r3),
                   SLUICE_DLQ_NON_RETRYABLE);
  env_free(e);
}
END_TEST

START_TEST(result_record_expires_after_its_ttl)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autofree gchar *id = NULL;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_CLOCK_TTL)) {
    env_free(e);
    return; /* TTLs follow the store's own time; its tests cover expiry */
  }
  sluice_enqueue_options_init(&eo);
  eo.options.result_ttl_ms = 5000;
  id = enqueue(e, "t.ok", NULL, &eo);
  run_idle(e);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  sluice_test_harness_advance(e->h, 4999);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  sluice_test_harness_advance(e->h, 1);
  ck_assert_state(e, id, SLUICE_STATE_UNKNOWN);
  env_free(e);
}
END_TEST

/* ---- 11. get_result ------------------------------------------------------ */

typedef struct {
  SluiceClient *client;
  const gchar *id;
  SluiceResult *result;
  GError *error;
} Waiter;

static gpointer
waiter_main(gpointer data)
{
  Waiter *w = data;
  w->result =
      sluice_client_get_result(w->client, w->id, 3600 * 1000, NULL, &w->error);
  return NULL;
}

START_TEST(get_result_wakes_on_completion_not_on_a_poll)
{
  SluiceClientOptions co;
  Env *e = env_new();
  g_autofree gchar *id = NULL;
  g_autoptr(GError) error = NULL;
  Waiter w = {0};
  GThread *thread;

  /* The safety-net poll is set to an hour, longer than the scenario's own
   * time limit: if get_result returns, the notification woke it. */
  sluice_client_options_init(&co);
  co.result_poll_interval_ms = 3600 * 1000;
  w.client = sluice_client_new(e->broker, &co, &error);
  id = enqueue(e, "t.gate", "\"done\"", NULL);
  w.id = id;
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(1), 30000));
  thread = g_thread_new("waiter", waiter_main, &w);
  g_usleep(100000); /* let the waiter block first; not a timing assertion */
  open_gate();
  g_thread_join(thread);
  ck_assert_msg(w.result != NULL, "%s",
                w.error != NULL ? w.error->message : "");
  ck_assert_int_eq(sluice_result_get_state(w.result), SLUICE_STATE_SUCCEEDED);
  sluice_result_unref(w.result);
  sluice_client_unref(w.client);
  env_free(e);
}
END_TEST

START_TEST(get_result_times_out_with_a_distinct_error)
{
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.ok", NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) r = NULL;

  /* No worker runs: the record stays `queued`. */
  r = sluice_client_get_result(e->client, id, 100, NULL, &error);
  ck_assert_ptr_null(r);
  ck_assert(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_TIMEOUT));
  ck_assert_ptr_nonnull(strstr(error->message, id));
  ck_assert_ptr_nonnull(strstr(error->message, "queued"));
  env_free(e);
}
END_TEST

static gpointer
cancel_soon(gpointer cancellable)
{
  g_usleep(100000);
  g_cancellable_cancel(cancellable);
  return NULL;
}

/* get_result and run_until_idle stop waiting when their cancellable is
 * cancelled, from another thread or before they began. */
START_TEST(blocking_calls_stop_when_cancelled)
{
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.gate", NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GCancellable) waiting = g_cancellable_new();
  g_autoptr(GCancellable) idling = g_cancellable_new();
  g_autoptr(GCancellable) before = g_cancellable_new();
  g_autoptr(SluiceResult) r = NULL;
  GThread *t;

  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(1), 30000));

  t = g_thread_new("cancel", cancel_soon, waiting);
  r = sluice_client_get_result(e->client, id, -1, waiting, &error);
  g_thread_join(t);
  ck_assert_ptr_null(r);
  ck_assert(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
  g_clear_error(&error);

  /* The gate holds the task: only the cancellation ends this wait. */
  t = g_thread_new("cancel", cancel_soon, idling);
  ck_assert(!sluice_worker_run_until_idle(e->worker, -1, idling, &error));
  g_thread_join(t);
  ck_assert(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
  g_clear_error(&error);

  g_cancellable_cancel(before);
  ck_assert(!sluice_worker_run_until_idle(e->worker, -1, before, &error));
  ck_assert(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
  g_clear_error(&error);
  ck_assert_ptr_null(
      sluice_client_get_result(e->client, id, -1, before, &error));
  ck_assert(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));

  open_gate();
  run_idle(e);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_records(TCase *semantics)
{
  sluice_conformance__add(semantics, states_with_track_state, 0);
  sluice_conformance__add(semantics, running_records_never_replace_final_ones,
                          0);
  sluice_conformance__add(semantics, states_without_track_state, 0);
  sluice_conformance__add(
      semantics, inspect_finds_scheduled_deferred_and_dead_without_records, 0);
  sluice_conformance__add(
      semantics, result_record_expires_after_its_ttl,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_CLOCK_TTL));
  sluice_conformance__add(semantics,
                          get_result_wakes_on_completion_not_on_a_poll, 0);
  sluice_conformance__add(semantics, get_result_times_out_with_a_distinct_error,
                          0);
  sluice_conformance__add(semantics, blocking_calls_stop_when_cancelled, 0);
}

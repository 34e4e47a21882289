/* retry.c - attempts, backoff, the retry policy, fatal errors, exhausted
 * attempts, timeouts, and the producer's trace context across retries,
 * replays and deferrals.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

START_TEST(attempt_is_one_based_and_retry_keeps_id)
{
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.flaky", "{\"fail_times\": 1}", NULL);
  g_autoptr(SluiceResult) r = NULL;

  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 1);
  ck_assert_uint_eq(attempt_of(id, 0), 1 * 1000 + 0);
  ck_assert_state(e, id, SLUICE_STATE_RETRYING);

  sluice_test_harness_advance(e->h, 1500);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 2);
  ck_assert_uint_eq(attempt_of(id, 1), 2 * 1000 + 1);
  r = sluice_test_harness_get_record(e->h, id);
  ck_assert_ptr_nonnull(r);
  ck_assert_str_eq(sluice_result_get_id(r), id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  ck_assert_uint_eq(sluice_result_get_attempt(r), 2);
  env_free(e);
}
END_TEST

/* ---- 2. backoff ---------------------------------------------------------- */

START_TEST(backoff_sequence_without_jitter)
{
  static const gint64 expected[] = {1500, 3000, 6000, 12000, 24000, 30000};
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;

  default_options(&o);
  o.retry.max_attempts = 7;
  e = env_new_full(100, &o);
  id = enqueue(e, "t.fail", NULL, NULL);
  run_idle(e);
  for (gsize i = 0; i < G_N_ELEMENTS(expected); i++)
    expect_next_attempt_after(e, id, expected[i]);
  ck_assert_uint_eq(runs_of(id), 7);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_MAX_ATTEMPTS);
  env_free(e);
}
END_TEST

START_TEST(backoff_with_jitter_stays_within_bounds)
{
  static const gint64 nominal[] = {1500, 3000, 6000, 12000};
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *id = NULL;

  default_options(&o);
  o.retry.jitter = SLUICE_ON;
  o.retry.max_attempts = 5;
  e = env_new_full(100, &o);
  id = enqueue(e, "t.fail", NULL, NULL);
  run_idle(e);
  for (gsize i = 0; i < G_N_ELEMENTS(nominal); i++) {
    guint before = runs_of(id);
    /* Jitter draws from [d/2, d]: nothing before d/2, something by d. */
    sluice_test_harness_advance(e->h, nominal[i] / 2 - 1);
    run_idle(e);
    ck_assert_uint_eq(runs_of(id), before);
    sluice_test_harness_advance(e->h, nominal[i] - nominal[i] / 2 + 1);
    run_idle(e);
    ck_assert_uint_eq(runs_of(id), before + 1);
  }
  env_free(e);
}
END_TEST

START_TEST(policy_resolves_global_then_task_then_message)
{
  SluiceWorkerOptions o;
  SluiceTaskOptions task_options;
  SluiceEnqueueOptions eo;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;

  default_options(&o);
  o.retry.max_attempts = 5;          /* global */
  o.retry.initial_backoff_ms = 1000; /* global, overridden by the task */
  e = env_new_full(100, &o);
  sluice_task_options_init(&task_options);
  task_options.retry.initial_backoff_ms = 200;
  task_options.retry.multiplier = 3.0;
  add_task(e, "t.policy", task_fail, &task_options);
  sluice_enqueue_options_init(&eo);
  eo.options.retry.max_attempts = 3; /* message, over the global 5 */
  id = enqueue(e, "t.policy", NULL, &eo);

  run_idle(e);
  expect_next_attempt_after(e, id, 200); /* the task's backoff */
  expect_next_attempt_after(e, id, 600); /* the task's multiplier */
  ck_assert_uint_eq(runs_of(id), 3);     /* the message's max_attempts */
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_MAX_ATTEMPTS);
  env_free(e);
}
END_TEST

/* ---- 3. an explicit retry counts toward max_attempts --------------------- */

START_TEST(explicit_retry_counts_toward_max_attempts)
{
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.retry_in", "{\"delay\": 10000}", NULL);
  g_autoptr(SluiceDeadLetter) dl = NULL;

  run_idle(e);
  expect_next_attempt_after(e, id, 10000);
  expect_next_attempt_after(e, id, 10000);
  ck_assert_uint_eq(runs_of(id), 3);
  sluice_test_harness_advance(e->h, 3600 * 1000);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 3);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_MAX_ATTEMPTS);
  env_free(e);
}
END_TEST

/* ---- 4. a fatal error is dead-lettered at once --------------------------- */

START_TEST(fatal_error_dead_letters_at_once)
{
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.fatal", NULL, NULL);
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autoptr(SluiceResult) r = NULL;

  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 1);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_NON_RETRYABLE);
  ck_assert_str_eq(dl->task_id, id);
  ck_assert_ptr_nonnull(strstr(dl->detail, "never retry"));
  r = sluice_test_harness_get_record(e->h, id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_DEAD_LETTERED);
  ck_assert_str_eq(sluice_result_get_dead_letter_reason(r),
                   SLUICE_DLQ_NON_RETRYABLE);
  env_free(e);
}
END_TEST

/* ---- 5. exhausted attempts: the dead letter's fields and capped history - */

START_TEST(exhausted_attempts_dead_letter_with_fields_and_capped_history)
{
  static const gchar *const queues[] = {"billing", NULL};
  SluiceWorkerOptions o;
  SluiceEnqueueOptions eo;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(GError) error = NULL;
  const gchar *last;

  default_options(&o);
  o.queues = queues;
  e = env_new_full(100, &o);
  sluice_enqueue_options_init(&eo);
  eo.queue = "billing";
  eo.options.retry.max_attempts = 15;
  eo.options.retry.initial_backoff_ms = 0; /* every retry due at once */
  id = enqueue(e, "t.long_error", NULL, &eo);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 15);

  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_MAX_ATTEMPTS);
  ck_assert_str_eq(dl->task_id, id);
  ck_assert_str_eq(dl->task, "t.long_error");
  ck_assert_str_eq(dl->source, "billing");
  ck_assert_uint_ge(dl->deliveries, 1);
  ck_assert_int_eq(dl->at, sluice_clock_now_ms(e->clock));
  ck_assert_ptr_nonnull(strstr(dl->detail, "15"));
  ck_assert_ptr_nonnull(strstr(dl->detail, "long failure"));

  env = sluice_envelope_decode(dl->payload, NULL, &error);
  ck_assert_msg(env != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_str_eq(env->id, id);
  ck_assert_uint_eq(env->attempt, 15);
  ck_assert_uint_eq(env->history->len, SLUICE_HISTORY_MAX_LINES);
  for (guint i = 0; i < env->history->len; i++)
    ck_assert_uint_le(strlen(env->history->pdata[i]),
                      SLUICE_HISTORY_MAX_LINE_BYTES);
  last = env->history->pdata[env->history->len - 1];
  ck_assert_msg(g_str_has_prefix(last, "attempt 14:"), "last line: %s", last);
  env_free(e);
}
END_TEST

/* ---- 6. timeouts --------------------------------------------------------- */

static gboolean
late_result_logged(gpointer data)
{
  Env *e = data;
  return stats_of(e).late_results_discarded >= 1;
}

START_TEST(timeout_cancels_fails_and_discards_late_result)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autoptr(GError) error = NULL;
  SluiceWorkerStats s;

  sluice_enqueue_options_init(&eo);
  eo.options.timeout_ms = 1000;
  eo.options.retry.max_attempts = 1;
  id = enqueue(e, "t.blocker", "{\"late\": 1}", &eo);
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(blocker_started, GUINT_TO_POINTER(1), 30000));

  sluice_test_harness_advance(e->h, 999);
  ck_assert_uint_eq(stats_of(e).timed_out, 0);
  sluice_test_harness_advance(e->h, 1);
  run_idle(e);
  ck_assert(wait_until(late_result_logged, e, 30000));

  s = stats_of(e);
  ck_assert_uint_eq(s.timed_out, 1);
  ck_assert_uint_eq(s.late_results_discarded, 1);
  ck_assert_uint_eq(s.succeeded, 0);
  ck_assert_uint_eq(rec.cancelled_seen, 1);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_MAX_ATTEMPTS);
  ck_assert_ptr_nonnull(strstr(dl->detail, "timed out after 1000 ms"));
  ck_assert_state(e, id, SLUICE_STATE_DEAD_LETTERED);
  ck_assert(sluice_test_log_capture_contains("late result is discarded"));
  env_free(e);
}
END_TEST

/* ---- 13b. the producer's trace context reaches every attempt ------------ */

#define TEST_TRACEPARENT                                                       \
  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TEST_TRACESTATE "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

/* Enqueue options carrying a trace context. @headers is the caller's. */
static void
traced_options(SluiceEnqueueOptions *eo, GHashTable *headers)
{
  sluice_enqueue_options_init(eo);
  g_hash_table_insert(headers, g_strdup("traceparent"),
                      g_strdup(TEST_TRACEPARENT));
  g_hash_table_insert(headers, g_strdup("tracestate"),
                      g_strdup(TEST_TRACESTATE));
  eo->headers = headers;
}

/* A retry, the dead letter it ends in and its replay carry the headers
 * the producer set: every attempt sees them. */
START_TEST(trace_context_survives_retries_and_replays)
{
  Env *e = env_new();
  g_autoptr(GHashTable) headers =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  SluiceEnqueueOptions eo;
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autoptr(SluiceEnvelope) buried = NULL;
  g_autoptr(GError) error = NULL;

  traced_options(&eo, headers);
  eo.options.retry.max_attempts = 2;
  eo.options.retry.initial_backoff_ms = 0;
  g_mutex_lock(&rec.lock);
  rec.broken = TRUE;
  g_mutex_unlock(&rec.lock);
  id = enqueue(e, "t.broken", NULL, &eo);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 2);
  dl = only_dead_letter(e);
  buried = sluice_envelope_decode(dl->payload, NULL, &error);
  ck_assert_msg(buried != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_str_eq(sluice_envelope_get_header(buried, "traceparent"),
                   TEST_TRACEPARENT);
  ck_assert_str_eq(sluice_envelope_get_header(buried, "tracestate"),
                   TEST_TRACESTATE);

  g_mutex_lock(&rec.lock);
  rec.broken = FALSE;
  g_mutex_unlock(&rec.lock);
  ck_assert(
      sluice_client_dlq_replay(e->client, dl->entry_id, FALSE, NULL, &error));
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 3);
  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *seen = trace_of(id, i);
    ck_assert_str_eq(seen, TEST_TRACEPARENT "|" TEST_TRACESTATE);
  }
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

/* A message deferred because no worker knew its task name keeps its trace
 * context until a worker that knows the name runs it. */
START_TEST(trace_context_survives_a_deferral)
{
  Env *e = env_new();
  g_autoptr(GHashTable) headers =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  SluiceEnqueueOptions eo;
  g_autofree gchar *id = NULL;
  g_autofree gchar *seen = NULL;

  traced_options(&eo, headers);
  id = enqueue(e, "t.later", NULL, &eo);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 0);
  ck_assert_uint_eq(stats_of(e).deferred, 1);
  add_task(e, "t.later", task_ok, NULL);
  sluice_test_harness_advance(e->h, SLUICE_DEFAULT_UNKNOWN_TASK_DEFER_MS);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 1);
  seen = trace_of(id, 0);
  ck_assert_str_eq(seen, TEST_TRACEPARENT "|" TEST_TRACESTATE);
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_retry(TCase *semantics)
{
  sluice_conformance__add(semantics, attempt_is_one_based_and_retry_keeps_id,
                          0);
  sluice_conformance__add(semantics, backoff_sequence_without_jitter, 0);
  sluice_conformance__add(semantics, backoff_with_jitter_stays_within_bounds,
                          0);
  sluice_conformance__add(semantics,
                          policy_resolves_global_then_task_then_message, 0);
  sluice_conformance__add(semantics, explicit_retry_counts_toward_max_attempts,
                          0);
  sluice_conformance__add(semantics, fatal_error_dead_letters_at_once, 0);
  sluice_conformance__add(
      semantics, exhausted_attempts_dead_letter_with_fields_and_capped_history,
      0);
  sluice_conformance__add(semantics,
                          timeout_cancels_fails_and_discards_late_result, 0);
  sluice_conformance__add(semantics, trace_context_survives_retries_and_replays,
                          0);
  sluice_conformance__add(semantics, trace_context_survives_a_deferral, 0);
}

/* dead-letters.c - what is buried and why: malformed records, unknown
 * task names (deferred, then buried by time), expired messages, the
 * dead-letter cap, and replays.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- 7. malformed records ------------------------------------------------ */

START_TEST(malformed_record_dead_letters_with_raw_bytes)
{
  static const guint8 garbage[] = {0xc1, 0x00, 'j', 'u', 'n', 'k'};
  static const gchar half_json[] = "{\"v\": 1, \"id\": ";
  Env *e = env_new();
  g_autoptr(GBytes) raw = g_bytes_new_static(garbage, sizeof garbage);
  g_autoptr(GBytes) raw2 = g_bytes_new_static(half_json, sizeof half_json - 1);
  SluiceSubmit submits[2] = {
      {.id = "raw-1", .queue = SLUICE_DEFAULT_QUEUE, .payload = raw},
      {.id = "raw-2", .queue = SLUICE_DEFAULT_QUEUE, .payload = raw2},
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) all = NULL;

  ck_assert(sluice_broker_enqueue(e->broker, submits, 2, &error));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 0);
  all = dead_letters(e);
  ck_assert_uint_eq(all->len, 2);
  for (guint i = 0; i < 2; i++) {
    SluiceDeadLetter *dl = all->pdata[i];
    const SluiceSubmit *want = &submits[i];

    /* Buried in the order they were taken: without ORDERED, either. */
    if (!ordered(e->broker) && !g_bytes_equal(dl->payload, want->payload))
      want = &submits[1 - i];
    ck_assert_str_eq(dl->reason, SLUICE_DLQ_MALFORMED);
    ck_assert_ptr_null(dl->task_id);
    ck_assert_ptr_nonnull(strstr(dl->detail, "cannot decode"));
    ck_assert(g_bytes_equal(dl->payload, want->payload));
  }
  ck_assert(!g_bytes_equal(((SluiceDeadLetter *)all->pdata[0])->payload,
                           ((SluiceDeadLetter *)all->pdata[1])->payload));
  env_free(e);
}
END_TEST

/* ---- 8. unknown task names ----------------------------------------------- */

static void
check_unknown_task_buried_by_time(gint64 defer_ms)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  gint64 elapsed = 0;

  default_options(&o);
  o.unknown_task_timeout_ms = 60000;
  o.unknown_task_defer_ms = defer_ms;
  e = env_new_full(100, &o);
  id = enqueue(e, "t.not_registered", NULL, NULL);
  run_idle(e);
  for (;;) {
    g_autoptr(GPtrArray) all = dead_letters(e);
    if (all->len > 0)
      break;
    ck_assert_msg(elapsed < 60000,
                  "still not buried after %" G_GINT64_FORMAT " ms", elapsed);
    sluice_test_harness_advance(e->h, defer_ms);
    elapsed += defer_ms;
    run_idle(e);
  }
  /* Buried by time, not by tries: the same elapsed time for any deferral. */
  ck_assert_int_eq(elapsed, 60000);
  ck_assert_uint_eq(stats_of(e).deferred, (guint64)(60000 / defer_ms));
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_UNKNOWN_TASK);
  env = sluice_envelope_decode(dl->payload, NULL, NULL);
  ck_assert_ptr_nonnull(env);
  ck_assert_uint_eq(env->attempt, 1);
  ck_assert_int_eq(env->unknown_since, e->t0);
  env_free(e);
}

START_TEST(unknown_task_is_deferred_then_buried_by_time)
{
  check_unknown_task_buried_by_time(5000);
}
END_TEST

START_TEST(unknown_task_burial_does_not_depend_on_deferral_count)
{
  check_unknown_task_buried_by_time(20000);
}
END_TEST

/* A message that claims its task has been unknown since a time in the
 * future (a producer's clock, or a forgery) is buried after the timeout
 * counted from the worker's clock, not deferred forever. */
START_TEST(unknown_since_in_the_future_is_clamped)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(SluiceEnvelope) env = sluice_envelope_new();
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  gint64 elapsed = 0;

  default_options(&o);
  o.unknown_task_timeout_ms = 60000;
  o.unknown_task_defer_ms = 5000;
  e = env_new_full(100, &o);
  env->id = g_strdup("from-the-future");
  env->task = g_strdup("t.not_registered");
  env->queue = g_strdup(SLUICE_DEFAULT_QUEUE);
  env->unknown_since = e->t0 + G_GINT64_CONSTANT(10) * 365 * 86400000;
  payload = sluice_envelope_encode(NULL, env, &error);
  ck_assert_msg(payload != NULL, "%s", error != NULL ? error->message : "");
  {
    SluiceSubmit submit = {
        .id = env->id, .queue = SLUICE_DEFAULT_QUEUE, .payload = payload};
    ck_assert(sluice_broker_enqueue(e->broker, &submit, 1, &error));
  }
  run_idle(e);
  for (;;) {
    g_autoptr(GPtrArray) all = dead_letters(e);
    if (all->len > 0)
      break;
    ck_assert_msg(elapsed <= 60000,
                  "still deferred after %" G_GINT64_FORMAT " ms", elapsed);
    sluice_test_harness_advance(e->h, 5000);
    elapsed += 5000;
    run_idle(e);
  }
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_UNKNOWN_TASK);
  env_free(e);
}
END_TEST

/* ---- 8b. a fleet of two versions ----------------------------------------- */

static void
enqueue_payload(Env *e, const gchar *id, GBytes *payload)
{
  g_autoptr(GError) error = NULL;
  SluiceSubmit submit = {
      .id = id, .queue = SLUICE_DEFAULT_QUEUE, .payload = payload};

  ck_assert_msg(sluice_broker_enqueue(e->broker, &submit, 1, &error), "%s",
                error != NULL ? error->message : "");
}

/* A message in an envelope version newer than the worker reads is a
 * rollout in progress: deferred for a newer worker with its bytes
 * untouched, never buried however long it waits, said once a minute, and
 * inspect says why. */
START_TEST(newer_envelope_version_is_deferred_never_buried)
{
  static const gchar v3[] =
      "{\"v\": 3, \"id\": \"from-v3\", \"task\": \"t.ok\", "
      "\"queue\": \"default\", \"attempt\": \"first of a new kind\", "
      "\"plan\": {\"steps\": [1, 2]}}";
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GBytes) payload = g_bytes_new_static(v3, sizeof v3 - 1);
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GError) error = NULL;
  SluiceTaskLocation loc = {0};

  default_options(&o);
  o.unknown_task_timeout_ms = 60000;
  o.unknown_task_defer_ms = 5000;
  e = env_new_full(100, &o);
  enqueue_payload(e, "from-v3", payload);
  run_idle(e);
  /* Past the time an unknown task name is buried after. */
  for (gint64 waited = 0; waited <= 90000; waited += 5000) {
    sluice_test_harness_advance(e->h, 5000);
    run_idle(e);
  }
  dead = dead_letters(e);
  ck_assert_uint_eq(dead->len, 0);
  ck_assert_uint_eq(total_runs(), 0);
  ck_assert_uint_ge(stats_of(e).deferred, 18);
  ck_assert_uint_eq(
      sluice_test_log_capture_count("in envelope format version 3, newer"), 1);

  r = sluice_client_inspect(e->client, "from-v3", &error);
  ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SCHEDULED);
  ck_assert_ptr_nonnull(
      strstr(sluice_result_get_error(r), "envelope format version 3"));
  if (sluice_broker_lookup_task(e->broker, "from-v3", &loc, NULL) &&
      loc.place == SLUICE_TASK_PLACE_SCHEDULED)
    ck_assert(g_bytes_equal(loc.payload, payload));
  sluice_task_location_clear(&loc);
  env_free(e);
}
END_TEST

/* What a newer producer added that this build does not know survives the
 * retries and the dead letter this build writes: a newer worker that
 * replays the dead letter finds it. */
START_TEST(unknown_keys_survive_retries_and_the_dead_letter)
{
  Env *e = env_new();
  g_autoptr(SluiceEnvelope) env = sluice_envelope_new();
  g_autoptr(SluiceEnvelope) buried = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *fields = NULL;
  g_autofree gchar *opts = NULL;

  env->id = g_strdup("carries");
  env->task = g_strdup("t.fail");
  env->queue = g_strdup(SLUICE_DEFAULT_QUEUE);
  env->opts.retry.max_attempts = 3;
  env->opts.retry.initial_backoff_ms = 0;
  env->unknown_fields = sluice_args_from_json(
      "{\"plan\": [1, \"two\", {\"three\": 3}]}", -1, &error);
  env->unknown_opts = sluice_args_from_json("{\"lane\": \"fast\"}", -1, &error);
  ck_assert_ptr_nonnull(env->unknown_opts);
  payload = sluice_envelope_encode(NULL, env, &error);
  ck_assert_msg(payload != NULL, "%s", error != NULL ? error->message : "");
  enqueue_payload(e, "carries", payload);
  run_idle(e);
  ck_assert_uint_eq(runs_of("carries"), 3);
  dl = only_dead_letter(e);
  buried = sluice_envelope_decode(dl->payload, NULL, &error);
  ck_assert_msg(buried != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(buried->attempt, 3);
  ck_assert_ptr_nonnull(buried->unknown_fields);
  ck_assert_ptr_nonnull(buried->unknown_opts);
  fields = sluice_args_to_json(buried->unknown_fields, &error);
  opts = sluice_args_to_json(buried->unknown_opts, &error);
  ck_assert_str_eq(fields, "{\"plan\":[1,\"two\",{\"three\":3}]}");
  ck_assert_str_eq(opts, "{\"lane\":\"fast\"}");
  env_free(e);
}
END_TEST

/* ---- 9. expiry ----------------------------------------------------------- */

START_TEST(expired_message_dead_letters_without_running)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;

  sluice_enqueue_options_init(&eo);
  eo.options.expires_at = e->t0 + 1000;
  id = enqueue(e, "t.ok", NULL, &eo);
  sluice_test_harness_advance(e->h, 2000);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 0);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_EXPIRED);
  ck_assert_state(e, id, SLUICE_STATE_DEAD_LETTERED);
  env_free(e);
}
END_TEST

/* ---- 13. dead-letter cap and replay -------------------------------------- */

START_TEST(dead_letter_cap_drops_the_oldest)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GPtrArray) all = NULL;
  g_autoptr(GError) error = NULL;

  default_options(&o);
  e = env_new_full(3, &o);
  for (guint i = 1; i <= 5; i++) {
    SluiceEnqueueOptions eo;
    g_autofree gchar *want = g_strdup_printf("f%u", i);
    g_autofree gchar *id = NULL;
    sluice_enqueue_options_init(&eo);
    eo.id = want;
    id = enqueue(e, "t.fatal", NULL, &eo);
    run_idle(e); /* one at a time, so burial order is enqueue order */
  }
  all = dead_letters(e);
  ck_assert_uint_eq(all->len, 3);
  ck_assert_str_eq(((SluiceDeadLetter *)all->pdata[0])->task_id, "f3");
  ck_assert_str_eq(((SluiceDeadLetter *)all->pdata[1])->task_id, "f4");
  ck_assert_str_eq(((SluiceDeadLetter *)all->pdata[2])->task_id, "f5");
  /* What the cap dropped leaves a trace: counted by reason, and logged. */
  {
    SluiceBrokerStats st;
    gint64 *by_reason;
    ck_assert(sluice_client_get_stats(e->client, NULL, &st, &error));
    ck_assert_int_eq(st.dead_letters_dropped, 2);
    by_reason = g_hash_table_lookup(st.dead_letters_dropped_by_reason,
                                    SLUICE_DLQ_NON_RETRYABLE);
    ck_assert_ptr_nonnull(by_reason);
    ck_assert_int_eq(*by_reason, 2);
    sluice_broker_stats_clear(&st);
  }
  ck_assert(sluice_test_log_capture_contains("dropped the 1 oldest"));
  env_free(e);
}
END_TEST

/* The sync cursor is the order revocations were made in, not their expiry:
 * clients may use different revoke TTLs, and two revocations may fall in
 * one millisecond (the fake clock never moves here). */
static gchar *
bury_broken_task(Env *e)
{
  SluiceEnqueueOptions eo;
  gchar *id;

  g_mutex_lock(&rec.lock);
  rec.broken = TRUE;
  g_mutex_unlock(&rec.lock);
  sluice_enqueue_options_init(&eo);
  eo.options.retry.max_attempts = 2;
  eo.options.retry.initial_backoff_ms = 0;
  id = enqueue(e, "t.broken", "{\"order\": 7}", &eo);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 2);
  return id;
}

START_TEST(replay_resets_attempt_and_the_task_runs)
{
  Env *e = env_new();
  g_autofree gchar *id = bury_broken_task(e);
  g_autoptr(SluiceDeadLetter) dl = only_dead_letter(e);
  g_autofree gchar *replayed = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) after = NULL;

  g_mutex_lock(&rec.lock);
  rec.broken = FALSE;
  g_mutex_unlock(&rec.lock);
  ck_assert(sluice_client_dlq_replay(e->client, dl->entry_id, FALSE, &replayed,
                                     &error));
  ck_assert_str_eq(replayed, id);
  /* The dead_lettered record was replaced at once (the running worker may
   * already have moved it further). */
  ck_assert_int_ne(state_of(e, id), SLUICE_STATE_DEAD_LETTERED);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 3);
  ck_assert_uint_eq(attempt_of(id, 2) / 1000, 1);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  after = dead_letters(e);
  ck_assert_uint_eq(after->len, 0);
  env_free(e);
}
END_TEST

START_TEST(replay_can_keep_the_attempt)
{
  Env *e = env_new();
  g_autofree gchar *id = bury_broken_task(e);
  g_autoptr(SluiceDeadLetter) dl = only_dead_letter(e);
  g_autoptr(SluiceDeadLetter) again = NULL;
  g_autoptr(GError) error = NULL;

  ck_assert(
      sluice_client_dlq_replay(e->client, dl->entry_id, TRUE, NULL, &error));
  run_idle(e);
  /* Attempt 2 of 2 again: it fails once more and goes straight back. */
  ck_assert_uint_eq(runs_of(id), 3);
  ck_assert_uint_eq(attempt_of(id, 2) / 1000, 2);
  again = only_dead_letter(e);
  ck_assert_str_eq(again->task_id, id);
  ck_assert_str_ne(again->entry_id, dl->entry_id);
  ck_assert(
      !sluice_client_dlq_replay(e->client, dl->entry_id, FALSE, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_NOT_FOUND));
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_dead_letters(TCase *semantics)
{
  sluice_conformance__add(semantics,
                          malformed_record_dead_letters_with_raw_bytes, 0);
  sluice_conformance__add(semantics,
                          unknown_task_is_deferred_then_buried_by_time, 0);
  sluice_conformance__add(
      semantics, unknown_task_burial_does_not_depend_on_deferral_count, 0);
  sluice_conformance__add(semantics, unknown_since_in_the_future_is_clamped, 0);
  sluice_conformance__add(semantics,
                          newer_envelope_version_is_deferred_never_buried, 0);
  sluice_conformance__add(semantics,
                          unknown_keys_survive_retries_and_the_dead_letter, 0);
  sluice_conformance__add(semantics,
                          expired_message_dead_letters_without_running, 0);
  sluice_conformance__add(semantics, dead_letter_cap_drops_the_oldest, 0);
  sluice_conformance__add(semantics, replay_resets_attempt_and_the_task_runs,
                          0);
  sluice_conformance__add(semantics, replay_can_keep_the_attempt, 0);
}

/* periodic.c - periodic tasks: one dispatch per occurrence however many
 * workers, missed runs, overlap.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

START_TEST(periodic_occurrence_is_dispatched_once_by_many_workers)
{
  SluicePeriodicOptions po;
  SluiceWorkerOptions o;
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceWorker) w2 = NULL;
  g_autofree gchar *first = NULL, *second = NULL;

  sluice_periodic_options_init(&po);
  po.name = "tick";
  po.task = "t.ok";
  po.interval_ms = 60000;
  ck_assert(sluice_worker_add_periodic(e->worker, &po, &error));
  default_options(&o);
  w2 = sluice_worker_new(e->broker, e->registry, &o, &error);
  ck_assert(sluice_worker_add_periodic(w2, &po, &error));

  /* The fake clock starts on a whole minute: that occurrence is due now. */
  run_idle(e);
  ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
  for (guint i = 0; i < 3; i++) {
    sluice_test_harness_advance(e->h, 60000);
    run_idle(e);
    ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
    run_idle(e);
  }
  first = g_strdup_printf("periodic:tick:%" G_GINT64_FORMAT, e->t0);
  second = g_strdup_printf("periodic:tick:%" G_GINT64_FORMAT, e->t0 + 60000);
  ck_assert_uint_eq(runs_of(first), 1);
  ck_assert_uint_eq(runs_of(second), 1);
  ck_assert_uint_eq(total_runs(), 4);
  sluice_worker_stop(w2);
  env_free(e);
}
END_TEST

START_TEST(periodic_missed_runs_follow_the_policy)
{
  SluicePeriodicOptions po;
  SluiceWorkerOptions o;
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  gint64 last = 0;

  sluice_periodic_options_init(&po);
  po.name = "catchup";
  po.task = "t.ok";
  po.interval_ms = 60000;
  po.missed = SLUICE_MISSED_ALL;
  po.missed_max = 3;
  ck_assert(sluice_worker_add_periodic(e->worker, &po, &error));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 1); /* the occurrence at t0 */
  sluice_worker_stop(e->worker);

  /* Ten occurrences fall while no scheduler runs. */
  sluice_test_harness_advance(e->h, 10 * 60000 + 30000);
  default_options(&o);
  {
    g_autoptr(SluiceWorker) w2 =
        sluice_worker_new(e->broker, e->registry, &o, &error);
    ck_assert(sluice_worker_add_periodic(w2, &po, &error));
    ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
    sluice_worker_stop(w2);
  }
  /* ALL with a cap of 3: the three latest missed ones. */
  ck_assert_uint_eq(total_runs(), 4);
  for (gint64 minute = 7; minute <= 10; minute++) {
    g_autofree gchar *occurrence = g_strdup_printf(
        "periodic:catchup:%" G_GINT64_FORMAT, e->t0 + minute * 60000);
    ck_assert_uint_eq(runs_of(occurrence), minute == 7 ? 0 : 1);
  }
  ck_assert(sluice_broker_last_periodic(e->broker, "catchup", &last, &error));
  ck_assert_int_eq(last, e->t0 + 10 * 60000);
  env_free(e);
}
END_TEST

/* Overlap = skip: an occurrence is not dispatched while the previous one
 * has not finished; once it has, the next one is. */
START_TEST(periodic_overlap_skip_waits_for_the_previous_occurrence)
{
  SluicePeriodicOptions po;
  SluiceTaskOptions to;
  SluiceWorkerOptions o;
  const gchar *const held[] = {"held", NULL};
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) second = NULL;
  g_autofree gchar *first_id = NULL, *second_id = NULL, *third_id = NULL;
  gint64 last = 0;

  /* It needs the previous occurrence's final record. */
  sluice_task_options_init(&to);
  to.store_result = SLUICE_OFF;
  add_task(e, "t.nostore", task_ok, &to);
  sluice_periodic_options_init(&po);
  po.name = "nightly";
  po.task = "t.nostore";
  po.interval_ms = 60000;
  po.overlap = SLUICE_OVERLAP_SKIP;
  ck_assert(!sluice_worker_add_periodic(e->worker, &po, &error));
  ck_assert(
      g_error_matches(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID));
  g_clear_error(&error);

  /* Its occurrences go to a queue this worker does not serve, so the
   * first stays queued until another worker runs it. */
  po.task = "t.ok";
  po.queue = "held";
  ck_assert(sluice_worker_add_periodic(e->worker, &po, &error));
  run_idle(e);
  first_id = g_strdup_printf("periodic:nightly:%" G_GINT64_FORMAT, e->t0);
  second_id =
      g_strdup_printf("periodic:nightly:%" G_GINT64_FORMAT, e->t0 + 60000);
  third_id =
      g_strdup_printf("periodic:nightly:%" G_GINT64_FORMAT, e->t0 + 120000);
  ck_assert_state(e, first_id, SLUICE_STATE_QUEUED);

  sluice_test_log_capture_reset();
  sluice_test_harness_advance(e->h, 60000);
  run_idle(e);
  ck_assert(sluice_broker_last_periodic(e->broker, "nightly", &last, &error));
  ck_assert_int_eq(last, e->t0);
  ck_assert(sluice_broker_get_record(e->broker, second_id, &second, &error));
  ck_assert_ptr_null(second);
  ck_assert(sluice_test_log_capture_contains("skipped its occurrence"));

  /* The first runs and finishes; the next occurrence is dispatched. */
  default_options(&o);
  o.queues = held;
  {
    g_autoptr(SluiceWorker) w2 =
        sluice_worker_new(e->broker, e->registry, &o, &error);
    ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
    sluice_worker_stop(w2);
  }
  ck_assert_uint_eq(runs_of(first_id), 1);
  ck_assert_state(e, first_id, SLUICE_STATE_SUCCEEDED);
  sluice_test_harness_advance(e->h, 60000);
  run_idle(e);
  ck_assert(sluice_broker_last_periodic(e->broker, "nightly", &last, &error));
  ck_assert_int_eq(last, e->t0 + 120000);
  ck_assert_state(e, third_id, SLUICE_STATE_QUEUED);
  ck_assert_uint_eq(runs_of(second_id), 0);
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_periodic(TCase *semantics)
{
  sluice_conformance__add(
      semantics, periodic_occurrence_is_dispatched_once_by_many_workers, 0);
  sluice_conformance__add(semantics, periodic_missed_runs_follow_the_policy, 0);
  sluice_conformance__add(
      semantics, periodic_overlap_skip_waits_for_the_previous_occurrence, 0);
}

/* cancel.c - cancelling scheduled, queued and running tasks, and
 * revocations (their TTL, and a sync that never misses one).
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- 12. cancellation ---------------------------------------------------- */

START_TEST(cancel_scheduled_task_is_certain)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autofree gchar *id = NULL;
  g_autoptr(GError) error = NULL;

  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 10000;
  id = enqueue(e, "t.ok", NULL, &eo);
  ck_assert_int_eq(sluice_client_cancel(e->client, id, &error),
                   SLUICE_CANCEL_REMOVED);
  sluice_test_harness_advance(e->h, 20000);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 0);
  ck_assert_state(e, id, SLUICE_STATE_CANCELLED);
  env_free(e);
}
END_TEST

/* The record of a task cancelled or deleted off the schedule still says
 * which task it was, of which queue, enqueued when, whether a record was
 * kept for it before (track_state) or not. */
static void
assert_cancelled_record(SluiceClient *client, const gchar *id, gint64 t0,
                        gboolean knowable)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) r = sluice_client_inspect(client, id, &error);

  ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_CANCELLED);
  if (!knowable)
    return;
  ck_assert_str_eq(sluice_result_get_task(r), "t.ok");
  ck_assert_str_eq(sluice_result_get_queue(r), "later");
  ck_assert_int_eq(sluice_result_get_enqueued_at(r), t0);
  ck_assert_uint_eq(sluice_result_get_attempt(r), 1);
}

START_TEST(cancelled_scheduled_task_keeps_its_name_queue_and_time)
{
  Env *e = env_new();
  SluiceEnqueueOptions eo;
  SluiceClientOptions co;
  g_autoptr(SluiceClient) untracked = NULL;
  g_autoptr(GError) error = NULL;
  gchar *ids[4];

  sluice_client_options_init(&co);
  co.track_state = FALSE;
  untracked = sluice_client_new(e->broker, &co, &error);
  ck_assert_msg(untracked != NULL, "%s", error != NULL ? error->message : "");
  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 60000;
  eo.queue = "later";
  for (guint i = 0; i < 4; i++) {
    ids[i] = sluice_client_enqueue(i % 2 == 0 ? e->client : untracked, "t.ok",
                                   NULL, &eo, &error);
    ck_assert_msg(ids[i] != NULL, "%s", error != NULL ? error->message : "");
  }
  sluice_test_harness_advance(e->h, 1000);
  ck_assert_int_eq(sluice_client_cancel(e->client, ids[0], &error),
                   SLUICE_CANCEL_REMOVED);
  ck_assert_int_eq(sluice_client_cancel(e->client, ids[1], &error),
                   SLUICE_CANCEL_REMOVED);
  ck_assert_int_eq(sluice_client_delete(e->client, ids[2], &error),
                   SLUICE_DELETE_UNSCHEDULED);
  ck_assert_int_eq(sluice_client_delete(e->client, ids[3], &error),
                   SLUICE_DELETE_UNSCHEDULED);
  for (guint i = 0; i < 4; i++) {
    /* Untracked, only its message says: a broker without lookup_task
     * cannot show it. */
    assert_cancelled_record(
        e->client, ids[i], e->t0,
        i % 2 == 0 || sluice_broker_supports(
                          e->broker, SLUICE_BROKER_FEATURE_LOOKUP_TASK));
    g_free(ids[i]);
  }
  env_free(e);
}
END_TEST

START_TEST(cancel_queued_task_revokes_and_skips_it)
{
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.ok", NULL, NULL);
  g_autofree gchar *other = enqueue(e, "t.ok", NULL, NULL);
  g_autoptr(GError) error = NULL;

  ck_assert_int_eq(sluice_client_cancel(e->client, id, &error),
                   SLUICE_CANCEL_REVOKED);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 0);
  ck_assert_uint_eq(runs_of(other), 1);
  ck_assert_state(e, id, SLUICE_STATE_CANCELLED);
  ck_assert_uint_eq(stats_of(e).cancelled, 1);
  env_free(e);
}
END_TEST

START_TEST(cancel_running_task_fires_its_cancellable)
{
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.blocker", NULL, NULL);
  g_autoptr(GError) error = NULL;

  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(blocker_started, GUINT_TO_POINTER(1), 30000));
  ck_assert_int_eq(sluice_client_cancel(e->client, id, &error),
                   SLUICE_CANCEL_REVOKED);
  run_idle(e); /* returns once the cancelled task was settled */
  ck_assert_uint_eq(rec.cancelled_seen, 1);
  ck_assert_uint_eq(runs_of(id), 1);
  ck_assert_state(e, id, SLUICE_STATE_CANCELLED);
  env_free(e);
}
END_TEST

START_TEST(revocation_expires_after_revoke_ttl)
{
  SluiceClientOptions co;
  Env *e = env_new();
  g_autofree gchar *id = enqueue(e, "t.ok", NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;

  sluice_client_options_init(&co);
  co.revoke_ttl_ms = 1000;
  client = sluice_client_new(e->broker, &co, &error);
  ck_assert_int_eq(sluice_client_cancel(client, id, &error),
                   SLUICE_CANCEL_REVOKED);
  sluice_test_harness_advance(e->h, 1000);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 1);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

START_TEST(revocations_are_never_missed_whatever_ttl_or_millisecond)
{
  SluiceClientOptions co;
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autoptr(SluiceClient) short_ttl = NULL;
  g_autoptr(GError) error = NULL;
  const gchar *const victims[] = {"victim", "twin-a", "twin-b"};

  sluice_client_options_init(&co);
  co.revoke_ttl_ms = 10 * 60 * 1000;
  short_ttl = sluice_client_new(e->broker, &co, &error);
  ck_assert_int_eq(sluice_client_cancel(e->client, "unrelated", &error),
                   SLUICE_CANCEL_REVOKED);
  run_idle(e); /* the worker has loaded "unrelated" (1 h) */
  ck_assert_int_eq(sluice_client_cancel(short_ttl, "victim", &error),
                   SLUICE_CANCEL_REVOKED);
  ck_assert_int_eq(sluice_client_cancel(e->client, "twin-a", &error),
                   SLUICE_CANCEL_REVOKED);
  run_idle(e); /* synced past twin-a's expiry... */
  ck_assert_int_eq(sluice_client_cancel(e->client, "twin-b", &error),
                   SLUICE_CANCEL_REVOKED); /* ...which twin-b shares */
  /* Synced before the tasks exist: a worker fetching the moment they are
   * enqueued must already know (a revocation made while a worker runs
   * reaches it within revocation_interval; that is not what this tests). */
  run_idle(e);
  for (gsize i = 0; i < G_N_ELEMENTS(victims); i++) {
    g_autofree gchar *id = NULL;
    sluice_enqueue_options_init(&eo);
    eo.id = victims[i];
    id = enqueue(e, "t.ok", NULL, &eo);
  }
  run_idle(e);
  for (gsize i = 0; i < G_N_ELEMENTS(victims); i++) {
    ck_assert_msg(runs_of(victims[i]) == 0, "%s ran", victims[i]);
    ck_assert_state(e, victims[i], SLUICE_STATE_CANCELLED);
  }
  env_free(e);
}
END_TEST

/* The series of @task on the default queue in @m, or NULL. */
static const SluiceTaskMetrics *
series_of(const SluiceWorkerMetrics *m, const gchar *task)
{
  for (guint i = 0; i < m->tasks->len; i++) {
    const SluiceTaskMetrics *t = m->tasks->pdata[i];
    if (g_strcmp0(t->task, task) == 0 &&
        g_strcmp0(t->queue, SLUICE_DEFAULT_QUEUE) == 0)
      return t;
  }
  return NULL;
}

/* "Idle" means every settled task is all there: its record, the worker's
 * counters, its metrics and its line, the moment run_until_idle returns,
 * round after round. The per-task line is held a moment in the log
 * writer, so a settlement announced before its line is caught. */
START_TEST(idle_means_settled_tasks_are_recorded_counted_and_logged)
{
  enum { ROUNDS = 20, OK = 3 };

  sluice_test_log_capture_delay(" succeeded in ", 20);
  for (guint round = 0; round < ROUNDS; round++) {
    SluiceWorkerOptions o;
    Env *e;
    g_autoptr(GPtrArray) ok = g_ptr_array_new_with_free_func(g_free);
    g_autofree gchar *cancelled = NULL;
    g_autofree gchar *fatal = NULL;
    g_autoptr(GError) error = NULL;
    SluiceWorkerMetrics m;
    const SluiceTaskMetrics *t;
    SluiceWorkerStats s;

    /* A worker of its own each round: the revocation is made before it
     * starts, so the cancelled task is never fetched before it is seen. */
    default_options(&o);
    o.log_each_task = TRUE;
    e = env_new_full(100, &o);
    cancelled = enqueue(e, "t.ok", NULL, NULL);
    fatal = enqueue(e, "t.fatal", NULL, NULL);
    for (guint i = 0; i < OK; i++)
      g_ptr_array_add(ok, enqueue(e, "t.ok", NULL, NULL));
    ck_assert_int_eq(sluice_client_cancel(e->client, cancelled, &error),
                     SLUICE_CANCEL_REVOKED);
    run_idle(e);

    for (guint i = 0; i < ok->len; i++)
      ck_assert_state(e, (const gchar *)ok->pdata[i], SLUICE_STATE_SUCCEEDED);
    ck_assert_state(e, cancelled, SLUICE_STATE_CANCELLED);
    ck_assert_state(e, fatal, SLUICE_STATE_DEAD_LETTERED);
    s = stats_of(e);
    ck_assert_uint_eq(s.succeeded, OK);
    ck_assert_uint_eq(s.cancelled, 1);
    ck_assert_uint_eq(s.dead_lettered, 1);
    sluice_worker_get_metrics(e->worker, &m);
    t = series_of(&m, "t.ok");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->succeeded, OK);
    ck_assert_uint_eq(t->cancelled, 1);
    t = series_of(&m, "t.fatal");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->dead_lettered, 1);
    sluice_worker_metrics_clear(&m);
    ck_assert_uint_eq(sluice_test_log_capture_count("t.ok succeeded in "), OK);
    ck_assert_uint_eq(sluice_test_log_capture_count("t.ok cancelled"), 1);
    ck_assert_uint_eq(sluice_test_log_capture_count("t.fatal dead-lettered"),
                      1);
    env_free(e);
  }
  sluice_test_log_capture_delay(NULL, 0);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_cancel(TCase *semantics)
{
  sluice_conformance__add(semantics, cancel_scheduled_task_is_certain, 0);
  sluice_conformance__add(
      semantics, cancelled_scheduled_task_keeps_its_name_queue_and_time, 0);
  sluice_conformance__add(semantics, cancel_queued_task_revokes_and_skips_it,
                          0);
  sluice_conformance__add(
      semantics, idle_means_settled_tasks_are_recorded_counted_and_logged, 0);
  sluice_conformance__add(semantics, cancel_running_task_fires_its_cancellable,
                          0);
  sluice_conformance__add(semantics, revocation_expires_after_revoke_ttl, 0);
  sluice_conformance__add(
      semantics, revocations_are_never_missed_whatever_ttl_or_millisecond, 0);
}

/* stop.c - graceful stop, stop timeouts, stop-now, and the concurrency
 * limit.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- 14. graceful stop and the concurrency limit ------------------------- */

typedef struct {
  SluiceWorker *worker;
} Stopper;

static gpointer
stopper_main(gpointer data)
{
  sluice_worker_stop(data);
  return NULL;
}

static guint64
ready_depth(Env *e, const gchar *queue)
{
  SluiceBrokerStats st;
  const gchar *queues[] = {queue, NULL};
  g_autoptr(GError) error = NULL;
  guint64 n;

  ck_assert(sluice_client_get_stats(e->client, queues, &st, &error));
  n = ((SluiceQueueStats *)st.queues->pdata[0])->ready;
  sluice_broker_stats_clear(&st);
  return n;
}

/* A second worker on the same broker drains what the first gave back. */
static void
drain_with_new_worker(Env *e)
{
  SluiceWorkerOptions o;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceWorker) w2 = NULL;

  default_options(&o);
  w2 = sluice_worker_new(e->broker, e->registry, &o, &error);
  ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
  sluice_worker_stop(w2);
}

START_TEST(graceful_stop_releases_unstarted_work_and_loses_nothing)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  GThread *stopper;
  SluiceWorkerStats s;

  default_options(&o);
  o.concurrency = 2;
  o.prefetch = 6;
  e = env_new_full(100, &o);
  for (guint i = 0; i < 10; i++)
    g_ptr_array_add(ids, enqueue(e, "t.gate", NULL, NULL));
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(2), 30000));

  stopper = g_thread_new("stopper", stopper_main, e->worker);
  g_usleep(100000); /* let the stop begin while both tasks still run */
  open_gate();
  g_thread_join(stopper);

  s = stats_of(e);
  ck_assert_uint_eq(s.succeeded, 2);
  ck_assert_uint_eq(s.started, 2);
  ck_assert_uint_eq(total_runs(), 2);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_LEASES))
    ck_assert_uint_eq(ready_depth(e, SLUICE_DEFAULT_QUEUE), 8);

  drain_with_new_worker(e);
  ck_assert_uint_eq(total_runs(), 10);
  for (guint i = 0; i < ids->len; i++)
    ck_assert_uint_eq(runs_of(ids->pdata[i]), 1);
  env_free(e);
}
END_TEST

START_TEST(stop_timeout_releases_and_cancels_a_running_task)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(GError) error = NULL;

  default_options(&o);
  o.shutdown_timeout_ms = 200;
  e = env_new_full(100, &o);
  id = enqueue(e, "t.blocker", "{\"late\": 1}", NULL);
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(blocker_started, GUINT_TO_POINTER(1), 30000));
  ck_assert_state_soon(e, id, SLUICE_STATE_RUNNING);
  sluice_worker_stop(e->worker);
  /* The stop cancelled it; the task's thread notices on its own time. */
  ck_assert(wait_until(blocker_cancelled, GUINT_TO_POINTER(1), 30000));
  ck_assert_uint_eq(stats_of(e).released, 1);
  ck_assert_uint_eq(stats_of(e).succeeded, 0);
  /* Given back: its record no longer says running on a stopped worker,
   * and it returned promptly once cancelled, so nothing is called stuck. */
  ck_assert_state(e, id, SLUICE_STATE_QUEUED);
  ck_assert(!sluice_test_log_capture_contains("ignored its cancellable"));
  ck_assert(!sluice_test_log_capture_contains("ignored their cancellable"));

  drain_with_new_worker(e);
  ck_assert_uint_eq(runs_of(id), 2);
  /* A release is not a delivery toward max_deliveries. */
  ck_assert_uint_eq(delivery_count_of(id), 1);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

/* A task that ignores its cancellable is the only one the stop calls
 * stuck, by its id. */
START_TEST(stop_names_only_tasks_that_ignore_their_cancellable)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *needle = NULL;

  default_options(&o);
  o.shutdown_timeout_ms = 100;
  e = env_new_full(100, &o);
  id = enqueue(e, "t.stubborn", NULL, NULL);
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(1), 30000));
  sluice_worker_stop(e->worker);
  needle = g_strdup_printf("task %s ignored its cancellable", id);
  ck_assert(sluice_test_log_capture_contains(needle));
  ck_assert(sluice_test_log_capture_contains("1 tasks ignored their "
                                             "cancellable"));
  g_mutex_lock(&rec.lock);
  rec.gate_open = TRUE;
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
  ck_assert(!sluice_worker_stopped_forcibly(e->worker));
  env_free(e);
}
END_TEST

static gpointer
stop_now_main(gpointer data)
{
  sluice_worker_stop_now(data);
  return NULL;
}

/* A stop made immediate (a second SIGTERM) does not wait out
 * shutdown_timeout: here an hour, which the test's timeout would catch. */
START_TEST(stop_now_releases_running_work_at_once)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *id = NULL;
  g_autoptr(GError) error = NULL;
  GThread *stopper;

  default_options(&o);
  o.shutdown_timeout_ms = 60 * 60 * 1000;
  e = env_new_full(100, &o);
  id = enqueue(e, "t.blocker", NULL, NULL);
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(blocker_started, GUINT_TO_POINTER(1), 30000));
  sluice_worker_request_stop(e->worker);
  stopper = g_thread_new("stop-now", stop_now_main, e->worker);
  sluice_worker_stop(e->worker);
  g_thread_join(stopper);
  ck_assert(sluice_worker_stopped_forcibly(e->worker));
  ck_assert(wait_until(blocker_cancelled, GUINT_TO_POINTER(1), 30000));
  ck_assert_uint_eq(stats_of(e).released, 1);
  drain_with_new_worker(e);
  ck_assert_uint_eq(runs_of(id), 2);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

START_TEST(concurrency_limit_is_never_exceeded)
{
  SluiceWorkerOptions o;
  Env *e;

  default_options(&o);
  o.concurrency = 3;
  o.prefetch = 10;
  e = env_new_full(100, &o);
  for (guint i = 0; i < 60; i++)
    g_free(enqueue(e, "t.busy", NULL, NULL));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 60);
  ck_assert_uint_le(rec.peak, 3);
  ck_assert_uint_le(stats_of(e).peak_running, 3);
  /* The limit is reached, not just respected by running one at a time. */
  ck_assert_uint_eq(stats_of(e).peak_running, 3);
  env_free(e);
}
END_TEST

/* A forced stop skips the shutdown timeout, not the judgement: a task that
 * returns a moment after its cancellable fired did not ignore it; one that
 * never returns did. */
START_TEST(stop_now_names_only_tasks_that_ignore_their_cancellable)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *quick = NULL;
  g_autofree gchar *stuck = NULL;
  g_autofree gchar *quick_named = NULL;
  g_autofree gchar *stuck_named = NULL;
  g_autoptr(GError) error = NULL;

  default_options(&o);
  o.concurrency = 2;
  o.shutdown_timeout_ms = 60 * 60 * 1000;
  e = env_new_full(100, &o);
  quick = enqueue(e, "t.blocker", "{\"linger_ms\": 20}", NULL);
  stuck = enqueue(e, "t.stubborn", NULL, NULL);
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(blocker_started, GUINT_TO_POINTER(1), 30000));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(1), 30000));
  sluice_worker_stop_now(e->worker);
  sluice_worker_stop(e->worker);
  ck_assert(sluice_worker_stopped_forcibly(e->worker));
  quick_named = g_strdup_printf("task %s ignored its cancellable", quick);
  stuck_named = g_strdup_printf("task %s ignored its cancellable", stuck);
  ck_assert(!sluice_test_log_capture_contains(quick_named));
  ck_assert(sluice_test_log_capture_contains(stuck_named));
  ck_assert(sluice_test_log_capture_contains("1 tasks ignored their "
                                             "cancellable"));
  g_mutex_lock(&rec.lock);
  rec.gate_open = TRUE;
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_stop(TCase *stop)
{
  sluice_conformance__add(
      stop, graceful_stop_releases_unstarted_work_and_loses_nothing, 0);
  sluice_conformance__add(stop,
                          stop_timeout_releases_and_cancels_a_running_task, 0);
  sluice_conformance__add(
      stop, stop_names_only_tasks_that_ignore_their_cancellable, 0);
  sluice_conformance__add(stop, stop_now_releases_running_work_at_once, 0);
  sluice_conformance__add(
      stop, stop_now_names_only_tasks_that_ignore_their_cancellable, 0);
  sluice_conformance__add(stop, concurrency_limit_is_never_exceeded, 0);
}

/* workers.c - what operators see of workers: unknown tasks logged once,
 * announcements, and reclaimed deliveries run alone.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- Operators: what a worker tells them --------------------------------- */

/* A name no worker knows is said once (per name, per minute), however many
 * messages of it come back. */
START_TEST(unknown_task_is_logged_once_per_name)
{
  Env *e = env_new();

  for (guint i = 0; i < 5; i++)
    g_free(enqueue(e, "t.typo", NULL, NULL));
  g_free(enqueue(e, "t.other_typo", NULL, NULL));
  run_idle(e);
  ck_assert_uint_eq(stats_of(e).deferred, 6);
  ck_assert_uint_eq(sluice_test_log_capture_count("no task named “t.typo”"), 1);
  ck_assert_uint_eq(
      sluice_test_log_capture_count("no task named “t.other_typo”"), 1);
  env_free(e);
}
END_TEST

/* A running worker announces what it serves; stats show it alive, with
 * its tasks and queues, and (on a broker whose TTLs follow the fake
 * clock) as dead once its announcement lapsed, never as alive. */
START_TEST(workers_announce_what_they_serve)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats st;
  SluiceWorkerInfo *me = NULL;
  guint serving = 0, announced = 0;

  run_idle(e);
  ck_assert(sluice_client_get_stats(e->client, NULL, &st, &error));
  for (guint i = 0; i < st.workers->len; i++)
    if (g_strcmp0(((SluiceWorkerInfo *)st.workers->pdata[i])->id,
                  sluice_worker_get_id(e->worker)) == 0)
      me = st.workers->pdata[i];
  if (me == NULL || me->info == NULL) {
    /* A broker without the `announce` slot: nothing to see (the suite
     * adds this scenario only with it, so this says the broker lost the
     * announcement). */
    sluice_conformance__skip_now("workers_announce_what_they_serve",
                                 "stats listed no announcement");
    sluice_broker_stats_clear(&st);
    env_free(e);
    return;
  }
  ck_assert(me->alive);
  ck_assert_int_eq(me->pid, (gint)getpid());
  ck_assert_ptr_nonnull(me->tasks);
  ck_assert(g_strv_contains((const gchar *const *)me->tasks, "t.ok"));
  ck_assert(g_strv_contains((const gchar *const *)me->queues, "default"));
  ck_assert_uint_eq(me->concurrency, 4);
  sluice_broker_stats_clear(&st);
  ck_assert(sluice_client_count_servers(e->client, "t.ok", &serving, &announced,
                                        &error));
  ck_assert_uint_ge(announced, 1);
  ck_assert_uint_ge(serving, 1);
  ck_assert(
      sluice_client_count_servers(e->client, "t.typo", &serving, NULL, &error));
  ck_assert_uint_eq(serving, 0);

  if (sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_CLOCK_TTL)) {
    /* The worker stops renewing (as a killed one would): keep the clock
     * moving past its lease without letting it announce again. */
    g_autoptr(GBytes) nothing = g_bytes_new_static("\x80", 1); /* {} */

    sluice_worker_stop(e->worker);
    ck_assert(
        sluice_broker_announce(e->broker, "ghost", nothing, 1000, &error));
    sluice_test_harness_advance(e->h, 1001);
    ck_assert(sluice_client_get_stats(e->client, NULL, &st, &error));
    me = NULL;
    for (guint i = 0; i < st.workers->len; i++)
      if (g_strcmp0(((SluiceWorkerInfo *)st.workers->pdata[i])->id, "ghost") ==
          0)
        me = st.workers->pdata[i];
    ck_assert_ptr_nonnull(me);
    ck_assert(!me->alive);
    sluice_broker_stats_clear(&st);
  }
  env_free(e);
}
END_TEST

/* Quarantine (brokers with leases): what a dead consumer held is taken
 * over one delivery at a time and run alone, so that if it crashes its
 * new worker too, only it is charged a delivery. */
START_TEST(reclaimed_deliveries_run_alone)
{
  Env *e = env_new();
  g_autoptr(GPtrArray) taken = NULL;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  const gchar *const queues[] = {"default", NULL};
  gint64 deadline;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_LEASES)) {
    env_free(e);
    return;
  }
  /* A consumer takes four and dies: its lease (300 ms) lapses. */
  for (guint i = 0; i < 4; i++)
    g_ptr_array_add(ids, enqueue(e, "t.watch", NULL, NULL));
  taken = g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
  ck_assert(sluice_broker_heartbeat(e->broker, "dead", 300, NULL, 0, &error));
  ck_assert(
      sluice_broker_fetch(e->broker, "dead", queues, 4, 0, taken, &error));
  ck_assert_uint_eq(taken->len, 4);
  /* Four more, for the worker's own fetches, beside the reclaimed ones. */
  for (guint i = 0; i < 4; i++)
    g_ptr_array_add(ids, enqueue(e, "t.watch", NULL, NULL));

  deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
  while (total_runs() < 8 && g_get_monotonic_time() < deadline)
    run_idle(e); /* each call reclaims what has lapsed by then */
  ck_assert_uint_eq(total_runs(), 8);
  for (guint i = 0; i < ids->len; i++)
    ck_assert_uint_eq(runs_of(ids->pdata[i]), 1);
  for (guint i = 0; i < 4; i++)
    ck_assert_uint_eq(delivery_count_of(ids->pdata[i]), 2);
  ck_assert_uint_eq(rec.beside_suspect, 0);
  ck_assert_uint_eq(stats_of(e).reclaimed, 4);
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_workers(TCase *semantics)
{
  sluice_conformance__add(semantics, unknown_task_is_logged_once_per_name, 0);
  sluice_conformance__add(
      semantics, workers_announce_what_they_serve,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_ANNOUNCE));
  sluice_conformance__add(
      semantics, reclaimed_deliveries_run_alone,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_LEASES));
}

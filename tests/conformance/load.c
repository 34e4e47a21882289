/* load.c - many producers and one worker: every task runs exactly once.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- 15. many producers, one worker: each task runs exactly once --------- */

typedef struct {
  SluiceClient *client;
  guint count;
  GPtrArray *ids;
} Producer;

static gpointer
producer_main(gpointer data)
{
  Producer *p = data;

  for (guint i = 0; i < p->count; i++) {
    g_autoptr(GError) error = NULL;
    gchar *id = sluice_client_enqueue(p->client, "t.count", NULL, NULL, &error);
    if (id == NULL)
      g_error("enqueue failed: %s", error->message);
    g_ptr_array_add(p->ids, id);
  }
  return NULL;
}

START_TEST(many_producers_each_task_runs_exactly_once)
{
  enum { PRODUCERS = 8 };
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GHashTable) counts =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  Producer producers[PRODUCERS];
  GThread *threads[PRODUCERS];
  g_autoptr(GError) error = NULL;
  guint per = (guint)(12500 * factory->scale);
  guint total = per * PRODUCERS;

  default_options(&o);
  o.concurrency = 4;
  o.track_state = FALSE;
  e = env_new_full(100, &o);
  ck_assert(sluice_registry_add(e->registry, "t.count", task_count, counts,
                                NULL, NULL, &error));
  ck_assert(sluice_worker_start(e->worker, &error));
  for (guint i = 0; i < PRODUCERS; i++) {
    producers[i].client = e->client;
    producers[i].count = per;
    producers[i].ids = g_ptr_array_new_with_free_func(g_free);
    threads[i] = g_thread_new("producer", producer_main, &producers[i]);
  }
  for (guint i = 0; i < PRODUCERS; i++)
    g_thread_join(threads[i]);
  ck_assert_msg(wait_until(runs_reached, GUINT_TO_POINTER(total), 600000),
                "only %u of %u tasks ran", total_runs(), total);
  run_idle(e);

  ck_assert_uint_eq(total_runs(), total);
  ck_assert_uint_eq(g_hash_table_size(counts), total);
  for (guint i = 0; i < PRODUCERS; i++) {
    for (guint j = 0; j < producers[i].ids->len; j++) {
      const gchar *id = producers[i].ids->pdata[j];
      ck_assert_msg(GPOINTER_TO_UINT(g_hash_table_lookup(counts, id)) == 1,
                    "task %s ran %u times", id,
                    GPOINTER_TO_UINT(g_hash_table_lookup(counts, id)));
    }
    g_ptr_array_unref(producers[i].ids);
  }
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_load(TCase *load)
{
  sluice_conformance__add(load, many_producers_each_task_runs_exactly_once, 0);
}

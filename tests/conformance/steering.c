/* steering.c - seeing and steering tasks: listing pages, pausing a queue,
 * running a scheduled task now, deleting one task wherever it is.
 *
 * Part of the conformance suite (scenario.h has what the files share;
 * conformance.c puts the scenarios in the suite).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

/* ---- Operators: seeing and steering -------------------------------------- */

/* Every page of a listing, from no cursor to none. */
static GPtrArray *
list_every_page(Env *e, SluiceTaskState state, const gchar *queue,
                const gchar *task, guint limit)
{
  GPtrArray *all =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_listed_task_free);
  g_autofree gchar *cursor = NULL;
  guint pages = 0;

  do {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) page = NULL;
    SluiceListOptions lo;
    gchar *next = NULL;

    sluice_list_options_init(&lo);
    lo.state = state;
    lo.queue = queue;
    lo.task = task;
    lo.cursor = cursor;
    lo.limit = limit;
    page = sluice_client_list(e->client, &lo, &next, &error);
    ck_assert_msg(page != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_uint_le(page->len, limit);
    while (page->len > 0)
      g_ptr_array_add(all, g_ptr_array_steal_index(page, 0));
    g_free(cursor);
    cursor = next;
    ck_assert_uint_lt(++pages, 1000);
  } while (cursor != NULL);
  return all;
}

/* The ids of @listed, each once (fails on a repeat). */
static GHashTable *
ids_of(GPtrArray *listed, SluiceTaskState state)
{
  GHashTable *ids = g_hash_table_new(g_str_hash, g_str_equal);

  for (guint i = 0; i < listed->len; i++) {
    SluiceListedTask *t = listed->pdata[i];
    ck_assert_int_eq(t->state, state);
    ck_assert_ptr_nonnull(t->id);
    ck_assert_msg(g_hash_table_add(ids, t->id), "%s listed twice", t->id);
  }
  return ids;
}

static gboolean
listed_running(gpointer data)
{
  Env *e = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) page = NULL;
  SluiceListOptions lo;

  sluice_list_options_init(&lo);
  lo.state = SLUICE_STATE_RUNNING;
  page = sluice_client_list(e->client, &lo, NULL, &error);
  return page != NULL && page->len == 3;
}

/* Each state, paged: every task listed once, in its state, nothing
 * changed by looking; filters keep what matches. */
START_TEST(listing_pages_cover_every_task_of_a_state_once)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) all = NULL;
  g_autoptr(GHashTable) ids = NULL;
  g_autoptr(GPtrArray) queued = g_ptr_array_new_with_free_func(g_free);
  SluiceEnqueueOptions eo;
  SluiceListOptions lo;
  g_autoptr(GPtrArray) page = NULL;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING) ||
      !sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    sluice_list_options_init(&lo);
    lo.queue = "default";
    ck_assert_ptr_null(sluice_client_list(e->client, &lo, NULL, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    env_free(e);
    return;
  }
  /* Queued: 25, one of another task name. */
  for (guint i = 0; i < 25; i++)
    g_ptr_array_add(queued,
                    enqueue(e, i == 7 ? "t.fatal" : "t.ok", NULL, NULL));
  all = list_every_page(e, SLUICE_STATE_QUEUED, "default", NULL, 7);
  ck_assert_uint_eq(all->len, 25);
  if (!ordered(e->broker)) {
    /* Each once, in the broker's order: put them in enqueue order. */
    gpointer by_enqueue[25] = {NULL};
    for (guint i = 0; i < 25; i++) {
      SluiceListedTask *t = all->pdata[i];
      gint at = index_of_id(queued, t->id);
      ck_assert_int_ge(at, 0);
      ck_assert_ptr_null(by_enqueue[at]);
      by_enqueue[at] = t;
    }
    memcpy(all->pdata, by_enqueue, sizeof by_enqueue);
  }
  for (guint i = 0; i < 25; i++) {
    SluiceListedTask *t = all->pdata[i];
    ck_assert_str_eq(t->id, queued->pdata[i]);
    ck_assert_str_eq(t->queue, "default");
    ck_assert_uint_eq(t->attempt, 1);
    ck_assert_int_eq(t->enqueued_at_ms, e->t0);
  }
  g_clear_pointer(&all, g_ptr_array_unref);
  all = list_every_page(e, SLUICE_STATE_QUEUED, "default", "t.fatal", 5);
  ck_assert_uint_eq(all->len, 1);
  ck_assert_str_eq(((SluiceListedTask *)all->pdata[0])->id, queued->pdata[7]);
  g_clear_pointer(&all, g_ptr_array_unref);

  /* Run them: 24 succeed, one is buried. Then 4 delays and 2 retries. */
  run_idle(e);
  sluice_enqueue_options_init(&eo);
  for (guint i = 0; i < 4; i++) {
    eo.delay_ms = 60000 + i * 1000;
    eo.queue = i % 2 ? "later" : "default";
    g_free(enqueue(e, "t.ok", NULL, &eo));
  }
  g_free(enqueue(e, "t.fail", NULL, NULL));
  g_free(enqueue(e, "t.fail", NULL, NULL));
  run_idle(e); /* each fails once and waits for its retry */

  all = list_every_page(e, SLUICE_STATE_SCHEDULED, NULL, NULL, 3);
  ck_assert_uint_eq(all->len, 4);
  ids = ids_of(all, SLUICE_STATE_SCHEDULED);
  for (guint i = 0; i < all->len; i++) {
    SluiceListedTask *t = all->pdata[i];
    ck_assert_int_eq(t->due_at_ms, e->t0 + 60000 + i * 1000);
    ck_assert_str_eq(t->queue, i % 2 ? "later" : "default");
  }
  g_clear_pointer(&ids, g_hash_table_unref);
  g_clear_pointer(&all, g_ptr_array_unref);
  all = list_every_page(e, SLUICE_STATE_SCHEDULED, "later", NULL, 100);
  ck_assert_uint_eq(all->len, 2);
  g_clear_pointer(&all, g_ptr_array_unref);

  all = list_every_page(e, SLUICE_STATE_RETRYING, NULL, NULL, 1);
  ck_assert_uint_eq(all->len, 2);
  ids = ids_of(all, SLUICE_STATE_RETRYING);
  for (guint i = 0; i < all->len; i++) {
    SluiceListedTask *t = all->pdata[i];
    ck_assert_str_eq(t->task, "t.fail");
    ck_assert_uint_eq(t->attempt, 2);
    ck_assert_int_gt(t->due_at_ms, e->t0);
    ck_assert_msg(t->error != NULL && strstr(t->error, "boom at attempt 1"),
                  "retry error: %s", t->error);
  }
  g_clear_pointer(&ids, g_hash_table_unref);
  g_clear_pointer(&all, g_ptr_array_unref);

  all = list_every_page(e, SLUICE_STATE_DEAD_LETTERED, NULL, NULL, 10);
  ck_assert_uint_eq(all->len, 1);
  {
    SluiceListedTask *t = all->pdata[0];
    ck_assert_str_eq(t->id, queued->pdata[7]);
    ck_assert_str_eq(t->dead_letter_reason, SLUICE_DLQ_NON_RETRYABLE);
    ck_assert_ptr_nonnull(t->entry_id);
  }
  g_clear_pointer(&all, g_ptr_array_unref);

  /* Running: from the workers' announcements, fresh within seconds. */
  for (guint i = 0; i < 3; i++)
    g_free(enqueue(e, "t.gate", NULL, NULL));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(3), 30000));
  ck_assert_msg(sluice_test_wait_for(listed_running, e, 60000),
                "the running tasks were never listed");
  all = list_every_page(e, SLUICE_STATE_RUNNING, NULL, NULL, 2);
  ck_assert_uint_eq(all->len, 3);
  ids = ids_of(all, SLUICE_STATE_RUNNING);
  for (guint i = 0; i < all->len; i++) {
    SluiceListedTask *t = all->pdata[i];
    ck_assert_str_eq(t->task, "t.gate");
    ck_assert_str_eq(t->worker, sluice_worker_get_id(e->worker));
    ck_assert_int_eq(t->started_at_ms, e->t0);
  }
  g_clear_pointer(&all, g_ptr_array_unref);
  all = list_every_page(e, SLUICE_STATE_RUNNING, "elsewhere", NULL, 2);
  ck_assert_uint_eq(all->len, 0);
  open_gate();
  run_idle(e);

  /* A cursor of one listing is refused by another. */
  sluice_list_options_init(&lo);
  lo.queue = "nowhere";
  lo.limit = 1;
  sluice_enqueue_options_init(&eo);
  eo.queue = "nowhere";
  g_clear_pointer(&all, g_ptr_array_unref);
  {
    g_autofree gchar *next = NULL;
    g_autoptr(GPtrArray) first = NULL;

    g_free(enqueue(e, "t.ok", NULL, &eo));
    g_free(enqueue(e, "t.ok", NULL, &eo));
    first = sluice_client_list(e->client, &lo, &next, &error);
    ck_assert_ptr_nonnull(next);
    lo.state = SLUICE_STATE_SCHEDULED;
    lo.cursor = next;
    page = sluice_client_list(e->client, &lo, NULL, &error);
    ck_assert_ptr_null(page);
    ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                              SLUICE_CLIENT_ERROR_INVALID));
  }
  env_free(e);
}
END_TEST

/* A paused queue is left alone by every worker until resumed: producers
 * still enqueue, stats show it paused, other queues run on. */
START_TEST(pause_stops_fetching_until_resumed)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *other = NULL;
  g_auto(GStrv) paused = NULL;
  SluiceEnqueueOptions eo;
  SluiceBrokerStats st;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    ck_assert(!sluice_client_pause(e->client, "default", &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    env_free(e);
    return;
  }
  ck_assert(sluice_client_pause(e->client, "default", &error));
  ck_assert(sluice_client_pause(e->client, "idle", &error));
  paused = sluice_client_list_paused(e->client, &error);
  ck_assert_uint_eq(g_strv_length(paused), 2);
  ck_assert_str_eq(paused[0], "default");
  ck_assert_str_eq(paused[1], "idle");

  id = enqueue(e, "t.ok", NULL, NULL);
  run_idle(e); /* syncs the pauses first, so this fetch knows */
  ck_assert_uint_eq(runs_of(id), 0);
  ck_assert_state(e, id, SLUICE_STATE_QUEUED);
  ck_assert(sluice_client_get_stats(e->client, NULL, &st, &error));
  for (guint i = 0; i < st.queues->len; i++) {
    SluiceQueueStats *q = st.queues->pdata[i];
    if (g_strcmp0(q->name, "default") == 0) {
      ck_assert(q->paused);
      ck_assert_int_eq(q->ready, 1);
    }
  }
  ck_assert_int_eq(sluice_test_queue_ready(&st, "idle"), 0);
  sluice_broker_stats_clear(&st);

  /* A worker of two queues runs the one that is not paused. */
  {
    const gchar *const both[] = {"default", "other", NULL};
    SluiceWorkerOptions o;
    g_autoptr(SluiceWorker) w2 = NULL;

    default_options(&o);
    o.queues = both;
    w2 = sluice_worker_new(e->broker, e->registry, &o, &error);
    sluice_enqueue_options_init(&eo);
    eo.queue = "other";
    other = enqueue(e, "t.ok", NULL, &eo);
    ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
    ck_assert_uint_eq(runs_of(other), 1);
    ck_assert_uint_eq(runs_of(id), 0);
    sluice_worker_stop(w2);
  }

  /* The worker's own sync (not run_until_idle's) sees the resume. */
  sluice_test_log_capture_reset();
  ck_assert(sluice_client_resume(e->client, "default", &error));
  ck_assert(wait_until(runs_reached, GUINT_TO_POINTER(2), 60000));
  ck_assert_uint_eq(runs_of(id), 1);
  /* Said just after the fetcher was told, so the task may run first. */
  ck_assert(wait_until(log_mentions, "queue “default” is resumed", 60000));
  g_clear_pointer(&paused, g_strfreev);
  paused = sluice_client_list_paused(e->client, &error);
  ck_assert_uint_eq(g_strv_length(paused), 1);
  env_free(e);
}
END_TEST

/* The ready count of @queue. */
static gint64
ready_of(Env *e, const gchar *queue)
{
  const gchar *const queues[] = {queue, NULL};
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats st;
  gint64 n;

  ck_assert_msg(sluice_client_get_stats(e->client, queues, &st, &error), "%s",
                error != NULL ? error->message : "");
  n = sluice_test_queue_ready(&st, queue);
  sluice_broker_stats_clear(&st);
  return n;
}

typedef struct {
  Env *e;
  const gchar *queue;
  gint64 ready;
} ReadyWait;

static gboolean
ready_is(gpointer data)
{
  ReadyWait *w = data;
  return ready_of(w->e, w->queue) == w->ready;
}

static gboolean
ready_at_most(gpointer data)
{
  ReadyWait *w = data;
  return ready_of(w->e, w->queue) <= w->ready;
}

/* A pause is the broker's: once sluice_client_pause() returned, a running
 * worker takes nothing more of the queue, though it syncs its pauses only
 * once an hour here; after the resume it takes it again. */
START_TEST(pause_holds_before_the_workers_know_of_it)
{
  const gchar *const queues[] = {"held", "open", NULL};
  SluiceWorkerOptions o;
  SluiceEnqueueOptions eo;
  Env *e;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *warm = NULL;
  g_autofree gchar *held = NULL;
  g_autofree gchar *open = NULL;

  default_options(&o);
  o.queues = queues;
  o.concurrency = 1;
  o.prefetch = 0;
  o.revocation_interval_ms = 3600 * 1000;
  e = env_new_full(100, &o);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    env_free(e);
    return;
  }
  sluice_enqueue_options_init(&eo);
  eo.queue = "open";
  warm = enqueue(e, "t.ok", NULL, &eo);
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(runs_reached, GUINT_TO_POINTER(1), 60000));

  ck_assert(sluice_client_pause(e->client, "held", &error));
  eo.queue = "held";
  held = enqueue(e, "t.ok", NULL, &eo);
  eo.queue = "open";
  open = enqueue(e, "t.ok", NULL, &eo);
  /* "held" goes first in the worker's order: had its fetch taken it, it
   * would have run before "open" did. */
  ck_assert(wait_until(runs_reached, GUINT_TO_POINTER(2), 60000));
  ck_assert_uint_eq(runs_of(open), 1);
  ck_assert_uint_eq(runs_of(held), 0);
  ck_assert_state(e, held, SLUICE_STATE_QUEUED);

  ck_assert(sluice_client_resume(e->client, "held", &error));
  ck_assert(wait_until(runs_reached, GUINT_TO_POINTER(3), 60000));
  ck_assert_uint_eq(runs_of(held), 1);
  env_free(e);
}
END_TEST

/* What a worker fetched and has not started when its queue is paused is
 * given back, and runs only once the queue is resumed. */
START_TEST(pause_gives_back_what_was_fetched_and_not_started)
{
  const gchar *const queues[] = {"q", NULL};
  SluiceWorkerOptions o;
  SluiceEnqueueOptions eo;
  Env *e;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *gate = NULL;
  gchar *waiting[3];
  ReadyWait w;

  default_options(&o);
  o.queues = queues;
  o.concurrency = 1;
  o.prefetch = 4;
  e = env_new_full(100, &o);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    env_free(e);
    return;
  }
  sluice_enqueue_options_init(&eo);
  eo.queue = "q";
  gate = enqueue(e, "t.gate", NULL, &eo);
  ck_assert(sluice_worker_start(e->worker, &error));
  ck_assert(wait_until(at_gate, GUINT_TO_POINTER(1), 60000));
  /* Enqueued once the gate holds the one executor (without ORDERED one of
   * them could run first otherwise). */
  for (guint i = 0; i < 3; i++)
    waiting[i] = enqueue(e, "t.ok", NULL, &eo);
  /* Something besides the gate was fetched: it waits for the executor. */
  w = (ReadyWait){e, "q", 2};
  ck_assert(sluice_test_wait_for(ready_at_most, &w, 60000));

  sluice_test_log_capture_reset();
  ck_assert(sluice_client_pause(e->client, "q", &error));
  ck_assert(wait_until(log_mentions, "queue “q” is paused", 60000));
  w.ready = 3;
  ck_assert_msg(sluice_test_wait_for(ready_is, &w, 60000),
                "%" G_GINT64_FORMAT " ready in q, not 3", ready_of(e, "q"));
  open_gate();
  ck_assert_state_soon(e, gate, SLUICE_STATE_SUCCEEDED);
  for (guint i = 0; i < 3; i++) {
    ck_assert_uint_eq(runs_of(waiting[i]), 0);
    ck_assert_state(e, waiting[i], SLUICE_STATE_QUEUED);
  }
  ck_assert_int_eq(ready_of(e, "q"), 3);

  ck_assert(sluice_client_resume(e->client, "q", &error));
  ck_assert(wait_until(runs_reached, GUINT_TO_POINTER(4), 60000));
  for (guint i = 0; i < 3; i++) {
    ck_assert_uint_eq(runs_of(waiting[i]), 1);
    g_free(waiting[i]);
  }
  env_free(e);
}
END_TEST

/* Run now: a delayed task, and a retry, go to their queue at once. */
START_TEST(run_now_moves_a_scheduled_task_to_its_queue)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *later = NULL;
  g_autofree gchar *failing = NULL;
  g_autofree gchar *buried = NULL;
  SluiceEnqueueOptions eo;

  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 3600 * 1000;
  later = enqueue(e, "t.ok", NULL, &eo);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    ck_assert(!sluice_client_run_now(e->client, later, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    env_free(e);
    return;
  }
  failing = enqueue(e, "t.fail", NULL, NULL);
  run_idle(e);
  ck_assert_uint_eq(runs_of(later), 0);
  ck_assert_uint_eq(runs_of(failing), 1);

  ck_assert_msg(sluice_client_run_now(e->client, later, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_client_run_now(e->client, failing, &error));
  run_idle(e); /* the clock has not moved */
  ck_assert_uint_eq(runs_of(later), 1);
  ck_assert_uint_eq(runs_of(failing), 2);
  ck_assert_uint_eq(attempt_of(failing, 1) / 1000, 2);

  /* Not on the schedule: said so, and where it is instead. */
  ck_assert(!sluice_client_run_now(e->client, later, &error));
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_NOT_FOUND));
  ck_assert_msg(strstr(error->message, "succeeded") != NULL, "%s",
                error->message);
  g_clear_error(&error);
  buried = enqueue(e, "t.fatal", NULL, NULL);
  run_idle(e);
  ck_assert(!sluice_client_run_now(e->client, buried, &error));
  ck_assert_msg(strstr(error->message, "dead letter") != NULL, "%s",
                error->message);
  env_free(e);
}
END_TEST

/* Delete finds a task wherever it is: off the schedule, out of the dead
 * letters, or out of its queue (revoked, on a broker that cannot take a
 * message out). */
START_TEST(delete_removes_one_task_wherever_it_is)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  g_autofree gchar *later = NULL;
  g_autofree gchar *buried = NULL;
  g_autofree gchar *queued = NULL;
  SluiceEnqueueOptions eo;

  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 60000;
  later = enqueue(e, "t.ok", NULL, &eo);
  buried = enqueue(e, "t.fatal", NULL, NULL);
  run_idle(e);
  /* On a queue the running worker does not take from, so it is still
   * queued when it is deleted; a worker of that queue meets it later. */
  sluice_enqueue_options_init(&eo);
  eo.queue = "held";
  queued = enqueue(e, "t.ok", NULL, &eo);

  ck_assert_int_eq(sluice_client_delete(e->client, later, &error),
                   SLUICE_DELETE_UNSCHEDULED);
  /* Without lookup_task only its record says where it is: it finished. */
  ck_assert_int_eq(
      sluice_client_delete(e->client, buried, &error),
      sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_LOOKUP_TASK)
          ? SLUICE_DELETE_DEAD_LETTER
          : SLUICE_DELETE_FAILED);
  g_clear_error(&error);
  ck_assert_int_eq(sluice_client_delete(e->client, queued, &error),
                   SLUICE_DELETE_REMOVED);
  sluice_test_harness_advance(e->h, 120000);
  run_idle(e);
  {
    const gchar *const held[] = {"held", NULL};
    SluiceWorkerOptions o;
    g_autoptr(SluiceWorker) w2 = NULL;

    default_options(&o);
    o.queues = held;
    w2 = sluice_worker_new(e->broker, e->registry, &o, &error);
    ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
    sluice_worker_stop(w2);
  }
  ck_assert_uint_eq(runs_of(later), 0);
  ck_assert_uint_eq(runs_of(queued), 0);
  ck_assert_state(e, later, SLUICE_STATE_CANCELLED);
  ck_assert_state(e, queued, SLUICE_STATE_CANCELLED);
  dead = dead_letters(e);
  if (sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_LOOKUP_TASK))
    ck_assert_uint_eq(dead->len, 0);
  env_free(e);
}
END_TEST

/* A queued task deleted is out of its queue at once, tracked or not:
 * not listed, not counted, its record `cancelled` with its name, queue
 * and enqueue time; a worker of the queue never meets it. An id that is
 * nowhere, or a task that finished, is an error. */
START_TEST(delete_takes_a_queued_task_out_of_its_queue)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) untracked = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GPtrArray) page = NULL;
  g_autofree gchar *tracked = NULL;
  g_autofree gchar *plain = NULL;
  g_autofree gchar *kept = NULL;
  g_autofree gchar *done = NULL;
  const gchar *const held[] = {"held", NULL};
  SluiceEnqueueOptions eo;
  SluiceClientOptions co;
  SluiceListOptions lo;
  SluiceBrokerStats st;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    env_free(e);
    return;
  }
  sluice_client_options_init(&co);
  co.track_state = FALSE;
  untracked = sluice_client_new(e->broker, &co, &error);
  sluice_enqueue_options_init(&eo);
  eo.queue = "held";
  tracked = enqueue(e, "t.ok", NULL, &eo);
  plain = sluice_client_enqueue(untracked, "t.ok", NULL, &eo, &error);
  kept = enqueue(e, "t.ok", NULL, &eo);
  done = enqueue(e, "t.ok", NULL, NULL);
  run_idle(e);
  ck_assert_state(e, done, SLUICE_STATE_SUCCEEDED);
  sluice_test_harness_advance(e->h, 1000);

  ck_assert_int_eq(sluice_client_delete(e->client, tracked, &error),
                   SLUICE_DELETE_REMOVED);
  /* Without a record, every queue is looked through. */
  ck_assert_int_eq(sluice_client_delete(e->client, plain, &error),
                   SLUICE_DELETE_REMOVED);
  sluice_list_options_init(&lo);
  lo.queue = "held";
  page = sluice_client_list(e->client, &lo, NULL, &error);
  ck_assert_uint_eq(page->len, 1);
  ck_assert_str_eq(((SluiceListedTask *)page->pdata[0])->id, kept);
  ck_assert(sluice_client_get_stats(e->client, held, &st, &error));
  ck_assert_int_eq(sluice_test_queue_ready(&st, "held"), 1);
  sluice_broker_stats_clear(&st);
  r = sluice_client_inspect(e->client, tracked, &error);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_CANCELLED);
  ck_assert_str_eq(sluice_result_get_task(r), "t.ok");
  ck_assert_str_eq(sluice_result_get_queue(r), "held");
  ck_assert_int_eq(sluice_result_get_enqueued_at(r), e->t0);
  ck_assert_str_eq(sluice_result_get_error(r), "deleted before it ran");
  g_clear_pointer(&r, sluice_result_unref);
  r = sluice_client_inspect(e->client, plain, &error);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_CANCELLED);

  /* Nowhere at all, or finished: nothing to delete. */
  ck_assert_int_eq(sluice_client_delete(e->client, "no-such-task", &error),
                   SLUICE_DELETE_FAILED);
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_NOT_FOUND));
  g_clear_error(&error);
  ck_assert_int_eq(sluice_client_delete(e->client, done, &error),
                   SLUICE_DELETE_FAILED);
  ck_assert_msg(g_error_matches(error, SLUICE_CLIENT_ERROR,
                                SLUICE_CLIENT_ERROR_NOT_FOUND) &&
                    strstr(error->message, "succeeded") != NULL,
                "%s", error->message);
  g_clear_error(&error);

  {
    SluiceWorkerOptions o;
    g_autoptr(SluiceWorker) w2 = NULL;

    default_options(&o);
    o.queues = held;
    w2 = sluice_worker_new(e->broker, e->registry, &o, &error);
    ck_assert(sluice_worker_run_until_idle(w2, 60000, NULL, &error));
    sluice_worker_stop(w2);
  }
  ck_assert_uint_eq(runs_of(tracked), 0);
  ck_assert_uint_eq(runs_of(plain), 0);
  ck_assert_uint_eq(runs_of(kept), 1);
  ck_assert_state(e, tracked, SLUICE_STATE_CANCELLED);
  env_free(e);
}
END_TEST

/* A purge takes every ready task out with a record that says so; a task
 * a worker holds is left to it. */
START_TEST(purge_records_the_tasks_it_takes_out)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  gchar *ids[3];
  SluiceEnqueueOptions eo;
  SluiceBrokerStats st;
  const gchar *const p[] = {"p", NULL};
  guint64 removed = 0;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    env_free(e);
    return;
  }
  sluice_enqueue_options_init(&eo);
  eo.queue = "p";
  for (guint i = 0; i < 3; i++)
    ids[i] = enqueue(e, "t.ok", NULL, &eo);
  ck_assert_msg(sluice_client_purge(e->client, "p", &removed, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_uint_eq(removed, 3);
  ck_assert(sluice_client_get_stats(e->client, p, &st, &error));
  ck_assert_int_eq(sluice_test_queue_ready(&st, "p"), 0);
  sluice_broker_stats_clear(&st);
  for (guint i = 0; i < 3; i++) {
    g_autoptr(SluiceResult) r =
        sluice_client_inspect(e->client, ids[i], &error);

    ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
    /* Without remove_queued the broker's purge leaves records alone. */
    if (sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_STEERING)) {
      ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_CANCELLED);
      ck_assert_str_eq(sluice_result_get_error(r),
                       "purged from queue p before it ran");
      ck_assert_str_eq(sluice_result_get_task(r), "t.ok");
    }
    g_free(ids[i]);
  }
  env_free(e);
}
END_TEST

/* ---- Into the suite ------------------------------------------------------ */

void
sluice_conformance__add_steering(TCase *steer)
{
  sluice_conformance__add(steer, listing_pages_cover_every_task_of_a_state_once,
                          0);
  sluice_conformance__add(steer, pause_stops_fetching_until_resumed, 0);
  sluice_conformance__add(steer, pause_holds_before_the_workers_know_of_it, 0);
  sluice_conformance__add(steer,
                          pause_gives_back_what_was_fetched_and_not_started, 0);
  sluice_conformance__add(steer, run_now_moves_a_scheduled_task_to_its_queue,
                          0);
  sluice_conformance__add(steer, delete_removes_one_task_wherever_it_is, 0);
  sluice_conformance__add(steer, delete_takes_a_queued_task_out_of_its_queue,
                          0);
  sluice_conformance__add(steer, purge_records_the_tasks_it_takes_out, 0);
}

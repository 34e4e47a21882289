/* flow.c - flow control on any broker: rate limits kept by the broker on
 * its own clock, the pause a task asks for after a downstream's 429, and
 * snoozes that use no attempt.
 *
 * Time: on a broker whose TTLs follow its SluiceClock (CLOCK_TTL) the rate
 * buckets do too, and a scenario only advances the fake clock. Elsewhere
 * (Redis) the buckets follow the store's time, so a scenario advances the
 * fake clock (the schedule's) and lets as much real time pass. Assertions
 * read the broker's time of each admission (what the task context
 * reports), never a worker's or the test's, so they hold on a busy
 * machine: the property checked is the broker's, not the scheduler's.
 */
#include "config.h"

#include <string.h>

#include <glib/gstdio.h>

#include "tests/conformance/conformance.h"
#include "tests/helpers/broker-calls.h"

static const SluiceConformanceFactory *factory;

/* ---- What the tasks saw -------------------------------------------------- */

typedef struct {
  gchar *id;
  gchar *queue;
  gchar *tenant;
  guint attempt;
  gint64 admitted_at;
} Run;

static struct {
  GMutex lock;
  GArray *runs; /* Run */
} seen;

static void
run_clear(gpointer data)
{
  Run *r = data;
  g_free(r->id);
  g_free(r->queue);
  g_free(r->tenant);
}

static void
seen_reset(void)
{
  g_mutex_lock(&seen.lock);
  g_clear_pointer(&seen.runs, g_array_unref);
  seen.runs = g_array_new(FALSE, TRUE, sizeof(Run));
  g_array_set_clear_func(seen.runs, run_clear);
  g_mutex_unlock(&seen.lock);
}

/* Records the run; returns how many runs of this id came before it. */
static guint
record(SluiceTaskContext *ctx)
{
  Run r = {0};
  const gchar *tenant = sluice_task_context_get_header(ctx, "tenant");
  guint before = 0;

  r.id = g_strdup(sluice_task_context_get_id(ctx));
  r.queue = g_strdup(sluice_task_context_get_queue(ctx));
  r.tenant = g_strdup(tenant != NULL ? tenant : "");
  r.attempt = sluice_task_context_get_attempt(ctx);
  r.admitted_at = sluice_task_context_get_admitted_at(ctx);
  g_mutex_lock(&seen.lock);
  for (guint i = 0; i < seen.runs->len; i++)
    if (g_str_equal(g_array_index(seen.runs, Run, i).id, r.id))
      before++;
  g_array_append_val(seen.runs, r);
  g_mutex_unlock(&seen.lock);
  return before;
}

static guint
n_runs(void)
{
  guint n;

  g_mutex_lock(&seen.lock);
  n = seen.runs->len;
  g_mutex_unlock(&seen.lock);
  return n;
}

/* Runs of @id (or every run with @id NULL) as a copy: admitted_at each. */
static GArray *
admissions(const gchar *id, const gchar *tenant)
{
  GArray *out = g_array_new(FALSE, FALSE, sizeof(gint64));

  g_mutex_lock(&seen.lock);
  for (guint i = 0; i < seen.runs->len; i++) {
    Run *r = &g_array_index(seen.runs, Run, i);
    if ((id == NULL || g_str_equal(r->id, id)) &&
        (tenant == NULL || g_str_equal(r->tenant, tenant)))
      g_array_append_val(out, r->admitted_at);
  }
  g_mutex_unlock(&seen.lock);
  return out;
}

static gboolean
task_log(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  record(ctx);
  return TRUE;
}

/* The scenario's first run (of any message) reports a 429 asking for 3 s;
 * every later run succeeds. It runs alone: nothing else is queued yet. */
static gboolean
task_429_once(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gboolean first = n_runs() == 0;

  record(ctx);
  if (first)
    return sluice_task_context_rate_limited(ctx, 3000, error);
  return TRUE;
}

/* Snoozes its first two runs, then succeeds. */
static gboolean
task_snooze_twice(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  if (record(ctx) < 2)
    return sluice_task_context_snooze(ctx, 1000, error);
  return TRUE;
}

static gboolean
task_snooze_always(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  record(ctx);
  return sluice_task_context_snooze(ctx, 1000, error);
}

/* ---- The environment ----------------------------------------------------- */

typedef struct {
  SluiceClock *clock;
  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceTestHarness *h;
  SluiceClient *client;
} Env;

/* A fresh broker and registry; NULL (and the scenario is skipped) when the
 * broker keeps no rate limits. */
static Env *
env_new(void)
{
  Env *e = g_new0(Env, 1);
  g_autoptr(GError) error = NULL;

  seen_reset();
  sluice_test_log_capture_reset();
  e->clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  e->broker = factory->create(e->clock, 100, factory->data, &error);
  ck_assert_msg(e->broker != NULL, "%s: cannot create the broker: %s",
                factory->name, error != NULL ? error->message : "?");
  e->registry = sluice_registry_new();
  return e;
}

static gboolean
keeps_rate_limits(Env *e)
{
  return sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_RATES);
}

static void
add_task(Env *e, const gchar *name, SluiceTaskFunc func,
         const SluiceTaskOptions *options)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(
      sluice_registry_add(e->registry, name, func, NULL, NULL, options, &error),
      "%s", error != NULL ? error->message : "");
}

static void
env_start(Env *e, const SluiceWorkerOptions *options)
{
  g_autoptr(GError) error = NULL;
  SluiceWorkerOptions o;

  if (options == NULL) {
    sluice_worker_options_init(&o);
    o.retry.jitter = SLUICE_OFF;
    options = &o;
  }
  e->h = sluice_test_harness_new_with_broker(e->broker, e->registry, options,
                                             &error);
  ck_assert_msg(e->h != NULL, "%s", error != NULL ? error->message : "");
  e->client = sluice_test_harness_get_client(e->h);
}

static void
env_free(Env *e)
{
  if (e->h != NULL)
    sluice_test_harness_free(e->h);
  sluice_registry_unref(e->registry);
  sluice_broker_unref(e->broker);
  sluice_clock_unref(e->clock);
  g_free(e);
}

static void
run_idle(Env *e)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sluice_test_harness_run_until_idle(e->h, &error), "%s",
                error != NULL ? error->message : "");
}

/* Moves time on by @ms: the fake clock, and real time too where the
 * broker's buckets follow the store's own clock. */
static void
pass(Env *e, gint64 ms)
{
  sluice_test_harness_advance(e->h, ms);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_CLOCK_TTL))
    g_usleep((gulong)ms * 1000);
}

/* Runs until @want runs were seen, moving time on @step ms at a time, for
 * at most @most_ms of it. */
static void
run_until(Env *e, guint want, gint64 step, gint64 most_ms)
{
  gint64 passed = 0;

  run_idle(e);
  while (n_runs() < want) {
    ck_assert_msg(passed <= most_ms,
                  "%u runs of %u after %" G_GINT64_FORMAT " ms", n_runs(), want,
                  passed);
    pass(e, step);
    passed += step;
    run_idle(e);
  }
}

static gchar *
enqueue_for(Env *e, const gchar *task, const gchar *queue, const gchar *tenant)
{
  SluiceEnqueueOptions o;
  g_autoptr(GHashTable) headers =
      g_hash_table_new_full(g_str_hash, g_str_equal, NULL, NULL);

  sluice_enqueue_options_init(&o);
  o.queue = queue;
  if (tenant != NULL) {
    g_hash_table_insert(headers, (gpointer) "tenant", (gpointer)tenant);
    o.headers = headers;
  }
  return sluice_test_client_enqueue(e->client, task, NULL, &o);
}

static gint
cmp_int64(gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
  return x < y ? -1 : x > y;
}

/* ---- Rate limits --------------------------------------------------------- */

static SluiceRateAcquire
acquire(Env *e, const gchar *key, gint64 interval_us, gint64 tolerance_us,
        gint64 block_ms)
{
  g_autoptr(GError) error = NULL;
  SluiceRateAcquire item = {.key = key,
                            .interval_us = interval_us,
                            .tolerance_us = tolerance_us,
                            .block_ms = block_ms};

  ck_assert_msg(sluice_broker_rate_acquire(e->broker, &item, 1, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_int_gt(item.now_ms, 0);
  return item;
}

/* The slot itself: a burst of 3 at one a second admits three at once and
 * then says how long until the fourth; buckets are independent, in one
 * call or apart; a block admits nothing for its length. */
START_TEST(rate_acquire_follows_the_generic_cell_rate_algorithm)
{
  Env *e = env_new();
  SluiceRateAcquire two[2] = {
      {.key = "other-1", .interval_us = 1000000},
      {.key = "other-2", .interval_us = 1000000},
  };
  SluiceRateAcquire got;
  g_autoptr(GError) error = NULL;

  if (!keeps_rate_limits(e)) {
    env_free(e);
    return;
  }
  for (guint i = 0; i < 3; i++)
    ck_assert(acquire(e, "k", 1000000, 2000000, 0).granted);
  got = acquire(e, "k", 1000000, 2000000, 0);
  ck_assert(!got.granted);
  ck_assert_int_ge(got.wait_ms, 1);
  ck_assert_int_le(got.wait_ms, 1000);
  ck_assert(sluice_broker_rate_acquire(e->broker, two, 2, &error));
  ck_assert(two[0].granted && two[1].granted);
  got = acquire(e, "blocked", 1000, 0, 5000);
  ck_assert(!got.granted);
  ck_assert_int_eq(got.wait_ms, 5000);
  got = acquire(e, "blocked", 1000, 0, 0);
  ck_assert(!got.granted);
  ck_assert_int_gt(got.wait_ms, 4000);
  ck_assert_int_le(got.wait_ms, 5000);
  if (sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_CLOCK_TTL)) {
    /* The buckets follow the broker's clock: a second later, one more. */
    sluice_clock_advance(e->clock, 1000);
    ck_assert(acquire(e, "k", 1000000, 2000000, 0).granted);
    ck_assert(!acquire(e, "k", 1000000, 2000000, 0).granted);
    sluice_clock_advance(e->clock, 5000);
    ck_assert(acquire(e, "blocked", 1000, 0, 0).granted);
  }
  env_free(e);
}
END_TEST

/* 10 per second over 200 tasks: the broker admits them over at least 19 s
 * of its clock, never more than 10 in any second, each on its first
 * attempt and exactly once. */
START_TEST(rate_limit_admits_at_most_n_per_period)
{
  Env *e = env_new();
  SluiceQueueRateLimit limit = {.queue = "limited"};
  SluiceWorkerOptions o;
  g_autoptr(GArray) at = NULL;
  g_autoptr(GHashTable) ids =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  SluiceWorkerStats stats;

  if (!keeps_rate_limits(e)) {
    env_free(e);
    return;
  }
  add_task(e, "t.log", task_log, NULL);
  sluice_rate_limit_init(&limit.rate);
  limit.rate.count = 10;
  limit.rate.period_ms = 1000;
  sluice_worker_options_init(&o);
  o.queues = (const gchar *const[]){"limited", NULL};
  o.queue_rate_limits = &limit;
  o.n_queue_rate_limits = 1;
  env_start(e, &o);
  for (guint i = 0; i < 200; i++)
    g_hash_table_add(ids, enqueue_for(e, "t.log", "limited", NULL));
  run_until(e, 200, 50, 120000);

  g_mutex_lock(&seen.lock);
  for (guint i = 0; i < seen.runs->len; i++) {
    Run *r = &g_array_index(seen.runs, Run, i);
    ck_assert_msg(g_hash_table_remove(ids, r->id), "%s ran twice", r->id);
    ck_assert_uint_eq(r->attempt, 1);
  }
  g_mutex_unlock(&seen.lock);
  ck_assert_uint_eq(g_hash_table_size(ids), 0);
  at = admissions(NULL, NULL);
  g_array_sort(at, cmp_int64);
  ck_assert_int_gt(g_array_index(at, gint64, 0), 0);
  ck_assert_int_ge(
      g_array_index(at, gint64, 199) - g_array_index(at, gint64, 0), 19000);
  /* Never 11 admissions within one second. */
  for (guint i = 0; i + 10 < at->len; i++)
    ck_assert_msg(
        g_array_index(at, gint64, i + 10) - g_array_index(at, gint64, i) >=
            1000,
        "admissions %u and %u are %" G_GINT64_FORMAT " ms apart", i, i + 10,
        g_array_index(at, gint64, i + 10) - g_array_index(at, gint64, i));
  sluice_worker_get_stats(sluice_test_harness_get_worker(e->h), &stats);
  ck_assert_uint_gt(stats.rate_waits, 0);
  ck_assert_uint_eq(stats.failed_attempts, 0);
  env_free(e);
}
END_TEST

/* A limit keyed by a header limits each tenant on its own: one tenant's
 * backlog holds up neither another tenant nor an unlimited queue. A burst
 * of 2 admits two at once. */
START_TEST(rate_limit_per_key_holds_up_no_other_key_or_queue)
{
  Env *e = env_new();
  SluiceRateLimit limit;
  SluiceTaskOptions t;
  SluiceWorkerOptions o;
  g_autoptr(GArray) a = NULL;
  g_autoptr(GArray) b = NULL;
  g_autoptr(GArray) free_runs = NULL;

  if (!keeps_rate_limits(e)) {
    env_free(e);
    return;
  }
  sluice_rate_limit_init(&limit);
  limit.count = 1;
  limit.period_ms = 2000;
  limit.burst = 2;
  limit.key = SLUICE_LIMIT_KEY_HEADER;
  limit.key_name = "tenant";
  sluice_task_options_init(&t);
  t.rate_limit = &limit;
  add_task(e, "t.per_tenant", task_log, &t);
  add_task(e, "t.free", task_log, NULL);
  sluice_worker_options_init(&o);
  o.queues = (const gchar *const[]){"default", "other", NULL};
  env_start(e, &o);
  for (guint i = 0; i < 5; i++)
    g_free(enqueue_for(e, "t.per_tenant", "default", "a"));
  g_free(enqueue_for(e, "t.per_tenant", "default", "b"));
  g_free(enqueue_for(e, "t.free", "other", NULL));
  run_idle(e);
  /* The fake clock has not moved, so nothing turned away is due yet. */
  a = admissions(NULL, "a");
  b = admissions(NULL, "b");
  ck_assert_uint_eq(a->len, 2); /* the burst */
  ck_assert_uint_eq(b->len, 1);
  ck_assert_uint_eq(n_runs(), 4); /* and t.free */
  run_until(e, 7, 250, 60000);
  g_clear_pointer(&a, g_array_unref);
  a = admissions(NULL, "a");
  g_array_sort(a, cmp_int64);
  ck_assert_uint_eq(a->len, 5);
  /* Never more than the burst (2) in 2 s of the broker's clock. The gap
   * between two consecutive admissions may be shorter: a message admitted
   * late (a fetch that came a little after its due time) does not move
   * the next one's turn, which GCRA keeps on its own schedule. */
  for (guint i = 2; i < a->len; i++)
    ck_assert_int_ge(
        g_array_index(a, gint64, i) - g_array_index(a, gint64, i - 2), 2000);
  free_runs = admissions(NULL, "");
  ck_assert_int_eq(g_array_index(free_runs, gint64, 0), 0); /* no limit */
  env_free(e);
}
END_TEST

/* A task told "429, retry after 3 s" pauses its whole bucket: the next
 * message of it is not admitted before 3 s of the broker's clock, and the
 * one that was told runs again on the same attempt. */
START_TEST(rate_limited_task_pauses_its_key)
{
  Env *e = env_new();
  SluiceRateLimit limit;
  SluiceTaskOptions t;
  g_autofree gchar *first = NULL;
  g_autofree gchar *second = NULL;
  g_autoptr(GArray) a1 = NULL;
  g_autoptr(GArray) a2 = NULL;

  if (!keeps_rate_limits(e)) {
    env_free(e);
    return;
  }
  sluice_rate_limit_init(&limit);
  limit.count = 100;
  limit.period_ms = 1000;
  sluice_task_options_init(&t);
  t.rate_limit = &limit;
  add_task(e, "t.429", task_429_once, &t);
  env_start(e, NULL);
  first = enqueue_for(e, "t.429", NULL, NULL);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  second = enqueue_for(e, "t.429", NULL, NULL);
  run_idle(e);
  run_until(e, 3, 250, 60000);
  a1 = admissions(first, NULL);
  a2 = admissions(second, NULL);
  ck_assert_uint_eq(a1->len, 2);
  ck_assert_uint_eq(a2->len, 1);
  ck_assert_int_ge(g_array_index(a2, gint64, 0) - g_array_index(a1, gint64, 0),
                   3000);
  ck_assert_int_ge(g_array_index(a1, gint64, 1) - g_array_index(a1, gint64, 0),
                   3000);
  g_mutex_lock(&seen.lock);
  for (guint i = 0; i < seen.runs->len; i++)
    ck_assert_uint_eq(g_array_index(seen.runs, Run, i).attempt, 1);
  g_mutex_unlock(&seen.lock);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, first),
                   SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

/* A malformed limit is refused when it is set, naming the field, and a
 * broker without the slot refuses a worker that would need it. */
START_TEST(malformed_rate_limits_are_refused_naming_the_field)
{
  Env *e = env_new();
  static const struct {
    gint64 count, period_ms, burst;
    SluiceLimitKey key;
    const gchar *key_name;
    const gchar *field;
  } bad[] = {
      {0, 1000, 0, SLUICE_LIMIT_KEY_NONE, NULL, "rate_limit.count"},
      {-3, 1000, 0, SLUICE_LIMIT_KEY_NONE, NULL, "rate_limit.count"},
      {5, 0, 0, SLUICE_LIMIT_KEY_NONE, NULL, "rate_limit.period_ms"},
      {5, -1, 0, SLUICE_LIMIT_KEY_NONE, NULL, "rate_limit.period_ms"},
      {5, 1000, -1, SLUICE_LIMIT_KEY_NONE, NULL, "rate_limit.burst"},
      {5, 1000, 0, SLUICE_LIMIT_KEY_HEADER, NULL, "rate_limit.key_name"},
      {5, 1000, 0, SLUICE_LIMIT_KEY_ARG, "", "rate_limit.key_name"},
      {5, 1000, 0, (SluiceLimitKey)42, NULL, "rate_limit.key"},
  };
  SluiceQueueRateLimit q = {.queue = "default"};
  SluiceWorkerOptions o;
  g_autoptr(GError) error = NULL;
  SluiceWorker *w;

  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    SluiceRateLimit limit;
    SluiceTaskOptions t;
    g_autoptr(GError) err = NULL;

    sluice_rate_limit_init(&limit);
    limit.count = bad[i].count;
    limit.period_ms = bad[i].period_ms;
    limit.burst = bad[i].burst;
    limit.key = bad[i].key;
    limit.key_name = bad[i].key_name;
    sluice_task_options_init(&t);
    t.rate_limit = &limit;
    ck_assert(!sluice_registry_add(e->registry, "t.bad", task_log, NULL, NULL,
                                   &t, &err));
    ck_assert(
        g_error_matches(err, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID));
    ck_assert_msg(strstr(err->message, bad[i].field) != NULL,
                  "case %" G_GSIZE_FORMAT ": “%s” does not name %s", i,
                  err->message, bad[i].field);
    ck_assert(!sluice_registry_contains(e->registry, "t.bad"));
  }
  sluice_rate_limit_init(&q.rate);
  q.rate.count = 3;
  sluice_worker_options_init(&o);
  o.queue_rate_limits = &q;
  o.n_queue_rate_limits = 1;
  w = sluice_worker_new(e->broker, e->registry, &o, &error);
  ck_assert_ptr_null(w);
  ck_assert(
      g_error_matches(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID));
  ck_assert_ptr_nonnull(
      strstr(error->message, "queue_rate_limits[0].rate.period_ms"));
  env_free(e);
}
END_TEST

/* ---- Concurrency limits -------------------------------------------------- */

static struct {
  gint running;
  gint peak;
} busy;

/* Runs for a little real time, counting how many run at once. */
static gboolean
task_busy(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gint now = g_atomic_int_add(&busy.running, 1) + 1;
  gint peak;

  while ((peak = g_atomic_int_get(&busy.peak)) < now &&
         !g_atomic_int_compare_and_exchange(&busy.peak, peak, now))
    ;
  record(ctx);
  g_usleep(20000);
  g_atomic_int_add(&busy.running, -1);
  return TRUE;
}

static SluiceSlotAcquire
take_slot(Env *e, const gchar *key, guint max, const gchar *holder,
          gint64 lease_ms, const gchar *waiter)
{
  g_autoptr(GError) error = NULL;
  SluiceSlotAcquire item = {.key = key,
                            .max = max,
                            .holder = holder,
                            .lease_ms = lease_ms,
                            .waiter = waiter};

  ck_assert_msg(sluice_broker_slot_acquire(e->broker, &item, 1, &error), "%s",
                error != NULL ? error->message : "");
  return item;
}

static gboolean
give_slot(Env *e, const gchar *key, const gchar *holder)
{
  g_autoptr(GError) error = NULL;
  SluiceSlotRelease item = {.key = key, .holder = holder};

  ck_assert_msg(sluice_broker_slot_release(e->broker, &item, 1, &error), "%s",
                error != NULL ? error->message : "");
  return item.woke;
}

/* The slots themselves: at most max holders, a holder asking again keeps
 * its slot, a lapsed lease frees it (a crashed holder), and a release
 * moves the oldest waiter that is on the schedule to its queue at once,
 * so a worker runs it without the clock moving. */
START_TEST(concurrency_slots_are_leases_and_a_release_wakes_a_waiter)
{
  Env *e = env_new();
  SluiceEnqueueOptions o;
  g_autofree gchar *parked = NULL;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_SLOTS)) {
    env_free(e);
    return;
  }
  add_task(e, "t.log", task_log, NULL);
  env_start(e, NULL);
  ck_assert(take_slot(e, "k", 2, "a", 60000, NULL).granted);
  ck_assert(take_slot(e, "k", 2, "b", 60000, NULL).granted);
  ck_assert(!take_slot(e, "k", 2, "c", 60000, "not-scheduled").granted);
  ck_assert(take_slot(e, "k", 2, "b", 60000, NULL).granted); /* renewal */
  /* The waiter is not on the schedule: nothing to wake, the slot frees. */
  ck_assert(!give_slot(e, "k", "a"));
  ck_assert(take_slot(e, "k", 2, "c", 60000, "not-scheduled").granted);
  ck_assert(!take_slot(e, "k", 2, "d", 60000, NULL).granted);

  /* A holder that stops renewing (it crashed) loses its slot. */
  ck_assert(take_slot(e, "lapse", 1, "dead", 300, NULL).granted);
  ck_assert(!take_slot(e, "lapse", 1, "alive", 300, NULL).granted);
  sluice_clock_advance(e->clock, 600);
  g_usleep(600 * 1000); /* leases follow a time every process shares */
  ck_assert(take_slot(e, "lapse", 1, "alive", 60000, NULL).granted);

  /* A message waiting on the schedule is woken by the release. */
  sluice_enqueue_options_init(&o);
  o.delay_ms = 3600 * 1000;
  parked = sluice_test_client_enqueue(e->client, "t.log", NULL, &o);
  ck_assert(!take_slot(e, "lapse", 1, "other", 60000, parked).granted);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 0);
  ck_assert(give_slot(e, "lapse", "alive"));
  run_idle(e); /* the clock has not moved */
  ck_assert_uint_eq(n_runs(), 1);
  ck_assert(!give_slot(e, "lapse", "nobody")); /* nothing left to wake */
  env_free(e);
}
END_TEST

static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

/* The state of @key as list_slots tells it: its holders, sorted and
 * joined with ",", and its waiting count; "" and 0 when it is not listed. */
static gchar *
listed_slot(Env *e, const gchar *key, guint *out_waiting)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_slot_state_free);

  ck_assert_msg(sluice_broker_list_slots(e->broker, 100, out, &error), "%s",
                error != NULL ? error->message : "");
  *out_waiting = 0;
  for (guint i = 0; i < out->len; i++) {
    SluiceSlotState *s = out->pdata[i];
    g_autoptr(GPtrArray) names = g_ptr_array_new();

    if (!g_str_equal(s->key, key))
      continue;
    for (guint k = 0; k < s->holders->len; k++)
      g_ptr_array_add(names, s->holders->pdata[k]);
    g_ptr_array_sort(names, compare_names);
    g_ptr_array_add(names, NULL);
    *out_waiting = s->waiting;
    return g_strjoinv(",", (gchar **)names->pdata);
  }
  return g_strdup("");
}

/* list_slots shows each key's live holders and how many wait, and leaves
 * out a key whose holders lapsed and which nobody waits for. */
START_TEST(list_slots_shows_holders_and_waiting_counts)
{
  Env *e = env_new();
  g_autofree gchar *two = NULL, *one = NULL, *gone = NULL;
  guint waiting = 99;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_SLOTS)) {
    env_free(e);
    return;
  }
  ck_assert(take_slot(e, "ls", 2, "a", 60000, NULL).granted);
  ck_assert(take_slot(e, "ls", 2, "b", 60000, NULL).granted);
  ck_assert(!take_slot(e, "ls", 2, "c", 60000, "w1").granted);
  ck_assert(!take_slot(e, "ls", 2, "d", 60000, "w2").granted);
  two = listed_slot(e, "ls", &waiting);
  ck_assert_str_eq(two, "a,b");
  ck_assert_uint_eq(waiting, 2);
  give_slot(e, "ls", "a");
  one = listed_slot(e, "ls", &waiting);
  ck_assert_str_eq(one, "b");
  ck_assert_uint_eq(waiting, 2); /* neither waiter is on the schedule */

  ck_assert(take_slot(e, "ls-lapse", 1, "dead", 300, NULL).granted);
  sluice_clock_advance(e->clock, 600);
  g_usleep(600 * 1000); /* leases follow a time every process shares */
  gone = listed_slot(e, "ls-lapse", &waiting);
  ck_assert_str_eq(gone, "");
  env_free(e);
}
END_TEST

/* At most 3 of a task run at once on a worker of 8 threads, each message
 * once, on its first attempt; the limit is reached, not just kept. */
START_TEST(concurrency_limit_holds_across_threads)
{
  Env *e = env_new();
  SluiceConcurrencyLimit limit = {.max = 3};
  SluiceTaskOptions t;
  SluiceWorkerOptions o;
  SluiceWorkerStats stats;
  gint64 passed = 0;
  gint peak;

  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_SLOTS)) {
    env_free(e);
    return;
  }
  g_atomic_int_set(&busy.running, 0);
  g_atomic_int_set(&busy.peak, 0);
  sluice_task_options_init(&t);
  t.concurrency_limit = &limit;
  add_task(e, "t.busy", task_busy, &t);
  sluice_worker_options_init(&o);
  o.concurrency = 8;
  o.visibility_timeout_ms = 5000;
  env_start(e, &o);
  for (guint i = 0; i < 40; i++)
    g_free(enqueue_for(e, "t.busy", NULL, NULL));
  run_idle(e);
  /* A release wakes the oldest waiter; one whose settlement had not landed
   * yet when a slot freed comes back after its lease instead. */
  while (n_runs() < 40) {
    ck_assert_int_lt(passed, 40 * 5000);
    sluice_test_harness_advance(e->h, 5000);
    passed += 5000;
    run_idle(e);
  }
  ck_assert_uint_eq(n_runs(), 40);
  peak = g_atomic_int_get(&busy.peak);
  ck_assert_int_le(peak, 3);
  ck_assert_int_eq(peak, 3);
  g_mutex_lock(&seen.lock);
  for (guint i = 0; i < seen.runs->len; i++)
    ck_assert_uint_eq(g_array_index(seen.runs, Run, i).attempt, 1);
  g_mutex_unlock(&seen.lock);
  sluice_worker_get_stats(sluice_test_harness_get_worker(e->h), &stats);
  ck_assert_uint_gt(stats.slot_waits, 0);
  ck_assert_uint_eq(stats.failed_attempts, 0);
  env_free(e);
}
END_TEST

START_TEST(malformed_concurrency_limits_are_refused_naming_the_field)
{
  Env *e = env_new();
  SluiceConcurrencyLimit zero = {.max = 0};
  SluiceConcurrencyLimit nameless = {.max = 2, .key = SLUICE_LIMIT_KEY_ARG};
  SluiceQueueConcurrencyLimit q = {.queue = "default", .limit = {.max = 0}};
  SluiceTaskOptions t;
  SluiceWorkerOptions o;
  g_autoptr(GError) e1 = NULL;
  g_autoptr(GError) e2 = NULL;
  g_autoptr(GError) e3 = NULL;

  sluice_task_options_init(&t);
  t.concurrency_limit = &zero;
  ck_assert(!sluice_registry_add(e->registry, "t.bad", task_log, NULL, NULL, &t,
                                 &e1));
  ck_assert_ptr_nonnull(strstr(e1->message, "concurrency_limit.max"));
  t.concurrency_limit = &nameless;
  ck_assert(!sluice_registry_add(e->registry, "t.bad", task_log, NULL, NULL, &t,
                                 &e2));
  ck_assert_ptr_nonnull(strstr(e2->message, "concurrency_limit.key_name"));
  sluice_worker_options_init(&o);
  o.queue_concurrency_limits = &q;
  o.n_queue_concurrency_limits = 1;
  ck_assert_ptr_null(sluice_worker_new(e->broker, e->registry, &o, &e3));
  ck_assert_ptr_nonnull(
      strstr(e3->message, "queue_concurrency_limits[0].limit.max"));
  env_free(e);
}
END_TEST

/* ---- Weighted fair queues ------------------------------------------------ */

/* Weights 3:1, both queues backlogged (4000 each), one message per fetch:
 * the first 4000 fetches are shared 3:1 (within 10%; strict priority would
 * give 4000:0), the light queue is served from the start, and once the
 * heavy one is empty the light one gets every fetch (nothing waits while
 * a queue is idle). */
START_TEST(weighted_queues_share_fetches_by_weight)
{
  Env *e = env_new();
  SluiceWorkerOptions o;
  static const guint weights[] = {3, 1};
  guint heavy = 0, light = 0, light_early = 0;

  /* A weight picks the queue a fetch asks first; only a broker that takes
   * the first-asked queue first (ORDERED) turns that into shares. */
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_ORDERED)) {
    env_free(e);
    return;
  }
  add_task(e, "t.log", task_log, NULL);
  sluice_worker_options_init(&o);
  o.queues = (const gchar *const[]){"heavy", "light", NULL};
  o.queue_weights = weights;
  o.concurrency = 1;
  o.prefetch = 0;
  env_start(e, &o);
  for (guint i = 0; i < 4000; i++) {
    g_free(enqueue_for(e, "t.log", "heavy", NULL));
    g_free(enqueue_for(e, "t.log", "light", NULL));
  }
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 8000);
  g_mutex_lock(&seen.lock);
  for (guint i = 0; i < 4000; i++) {
    gboolean is_heavy =
        g_str_equal(g_array_index(seen.runs, Run, i).queue, "heavy");
    heavy += is_heavy;
    light += !is_heavy;
    if (i < 100 && !is_heavy)
      light_early++;
  }
  g_mutex_unlock(&seen.lock);
  ck_assert_msg(light > 0 && heavy * 10 >= light * 27 &&
                    heavy * 10 <= light * 33,
                "heavy %u, light %u: not 3:1 within 10%%", heavy, light);
  ck_assert_uint_ge(light_early, 20);
  env_free(e);
}
END_TEST

START_TEST(queue_weights_must_be_positive)
{
  Env *e = env_new();
  SluiceWorkerOptions o;
  static const guint weights[] = {2, 0};
  g_autoptr(GError) error = NULL;

  sluice_worker_options_init(&o);
  o.queues = (const gchar *const[]){"a", "b", NULL};
  o.queue_weights = weights;
  ck_assert_ptr_null(sluice_worker_new(e->broker, e->registry, &o, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "queue_weights[1]"));
  env_free(e);
}
END_TEST

/* ---- Snooze -------------------------------------------------------------- */

START_TEST(snooze_runs_again_on_the_same_attempt)
{
  Env *e = env_new();
  g_autofree gchar *id = NULL;
  SluiceWorkerStats stats;

  add_task(e, "t.snooze", task_snooze_twice, NULL);
  env_start(e, NULL);
  id = enqueue_for(e, "t.snooze", NULL, NULL);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  sluice_test_harness_advance(e->h, 999);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1); /* not before its delay */
  for (guint i = 0; i < 2; i++) {
    sluice_test_harness_advance(e->h, i == 0 ? 1 : 1000);
    run_idle(e);
  }
  ck_assert_uint_eq(n_runs(), 3);
  g_mutex_lock(&seen.lock);
  for (guint i = 0; i < seen.runs->len; i++)
    ck_assert_uint_eq(g_array_index(seen.runs, Run, i).attempt, 1);
  g_mutex_unlock(&seen.lock);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, id),
                   SLUICE_STATE_SUCCEEDED);
  sluice_worker_get_stats(sluice_test_harness_get_worker(e->h), &stats);
  ck_assert_uint_eq(stats.snoozed, 2);
  ck_assert_uint_eq(stats.failed_attempts, 0);
  env_free(e);
}
END_TEST

/* Past max_snoozes the message is buried `snoozed_too_often`, with its
 * attempt still 1 and its snoozes counted in the envelope. */
/* Under process isolation the task runs in a child: it tells a first run
 * from a second by a file (set before the worker forks its zygote). */
static gchar *snooze_flag;

static gboolean
task_snooze_once_in_child(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  if (!g_file_test(snooze_flag, G_FILE_TEST_EXISTS)) {
    if (!g_file_set_contents(snooze_flag, "", 0, error))
      return FALSE;
    return sluice_task_context_snooze(ctx, 1000, error);
  }
  return TRUE;
}

/* A snooze crosses the child's pipe as itself, not as a failure. */
START_TEST(snooze_works_under_process_isolation)
{
  Env *e = env_new();
  SluiceWorkerOptions o;
  SluiceWorkerStats stats;
  g_autofree gchar *dir = g_dir_make_tmp("sluice-flow-XXXXXX", NULL);
  g_autofree gchar *id = NULL;

  snooze_flag = g_build_filename(dir, "snoozed", NULL);
  add_task(e, "t.snooze_child", task_snooze_once_in_child, NULL);
  sluice_worker_options_init(&o);
  o.isolation = SLUICE_ISOLATION_PROCESS;
  o.retry.jitter = SLUICE_OFF;
  env_start(e, &o);
  id = enqueue_for(e, "t.snooze_child", NULL, NULL);
  run_idle(e);
  ck_assert(g_file_test(snooze_flag, G_FILE_TEST_EXISTS));
  ck_assert_int_ne(sluice_test_harness_get_state(e->h, id),
                   SLUICE_STATE_SUCCEEDED);
  sluice_test_harness_advance(e->h, 1000);
  run_idle(e);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, id),
                   SLUICE_STATE_SUCCEEDED);
  sluice_worker_get_stats(sluice_test_harness_get_worker(e->h), &stats);
  ck_assert_uint_eq(stats.snoozed, 1);
  ck_assert_uint_eq(stats.failed_attempts, 0);
  env_free(e);
  g_unlink(snooze_flag);
  g_rmdir(dir);
  g_clear_pointer(&snooze_flag, g_free);
}
END_TEST

START_TEST(snoozing_past_the_maximum_dead_letters)
{
  Env *e = env_new();
  SluiceTaskOptions t;
  g_autofree gchar *id = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(GError) error = NULL;
  SluiceDeadLetter *dl;

  sluice_task_options_init(&t);
  t.max_snoozes = 2;
  add_task(e, "t.snooze_always", task_snooze_always, &t);
  env_start(e, NULL);
  id = enqueue_for(e, "t.snooze_always", NULL, NULL);
  run_idle(e);
  for (guint i = 0; i < 4; i++) {
    sluice_test_harness_advance(e->h, 1000);
    run_idle(e);
  }
  ck_assert_uint_eq(n_runs(), 3);
  dead = sluice_test_harness_dead_letters(e->h);
  ck_assert_uint_eq(dead->len, 1);
  dl = dead->pdata[0];
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_SNOOZED_TOO_OFTEN);
  ck_assert_str_eq(dl->task_id, id);
  env = sluice_envelope_decode(dl->payload, NULL, NULL);
  ck_assert_ptr_nonnull(env);
  ck_assert_uint_eq(env->attempt, 1);
  ck_assert_uint_eq(env->snoozes, 2);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, id),
                   SLUICE_STATE_DEAD_LETTERED);
  /* A replay restores the snoozes with the attempts: three runs again. */
  ck_assert(
      sluice_client_dlq_replay(e->client, dl->entry_id, FALSE, NULL, &error));
  run_idle(e);
  for (guint i = 0; i < 4; i++) {
    sluice_test_harness_advance(e->h, 1000);
    run_idle(e);
  }
  ck_assert_uint_eq(n_runs(), 6);
  g_clear_pointer(&dead, g_ptr_array_unref);
  dead = sluice_test_harness_dead_letters(e->h);
  ck_assert_uint_eq(dead->len, 1);
  ck_assert_str_eq(((SluiceDeadLetter *)dead->pdata[0])->reason,
                   SLUICE_DLQ_SNOOZED_TOO_OFTEN);
  env_free(e);
}
END_TEST

void
sluice_conformance_add_flow(Suite *s, const SluiceConformanceFactory *f)
{
  TCase *flow = tcase_create("flow");

  factory = f;
  g_mutex_init(&seen.lock);
  /* The Redis brokers' buckets follow real time: the 200-task scenario
   * takes 20 s of it there, more on a busy machine. */
  tcase_set_timeout(flow, 600);
  sluice_conformance__add(
      flow, rate_acquire_follows_the_generic_cell_rate_algorithm,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_RATES));
  sluice_conformance__add(
      flow, rate_limit_admits_at_most_n_per_period,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_RATES));
  sluice_conformance__add(
      flow, rate_limit_per_key_holds_up_no_other_key_or_queue,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_RATES));
  sluice_conformance__add(
      flow, rate_limited_task_pauses_its_key,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_RATES));
  sluice_conformance__add(
      flow, malformed_rate_limits_are_refused_naming_the_field, 0);
  sluice_conformance__add(
      flow, concurrency_slots_are_leases_and_a_release_wakes_a_waiter,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_SLOTS));
  sluice_conformance__add(
      flow, list_slots_shows_holders_and_waiting_counts,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_SLOTS));
  sluice_conformance__add(
      flow, concurrency_limit_holds_across_threads,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_SLOTS));
  sluice_conformance__add(
      flow, malformed_concurrency_limits_are_refused_naming_the_field, 0);
  sluice_conformance__add(
      flow, weighted_queues_share_fetches_by_weight,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_ORDERED));
  sluice_conformance__add(flow, queue_weights_must_be_positive, 0);
  sluice_conformance__add(flow, snooze_runs_again_on_the_same_attempt, 0);
  sluice_conformance__add(flow, snooze_works_under_process_isolation, 0);
  sluice_conformance__add(flow, snoozing_past_the_maximum_dead_letters, 0);
  suite_add_tcase(s, flow);
}

/* conformance.c - the semantics of docs/design.md as Check scenarios, run
 * against any broker through a SluiceConformanceFactory.
 *
 * Every scenario drives the public API the way a user does: a registry of
 * small task functions, a client, a worker (through the test harness), and a
 * fake clock advanced instead of sleeping. Task functions report what they
 * saw to one recorder; assertions read the recorder, the records, the dead
 * letters and the worker's counters.
 *
 * Each scenario runs in its own forked process (CK_FORK), so the recorder
 * and the factory pointer, process globals, start fresh every time.
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/conformance.h"
#include "tests/conformance/contract.h"
#include "tests/helpers/broker-calls.h"

static const SluiceConformanceFactory *factory;

/* TRUE when the broker promises FIFO within a queue and strict priority
 * across queues (SLUICE_BROKER_CAP_ORDERED); without it, scenarios check
 * that every message is handed out once, in an order of the broker's. */
static gboolean
ordered(SluiceBroker *broker)
{
  return (sluice_broker_get_caps(broker) & SLUICE_BROKER_CAP_ORDERED) != 0;
}

/* The index of the id @id in @ids (gchar *), or -1. */
static gint
index_of_id(GPtrArray *ids, const gchar *id)
{
  for (guint i = 0; i < ids->len; i++)
    if (g_strcmp0(ids->pdata[i], id) == 0)
      return (gint)i;
  return -1;
}

/* ---- The recorder: what task functions saw ------------------------------- */

static struct {
  GMutex lock;
  GCond cond;
  GHashTable *attempts; /* id -> GArray of guint (attempt * 1000 + retries) */
  guint runs;
  guint running;
  guint peak;
  guint at_gate;
  gboolean gate_open;
  gboolean broken;
  guint started_blockers;
  guint cancelled_seen;
  GPtrArray *order;       /* task ids in the order they started */
  GHashTable *deliveries; /* id -> delivery count of its last run */
  GHashTable *traces; /* id -> GPtrArray of "traceparent|tracestate" by run */
  guint suspects_running; /* t.watch runs with a delivery count >= 2 */
  guint beside_suspect;   /* t.watch runs that overlapped such a run */
} rec;

static void
rec_reset(void)
{
  g_mutex_lock(&rec.lock);
  g_clear_pointer(&rec.attempts, g_hash_table_unref);
  g_clear_pointer(&rec.order, g_ptr_array_unref);
  g_clear_pointer(&rec.deliveries, g_hash_table_unref);
  g_clear_pointer(&rec.traces, g_hash_table_unref);
  rec.attempts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify)g_array_unref);
  rec.order = g_ptr_array_new_with_free_func(g_free);
  rec.deliveries = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  rec.traces = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                     (GDestroyNotify)g_ptr_array_unref);
  rec.suspects_running = rec.beside_suspect = 0;
  rec.runs = rec.running = rec.peak = rec.at_gate = 0;
  rec.gate_open = rec.broken = FALSE;
  rec.started_blockers = rec.cancelled_seen = 0;
  g_mutex_unlock(&rec.lock);
}

static void
rec_run(SluiceTaskContext *ctx)
{
  const gchar *id = sluice_task_context_get_id(ctx);
  const gchar *tp = sluice_task_context_get_header(ctx, "traceparent");
  const gchar *ts = sluice_task_context_get_header(ctx, "tracestate");
  GPtrArray *traces;
  GArray *a;
  guint v;

  g_mutex_lock(&rec.lock);
  a = g_hash_table_lookup(rec.attempts, id);
  if (a == NULL) {
    a = g_array_new(FALSE, FALSE, sizeof(guint));
    g_hash_table_insert(rec.attempts, g_strdup(id), a);
  }
  traces = g_hash_table_lookup(rec.traces, id);
  if (traces == NULL) {
    traces = g_ptr_array_new_with_free_func(g_free);
    g_hash_table_insert(rec.traces, g_strdup(id), traces);
  }
  g_ptr_array_add(traces, g_strdup_printf("%s|%s", tp != NULL ? tp : "-",
                                          ts != NULL ? ts : "-"));
  v = sluice_task_context_get_attempt(ctx) * 1000 +
      sluice_task_context_get_retries(ctx);
  g_array_append_val(a, v);
  g_ptr_array_add(rec.order, g_strdup(id));
  g_hash_table_replace(
      rec.deliveries, g_strdup(id),
      GUINT_TO_POINTER(sluice_task_context_get_delivery_count(ctx)));
  rec.runs++;
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
}

/* How many times @id ran. */
static guint
runs_of(const gchar *id)
{
  GArray *a;
  guint n;

  g_mutex_lock(&rec.lock);
  a = g_hash_table_lookup(rec.attempts, id);
  n = a != NULL ? a->len : 0;
  g_mutex_unlock(&rec.lock);
  return n;
}

/* The attempt seen by run @i of @id (0-based). */
static guint
attempt_of(const gchar *id, guint i)
{
  GArray *a;
  guint v = 0;

  g_mutex_lock(&rec.lock);
  a = g_hash_table_lookup(rec.attempts, id);
  if (a != NULL && i < a->len)
    v = g_array_index(a, guint, i);
  g_mutex_unlock(&rec.lock);
  return v;
}

/* The trace context run @i of @id saw: "traceparent|tracestate". */
static gchar *
trace_of(const gchar *id, guint i)
{
  GPtrArray *traces;
  gchar *seen = NULL;

  g_mutex_lock(&rec.lock);
  traces = g_hash_table_lookup(rec.traces, id);
  if (traces != NULL && i < traces->len)
    seen = g_strdup(traces->pdata[i]);
  g_mutex_unlock(&rec.lock);
  return seen;
}

static guint
total_runs(void)
{
  guint n;

  g_mutex_lock(&rec.lock);
  n = rec.runs;
  g_mutex_unlock(&rec.lock);
  return n;
}

static void
on_cancelled(GCancellable *cancellable, gpointer data)
{
  g_mutex_lock(&rec.lock);
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
}

/* Waits (real time, bounded) until @check holds; for conditions reached by
 * other threads that have no notification of their own. */
static gboolean
wait_until(gboolean (*check)(gpointer), gpointer data, gint64 timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  g_mutex_lock(&rec.lock);
  while (!check(data)) {
    if (!g_cond_wait_until(&rec.cond, &rec.lock,
                           MIN(deadline, g_get_monotonic_time() + 2000))) {
      if (g_get_monotonic_time() >= deadline) {
        gboolean ok = check(data);
        g_mutex_unlock(&rec.lock);
        return ok;
      }
    }
  }
  g_mutex_unlock(&rec.lock);
  return TRUE;
}

/* ---- Task functions ------------------------------------------------------ */

static gint64
arg_int(SluiceTaskContext *ctx, const gchar *key, gint64 fallback)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);

  if (args->type != MSGPACK_OBJECT_MAP)
    return fallback;
  for (guint32 i = 0; i < args->via.map.size; i++) {
    const msgpack_object_kv *kv = &args->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR &&
        kv->key.via.str.size == strlen(key) &&
        memcmp(kv->key.via.str.ptr, key, kv->key.via.str.size) == 0) {
      if (kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return (gint64)kv->val.via.u64;
      if (kv->val.type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return kv->val.via.i64;
    }
  }
  return fallback;
}

static gboolean
task_ok(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

static gboolean
task_fail(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "boom at attempt %u",
              sluice_task_context_get_attempt(ctx));
  return FALSE;
}

static gboolean
task_fatal(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  return sluice_task_context_fail(ctx, error, "bad input, never retry");
}

static gboolean
task_retry_in(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  return sluice_task_context_retry(ctx, arg_int(ctx, "delay", 0), error,
                                   "asked to retry later");
}

static gboolean
task_flaky(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  if (sluice_task_context_get_attempt(ctx) <= arg_int(ctx, "fail_times", 0)) {
    g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "flaky");
    return FALSE;
  }
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

static gboolean
task_long_error(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autofree gchar *big = g_strnfill(1000, 'x');

  rec_run(ctx);
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "long failure %s", big);
  return FALSE;
}

static gboolean
task_broken_until_fixed(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gboolean broken;

  rec_run(ctx);
  g_mutex_lock(&rec.lock);
  broken = rec.broken;
  g_mutex_unlock(&rec.lock);
  if (broken) {
    g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "still broken");
    return FALSE;
  }
  return TRUE;
}

/* Waits at the gate until the test opens it (or the task is cancelled). */
static gboolean
task_gate(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  GCancellable *cancellable = sluice_task_context_get_cancellable(ctx);
  gulong handler =
      g_cancellable_connect(cancellable, G_CALLBACK(on_cancelled), NULL, NULL);

  rec_run(ctx);
  g_mutex_lock(&rec.lock);
  rec.running++;
  rec.peak = MAX(rec.peak, rec.running);
  rec.at_gate++;
  g_cond_broadcast(&rec.cond);
  while (!rec.gate_open && !g_cancellable_is_cancelled(cancellable))
    g_cond_wait(&rec.cond, &rec.lock);
  rec.at_gate--;
  rec.running--;
  g_mutex_unlock(&rec.lock);
  g_cancellable_disconnect(cancellable, handler);
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

/* On its first run, blocks until cancelled; then returns TRUE (args
 * "late": 1, a result that must be discarded) or the cancellation error. On
 * later runs it succeeds at once. */
static gboolean
task_blocker(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  GCancellable *cancellable = sluice_task_context_get_cancellable(ctx);
  gulong handler;
  gboolean first = runs_of(sluice_task_context_get_id(ctx)) == 0;

  rec_run(ctx);
  if (!first)
    return TRUE;
  handler =
      g_cancellable_connect(cancellable, G_CALLBACK(on_cancelled), NULL, NULL);
  g_mutex_lock(&rec.lock);
  rec.started_blockers++;
  g_cond_broadcast(&rec.cond);
  while (!g_cancellable_is_cancelled(cancellable))
    g_cond_wait(&rec.cond, &rec.lock);
  rec.cancelled_seen++;
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
  g_cancellable_disconnect(cancellable, handler);
  if (arg_int(ctx, "late", 0)) {
    sluice_task_context_set_result(ctx,
                                   sluice_task_context_get_args_bytes(ctx));
    return TRUE;
  }
  return !g_cancellable_set_error_if_cancelled(cancellable, error);
}

static gboolean
task_busy(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  g_mutex_lock(&rec.lock);
  rec.running++;
  rec.peak = MAX(rec.peak, rec.running);
  g_mutex_unlock(&rec.lock);
  g_usleep(2000);
  g_mutex_lock(&rec.lock);
  rec.running--;
  g_mutex_unlock(&rec.lock);
  return TRUE;
}

/* The delivery count seen by the last run of @id. */
static guint
delivery_count_of(const gchar *id)
{
  guint n;

  g_mutex_lock(&rec.lock);
  n = GPOINTER_TO_UINT(g_hash_table_lookup(rec.deliveries, id));
  g_mutex_unlock(&rec.lock);
  return n;
}

/* Runs a few milliseconds and notes whether it overlapped a run of a
 * delivery taken over from a dead consumer (delivery count >= 2): those
 * must run alone. */
static gboolean
task_watch(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gboolean suspect = sluice_task_context_get_delivery_count(ctx) >= 2;

  rec_run(ctx);
  g_mutex_lock(&rec.lock);
  if (rec.suspects_running > 0 || (suspect && rec.running > 0))
    rec.beside_suspect++;
  rec.running++;
  if (suspect)
    rec.suspects_running++;
  g_mutex_unlock(&rec.lock);
  g_usleep(3000);
  g_mutex_lock(&rec.lock);
  if (rec.suspects_running > 0 && !suspect)
    rec.beside_suspect++;
  rec.running--;
  if (suspect)
    rec.suspects_running--;
  g_mutex_unlock(&rec.lock);
  return TRUE;
}

/* Ignores its cancellable: waits at the gate until the test opens it. */
static gboolean
task_stubborn(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  g_mutex_lock(&rec.lock);
  rec.at_gate++;
  g_cond_broadcast(&rec.cond);
  while (!rec.gate_open)
    g_cond_wait(&rec.cond, &rec.lock);
  rec.at_gate--;
  g_mutex_unlock(&rec.lock);
  return TRUE;
}

/* Counts runs per id only: the fast path of the throughput scenario. */
static gboolean
task_count(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  GHashTable *counts = data;
  const gchar *id = sluice_task_context_get_id(ctx);
  guint n;

  g_mutex_lock(&rec.lock);
  n = GPOINTER_TO_UINT(g_hash_table_lookup(counts, id));
  g_hash_table_replace(counts, g_strdup(id), GUINT_TO_POINTER(n + 1));
  rec.runs++;
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
  return TRUE;
}

/* ---- The environment of one scenario ------------------------------------- */

typedef struct {
  SluiceClock *clock;
  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceTestHarness *h;
  SluiceClient *client;
  SluiceWorker *worker;
  gint64 t0;
} Env;

static void
add_task(Env *e, const gchar *name, SluiceTaskFunc func,
         const SluiceTaskOptions *options)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(
      sluice_registry_add(e->registry, name, func, NULL, NULL, options, &error),
      "%s", error != NULL ? error->message : "");
}

static Env *
env_new_full(guint dead_letter_max, const SluiceWorkerOptions *options)
{
  Env *e = g_new0(Env, 1);
  g_autoptr(GError) error = NULL;

  rec_reset();
  sluice_test_log_capture_reset();
  e->t0 = SLUICE_TEST_EPOCH_MS;
  e->clock = sluice_clock_new_fake(e->t0);
  e->broker = factory->create(e->clock, dead_letter_max, factory->data, &error);
  ck_assert_msg(e->broker != NULL, "%s: cannot create the broker: %s",
                factory->name, error != NULL ? error->message : "?");
  e->registry = sluice_registry_new();
  add_task(e, "t.ok", task_ok, NULL);
  add_task(e, "t.fail", task_fail, NULL);
  add_task(e, "t.fatal", task_fatal, NULL);
  add_task(e, "t.retry_in", task_retry_in, NULL);
  add_task(e, "t.flaky", task_flaky, NULL);
  add_task(e, "t.long_error", task_long_error, NULL);
  add_task(e, "t.broken", task_broken_until_fixed, NULL);
  add_task(e, "t.gate", task_gate, NULL);
  add_task(e, "t.blocker", task_blocker, NULL);
  add_task(e, "t.busy", task_busy, NULL);
  add_task(e, "t.watch", task_watch, NULL);
  add_task(e, "t.stubborn", task_stubborn, NULL);
  e->h = sluice_test_harness_new_with_broker(e->broker, e->registry, options,
                                             &error);
  ck_assert_msg(e->h != NULL, "%s", error != NULL ? error->message : "");
  e->client = sluice_test_harness_get_client(e->h);
  e->worker = sluice_test_harness_get_worker(e->h);
  return e;
}

/* The harness defaults (jitter off, track_state on), with a short
 * revocation interval so cancellations show up quickly. */
static void
default_options(SluiceWorkerOptions *o)
{
  sluice_worker_options_init(o);
  o->retry.jitter = SLUICE_OFF;
  o->track_state = TRUE;
  o->revocation_interval_ms = 20;
}

static Env *
env_new(void)
{
  SluiceWorkerOptions o;

  default_options(&o);
  return env_new_full(100, &o);
}

static void
env_free(Env *e)
{
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

static gchar *
enqueue(Env *e, const gchar *task, const gchar *json_args,
        const SluiceEnqueueOptions *options)
{
  return sluice_test_client_enqueue(e->client, task, json_args, options);
}

static SluiceTaskState
state_of(Env *e, const gchar *id)
{
  return sluice_test_harness_get_state(e->h, id);
}

static GPtrArray *
dead_letters(Env *e)
{
  return sluice_test_harness_dead_letters(e->h);
}

static SluiceDeadLetter *
only_dead_letter(Env *e)
{
  g_autoptr(GPtrArray) all = dead_letters(e);
  ck_assert_uint_eq(all->len, 1);
  return sluice_dead_letter_copy(all->pdata[0]);
}

static SluiceWorkerStats
stats_of(Env *e)
{
  SluiceWorkerStats s;
  sluice_worker_get_stats(e->worker, &s);
  return s;
}

#define ck_assert_state(e, id, want)                                           \
  do {                                                                         \
    SluiceTaskState _got = state_of(e, id);                                    \
    ck_assert_msg(_got == (want), "task %s: state %s, expected %s", (id),      \
                  sluice_task_state_to_string(_got),                           \
                  sluice_task_state_to_string(want));                          \
  } while (0)

/* The `running` record is written by the settler, shortly after the task
 * starts: wait for it (or for any @want) rather than expect it at once. */
#define ck_assert_state_soon(e, id, want)                                      \
  do {                                                                         \
    gint64 _deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;           \
    while (state_of(e, id) != (want) && g_get_monotonic_time() < _deadline)    \
      g_usleep(2000);                                                          \
    ck_assert_state(e, id, want);                                              \
  } while (0)

/* ---- 1. attempt is 1-based; retries = attempt - 1; a retry keeps its id -- */

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

/* Asserts that the next attempt of @id comes exactly @delay ms later: not at
 * delay - 1, and at delay. */
static void
expect_next_attempt_after(Env *e, const gchar *id, gint64 delay)
{
  guint before = runs_of(id);

  sluice_test_harness_advance(e->h, delay - 1);
  run_idle(e);
  ck_assert_msg(runs_of(id) == before,
                "attempt %u ran before its backoff of %" G_GINT64_FORMAT
                " ms was over",
                before + 1, delay);
  sluice_test_harness_advance(e->h, 1);
  run_idle(e);
  ck_assert_msg(runs_of(id) == before + 1,
                "attempt %u did not run after its backoff of %" G_GINT64_FORMAT
                " ms",
                before + 1, delay);
}

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
blocker_started(gpointer n)
{
  return rec.started_blockers >= GPOINTER_TO_UINT(n);
}

static gboolean
blocker_cancelled(gpointer n)
{
  return rec.cancelled_seen >= GPOINTER_TO_UINT(n);
}

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

/* ---- 10. states ---------------------------------------------------------- */

static gboolean
at_gate(gpointer n)
{
  return rec.at_gate >= GPOINTER_TO_UINT(n);
}

static void
open_gate(void)
{
  g_mutex_lock(&rec.lock);
  rec.gate_open = TRUE;
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
}

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

  if (!(sluice_broker_get_caps(e->broker) & SLUICE_BROKER_CAP_CLOCK_TTL)) {
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
    assert_cancelled_record(e->client, ids[i], e->t0,
                            i % 2 == 0 ||
                                e->broker->klass->lookup_task != NULL);
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
  if (!(sluice_broker_get_caps(e->broker) & SLUICE_BROKER_CAP_LEASES))
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

static gboolean
runs_reached(gpointer n)
{
  return rec.runs >= GPOINTER_TO_UINT(n);
}

static gboolean
log_mentions(gpointer needle)
{
  return sluice_test_log_capture_contains(needle);
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

/* ---- The rest of the contract: queues, delays, idempotency, periodic ----- */

START_TEST(queues_are_served_in_priority_order)
{
  SluiceWorkerOptions o;
  SluiceEnqueueOptions low, high;
  static const gchar *const queues[] = {"high", "low", NULL};
  Env *e;
  g_autofree gchar *a = NULL, *b = NULL, *c = NULL;

  default_options(&o);
  o.queues = queues;
  o.concurrency = 1;
  o.prefetch = 0;
  e = env_new_full(100, &o);
  sluice_enqueue_options_init(&low);
  low.queue = "low";
  sluice_enqueue_options_init(&high);
  high.queue = "high";
  a = enqueue(e, "t.ok", NULL, &low);
  b = enqueue(e, "t.ok", NULL, &low);
  c = enqueue(e, "t.ok", NULL, &high);
  run_idle(e);
  ck_assert_uint_eq(rec.order->len, 3);
  if (ordered(e->broker)) {
    ck_assert_str_eq(rec.order->pdata[0], c);
    ck_assert_str_eq(rec.order->pdata[1], a);
    ck_assert_str_eq(rec.order->pdata[2], b);
  } else {
    /* Every one ran, once. */
    ck_assert_int_ge(index_of_id(rec.order, a), 0);
    ck_assert_int_ge(index_of_id(rec.order, b), 0);
    ck_assert_int_ge(index_of_id(rec.order, c), 0);
  }
  env_free(e);
}
END_TEST

START_TEST(delayed_task_runs_only_when_due)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autofree gchar *id = NULL;

  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 10000;
  id = enqueue(e, "t.ok", NULL, &eo);
  run_idle(e);
  expect_next_attempt_after(e, id, 10000);
  env_free(e);
}
END_TEST

START_TEST(enqueue_with_an_id_is_idempotent)
{
  SluiceEnqueueOptions eo;
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  gboolean existed = TRUE;
  g_autofree gchar *first = NULL, *second = NULL;

  sluice_enqueue_options_init(&eo);
  eo.id = "order-42";
  first = sluice_client_enqueue_full(e->client, "t.ok", NULL, &eo, &existed,
                                     &error);
  ck_assert_str_eq(first, "order-42");
  ck_assert(!existed);
  second = sluice_client_enqueue_full(e->client, "t.ok", NULL, &eo, &existed,
                                      &error);
  ck_assert_str_eq(second, "order-42");
  ck_assert(existed);
  run_idle(e);
  ck_assert_uint_eq(runs_of("order-42"), 1);
  env_free(e);
}
END_TEST

START_TEST(batch_enqueue_is_all_or_nothing)
{
  Env *e = env_new();
  SluiceEnqueueRequest requests[50];
  g_autoptr(GPtrArray) ids = NULL;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS(requests); i++)
    requests[i] = (SluiceEnqueueRequest){.task = "t.ok"};
  ids = sluice_client_enqueue_batch(e->client, requests, G_N_ELEMENTS(requests),
                                    &error);
  ck_assert_uint_eq(ids->len, G_N_ELEMENTS(requests));

  requests[7].task = "bad name";
  ck_assert_ptr_null(sluice_client_enqueue_batch(
      e->client, requests, G_N_ELEMENTS(requests), &error));
  ck_assert(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID));
  ck_assert_ptr_nonnull(strstr(error->message, "request 7"));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), G_N_ELEMENTS(requests));
  env_free(e);
}
END_TEST

START_TEST(oversized_message_is_refused_and_nothing_is_enqueued)
{
  Env *e = env_new();
  g_autofree gchar *big = g_strnfill(SLUICE_DEFAULT_MAX_MESSAGE_BYTES, 'a');
  g_autofree gchar *json = g_strdup_printf("\"%s\"", big);
  g_autoptr(GBytes) args = sluice_args_from_json(json, -1, NULL);
  g_autoptr(GError) error = NULL;
  gchar *id;

  id = sluice_client_enqueue(e->client, "t.ok", args, NULL, &error);
  ck_assert_ptr_null(id);
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_TOO_LARGE));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 0);
  env_free(e);
}
END_TEST

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
    /* A broker without the `announce` slot (version 1): nothing to see. */
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

  if (sluice_broker_get_caps(e->broker) & SLUICE_BROKER_CAP_CLOCK_TTL) {
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

  if (!(sluice_broker_get_caps(e->broker) & SLUICE_BROKER_CAP_LEASES)) {
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

  if (e->broker->klass->list_queued == NULL ||
      e->broker->klass->list_scheduled == NULL) {
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

  if (e->broker->klass->set_paused == NULL) {
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
  if (e->broker->klass->set_paused == NULL) {
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
  if (e->broker->klass->set_paused == NULL) {
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
  if (e->broker->klass->reschedule == NULL) {
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
  ck_assert_int_eq(sluice_client_delete(e->client, buried, &error),
                   e->broker->klass->lookup_task != NULL
                       ? SLUICE_DELETE_DEAD_LETTER
                       : SLUICE_DELETE_FAILED);
  g_clear_error(&error);
  ck_assert_int_eq(sluice_client_delete(e->client, queued, &error),
                   e->broker->klass->remove_queued != NULL
                       ? SLUICE_DELETE_REMOVED
                       : SLUICE_DELETE_REVOKED);
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
  if (e->broker->klass->lookup_task != NULL)
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

  if (e->broker->klass->remove_queued == NULL) {
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

  if (e->broker->klass->purge == NULL) {
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
    if (e->broker->klass->remove_queued != NULL) {
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

/* ---- The suite ----------------------------------------------------------- */

Suite *
sluice_conformance_suite(const SluiceConformanceFactory *f)
{
  Suite *s = suite_create(f->name);
  TCase *semantics = tcase_create("semantics");
  TCase *stop = tcase_create("stop");
  TCase *load = tcase_create("load");
  TCase *steer = tcase_create("steer");

  factory = f;
  g_mutex_init(&rec.lock);
  g_cond_init(&rec.cond);

  tcase_set_timeout(semantics, 120);
  tcase_add_test(semantics, attempt_is_one_based_and_retry_keeps_id);
  tcase_add_test(semantics, backoff_sequence_without_jitter);
  tcase_add_test(semantics, backoff_with_jitter_stays_within_bounds);
  tcase_add_test(semantics, policy_resolves_global_then_task_then_message);
  tcase_add_test(semantics, explicit_retry_counts_toward_max_attempts);
  tcase_add_test(semantics, fatal_error_dead_letters_at_once);
  tcase_add_test(semantics,
                 exhausted_attempts_dead_letter_with_fields_and_capped_history);
  tcase_add_test(semantics, timeout_cancels_fails_and_discards_late_result);
  tcase_add_test(semantics, malformed_record_dead_letters_with_raw_bytes);
  tcase_add_test(semantics, unknown_task_is_deferred_then_buried_by_time);
  tcase_add_test(semantics, unknown_since_in_the_future_is_clamped);
  tcase_add_test(semantics,
                 unknown_task_burial_does_not_depend_on_deferral_count);
  tcase_add_test(semantics, expired_message_dead_letters_without_running);
  tcase_add_test(semantics, states_with_track_state);
  tcase_add_test(semantics, states_without_track_state);
  tcase_add_test(semantics, running_records_never_replace_final_ones);
  tcase_add_test(semantics,
                 inspect_finds_scheduled_deferred_and_dead_without_records);
  tcase_add_test(semantics,
                 revocations_are_never_missed_whatever_ttl_or_millisecond);
  tcase_add_test(semantics, result_record_expires_after_its_ttl);
  tcase_add_test(semantics, get_result_wakes_on_completion_not_on_a_poll);
  tcase_add_test(semantics, get_result_times_out_with_a_distinct_error);
  tcase_add_test(semantics, blocking_calls_stop_when_cancelled);
  tcase_add_test(semantics, cancel_scheduled_task_is_certain);
  tcase_add_test(semantics,
                 cancelled_scheduled_task_keeps_its_name_queue_and_time);
  tcase_add_test(semantics, cancel_queued_task_revokes_and_skips_it);
  tcase_add_test(semantics, cancel_running_task_fires_its_cancellable);
  tcase_add_test(semantics, revocation_expires_after_revoke_ttl);
  tcase_add_test(semantics, dead_letter_cap_drops_the_oldest);
  tcase_add_test(semantics, replay_resets_attempt_and_the_task_runs);
  tcase_add_test(semantics, replay_can_keep_the_attempt);
  tcase_add_test(semantics, trace_context_survives_retries_and_replays);
  tcase_add_test(semantics, trace_context_survives_a_deferral);
  tcase_add_test(semantics, queues_are_served_in_priority_order);
  tcase_add_test(semantics, delayed_task_runs_only_when_due);
  tcase_add_test(semantics, enqueue_with_an_id_is_idempotent);
  tcase_add_test(semantics, batch_enqueue_is_all_or_nothing);
  tcase_add_test(semantics,
                 oversized_message_is_refused_and_nothing_is_enqueued);
  tcase_add_test(semantics,
                 periodic_occurrence_is_dispatched_once_by_many_workers);
  tcase_add_test(semantics, periodic_missed_runs_follow_the_policy);
  tcase_add_test(semantics,
                 periodic_overlap_skip_waits_for_the_previous_occurrence);
  tcase_add_test(semantics, unknown_task_is_logged_once_per_name);
  tcase_add_test(semantics, workers_announce_what_they_serve);
  tcase_add_test(semantics, reclaimed_deliveries_run_alone);
  suite_add_tcase(s, semantics);

  tcase_set_timeout(stop, 120);
  tcase_add_test(stop, graceful_stop_releases_unstarted_work_and_loses_nothing);
  tcase_add_test(stop, stop_timeout_releases_and_cancels_a_running_task);
  tcase_add_test(stop, stop_names_only_tasks_that_ignore_their_cancellable);
  tcase_add_test(stop, stop_now_releases_running_work_at_once);
  tcase_add_test(stop, concurrency_limit_is_never_exceeded);
  suite_add_tcase(s, stop);

  sluice_conformance_add_isolation(s, f);
  sluice_conformance_add_workflow(s, f);
  sluice_conformance_add_flow(s, f);
  sluice_conformance_add_unique(s, f);

  tcase_set_timeout(load, 900);
  tcase_add_test(load, many_producers_each_task_runs_exactly_once);
  suite_add_tcase(s, load);

  tcase_set_timeout(steer, 120);
  tcase_add_test(steer, listing_pages_cover_every_task_of_a_state_once);
  tcase_add_test(steer, pause_stops_fetching_until_resumed);
  tcase_add_test(steer, pause_holds_before_the_workers_know_of_it);
  tcase_add_test(steer, pause_gives_back_what_was_fetched_and_not_started);
  tcase_add_test(steer, run_now_moves_a_scheduled_task_to_its_queue);
  tcase_add_test(steer, delete_removes_one_task_wherever_it_is);
  tcase_add_test(steer, delete_takes_a_queued_task_out_of_its_queue);
  tcase_add_test(steer, purge_records_the_tasks_it_takes_out);
  suite_add_tcase(s, steer);

  suite_add_tcase(s, sluice_conformance__contract_tcase(f));
  return s;
}

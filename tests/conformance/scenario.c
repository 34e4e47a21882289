/* scenario.c - what the conformance scenarios share (see scenario.h).
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

#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

const SluiceConformanceFactory *factory;

/* TRUE when the broker promises FIFO within a queue and strict priority
 * across queues (SLUICE_BROKER_CAP_ORDERED); without it, scenarios check
 * that every message is handed out once, in an order of the broker's. */
gboolean
ordered(SluiceBroker *broker)
{
  return sluice_broker_supports(broker, SLUICE_BROKER_FEATURE_ORDERED);
}

/* The index of the id @id in @ids (gchar *), or -1. */
gint
index_of_id(GPtrArray *ids, const gchar *id)
{
  for (guint i = 0; i < ids->len; i++)
    if (g_strcmp0(ids->pdata[i], id) == 0)
      return (gint)i;
  return -1;
}

/* ---- The recorder: what task functions saw ------------------------------- */

ConformanceRecorder rec;

void
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

void
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
guint
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
guint
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
gchar *
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

guint
total_runs(void)
{
  guint n;

  g_mutex_lock(&rec.lock);
  n = rec.runs;
  g_mutex_unlock(&rec.lock);
  return n;
}

void
on_cancelled(GCancellable *cancellable, gpointer data)
{
  g_mutex_lock(&rec.lock);
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
}

/* Waits (real time, bounded) until @check holds; for conditions reached by
 * other threads that have no notification of their own. */
gboolean
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

gint64
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

gboolean
task_ok(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

gboolean
task_fail(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "boom at attempt %u",
              sluice_task_context_get_attempt(ctx));
  return FALSE;
}

gboolean
task_fatal(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  return sluice_task_context_fail(ctx, error, "bad input, never retry");
}

gboolean
task_retry_in(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  rec_run(ctx);
  return sluice_task_context_retry(ctx, arg_int(ctx, "delay", 0), error,
                                   "asked to retry later");
}

gboolean
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

gboolean
task_long_error(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autofree gchar *big = g_strnfill(1000, 'x');

  rec_run(ctx);
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "long failure %s", big);
  return FALSE;
}

gboolean
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
gboolean
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
gboolean
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
  /* Noticed the cancellation, and takes a moment to wind down. */
  if (arg_int(ctx, "linger_ms", 0) > 0)
    g_usleep((gulong)arg_int(ctx, "linger_ms", 0) * 1000);
  if (arg_int(ctx, "late", 0)) {
    sluice_task_context_set_result(ctx,
                                   sluice_task_context_get_args_bytes(ctx));
    return TRUE;
  }
  return !g_cancellable_set_error_if_cancelled(cancellable, error);
}

gboolean
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
guint
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
gboolean
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
gboolean
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
gboolean
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

void
add_task(Env *e, const gchar *name, SluiceTaskFunc func,
         const SluiceTaskOptions *options)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(
      sluice_registry_add(e->registry, name, func, NULL, NULL, options, &error),
      "%s", error != NULL ? error->message : "");
}

Env *
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
void
default_options(SluiceWorkerOptions *o)
{
  sluice_worker_options_init(o);
  o->retry.jitter = SLUICE_OFF;
  o->track_state = TRUE;
  o->revocation_interval_ms = 20;
}

Env *
env_new(void)
{
  SluiceWorkerOptions o;

  default_options(&o);
  return env_new_full(100, &o);
}

void
env_free(Env *e)
{
  sluice_test_harness_free(e->h);
  sluice_registry_unref(e->registry);
  sluice_broker_unref(e->broker);
  sluice_clock_unref(e->clock);
  g_free(e);
}

void
run_idle(Env *e)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sluice_test_harness_run_until_idle(e->h, &error), "%s",
                error != NULL ? error->message : "");
}

gchar *
enqueue(Env *e, const gchar *task, const gchar *json_args,
        const SluiceEnqueueOptions *options)
{
  return sluice_test_client_enqueue(e->client, task, json_args, options);
}

SluiceTaskState
state_of(Env *e, const gchar *id)
{
  return sluice_test_harness_get_state(e->h, id);
}

GPtrArray *
dead_letters(Env *e)
{
  return sluice_test_harness_dead_letters(e->h);
}

SluiceDeadLetter *
only_dead_letter(Env *e)
{
  g_autoptr(GPtrArray) all = dead_letters(e);
  ck_assert_uint_eq(all->len, 1);
  return sluice_dead_letter_copy(all->pdata[0]);
}

SluiceWorkerStats
stats_of(Env *e)
{
  SluiceWorkerStats s;
  sluice_worker_get_stats(e->worker, &s);
  return s;
}

/* Asserts that the next attempt of @id comes exactly @delay ms later: not at
 * delay - 1, and at delay. */
void
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

gboolean
blocker_started(gpointer n)
{
  return rec.started_blockers >= GPOINTER_TO_UINT(n);
}

gboolean
blocker_cancelled(gpointer n)
{
  return rec.cancelled_seen >= GPOINTER_TO_UINT(n);
}

gboolean
at_gate(gpointer n)
{
  return rec.at_gate >= GPOINTER_TO_UINT(n);
}

void
open_gate(void)
{
  g_mutex_lock(&rec.lock);
  rec.gate_open = TRUE;
  g_cond_broadcast(&rec.cond);
  g_mutex_unlock(&rec.lock);
}

gboolean
runs_reached(gpointer n)
{
  return rec.runs >= GPOINTER_TO_UINT(n);
}

gboolean
log_mentions(gpointer needle)
{
  return sluice_test_log_capture_contains(needle);
}

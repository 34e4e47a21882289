/* workflow.c - groups, chains and chords on any broker with joins
 * (SLUICE_BROKER_FEATURE_JOINS, its joins table): the join slots directly (a member counts
 * once, a join is released once, opening is all or nothing), then whole
 * workflows through a client and a worker (each failure policy, retries,
 * a replay from the dead letters, chains, nesting, cancellation, bad
 * input).
 *
 * Task functions report to the test through `seen`: every callback run
 * appends its arguments, as JSON, so a test asserts both "exactly once"
 * and "with every result".
 */
#include "config.h"

#include <string.h>

#include <msgpack.h>

#include "tests/conformance/conformance.h"

static const SluiceConformanceFactory *factory;

static struct {
  GMutex lock;
  GCond cond;
  GPtrArray *callbacks;   /* gchar*: the JSON arguments of each callback run */
  gboolean progress_seen; /* the test saw the running task's progress */
} seen;

typedef struct {
  SluiceClock *clock;
  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceTestHarness *h;
  SluiceClient *client;
} Env;

/* ---- Task functions ------------------------------------------------------ */

static GBytes *
pack_int(gint64 v)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  GBytes *bytes;

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_int64(&pk, v);
  bytes = g_bytes_new(buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
  return bytes;
}

static gint64
int_arg(SluiceTaskContext *ctx)
{
  const msgpack_object *a = sluice_task_context_get_args(ctx);

  if (a->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
    return (gint64)a->via.u64;
  if (a->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    return a->via.i64;
  return -1;
}

/* Returns its integer argument. */
static gboolean
task_echo(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autoptr(GBytes) r = pack_int(int_arg(ctx));

  sluice_task_context_set_result(ctx, r);
  return TRUE;
}

/* Fails its first attempt when its argument is a multiple of 3, then
 * returns it. */
static gboolean
task_flaky(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gint64 n = int_arg(ctx);

  if (n % 3 == 0 && sluice_task_context_get_attempt(ctx) == 1)
    return sluice_task_context_retry(ctx, 0, error, "flaky %" G_GINT64_FORMAT,
                                     n);
  return task_echo(ctx, data, error);
}

/* Returns twice its integer argument. */
static gboolean
task_double(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autoptr(GBytes) r = pack_int(int_arg(ctx) * 2);

  sluice_task_context_set_result(ctx, r);
  return TRUE;
}

static gboolean
task_fatal(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return sluice_task_context_fail(ctx, error, "broken on purpose");
}

/* Fails for good unless its argument is even. */
static gboolean
task_odd_fails(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  if (int_arg(ctx) % 2 != 0)
    return sluice_task_context_fail(ctx, error, "odd");
  return task_echo(ctx, data, error);
}

/* Reports half its work, waits until the test has read that (30 s at
 * most), then reports it all. */
static gboolean
task_progress(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;

  sluice_task_context_progress(ctx, 0.5, "halfway");
  g_mutex_lock(&seen.lock);
  while (!seen.progress_seen)
    if (!g_cond_wait_until(&seen.cond, &seen.lock, deadline))
      break;
  g_mutex_unlock(&seen.lock);
  sluice_task_context_progress(ctx, 7.0, "done");
  return TRUE;
}

/* Reports half, then all, of its work at once (the second report is
 * never throttled: it reaches 1). */
static gboolean
task_report(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  sluice_task_context_progress(ctx, 0.5, "half");
  sluice_task_context_progress(ctx, 1.0, "all");
  return TRUE;
}

/* A callback: records its arguments. */
static gboolean
task_collect(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autoptr(GError) local = NULL;
  gchar *json =
      sluice_args_to_json(sluice_task_context_get_args_bytes(ctx), &local);

  g_mutex_lock(&seen.lock);
  g_ptr_array_add(seen.callbacks,
                  json != NULL ? json : g_strdup(local->message));
  g_mutex_unlock(&seen.lock);
  return TRUE;
}

/* ---- The environment ----------------------------------------------------- */

static void
add_task(Env *e, const gchar *name, SluiceTaskFunc func)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(
      sluice_registry_add(e->registry, name, func, NULL, NULL, NULL, &error),
      "%s", error != NULL ? error->message : "");
}

static Env *
env_new(void)
{
  Env *e = g_new0(Env, 1);
  g_autoptr(GError) error = NULL;
  SluiceWorkerOptions o;

  g_mutex_lock(&seen.lock);
  g_ptr_array_set_size(seen.callbacks, 0);
  seen.progress_seen = FALSE;
  g_mutex_unlock(&seen.lock);
  e->clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  e->broker = factory->create(e->clock, 100, factory->data, &error);
  ck_assert_msg(e->broker != NULL, "%s: cannot create the broker: %s",
                factory->name, error != NULL ? error->message : "?");
  e->registry = sluice_registry_new();
  add_task(e, "wf.echo", task_echo);
  add_task(e, "wf.flaky", task_flaky);
  add_task(e, "wf.double", task_double);
  add_task(e, "wf.fatal", task_fatal);
  add_task(e, "wf.odd-fails", task_odd_fails);
  add_task(e, "wf.collect", task_collect);
  add_task(e, "wf.progress", task_progress);
  add_task(e, "wf.report", task_report);
  sluice_worker_options_init(&o);
  o.retry.jitter = SLUICE_OFF;
  o.retry.initial_backoff_ms = 1;
  o.track_state = TRUE;
  o.revocation_interval_ms = 20;
  o.concurrency = 4;
  o.events = TRUE;
  e->h =
      sluice_test_harness_new_with_broker(e->broker, e->registry, &o, &error);
  ck_assert_msg(e->h != NULL, "%s", error != NULL ? error->message : "");
  e->client = sluice_test_harness_get_client(e->h);
  return e;
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

static gboolean
has_joins(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClock) clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  SluiceBroker *b = factory->create(clock, 100, factory->data, &error);
  gboolean yes;

  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  yes = sluice_broker_supports(b, SLUICE_BROKER_FEATURE_JOINS);
  sluice_broker_unref(b);
  return yes;
}

#define NEED_JOINS()                                                           \
  do {                                                                         \
    if (!has_joins())                                                          \
      return;                                                                  \
  } while (0)

/* Runs until nothing is left: retries are due 1 ms after their failure. */
static void
run_all(Env *e)
{
  for (guint round = 0; round < 20; round++) {
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_test_harness_run_until_idle(e->h, &error), "%s",
                  error != NULL ? error->message : "");
    sluice_test_harness_advance(e->h, 10);
  }
}

static SluiceWorkflow *
task_of(const gchar *name, gint64 arg)
{
  g_autoptr(GBytes) args = pack_int(arg);
  return sluice_workflow_task(name, args, NULL);
}

static gchar *
enqueue_ok(Env *e, SluiceWorkflow *wf)
{
  g_autoptr(GError) error = NULL;
  gchar *id = sluice_client_enqueue_workflow(e->client, wf, &error);

  ck_assert_msg(id != NULL, "%s: %s", factory->name,
                error != NULL ? error->message : "");
  return id;
}

static guint
n_callbacks(void)
{
  guint n;

  g_mutex_lock(&seen.lock);
  n = seen.callbacks->len;
  g_mutex_unlock(&seen.lock);
  return n;
}

static const gchar *
callback_args(guint i)
{
  const gchar *s;

  g_mutex_lock(&seen.lock);
  s = g_ptr_array_index(seen.callbacks, i);
  g_mutex_unlock(&seen.lock);
  return s;
}

/* A chord of @n members of @task (argument i for member i). */
static SluiceWorkflow *
chord_of(const gchar *task, guint n, SluiceChordPolicy policy)
{
  SluiceWorkflow *group = sluice_workflow_group();

  for (guint i = 0; i < n; i++)
    sluice_workflow_add(group, task_of(task, i));
  return sluice_workflow_chord(
      group, sluice_workflow_task("wf.collect", NULL, NULL), policy);
}

static SluiceWorkflowStatus
status_of(Env *e, const gchar *id)
{
  SluiceWorkflowStatus st;
  g_autoptr(GError) error = NULL;

  ck_assert_msg(sluice_client_get_workflow(e->client, id, &st, &error), "%s",
                error != NULL ? error->message : "");
  return st;
}

/* ---- The join slots, directly -------------------------------------------- */

static gint64
queued_in(SluiceBroker *b, const gchar *queue)
{
  SluiceBrokerStats st;
  const gchar *const queues[] = {queue, NULL};
  g_autoptr(GError) error = NULL;
  gint64 n = 0;

  sluice_broker_stats_init(&st);
  ck_assert_msg(sluice_broker_stats(b, queues, &st, &error), "%s",
                error != NULL ? error->message : "");
  for (guint i = 0; i < st.queues->len; i++) {
    SluiceQueueStats *q = g_ptr_array_index(st.queues, i);
    if (g_strcmp0(q->name, queue) == 0)
      n = q->ready;
  }
  sluice_broker_stats_clear(&st);
  return n;
}

START_TEST(join_counts_each_member_once_and_releases_once)
{
  g_autoptr(SluiceClock) clock = NULL;
  SluiceBroker *b;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) payload = g_bytes_new_static("\x81\xa1v\x01", 4);
  g_autoptr(GBytes) start = g_bytes_new_static("\x81\xa1v\x02", 4);
  g_autoptr(GBytes) meta = g_bytes_new_static("meta", 4);
  g_autoptr(GBytes) o0 = g_bytes_new_static("first", 5);
  g_autoptr(GBytes) o0b = g_bytes_new_static("again", 5);
  g_autoptr(GBytes) o1 = g_bytes_new_static("second", 6);
  SluiceSubmit release = {
      .id = "cb", .queue = "wf-release", .payload = payload};
  SluiceSubmit item = {.id = "m0", .queue = "wf-start", .payload = start};
  SluiceJoinSpec spec = {"j1", 2, &release, 1, meta, 3600 * 1000};
  SluiceJoinArrival a[3] = {{0}};
  SluiceJoinState state;
  gboolean existed = TRUE, found = FALSE;

  NEED_JOINS();
  clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  b = factory->create(clock, 100, factory->data, &error);
  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");

  ck_assert(sluice_broker_join_open(b, &spec, 1, &item, 1, &existed, &error));
  ck_assert(!existed);
  ck_assert_int_eq(queued_in(b, "wf-start"), 1);
  /* A repeat (its reply lost) writes nothing. */
  ck_assert(sluice_broker_join_open(b, &spec, 1, &item, 1, &existed, &error));
  ck_assert(existed);
  ck_assert_int_eq(queued_in(b, "wf-start"), 1);

  /* Member 0 twice in one call, as a redelivered member would. */
  a[0] = (SluiceJoinArrival){"j1", 0, o0, SLUICE_JOIN_COUNT, FALSE, FALSE};
  a[1] = (SluiceJoinArrival){"j1", 0, o0b, SLUICE_JOIN_COUNT, FALSE, FALSE};
  ck_assert_msg(sluice_broker_join_arrive(b, a, 2, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(a[0].counted && !a[0].released);
  ck_assert(!a[1].counted && !a[1].released);
  ck_assert_int_eq(queued_in(b, "wf-release"), 0);

  ck_assert(sluice_broker_join_read(b, "j1", TRUE, &state, &found, &error));
  ck_assert(found);
  ck_assert_uint_eq(state.total, 2);
  ck_assert_uint_eq(state.arrived, 1);
  ck_assert_int_eq(state.status, SLUICE_JOIN_OPEN);
  ck_assert(g_bytes_equal(state.meta, meta));
  ck_assert_uint_eq(state.outcomes->len, 2);
  ck_assert(g_bytes_equal(g_ptr_array_index(state.outcomes, 0), o0));
  ck_assert(g_ptr_array_index(state.outcomes, 1) == NULL);
  sluice_join_state_clear(&state);

  /* The last member releases it; a repeat of it, or a fail-fast step of a
   * member that already arrived, releases nothing more. */
  a[0] = (SluiceJoinArrival){"j1", 1, o1, SLUICE_JOIN_COUNT, FALSE, FALSE};
  a[1] = (SluiceJoinArrival){"j1", 1, o1, SLUICE_JOIN_COUNT, FALSE, FALSE};
  a[2] =
      (SluiceJoinArrival){"j1", 0, o0, SLUICE_JOIN_RELEASE_NOW, FALSE, FALSE};
  ck_assert(sluice_broker_join_arrive(b, a, 3, &error));
  ck_assert(a[0].counted && a[0].released);
  ck_assert(!a[1].counted && !a[1].released);
  ck_assert(!a[2].counted && !a[2].released);
  ck_assert_int_eq(queued_in(b, "wf-release"), 1);
  ck_assert(sluice_broker_join_arrive(b, a, 1, &error));
  ck_assert(!a[0].counted && !a[0].released);
  ck_assert_int_eq(queued_in(b, "wf-release"), 1);

  ck_assert(sluice_broker_join_read(b, "j1", FALSE, &state, &found, &error));
  ck_assert(found);
  ck_assert_uint_eq(state.arrived, 2);
  ck_assert_int_eq(state.status, SLUICE_JOIN_RELEASED);
  ck_assert(state.outcomes == NULL);
  sluice_join_state_clear(&state);

  /* Unknown joins: nothing counted, nothing found. */
  a[0] = (SluiceJoinArrival){"nope", 0, o0, SLUICE_JOIN_COUNT, FALSE, FALSE};
  ck_assert(sluice_broker_join_arrive(b, a, 1, &error));
  ck_assert(!a[0].counted && !a[0].released);
  ck_assert(sluice_broker_join_read(b, "nope", TRUE, &state, &found, &error));
  ck_assert(!found);
  sluice_broker_unref(b);
}
END_TEST

START_TEST(join_release_now_and_abandon)
{
  g_autoptr(SluiceClock) clock = NULL;
  SluiceBroker *b;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) payload = g_bytes_new_static("\x81\xa1v\x01", 4);
  g_autoptr(GBytes) o = g_bytes_new_static("o", 1);
  SluiceSubmit release = {.id = "cb", .queue = "wf-r1", .payload = payload};
  SluiceSubmit release2 = {.id = "cb2", .queue = "wf-r2", .payload = payload};
  SluiceJoinSpec specs[2] = {{"fast", 3, &release, 1, NULL, 3600 * 1000},
                             {"stop", 2, &release2, 1, NULL, 3600 * 1000}};
  SluiceJoinArrival a[2] = {{0}};
  SluiceJoinState state;
  gboolean found = FALSE;

  NEED_JOINS();
  clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  b = factory->create(clock, 100, factory->data, &error);
  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(sluice_broker_join_open(b, specs, 2, NULL, 0, NULL, &error));

  a[0] =
      (SluiceJoinArrival){"fast", 1, o, SLUICE_JOIN_RELEASE_NOW, FALSE, FALSE};
  a[1] = (SluiceJoinArrival){"stop", 0, o, SLUICE_JOIN_ABANDON, FALSE, FALSE};
  ck_assert(sluice_broker_join_arrive(b, a, 2, &error));
  ck_assert(a[0].counted && a[0].released);
  ck_assert(a[1].counted && !a[1].released);
  ck_assert_int_eq(queued_in(b, "wf-r1"), 1);
  /* The rest of an abandoned join arrives: it is never released. */
  a[0] = (SluiceJoinArrival){"stop", 1, o, SLUICE_JOIN_COUNT, FALSE, FALSE};
  a[1] = (SluiceJoinArrival){"fast", 0, o, SLUICE_JOIN_COUNT, FALSE, FALSE};
  ck_assert(sluice_broker_join_arrive(b, a, 2, &error));
  ck_assert(a[0].counted && !a[0].released);
  ck_assert(a[1].counted && !a[1].released);
  ck_assert_int_eq(queued_in(b, "wf-r2"), 0);
  ck_assert_int_eq(queued_in(b, "wf-r1"), 1);
  ck_assert(sluice_broker_join_read(b, "stop", FALSE, &state, &found, &error));
  ck_assert(found);
  ck_assert_int_eq(state.status, SLUICE_JOIN_ABANDONED);
  ck_assert_uint_eq(state.arrived, 2);
  sluice_join_state_clear(&state);
  sluice_broker_unref(b);
}
END_TEST

/* ---- Chords -------------------------------------------------------------- */

START_TEST(chord_runs_callback_once_with_every_result)
{
  Env *e;
  g_autoptr(SluiceWorkflow) wf = NULL;
  g_autofree gchar *id = NULL;
  GString *want = g_string_new("{\"results\":[");
  SluiceWorkflowStatus st;

  NEED_JOINS();
  e = env_new();
  /* Every third member fails its first attempt and is retried. */
  wf = chord_of("wf.flaky", 30, SLUICE_CHORD_WAIT_ALL);
  id = enqueue_ok(e, wf);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  for (guint i = 0; i < 30; i++)
    g_string_append_printf(want, "%s%u", i > 0 ? "," : "", i);
  g_string_append(want, "],\"errors\":[],\"args\":null}");
  ck_assert_str_eq(callback_args(0), want->str);
  g_string_free(want, TRUE);
  st = status_of(e, id);
  ck_assert_uint_eq(st.total, 1);
  ck_assert_uint_eq(st.finished, 1);
  ck_assert_uint_eq(st.failed, 0);
  ck_assert_uint_eq(st.tasks, 31);
  env_free(e);
}
END_TEST

START_TEST(chord_wait_all_gives_successes_and_failures)
{
  Env *e;
  g_autoptr(SluiceWorkflow) wf = NULL;
  g_autofree gchar *id = NULL;
  const gchar *args;

  NEED_JOINS();
  e = env_new();
  wf = chord_of("wf.odd-fails", 4, SLUICE_CHORD_WAIT_ALL);
  id = enqueue_ok(e, wf);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  args = callback_args(0);
  ck_assert_msg(g_str_has_prefix(args, "{\"results\":[0,null,2,null],"
                                       "\"errors\":[{\"index\":1,"),
                "%s", args);
  ck_assert_msg(strstr(args, "\"index\":3") != NULL, "%s", args);
  ck_assert_msg(strstr(args, "\"state\":\"dead_lettered\"") != NULL, "%s",
                args);
  ck_assert_msg(strstr(args, "odd") != NULL, "%s", args);
  env_free(e);
}
END_TEST

START_TEST(chord_ignore_failures_gives_only_successes)
{
  Env *e;
  g_autoptr(SluiceWorkflow) wf = NULL;
  g_autofree gchar *id = NULL;

  NEED_JOINS();
  e = env_new();
  wf = chord_of("wf.odd-fails", 5, SLUICE_CHORD_IGNORE_FAILURES);
  id = enqueue_ok(e, wf);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  ck_assert_str_eq(callback_args(0),
                   "{\"results\":[0,2,4],\"errors\":[],\"args\":null}");
  env_free(e);
}
END_TEST

static gboolean
revoked(SluiceBroker *b, const gchar *id)
{
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_revocation_free);
  g_autoptr(GError) error = NULL;
  gint64 cursor = 0;

  ck_assert_msg(sluice_broker_list_revocations(b, &cursor, SLUICE_TEST_EPOCH_MS,
                                               list, &error),
                "%s", error != NULL ? error->message : "");
  for (guint i = 0; i < list->len; i++)
    if (g_strcmp0(((SluiceRevocation *)g_ptr_array_index(list, i))->id, id) ==
        0)
      return TRUE;
  return FALSE;
}

START_TEST(chord_fail_fast_runs_callback_with_the_error_and_cancels_the_rest)
{
  Env *e;
  SluiceWorkflow *group;
  g_autoptr(SluiceWorkflow) wf = NULL;
  g_autofree gchar *id = NULL;
  SluiceEnqueueOptions slow;
  const gchar *args;

  NEED_JOINS();
  e = env_new();
  /* Member 0 fails for good; members 1 and 2 wait in a queue the worker
   * does not serve, so they are still unfinished when it fails. */
  sluice_enqueue_options_init(&slow);
  slow.queue = "wf-slow";
  group = sluice_workflow_group();
  sluice_workflow_add(group, sluice_workflow_task("wf.fatal", NULL, NULL));
  sluice_workflow_add(group, sluice_workflow_task("wf.echo", NULL, &slow));
  sluice_workflow_add(group, sluice_workflow_task("wf.echo", NULL, &slow));
  wf = sluice_workflow_chord(group,
                             sluice_workflow_task("wf.collect", NULL, NULL),
                             SLUICE_CHORD_FAIL_FAST);
  id = enqueue_ok(e, wf);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  args = callback_args(0);
  ck_assert_msg(g_str_has_prefix(args, "{\"results\":[null,null,null],"
                                       "\"errors\":[{\"index\":0,"),
                "%s", args);
  ck_assert_msg(strstr(args, "broken on purpose") != NULL, "%s", args);
  for (guint i = 1; i <= 2; i++) {
    g_autofree gchar *member = g_strdup_printf("%s.%u", id, i);
    ck_assert_msg(revoked(e->broker, member), "%s was not cancelled", member);
  }
  {
    g_autofree gchar *callback = g_strdup_printf("%s.3", id);
    ck_assert(!revoked(e->broker, callback));
  }
  env_free(e);
}
END_TEST

START_TEST(replayed_member_does_not_run_the_callback_again)
{
  Env *e;
  g_autoptr(SluiceWorkflow) wf = NULL;
  g_autofree gchar *id = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(GError) error = NULL;
  SluiceDeadLetter *dl;

  NEED_JOINS();
  e = env_new();
  wf = chord_of("wf.odd-fails", 2, SLUICE_CHORD_WAIT_ALL);
  id = enqueue_ok(e, wf);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  dead = sluice_test_harness_dead_letters(e->h);
  ck_assert_uint_eq(dead->len, 1);
  dl = g_ptr_array_index(dead, 0);
  ck_assert_msg(
      sluice_client_dlq_replay(e->client, dl->entry_id, FALSE, NULL, &error),
      "%s", error != NULL ? error->message : "");
  run_all(e);
  /* The member ran (and was buried) again; the chord counted it once. */
  ck_assert_uint_eq(n_callbacks(), 1);
  env_free(e);
}
END_TEST

/* ---- Chains and nesting -------------------------------------------------- */

START_TEST(chain_passes_each_result_on)
{
  Env *e;
  SluiceWorkflow *chain = NULL;
  g_autoptr(SluiceWorkflow) wf = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *last = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autofree gchar *json = NULL;

  NEED_JOINS();
  chain = sluice_workflow_chain();
  e = env_new();
  sluice_workflow_add(chain, task_of("wf.flaky", 3));
  sluice_workflow_add(chain, task_of("wf.double", 0));
  sluice_workflow_add(chain, task_of("wf.double", 0));
  wf = chain;
  id = enqueue_ok(e, wf);
  run_all(e);
  last = g_strdup_printf("%s.2", id);
  r = sluice_test_harness_get_record(e->h, last);
  ck_assert(r != NULL);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  json = sluice_args_to_json(sluice_result_get_value(r), NULL);
  ck_assert_str_eq(json, "12");
  ck_assert_uint_eq(status_of(e, id).finished, 1);
  ck_assert_uint_eq(status_of(e, id).failed, 0);
  env_free(e);
}
END_TEST

START_TEST(chain_stops_at_a_failure_unless_the_step_continues)
{
  Env *e;
  SluiceWorkflow *chain = NULL, *cont = NULL;
  g_autoptr(SluiceWorkflow) wf = NULL, wf2 = NULL;
  g_autofree gchar *id = NULL, *id2 = NULL, *second = NULL, *second2 = NULL;
  g_autoptr(SluiceResult) r = NULL;
  SluiceWorkflowStatus st;

  NEED_JOINS();
  chain = sluice_workflow_chain();
  e = env_new();
  sluice_workflow_add(chain, task_of("wf.fatal", 0));
  sluice_workflow_add(chain, task_of("wf.echo", 7));
  wf = chain;
  id = enqueue_ok(e, wf);

  wf2 = sluice_workflow_chain();
  cont = task_of("wf.fatal", 0);
  sluice_workflow_set_continue(cont, TRUE);
  sluice_workflow_add(wf2, cont);
  sluice_workflow_add(wf2, sluice_workflow_task("wf.collect", NULL, NULL));
  id2 = enqueue_ok(e, wf2);
  run_all(e);

  /* Stopped: the second step never ran, and the workflow is over, failed. */
  second = g_strdup_printf("%s.1", id);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, second),
                   SLUICE_STATE_UNKNOWN);
  st = status_of(e, id);
  ck_assert_uint_eq(st.finished, 1);
  ck_assert_uint_eq(st.failed, 1);
  /* The dead letter names the chain: its message carries the workflow. */
  {
    g_autoptr(GPtrArray) dead = sluice_test_harness_dead_letters(e->h);
    gboolean named = FALSE;
    for (guint i = 0; i < dead->len; i++) {
      SluiceDeadLetter *dl = g_ptr_array_index(dead, i);
      g_autoptr(SluiceEnvelope) env =
          sluice_envelope_decode(dl->payload, NULL, NULL);
      if (env != NULL && env->wf != NULL && g_str_has_prefix(env->wf, id))
        named = TRUE;
    }
    ck_assert(named);
  }

  /* Continued: the next step got nil. */
  second2 = g_strdup_printf("%s.1", id2);
  r = sluice_test_harness_get_record(e->h, second2);
  ck_assert(r != NULL);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  ck_assert_uint_eq(n_callbacks(), 1);
  ck_assert_str_eq(callback_args(0), "null");
  env_free(e);
}
END_TEST

START_TEST(nested_group_of_chains_and_chain_of_groups)
{
  Env *e;
  SluiceWorkflow *group = NULL;
  SluiceWorkflow *g2 = NULL;
  g_autoptr(SluiceWorkflow) wf = NULL, wf2 = NULL;
  g_autofree gchar *id = NULL, *id2 = NULL;

  NEED_JOINS();
  group = sluice_workflow_group();
  g2 = sluice_workflow_group();
  e = env_new();
  /* A chord of a group of chains: group(chain(1, double), chain(2, double),
   * 5) -> collect. */
  for (gint64 i = 1; i <= 2; i++) {
    SluiceWorkflow *c = sluice_workflow_chain();
    sluice_workflow_add(c, task_of("wf.echo", i));
    sluice_workflow_add(c, task_of("wf.double", 0));
    sluice_workflow_add(group, c);
  }
  sluice_workflow_add(group, task_of("wf.echo", 5));
  wf = sluice_workflow_chord(group,
                             sluice_workflow_task("wf.collect", NULL, NULL),
                             SLUICE_CHORD_WAIT_ALL);
  id = enqueue_ok(e, wf);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  ck_assert_str_eq(callback_args(0),
                   "{\"results\":[2,4,5],\"errors\":[],\"args\":null}");
  ck_assert_uint_eq(status_of(e, id).tasks, 6);
  ck_assert_uint_eq(status_of(e, id).finished, 1);
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceWorkflowNode) root =
        sluice_client_get_workflow_tree(e->client, id, &error);
    SluiceWorkflowNode *g, *c0, *cb;
    g_autofree gchar *cb_id = g_strdup_printf("%s.5", id);

    ck_assert_msg(root != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_int_eq(root->kind, SLUICE_WORKFLOW_NODE_CHORD);
    ck_assert_int_eq(root->policy, SLUICE_CHORD_WAIT_ALL);
    ck_assert_uint_eq(root->children->len, 2);
    g = g_ptr_array_index(root->children, 0);
    ck_assert_int_eq(g->kind, SLUICE_WORKFLOW_NODE_GROUP);
    ck_assert_uint_eq(g->children->len, 3);
    c0 = g_ptr_array_index(g->children, 0);
    ck_assert_int_eq(c0->kind, SLUICE_WORKFLOW_NODE_CHAIN);
    ck_assert_str_eq(
        ((SluiceWorkflowNode *)g_ptr_array_index(c0->children, 1))->task,
        "wf.double");
    cb = g_ptr_array_index(root->children, 1);
    ck_assert_str_eq(cb->task, "wf.collect");
    ck_assert_str_eq(cb->task_id, cb_id);
    ck_assert_int_eq(cb->state, SLUICE_STATE_SUCCEEDED);
  }

  /* A chain of groups: group(8, 9) -> group(double, double) -> collect;
   * a step after a group gets the group's map. */
  wf2 = sluice_workflow_chain();
  sluice_workflow_add(g2, task_of("wf.echo", 8));
  sluice_workflow_add(g2, task_of("wf.echo", 9));
  sluice_workflow_add(wf2, g2);
  sluice_workflow_add(wf2, sluice_workflow_task("wf.collect", NULL, NULL));
  id2 = enqueue_ok(e, wf2);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 2);
  ck_assert_str_eq(callback_args(1),
                   "{\"results\":[8,9],\"errors\":[],\"args\":null}");
  ck_assert_uint_eq(status_of(e, id2).finished, 1);
  env_free(e);
}
END_TEST

START_TEST(cancelling_a_workflow_cancels_what_has_not_run)
{
  Env *e;
  SluiceWorkflow *chain = NULL;
  g_autoptr(SluiceWorkflow) wf = NULL;
  g_autofree gchar *id = NULL, *first = NULL, *second = NULL;
  g_autoptr(GError) error = NULL;

  NEED_JOINS();
  chain = sluice_workflow_chain();
  e = env_new();
  sluice_workflow_add(chain, task_of("wf.echo", 1));
  sluice_workflow_add(chain, sluice_workflow_task("wf.collect", NULL, NULL));
  wf = chain;
  id = enqueue_ok(e, wf);
  ck_assert_msg(sluice_client_cancel_workflow(e->client, id, &error), "%s",
                error != NULL ? error->message : "");
  run_all(e);
  first = g_strdup_printf("%s.0", id);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, first),
                   SLUICE_STATE_CANCELLED);
  ck_assert_uint_eq(n_callbacks(), 0);
  ck_assert_uint_eq(status_of(e, id).failed, 1);
  ck_assert(
      !sluice_client_cancel_workflow(e->client, "no-such-workflow", &error));
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_NOT_FOUND));
  env_free(e);
}
END_TEST

/* ---- Batches ------------------------------------------------------------- */

START_TEST(join_grow_is_a_compare_and_set)
{
  g_autoptr(SluiceClock) clock = NULL;
  SluiceBroker *b;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) payload = g_bytes_new_static("\x81\xa1v\x01", 4);
  g_autoptr(GBytes) o = g_bytes_new_static("o", 1);
  SluiceSubmit items[2] = {
      {.id = "g1", .queue = "wf-grow", .payload = payload},
      {.id = "g2", .queue = "wf-grow", .payload = payload}};
  SluiceJoinSpec spec = {"grown", 1, NULL, 0, NULL, 3600 * 1000};
  SluiceJoinArrival a[3] = {{0}};
  guint total = 0;

  NEED_JOINS();
  clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  b = factory->create(clock, 100, factory->data, &error);
  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  if (!sluice_broker_join_grow(b, "nope", 0, 1, NULL, 0, &total, NULL)) {
    /* The joins table is complete, so this is a store that failed. */
    sluice_conformance__skip_now(
        "join_grow_is_a_compare_and_set",
        "join_grow failed on a join that does not exist");
    sluice_broker_unref(b);
    return;
  }
  ck_assert_uint_eq(total, 0);
  ck_assert(sluice_broker_join_open(b, &spec, 1, NULL, 0, NULL, &error));
  ck_assert(
      sluice_broker_join_grow(b, "grown", 1, 2, items, 2, &total, &error));
  ck_assert_uint_eq(total, 3);
  ck_assert_int_eq(queued_in(b, "wf-grow"), 2);
  /* A second add prepared for the old size: refused, nothing written. */
  ck_assert(
      sluice_broker_join_grow(b, "grown", 1, 2, items, 2, &total, &error));
  ck_assert_uint_eq(total, 3);
  ck_assert_int_eq(queued_in(b, "wf-grow"), 2);
  /* Members up to the new total count; the join completes at 3. */
  for (guint i = 0; i < 3; i++)
    a[i] = (SluiceJoinArrival){"grown", i, o, SLUICE_JOIN_COUNT, FALSE, FALSE};
  ck_assert(sluice_broker_join_arrive(b, a, 3, &error));
  ck_assert(a[0].counted && a[1].counted && a[2].counted && a[2].released);
  /* Released: it takes no more. */
  ck_assert(
      sluice_broker_join_grow(b, "grown", 3, 1, items, 1, &total, &error));
  ck_assert_uint_eq(total, 0);
  ck_assert_int_eq(queued_in(b, "wf-grow"), 2);
  sluice_broker_unref(b);
}
END_TEST

START_TEST(batch_runs_its_callbacks_once_it_is_closed_and_done)
{
  Env *e;
  SluiceWorkflow *first = NULL;
  g_autoptr(SluiceWorkflow) more = sluice_workflow_group();
  g_autoptr(SluiceWorkflow) late = task_of("wf.echo", 9);
  g_autoptr(SluiceWorkflow) complete = NULL, success = NULL;
  g_autoptr(SluiceWorkflow) owner = first;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL, *success_id = NULL;
  SluiceBatchStatus st;

  NEED_JOINS();
  first = sluice_workflow_group();
  e = env_new();
  complete = sluice_workflow_task("wf.collect", NULL, NULL);
  success = sluice_workflow_task("wf.collect", NULL, NULL);
  for (gint64 i = 0; i < 3; i++)
    sluice_workflow_add(first, task_of("wf.odd-fails", i));
  id = sluice_client_start_batch(e->client, first, complete, success, TRUE,
                                 &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  run_all(e);
  ck_assert(sluice_client_get_batch(e->client, id, &st, &error));
  ck_assert_uint_eq(st.total, 3);
  ck_assert_uint_eq(st.pending, 0);
  ck_assert_uint_eq(st.succeeded, 2);
  ck_assert_uint_eq(st.failed, 1);
  ck_assert(st.open && !st.complete);
  ck_assert_uint_eq(n_callbacks(), 0); /* open: not complete */

  sluice_workflow_add(more, task_of("wf.echo", 10));
  sluice_workflow_add(more, task_of("wf.echo", 12));
  ck_assert_msg(sluice_client_add_to_batch(e->client, id, more, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_client_close_batch(e->client, id, &error));
  run_all(e);
  ck_assert(sluice_client_get_batch(e->client, id, &st, &error));
  ck_assert_uint_eq(st.total, 5);
  ck_assert_uint_eq(st.succeeded, 4);
  ck_assert(!st.open && st.complete);
  /* on_complete once, with every task; on_success not run: one failed. */
  ck_assert_uint_eq(n_callbacks(), 1);
  ck_assert_msg(g_str_has_prefix(callback_args(0),
                                 "{\"results\":[0,null,2,10,12],"
                                 "\"errors\":[{\"index\":1,"),
                "%s", callback_args(0));
  success_id = g_strdup_printf("%s.success", id);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, success_id),
                   SLUICE_STATE_CANCELLED);
  /* Closed: no more tasks. */
  ck_assert(!sluice_client_add_to_batch(e->client, id, late, &error));
  ck_assert(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID));
  g_clear_error(&error);
  ck_assert(sluice_client_close_batch(e->client, id, &error));
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  env_free(e);
}
END_TEST

START_TEST(batch_on_success_runs_when_all_succeed)
{
  Env *e;
  g_autoptr(SluiceWorkflow) tasks = sluice_workflow_group();
  g_autoptr(SluiceWorkflow) success = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;
  SluiceBatchStatus st;

  NEED_JOINS();
  e = env_new();
  success = sluice_workflow_task("wf.collect", NULL, NULL);
  sluice_workflow_add(tasks, task_of("wf.flaky", 3));
  sluice_workflow_add(tasks, task_of("wf.echo", 4));
  id =
      sluice_client_start_batch(e->client, tasks, NULL, success, FALSE, &error);
  ck_assert(id != NULL);
  run_all(e);
  ck_assert_uint_eq(n_callbacks(), 1);
  ck_assert_str_eq(callback_args(0),
                   "{\"results\":[3,4],\"errors\":[],\"args\":null}");
  ck_assert(sluice_client_get_batch(e->client, id, &st, &error));
  ck_assert(st.complete && !st.open);
  ck_assert_uint_eq(st.succeeded, 2);
  env_free(e);
}
END_TEST

/* ---- Progress ------------------------------------------------------------ */

static gpointer
run_thread(gpointer data)
{
  Env *e = data;
  g_autoptr(GError) error = NULL;

  if (!sluice_test_harness_run_until_idle(e->h, &error))
    return g_strdup(error->message);
  return NULL;
}

static gboolean
can_progress(Env *e)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceProgress) p =
      sluice_client_get_progress(e->client, "nothing-here", &error);

  return !g_error_matches(error, SLUICE_BROKER_ERROR,
                          SLUICE_BROKER_ERROR_UNSUPPORTED);
}

START_TEST(progress_is_visible_while_the_task_runs)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceProgress) none = NULL;
  GThread *runner;
  gchar *failure;
  gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

  if (!can_progress(e)) {
    env_free(e);
    return;
  }
  id = sluice_client_enqueue(e->client, "wf.progress", NULL, NULL, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  none = sluice_client_get_progress(e->client, id, &error);
  ck_assert(none == NULL);
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_NOT_FOUND));
  g_clear_error(&error);

  runner = g_thread_new("run", run_thread, e);
  for (;;) {
    g_autoptr(SluiceProgress) p =
        sluice_client_get_progress(e->client, id, NULL);
    if (p != NULL) {
      ck_assert(p->fraction == 0.5);
      ck_assert_str_eq(p->message, "halfway");
      ck_assert_int_eq(p->updated_at, SLUICE_TEST_EPOCH_MS);
      /* Still running: it waits for us (its `running` record goes through
       * the settler, so it may come after the progress). */
      while (sluice_test_harness_get_state(e->h, id) != SLUICE_STATE_RUNNING) {
        ck_assert_msg(g_get_monotonic_time() < deadline,
                      "not running within 60 s");
        g_usleep(5000);
      }
      break;
    }
    ck_assert_msg(g_get_monotonic_time() < deadline, "no progress within 60 s");
    g_usleep(5000);
  }
  g_mutex_lock(&seen.lock);
  seen.progress_seen = TRUE;
  g_cond_broadcast(&seen.cond);
  g_mutex_unlock(&seen.lock);
  failure = g_thread_join(runner);
  ck_assert_msg(failure == NULL, "%s", failure);
  {
    g_autoptr(SluiceProgress) p =
        sluice_client_get_progress(e->client, id, &error);
    ck_assert_msg(p != NULL, "%s", error != NULL ? error->message : "");
    /* Clamped to 1; a report of 1 is never dropped by the throttle. */
    ck_assert(p->fraction == 1.0);
    ck_assert_str_eq(p->message, "done");
  }
  env_free(e);
}
END_TEST

/* ---- Events -------------------------------------------------------------- */

static gboolean
can_events(SluiceClient *client)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *cursor = NULL;
  g_autoptr(GPtrArray) none =
      sluice_client_read_events(client, NULL, 1, 0, &cursor, &error);

  return none != NULL;
}

/* "kind kind ..." of task @id's events, read from the oldest, in order. */
static gchar *
kinds_of(SluiceClient *client, const gchar *id)
{
  GString *out = g_string_new(NULL);
  g_autofree gchar *cursor = NULL;

  for (;;) {
    g_autoptr(GError) error = NULL;
    gchar *next = NULL;
    g_autoptr(GPtrArray) page =
        sluice_client_read_events(client, cursor, 7, 0, &next, &error);

    ck_assert_msg(page != NULL, "%s", error != NULL ? error->message : "");
    ck_assert(next != NULL);
    g_free(cursor);
    cursor = next;
    if (page->len == 0)
      break;
    for (guint i = 0; i < page->len; i++) {
      SluiceEvent *ev = g_ptr_array_index(page, i);
      if (g_strcmp0(ev->task_id, id) != 0)
        continue;
      if (out->len > 0)
        g_string_append_c(out, ' ');
      g_string_append(out, sluice_event_kind_to_string(ev->kind));
      if (ev->kind == SLUICE_EVENT_PROGRESS)
        g_string_append_printf(out, "(%.1f %s)", ev->progress, ev->detail);
    }
  }
  return g_string_free(out, FALSE);
}

START_TEST(events_of_each_task_are_in_order)
{
  Env *e = env_new();
  SluiceClientOptions co;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *flaky = NULL, *report = NULL, *fatal = NULL;
  g_autofree gchar *k1 = NULL, *k2 = NULL, *k3 = NULL;
  g_autoptr(GBytes) three = pack_int(3);
  SluiceEnqueueOptions once;

  sluice_client_options_init(&co);
  co.events = TRUE;
  client = sluice_client_new(e->broker, &co, &error);
  ck_assert(client != NULL);
  if (!can_events(client)) {
    env_free(e);
    return;
  }
  sluice_enqueue_options_init(&once);
  once.options.retry.max_attempts = 1;
  flaky = sluice_client_enqueue(client, "wf.flaky", three, NULL, &error);
  report = sluice_client_enqueue(client, "wf.report", NULL, NULL, &error);
  fatal = sluice_client_enqueue(client, "wf.fatal", NULL, &once, &error);
  ck_assert(flaky != NULL && report != NULL && fatal != NULL);
  run_all(e);
  k1 = kinds_of(client, flaky);
  ck_assert_str_eq(k1, "enqueued started retried started succeeded");
  k2 = kinds_of(client, report);
  ck_assert_str_eq(k2, "enqueued started progress(0.5 half) progress(1.0 all) "
                       "succeeded");
  k3 = kinds_of(client, fatal);
  ck_assert_str_eq(k3, "enqueued started dead_lettered");
  env_free(e);
}
END_TEST

START_TEST(events_are_trimmed_by_length_and_age)
{
  g_autoptr(SluiceClock) clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  g_autoptr(GError) error = NULL;
  SluiceBroker *b = factory->create(clock, 100, factory->data, &error);
  GBytes *ev[10];
  g_autoptr(GPtrArray) out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_event_entry_free);
  g_autofree gchar *cursor = NULL, *again = NULL;
  gchar *next = NULL;

  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  if (!sluice_broker_read_events(b, NULL, 1, 0, out, &next, NULL)) {
    sluice_broker_unref(b);
    return;
  }
  g_free(next);
  for (guint i = 0; i < 10; i++)
    ev[i] = g_bytes_new(&i, sizeof i);
  /* Length: 10 appended, 4 kept, the newest, in order. */
  ck_assert(sluice_broker_append_events(b, ev, 10, 4, 3600 * 1000,
                                        SLUICE_TEST_EPOCH_MS, &error));
  ck_assert(sluice_broker_read_events(b, NULL, 100, 0, out, &cursor, &error));
  ck_assert_uint_eq(out->len, 4);
  for (guint i = 0; i < 4; i++)
    ck_assert(g_bytes_equal(
        ((SluiceEventEntry *)g_ptr_array_index(out, i))->event, ev[6 + i]));
  /* Nothing after the last cursor; a blocked read ends with the next
   * append (from another thread) or its timeout. */
  g_ptr_array_set_size(out, 0);
  ck_assert(sluice_broker_read_events(b, cursor, 100, 0, out, &again, &error));
  ck_assert_uint_eq(out->len, 0);
  ck_assert_str_eq(again, cursor);
  /* Age, on brokers whose stream follows the caller's clock. */
  if (sluice_broker_supports(b, SLUICE_BROKER_FEATURE_CLOCK_TTL)) {
    g_autofree gchar *c2 = NULL;
    ck_assert(sluice_broker_append_events(b, ev, 1, 100, 1000,
                                          SLUICE_TEST_EPOCH_MS + 5000, &error));
    g_ptr_array_set_size(out, 0);
    ck_assert(sluice_broker_read_events(b, NULL, 100, 0, out, &c2, &error));
    ck_assert_uint_eq(out->len, 1);
    ck_assert(g_bytes_equal(
        ((SluiceEventEntry *)g_ptr_array_index(out, 0))->event, ev[0]));
  }
  for (guint i = 0; i < 10; i++)
    g_bytes_unref(ev[i]);
  sluice_broker_unref(b);
}
END_TEST

/* A cursor the broker never handed out is refused as bad input, not read
 * as "from the start": a typo would otherwise replay the whole stream. */
START_TEST(events_refuse_a_cursor_never_issued)
{
  g_autoptr(SluiceClock) clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  g_autoptr(GError) error = NULL;
  SluiceBroker *b = factory->create(clock, 100, factory->data, &error);
  static const gchar *const bad[] = {
      "not a cursor", "",
      /* A number or stream id ahead of every event written. */
      "99999999999999999"};
  g_autoptr(GPtrArray) out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_event_entry_free);
  g_autoptr(GBytes) ev = g_bytes_new_static("e", 1);
  g_autofree gchar *cursor = NULL;
  gchar *next = NULL;

  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  if (!sluice_broker_read_events(b, NULL, 1, 0, out, &next, NULL)) {
    sluice_broker_unref(b);
    return;
  }
  g_free(next);
  ck_assert(sluice_broker_append_events(b, &ev, 1, 100, 3600 * 1000,
                                        SLUICE_TEST_EPOCH_MS, &error));
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) refused = NULL;
    next = NULL;
    g_ptr_array_set_size(out, 0);
    ck_assert_msg(
        !sluice_broker_read_events(b, bad[i], 10, 0, out, &next, &refused),
        "read after cursor “%s”", bad[i]);
    ck_assert_msg(g_error_matches(refused, SLUICE_BROKER_ERROR,
                                  SLUICE_BROKER_ERROR_INVALID),
                  "cursor “%s”: %s", bad[i], refused->message);
    ck_assert(next == NULL);
    ck_assert_uint_eq(out->len, 0);
  }
  /* The cursors it hands out stay good, the last one included. */
  g_ptr_array_set_size(out, 0);
  ck_assert(sluice_broker_read_events(b, NULL, 10, 0, out, &cursor, &error));
  ck_assert_uint_eq(out->len, 1);
  g_free(next);
  next = NULL;
  g_ptr_array_set_size(out, 0);
  ck_assert_msg(sluice_broker_read_events(b, cursor, 10, 0, out, &next, &error),
                "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(out->len, 0);
  g_free(next);
  sluice_broker_unref(b);
}
END_TEST

/* ---- Bad input ----------------------------------------------------------- */

static void
refused(Env *e, SluiceWorkflow *wf, const gchar *words)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = sluice_client_enqueue_workflow(e->client, wf, &error);

  ck_assert_msg(id == NULL, "accepted a workflow that %s", words);
  ck_assert_msg(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID),
      "%s", error->message);
  ck_assert_msg(strstr(error->message, words) != NULL, "“%s” lacks “%s”",
                error->message, words);
  ck_assert_int_eq(queued_in(e->broker, "default"), 0);
}

START_TEST(bad_workflows_are_refused_and_nothing_is_enqueued)
{
  Env *e;
  g_autoptr(SluiceWorkflow) empty = NULL, looped = NULL, twice = NULL;
  g_autoptr(SluiceWorkflow) big = NULL, with_id = NULL, late_empty = NULL;
  g_autoptr(SluiceWorkflow) unknown = NULL;
  SluiceWorkflow *shared, *inner;
  SluiceEnqueueOptions eo;
  g_autofree gchar *id = NULL;

  NEED_JOINS();
  e = env_new();
  empty = sluice_workflow_chord(sluice_workflow_group(), task_of("wf.echo", 1),
                                SLUICE_CHORD_WAIT_ALL);
  refused(e, empty, "empty");

  /* Valid first members, an empty group last: still nothing enqueued. */
  late_empty = sluice_workflow_group();
  sluice_workflow_add(late_empty, task_of("wf.echo", 1));
  sluice_workflow_add(late_empty, sluice_workflow_chain());
  refused(e, late_empty, "empty");

  looped = sluice_workflow_chain();
  inner = sluice_workflow_group();
  sluice_workflow_add(looped, inner);
  sluice_workflow_add(inner, task_of("wf.echo", 1));
  sluice_workflow_add(inner, sluice_workflow_ref(looped));
  refused(e, looped, "cycle");

  twice = sluice_workflow_group();
  shared = task_of("wf.echo", 1);
  sluice_workflow_add(twice, shared);
  sluice_workflow_add(twice, sluice_workflow_ref(shared));
  refused(e, twice, "two places");

  big = sluice_workflow_group();
  for (guint i = 0; i <= SLUICE_WORKFLOW_MAX_TASKS; i++)
    sluice_workflow_add(big, task_of("wf.echo", i));
  refused(e, big, "more than");

  sluice_enqueue_options_init(&eo);
  eo.id = "mine";
  with_id = sluice_workflow_group();
  sluice_workflow_add(with_id, task_of("wf.echo", 1));
  sluice_workflow_add(with_id, sluice_workflow_task("wf.echo", NULL, &eo));
  refused(e, with_id, "id");

  /* A task no worker has registered yet is accepted. */
  unknown = sluice_workflow_group();
  sluice_workflow_add(unknown,
                      sluice_workflow_task("not.yet.deployed", NULL, NULL));
  id = enqueue_ok(e, unknown);
  ck_assert_int_eq(queued_in(e->broker, "default"), 1);
  env_free(e);
}
END_TEST

void
sluice_conformance_add_workflow(Suite *s, const SluiceConformanceFactory *f)
{
  TCase *tc = tcase_create("workflow");

  factory = f;
  g_mutex_init(&seen.lock);
  g_cond_init(&seen.cond);
  seen.callbacks = g_ptr_array_new_with_free_func(g_free);
  tcase_set_timeout(tc, 300);
  sluice_conformance__add(
      tc, join_counts_each_member_once_and_releases_once,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, join_release_now_and_abandon,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, chord_runs_callback_once_with_every_result,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, chord_wait_all_gives_successes_and_failures,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, chord_ignore_failures_gives_only_successes,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, chord_fail_fast_runs_callback_with_the_error_and_cancels_the_rest,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, replayed_member_does_not_run_the_callback_again,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, chain_passes_each_result_on,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, chain_stops_at_a_failure_unless_the_step_continues,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, nested_group_of_chains_and_chain_of_groups,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, cancelling_a_workflow_cancels_what_has_not_run,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, bad_workflows_are_refused_and_nothing_is_enqueued,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, join_grow_is_a_compare_and_set,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, batch_runs_its_callbacks_once_it_is_closed_and_done,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, batch_on_success_runs_when_all_succeed,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_JOINS));
  sluice_conformance__add(
      tc, progress_is_visible_while_the_task_runs,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_EVENTS));
  sluice_conformance__add(
      tc, events_of_each_task_are_in_order,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_EVENTS));
  sluice_conformance__add(
      tc, events_are_trimmed_by_length_and_age,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_EVENTS));
  sluice_conformance__add(
      tc, events_refuse_a_cursor_never_issued,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_EVENTS));
  suite_add_tcase(s, tc);
}

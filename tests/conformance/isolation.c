/* isolation.c - process isolation (SLUICE_ISOLATION_PROCESS) on any
 * broker: a task that crashes, hangs or leaks costs one attempt, and
 * nothing else.
 *
 * Task functions here run in child processes, so they cannot report to
 * the test through memory: they return their child's pid as their result,
 * or leave a file (holding that pid) where the test waits for it.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <msgpack.h>

#include "tests/conformance/conformance.h"

static const SluiceConformanceFactory *factory;

/* Where the leaking tasks put what they leak, so the compiler cannot drop
 * an allocation nothing reads. */
static gpointer volatile leak_sink;

typedef struct {
  SluiceClock *clock;
  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceTestHarness *h;
  SluiceClient *client;
  SluiceWorker *worker;
  gchar *dir;
} Env;

/* ---- Task functions (they run in the children) --------------------------- */

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

static gboolean
task_pid(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autoptr(GBytes) pid = pack_int(getpid());

  sluice_task_context_set_result(ctx, pid);
  return TRUE;
}

static gboolean
task_segv(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  raise(SIGSEGV);
  return TRUE;
}

static gboolean
task_abort(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  abort();
}

static gboolean
task_exit(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  _exit(3);
}

static gboolean
task_spin(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  volatile guint64 n = 0;

  for (;;)
    n++;
  return TRUE;
}

static gboolean
task_hog(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  /* Leaks on purpose, touching every page, until it is stopped. */
  for (;;) {
    gchar *chunk = g_malloc(4 << 20);
    memset(chunk, 1, 4 << 20);
    leak_sink = chunk;
  }
  return TRUE;
}

static gboolean
task_leak(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autoptr(GBytes) pid = pack_int(getpid());
  gchar *leaked = g_malloc(256 << 20);

  memset(leaked, 1, 256 << 20);
  leak_sink = leaked;
  sluice_task_context_set_result(ctx, pid);
  return TRUE;
}

/* The path in the task's arguments (a msgpack string). */
static gchar *
path_arg(SluiceTaskContext *ctx)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);

  if (args->type != MSGPACK_OBJECT_STR)
    return NULL;
  return g_strndup(args->via.str.ptr, args->via.str.size);
}

static void
leave_mark(SluiceTaskContext *ctx)
{
  g_autofree gchar *path = path_arg(ctx);
  g_autofree gchar *pid = g_strdup_printf("%d", (int)getpid());
  g_autofree gchar *tmp = g_strconcat(path, ".tmp", NULL);

  /* Renamed into place, so the test never reads half a file. */
  if (path != NULL && g_file_set_contents(tmp, pid, -1, NULL))
    g_rename(tmp, path);
}

/* Ignores its cancellable: only a kill stops it. */
static gboolean
task_stubborn(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  leave_mark(ctx);
  for (;;)
    g_usleep(10000);
  return TRUE;
}

/* Returns as soon as it is cancelled. */
static gboolean
task_listen(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  GCancellable *cancellable = sluice_task_context_get_cancellable(ctx);

  leave_mark(ctx);
  while (!g_cancellable_is_cancelled(cancellable))
    g_usleep(5000);
  return !g_cancellable_set_error_if_cancelled(cancellable, error);
}

/* ---- The environment ----------------------------------------------------- */

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
process_options(SluiceWorkerOptions *o)
{
  sluice_worker_options_init(o);
  o->retry.jitter = SLUICE_OFF;
  o->track_state = TRUE;
  o->revocation_interval_ms = 20;
  o->isolation = SLUICE_ISOLATION_PROCESS;
}

static Env *
env_new(const SluiceWorkerOptions *options)
{
  Env *e = g_new0(Env, 1);
  g_autoptr(GError) error = NULL;
  SluiceTaskOptions spin;

  e->dir = g_dir_make_tmp("sluice-isolation-XXXXXX", &error);
  ck_assert_msg(e->dir != NULL, "%s", error != NULL ? error->message : "");
  e->clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  e->broker = factory->create(e->clock, 100, factory->data, &error);
  ck_assert_msg(e->broker != NULL, "%s: cannot create the broker: %s",
                factory->name, error != NULL ? error->message : "?");
  e->registry = sluice_registry_new();
  add_task(e, "iso.pid", task_pid, NULL);
  add_task(e, "iso.segv", task_segv, NULL);
  add_task(e, "iso.abort", task_abort, NULL);
  add_task(e, "iso.exit", task_exit, NULL);
  sluice_task_options_init(&spin);
  spin.hard_timeout_ms = 300;
  add_task(e, "iso.spin", task_spin, &spin);
  add_task(e, "iso.spin-unbounded", task_spin, NULL);
  add_task(e, "iso.hog", task_hog, NULL);
  add_task(e, "iso.leak", task_leak, NULL);
  add_task(e, "iso.stubborn", task_stubborn, NULL);
  add_task(e, "iso.listen", task_listen, NULL);
  e->h = sluice_test_harness_new_with_broker(e->broker, e->registry, options,
                                             &error);
  ck_assert_msg(e->h != NULL, "%s", error != NULL ? error->message : "");
  e->client = sluice_test_harness_get_client(e->h);
  e->worker = sluice_test_harness_get_worker(e->h);
  return e;
}

static void
env_free(Env *e)
{
  sluice_test_harness_free(e->h);
  sluice_registry_unref(e->registry);
  sluice_broker_unref(e->broker);
  sluice_clock_unref(e->clock);
  {
    g_autoptr(GDir) dir = g_dir_open(e->dir, 0, NULL);
    const gchar *name;
    while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
      g_autofree gchar *path = g_build_filename(e->dir, name, NULL);
      g_unlink(path);
    }
  }
  g_rmdir(e->dir);
  g_free(e->dir);
  g_free(e);
}

static gchar *
enqueue_full(Env *e, const gchar *task, const gchar *json_args,
             guint max_attempts)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = NULL;
  SluiceEnqueueOptions eo;
  gchar *id;

  sluice_enqueue_options_init(&eo);
  eo.options.retry.initial_backoff_ms = 0; /* retries due at once */
  if (max_attempts > 0)
    eo.options.retry.max_attempts = max_attempts;
  if (json_args != NULL) {
    args = sluice_args_from_json(json_args, -1, &error);
    ck_assert_msg(args != NULL, "%s", error->message);
  }
  id = sluice_client_enqueue(e->client, task, args, &eo, &error);
  ck_assert_msg(id != NULL, "enqueue %s: %s", task,
                error != NULL ? error->message : "");
  return id;
}

static gchar *
enqueue(Env *e, const gchar *task)
{
  return enqueue_full(e, task, NULL, 0);
}

/* Enqueues @task with the path of mark @name in the arguments. */
static gchar *
enqueue_marked(Env *e, const gchar *task, const gchar *name)
{
  g_autofree gchar *path = g_build_filename(e->dir, name, NULL);
  g_autofree gchar *json = g_strdup_printf("\"%s\"", path);

  return enqueue_full(e, task, json, 1);
}

/* Waits for mark @name; returns the pid of the child that left it. */
static GPid
wait_for_mark(Env *e, const gchar *name)
{
  g_autofree gchar *path = g_build_filename(e->dir, name, NULL);
  gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

  while (g_get_monotonic_time() < deadline) {
    g_autofree gchar *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL))
      return (GPid)g_ascii_strtoll(text, NULL, 10);
    g_usleep(10000);
  }
  ck_abort_msg("no task left the mark %s within 60 s", name);
  return 0;
}

static void
run_idle(Env *e)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sluice_test_harness_run_until_idle(e->h, &error), "%s",
                error != NULL ? error->message : "");
}

static SluiceWorkerStats
stats_of(Env *e)
{
  SluiceWorkerStats s;
  sluice_worker_get_stats(e->worker, &s);
  return s;
}

static SluiceTaskState
state_of(Env *e, const gchar *id)
{
  return sluice_test_harness_get_state(e->h, id);
}

/* The pid an iso.pid (or iso.leak) task returned. */
static GPid
pid_of(Env *e, const gchar *id)
{
  g_autoptr(SluiceResult) r = sluice_test_harness_get_record(e->h, id);
  GBytes *value;
  msgpack_unpacked u;
  gsize len = 0;
  gconstpointer data;
  GPid pid = 0;

  ck_assert_msg(r != NULL, "task %s has no record", id);
  ck_assert_msg(
      sluice_result_get_state(r) == SLUICE_STATE_SUCCEEDED, "task %s: %s (%s)",
      id, sluice_task_state_to_string(sluice_result_get_state(r)),
      sluice_result_get_error(r) != NULL ? sluice_result_get_error(r) : "");
  value = sluice_result_get_value(r);
  ck_assert_ptr_nonnull(value);
  data = g_bytes_get_data(value, &len);
  msgpack_unpacked_init(&u);
  if (msgpack_unpack_next(&u, data, len, NULL) == MSGPACK_UNPACK_SUCCESS &&
      u.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
    pid = (GPid)u.data.via.u64;
  msgpack_unpacked_destroy(&u);
  ck_assert_int_gt(pid, 0);
  return pid;
}

/* The dead letter of @id (transfer full). */
static SluiceDeadLetter *
dead_letter_of(Env *e, const gchar *id)
{
  g_autoptr(GPtrArray) all = sluice_test_harness_dead_letters(e->h);

  for (guint i = 0; i < all->len; i++) {
    SluiceDeadLetter *dl = all->pdata[i];
    if (g_strcmp0(dl->task_id, id) == 0)
      return sluice_dead_letter_copy(dl);
  }
  ck_abort_msg("task %s was not dead-lettered", id);
  return NULL;
}

/* How a child killed by @signal_name is described. A sanitizer turns a
 * SIGSEGV into an exit (status 1 for ASan, 66 for TSan), after its
 * report. */
static gboolean
names_crash(const gchar *text, const gchar *signal_name)
{
  g_autofree gchar *killed = g_strdup_printf("killed by %s", signal_name);

  if (strstr(text, killed) != NULL)
    return TRUE;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return strstr(text, "exited with status") != NULL;
#else
  return FALSE;
#endif
}

/* ---- Scenarios ----------------------------------------------------------- */

/* A task that crashes its child fails that attempt alone: it is retried,
 * each history line names the signal, and its last attempt buries it;
 * a hundred batch-mates all succeed in children, and the worker lives. */
START_TEST(crash_fails_one_attempt_and_spares_batch_mates)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GPtrArray) healthy = g_ptr_array_new_with_free_func(g_free);
  g_autofree gchar *crasher = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(GError) error = NULL;
  SluiceWorkerStats s;

  process_options(&o);
  o.concurrency = 4;
  o.prefetch = 16;
  e = env_new(&o);
  for (guint i = 0; i < 50; i++)
    g_ptr_array_add(healthy, enqueue(e, "iso.pid"));
  crasher = enqueue_full(e, "iso.segv", NULL, 3);
  for (guint i = 0; i < 50; i++)
    g_ptr_array_add(healthy, enqueue(e, "iso.pid"));
  run_idle(e);

  for (guint i = 0; i < healthy->len; i++)
    ck_assert_int_ne(pid_of(e, healthy->pdata[i]), getpid());
  ck_assert_int_eq(state_of(e, crasher), SLUICE_STATE_DEAD_LETTERED);
  dl = dead_letter_of(e, crasher);
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_MAX_ATTEMPTS);
  ck_assert_msg(names_crash(dl->detail, "SIGSEGV"), "detail: %s", dl->detail);
  env = sluice_envelope_decode(dl->payload, NULL, &error);
  ck_assert_msg(env != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(env->history->len, 2);
  for (guint i = 0; i < env->history->len; i++) {
    const gchar *line = env->history->pdata[i];
    g_autofree gchar *prefix = g_strdup_printf("attempt %u:", i + 1);
    ck_assert_msg(g_str_has_prefix(line, prefix) &&
                      names_crash(line, "SIGSEGV"),
                  "history line %u: %s", i, line);
  }
  s = stats_of(e);
  ck_assert_uint_eq(s.succeeded, 100);
  ck_assert_uint_eq(s.children_lost, 3);
  ck_assert_uint_ge(s.children_started, 4);
  /* The worker that announced itself at the start is this process still. */
  ck_assert_int_eq(kill(getpid(), 0), 0);
  env_free(e);
}
END_TEST

/* Every way a child can end under a task is named in its history. */
START_TEST(each_way_a_child_dies_is_named)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *aborts = NULL;
  g_autofree gchar *exits = NULL;
  g_autoptr(SluiceDeadLetter) dl_abort = NULL;
  g_autoptr(SluiceDeadLetter) dl_exit = NULL;

  process_options(&o);
  o.concurrency = 2;
  e = env_new(&o);
  aborts = enqueue_full(e, "iso.abort", NULL, 1);
  exits = enqueue_full(e, "iso.exit", NULL, 1);
  run_idle(e);
  dl_abort = dead_letter_of(e, aborts);
  dl_exit = dead_letter_of(e, exits);
  ck_assert_msg(strstr(dl_abort->detail, "killed by SIGABRT") != NULL,
                "detail: %s", dl_abort->detail);
  ck_assert_msg(strstr(dl_exit->detail, "exited with status 3") != NULL,
                "detail: %s", dl_exit->detail);
  env_free(e);
}
END_TEST

/* An infinite loop is killed at its hard timeout, fails as timed out, and
 * its slot runs the next task. */
START_TEST(hard_timeout_kills_an_infinite_loop)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *spin = NULL;
  g_autofree gchar *after = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  SluiceWorkerStats s;

  process_options(&o);
  o.concurrency = 1;
  e = env_new(&o);
  spin = enqueue_full(e, "iso.spin", NULL, 1);
  after = enqueue(e, "iso.pid");
  run_idle(e);
  dl = dead_letter_of(e, spin);
  ck_assert_msg(strstr(dl->detail, "timed out") != NULL &&
                    strstr(dl->detail, "hard timeout of 300 ms") != NULL,
                "detail: %s", dl->detail);
  ck_assert_int_ne(pid_of(e, after), getpid());
  s = stats_of(e);
  ck_assert_uint_eq(s.timed_out, 1);
  ck_assert_uint_eq(s.children_lost, 1);
  ck_assert_uint_eq(s.succeeded, 1);
  env_free(e);
}
END_TEST

/* A message's own hard timeout wins over its task's, and bounds a task
 * that has none, with no hard timeout configured on the worker. */
START_TEST(message_hard_timeout_wins)
{
  static const struct {
    const gchar *task;
    gint64 message_ms;
    const gchar *detail;
  } cases[] = {
      {"iso.spin-unbounded", 400, "hard timeout of 400 ms"},
      {"iso.spin", 500, "hard timeout of 500 ms"},
  };
  SluiceWorkerOptions o;
  Env *e;
  gchar *ids[G_N_ELEMENTS(cases)];

  process_options(&o);
  o.concurrency = 1;
  e = env_new(&o);
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    SluiceEnqueueOptions eo;

    sluice_enqueue_options_init(&eo);
    eo.options.retry.max_attempts = 1;
    eo.options.hard_timeout_ms = cases[i].message_ms;
    ids[i] = sluice_client_enqueue(e->client, cases[i].task, NULL, &eo, &error);
    ck_assert_msg(ids[i] != NULL, "%s", error != NULL ? error->message : "");
  }
  run_idle(e);
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(SluiceDeadLetter) dl = dead_letter_of(e, ids[i]);

    ck_assert_msg(strstr(dl->detail, cases[i].detail) != NULL, "%s: detail: %s",
                  cases[i].task, dl->detail);
    g_free(ids[i]);
  }
  ck_assert_uint_eq(stats_of(e).timed_out, 2);
  env_free(e);
}
END_TEST

/* A task that allocates without bound is stopped by the memory limit, and
 * its attempt says so. */
START_TEST(memory_limit_stops_unbounded_allocation)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *hog = NULL;
  g_autofree gchar *after = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;

  process_options(&o);
  o.concurrency = 1;
  o.memory_limit_per_child = (guint64)256 << 20;
  e = env_new(&o);
  hog = enqueue_full(e, "iso.hog", NULL, 1);
  after = enqueue(e, "iso.pid");
  run_idle(e);
  dl = dead_letter_of(e, hog);
  ck_assert_msg(strstr(dl->detail, "memory limit of 256 MiB") != NULL,
                "detail: %s", dl->detail);
  ck_assert_int_ne(pid_of(e, after), getpid());
  ck_assert_uint_eq(stats_of(e).children_lost, 1);
  env_free(e);
}
END_TEST

/* The resident memory of this process, in bytes. */
static guint64
own_resident(void)
{
  g_autofree gchar *statm = NULL;
  const gchar *space;

  ck_assert(g_file_get_contents("/proc/self/statm", &statm, NULL, NULL));
  space = strchr(statm, ' ');
  ck_assert_ptr_nonnull(space);
  return g_ascii_strtoull(space + 1, NULL, 10) * (guint64)sysconf(_SC_PAGESIZE);
}

/* Children are replaced after max_tasks_per_child tasks, and after a task
 * leaves one above max_rss_per_child. */
START_TEST(children_are_recycled_by_task_count_and_memory)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autofree gchar *before = NULL;
  g_autofree gchar *leak = NULL;
  g_autofree gchar *after = NULL;

  process_options(&o);
  o.concurrency = 1;
  o.max_tasks_per_child = 3;
  e = env_new(&o);
  for (guint i = 0; i < 9; i++)
    g_ptr_array_add(ids, enqueue(e, "iso.pid"));
  run_idle(e);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_ORDERED)) {
    /* One executor, tasks in the broker's order: still three children,
     * three tasks each. */
    g_autoptr(GHashTable) runs = g_hash_table_new(NULL, NULL);
    GHashTableIter iter;
    gpointer pid, n;

    for (guint i = 0; i < 9; i++) {
      gpointer key = GINT_TO_POINTER(pid_of(e, ids->pdata[i]));
      g_hash_table_insert(
          runs, key,
          GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(runs, key)) +
                           1));
    }
    ck_assert_uint_eq(g_hash_table_size(runs), 3);
    g_hash_table_iter_init(&iter, runs);
    while (g_hash_table_iter_next(&iter, &pid, &n))
      ck_assert_uint_eq(GPOINTER_TO_UINT(n), 3);
  }
  /* One executor runs them in order: three children, three tasks each. */
  for (guint i = 0;
       sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_ORDERED) &&
       i < 9;
       i++) {
    GPid pid = pid_of(e, ids->pdata[i]);
    GPid first = pid_of(e, ids->pdata[i - i % 3]);
    ck_assert_int_eq(pid, first);
    if (i >= 3)
      ck_assert_int_ne(pid, pid_of(e, ids->pdata[i - 3]));
  }
  ck_assert_uint_eq(stats_of(e).children_started, 3);
  ck_assert_uint_eq(stats_of(e).children_lost, 0);
  env_free(e);

  /* The leak is 256 MiB; the threshold sits halfway above what a fresh
   * child holds (it shares this process's pages). */
  process_options(&o);
  o.concurrency = 1;
  o.max_rss_per_child = own_resident() + ((guint64)128 << 20);
  e = env_new(&o);
  before = enqueue(e, "iso.pid");
  leak = enqueue(e, "iso.leak");
  after = enqueue(e, "iso.pid");
  run_idle(e);
  if (sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_ORDERED)) {
    ck_assert_int_eq(pid_of(e, before), pid_of(e, leak));
    ck_assert_int_ne(pid_of(e, leak), pid_of(e, after));
    ck_assert_uint_eq(stats_of(e).children_started, 2);
  } else {
    /* In the broker's order: what ran before the leak shares its child,
     * what ran after it has a new one; run last, it leaves one child. */
    guint shared = (pid_of(e, before) == pid_of(e, leak)) +
                   (pid_of(e, after) == pid_of(e, leak));
    ck_assert_uint_eq(stats_of(e).children_started, shared == 2 ? 1 : 2);
  }
  env_free(e);
}
END_TEST

/* A running task that listens to its cancellable returns when revoked, and
 * its child lives on; one that ignores it has its child killed after the
 * grace, and the next task gets a fresh child. */
START_TEST(revocation_kills_only_a_child_that_ignores_it)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *first = NULL;
  g_autofree gchar *listener = NULL;
  g_autofree gchar *second = NULL;
  g_autofree gchar *stubborn = NULL;
  g_autofree gchar *third = NULL;
  GPid stubborn_pid;

  process_options(&o);
  o.concurrency = 1;
  /* Long enough for the listener to return on a loaded machine under a
   * sanitizer (a listener killed after the grace gives the second task a
   * new child); the stubborn one waits it out once. */
  o.cancel_grace_ms = 3000;
  e = env_new(&o);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_ORDERED)) {
    /* The scenario needs its five tasks run in order (the listener before
     * the stubborn one, which holds the only executor until killed). */
    env_free(e);
    return;
  }
  first = enqueue(e, "iso.pid");
  listener = enqueue_marked(e, "iso.listen", "listener");
  second = enqueue(e, "iso.pid");
  stubborn = enqueue_marked(e, "iso.stubborn", "stubborn");
  third = enqueue(e, "iso.pid");
  ck_assert(sluice_worker_start(e->worker, &error));

  wait_for_mark(e, "listener");
  ck_assert_int_eq(sluice_client_cancel(e->client, listener, &error),
                   SLUICE_CANCEL_REVOKED);
  stubborn_pid = wait_for_mark(e, "stubborn");
  ck_assert_int_eq(sluice_client_cancel(e->client, stubborn, &error),
                   SLUICE_CANCEL_REVOKED);
  run_idle(e);

  ck_assert_int_eq(state_of(e, listener), SLUICE_STATE_CANCELLED);
  ck_assert_int_eq(state_of(e, stubborn), SLUICE_STATE_CANCELLED);
  ck_assert_int_eq(pid_of(e, first), pid_of(e, second));
  ck_assert_int_eq(pid_of(e, second), stubborn_pid);
  ck_assert_int_ne(pid_of(e, third), stubborn_pid);
  ck_assert_uint_eq(stats_of(e).children_lost, 1);
  ck_assert_int_eq(kill(stubborn_pid, 0), -1);
  env_free(e);
}
END_TEST

/* The stop gives a running task its shutdown timeout, cancels it, kills a
 * child that ignores that after the grace, and gives the message back. */
START_TEST(graceful_stop_kills_a_stuck_child_and_releases_its_message)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *stubborn = NULL;
  GPid pid;
  SluiceWorkerStats s;

  process_options(&o);
  o.concurrency = 1;
  o.shutdown_timeout_ms = 200;
  o.cancel_grace_ms = 200;
  e = env_new(&o);
  stubborn = enqueue_marked(e, "iso.stubborn", "stop");
  ck_assert(sluice_worker_start(e->worker, &error));
  pid = wait_for_mark(e, "stop");
  sluice_worker_stop(e->worker);

  s = stats_of(e);
  ck_assert_uint_eq(s.released, 1);
  ck_assert_uint_eq(s.children_lost, 1);
  ck_assert(!sluice_worker_stopped_forcibly(e->worker));
  ck_assert_int_eq(state_of(e, stubborn), SLUICE_STATE_QUEUED);
  /* The child is gone (reaped, not a zombie), and nothing is called stuck:
   * in process isolation no thread is left behind. */
  ck_assert_int_eq(kill(pid, 0), -1);
  ck_assert_int_eq(errno, ESRCH);
  ck_assert(!sluice_test_log_capture_contains("ignored their cancellable"));
  {
    SluiceBrokerStats st;
    const gchar *queues[] = {"default", NULL};
    ck_assert(sluice_client_get_stats(e->client, queues, &st, &error));
    ck_assert_uint_eq(((SluiceQueueStats *)st.queues->pdata[0])->ready, 1);
    sluice_broker_stats_clear(&st);
  }
  env_free(e);
}
END_TEST

/* A child that dies between tasks (the OOM killer, an operator's kill)
 * costs the next task nothing: it gets a fresh child, and its first attempt
 * succeeds. The test kills the child itself: a task that starts a thread to
 * kill its own process can hang in that thread's start under GCC 12's
 * AddressSanitizer, whose thread registry a child forked from a threaded
 * process may inherit locked. */
START_TEST(a_child_lost_between_tasks_costs_nothing)
{
  SluiceWorkerOptions o;
  Env *e;
  g_autofree gchar *doomed = NULL;
  g_autofree gchar *next = NULL;
  gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
  GPid pid;

  process_options(&o);
  o.concurrency = 1;
  e = env_new(&o);
  doomed = enqueue(e, "iso.pid");
  run_idle(e);
  pid = pid_of(e, doomed);
  ck_assert_int_eq(kill(pid, SIGKILL), 0);
  /* Until its parent reaps it, a killed child still answers kill(0). */
  while (kill(pid, 0) == 0 && g_get_monotonic_time() < deadline)
    g_usleep(10000);
  ck_assert_msg(kill(pid, 0) != 0, "child %d never died", (int)pid);

  next = enqueue(e, "iso.pid");
  run_idle(e);
  ck_assert_int_ne(pid_of(e, next), pid);
  {
    g_autoptr(SluiceResult) r = sluice_test_harness_get_record(e->h, next);
    ck_assert_uint_eq(sluice_result_get_attempt(r), 1);
  }
  ck_assert_uint_eq(stats_of(e).children_lost, 0);
  ck_assert_uint_eq(stats_of(e).failed_attempts, 0);
  env_free(e);
}
END_TEST

/* Options only a process can honour are refused in thread mode. */
START_TEST(child_limits_need_process_isolation)
{
  SluiceWorkerOptions o;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceClock) clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(GError) error = NULL;
  SluiceWorker *worker;

  broker = factory->create(clock, 100, factory->data, &error);
  ck_assert_ptr_nonnull(broker);
  sluice_worker_options_init(&o);
  o.hard_timeout_ms = 1000;
  worker = sluice_worker_new(broker, registry, &o, &error);
  ck_assert_ptr_null(worker);
  ck_assert(
      g_error_matches(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID));
  ck_assert_ptr_nonnull(strstr(error->message, "--isolation process"));
}
END_TEST

void
sluice_conformance_add_isolation(Suite *s, const SluiceConformanceFactory *f)
{
  TCase *isolation = tcase_create("isolation");

  factory = f;
  tcase_set_timeout(isolation, 300);
  sluice_conformance__add(isolation,
                          crash_fails_one_attempt_and_spares_batch_mates, 0);
  sluice_conformance__add(isolation, each_way_a_child_dies_is_named, 0);
  sluice_conformance__add(isolation, hard_timeout_kills_an_infinite_loop, 0);
  sluice_conformance__add(isolation, message_hard_timeout_wins, 0);
  sluice_conformance__add(isolation, memory_limit_stops_unbounded_allocation,
                          0);
  sluice_conformance__add(isolation,
                          children_are_recycled_by_task_count_and_memory, 0);
  sluice_conformance__add(
      isolation, revocation_kills_only_a_child_that_ignores_it,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_ORDERED));
  sluice_conformance__add(
      isolation, graceful_stop_kills_a_stuck_child_and_releases_its_message, 0);
  sluice_conformance__add(isolation, a_child_lost_between_tasks_costs_nothing,
                          0);
  sluice_conformance__add(isolation, child_limits_need_process_isolation, 0);
  suite_add_tcase(s, isolation);
}

/* test-middleware.c - producer hooks and worker hooks (sluice-middleware.h)
 * on the memory broker: their order, what they may change, rejection
 * (nothing enqueued, a workflow included), error mapping and
 * short-circuiting, and when a worker refuses a hook.
 */
#include "config.h"

#include <check.h>
#include <string.h>

#include <sluice/sluice.h>

/* What the tasks and hooks of one test saw, in order. */
static GString *trail;
static GMutex trail_lock;

static void
note(const gchar *what)
{
  g_mutex_lock(&trail_lock);
  if (trail->len > 0)
    g_string_append_c(trail, ' ');
  g_string_append(trail, what);
  g_mutex_unlock(&trail_lock);
}

static gchar *
trail_text(void)
{
  gchar *s;

  g_mutex_lock(&trail_lock);
  s = g_strdup(trail->str);
  g_mutex_unlock(&trail_lock);
  return s;
}

/* Notes the headers "a" and "b" it was enqueued with. */
static gboolean
task_headers(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autofree gchar *s = g_strdup_printf(
      "task(a=%s,b=%s)", sluice_task_context_get_header(ctx, "a"),
      sluice_task_context_get_header(ctx, "b"));
  note(s);
  return TRUE;
}

static gboolean
task_denied(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  note("task");
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED, "denied");
  return FALSE;
}

static SluiceTestHarness *
harness_new(SluiceRegistry **out_registry)
{
  g_autoptr(GError) error = NULL;
  SluiceRegistry *registry = sluice_registry_new();
  SluiceTestHarness *h;

  ck_assert(sluice_registry_add(registry, "mw.headers", task_headers, NULL,
                                NULL, NULL, &error));
  ck_assert(sluice_registry_add(registry, "mw.denied", task_denied, NULL, NULL,
                                NULL, &error));
  h = sluice_test_harness_new(registry, NULL, &error);
  ck_assert_msg(h != NULL, "%s", error != NULL ? error->message : "");
  g_string_truncate(trail, 0);
  *out_registry = registry;
  return h;
}

static void
run(SluiceTestHarness *h)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sluice_test_harness_run_until_idle(h, &error), "%s",
                error != NULL ? error->message : "");
}

static gint64
queued(SluiceTestHarness *h)
{
  SluiceBrokerStats st;
  g_autoptr(GError) error = NULL;
  gint64 n = 0;

  sluice_broker_stats_init(&st);
  ck_assert(sluice_client_get_stats(sluice_test_harness_get_client(h), NULL,
                                    &st, &error));
  for (guint i = 0; i < st.queues->len; i++)
    n += ((SluiceQueueStats *)g_ptr_array_index(st.queues, i))->ready;
  sluice_broker_stats_clear(&st);
  return n;
}

/* ---- Producer hooks ------------------------------------------------------ */

static gboolean
hook_a(SluiceEnvelope *env, gpointer data, GError **error)
{
  sluice_envelope_set_header(env, "a", data);
  return TRUE;
}

/* Sees what hook_a set: hooks run in the order they were added. */
static gboolean
hook_b(SluiceEnvelope *env, gpointer data, GError **error)
{
  const gchar *a = sluice_envelope_get_header(env, "a");
  g_autofree gchar *b = g_strconcat(a != NULL ? a : "none", "+b", NULL);

  sluice_envelope_set_header(env, "b", b);
  return TRUE;
}

static gboolean
hook_reject(SluiceEnvelope *env, gpointer data, GError **error)
{
  if (g_strcmp0(env->task, "mw.denied") != 0)
    return TRUE;
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
              "tenant %s may not run %s", (const gchar *)data, env->task);
  return FALSE;
}

static void
count_destroy(gpointer data)
{
  note("destroyed");
}

START_TEST(producer_hooks_run_in_order_and_set_headers)
{
  SluiceRegistry *registry;
  SluiceTestHarness *h = harness_new(&registry);
  SluiceClient *client = sluice_test_harness_get_client(h);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *seen = NULL;

  sluice_client_add_producer_hook(client, hook_a, "1", NULL);
  sluice_client_add_producer_hook(client, hook_b, NULL, count_destroy);
  id = sluice_client_enqueue(client, "mw.headers", NULL, NULL, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  run(h);
  seen = trail_text();
  ck_assert_str_eq(seen, "task(a=1,b=1+b)");
  sluice_test_harness_free(h);
  sluice_registry_unref(registry);
  /* The client went with the harness, and its hooks' data with it. */
  g_free(seen);
  seen = trail_text();
  ck_assert_str_eq(seen, "task(a=1,b=1+b) destroyed");
}
END_TEST

START_TEST(a_rejecting_producer_hook_enqueues_nothing)
{
  SluiceRegistry *registry;
  SluiceTestHarness *h = harness_new(&registry);
  SluiceClient *client = sluice_test_harness_get_client(h);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;
  g_autoptr(GPtrArray) ids = NULL;
  g_autoptr(SluiceWorkflow) group = sluice_workflow_group();
  g_autofree gchar *wf = NULL;
  SluiceEnqueueRequest batch[2] = {{"mw.headers", NULL, NULL},
                                   {"mw.denied", NULL, NULL}};

  sluice_client_add_producer_hook(client, hook_reject, "acme", NULL);
  id = sluice_client_enqueue(client, "mw.denied", NULL, NULL, &error);
  ck_assert(id == NULL);
  ck_assert_msg(strstr(error->message, "rejected by a producer hook") &&
                    strstr(error->message, "tenant acme may not run"),
                "%s", error->message);
  g_clear_error(&error);

  ids = sluice_client_enqueue_batch(client, batch, 2, &error);
  ck_assert(ids == NULL && error != NULL);
  g_clear_error(&error);

  sluice_workflow_add(group, sluice_workflow_task("mw.headers", NULL, NULL));
  sluice_workflow_add(group, sluice_workflow_task("mw.denied", NULL, NULL));
  wf = sluice_client_enqueue_workflow(client, group, &error);
  ck_assert(wf == NULL && error != NULL);
  ck_assert_int_eq(queued(h), 0);
  sluice_test_harness_free(h);
  sluice_registry_unref(registry);
}
END_TEST

/* ---- Worker hooks -------------------------------------------------------- */

static gboolean
hook_around(SluiceTaskContext *ctx, SluiceTaskNext next, gpointer next_data,
            gpointer user_data, GError **error)
{
  const gchar *name = user_data;
  g_autofree gchar *in = g_strconcat(name, ">", NULL);
  g_autofree gchar *out = g_strconcat("<", name, NULL);
  gboolean ok;

  note(in);
  ok = next(ctx, next_data, error);
  note(out);
  return ok;
}

/* Maps "permission denied" to a fatal error: no retries. */
static gboolean
hook_map_errors(SluiceTaskContext *ctx, SluiceTaskNext next, gpointer next_data,
                gpointer user_data, GError **error)
{
  GError *local = NULL;

  if (next(ctx, next_data, &local))
    return TRUE;
  if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED)) {
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                "not allowed: %s", local->message);
    g_error_free(local);
  } else {
    g_propagate_error(error, local);
  }
  return FALSE;
}

/* Fails every task with header "blocked" without running it. */
static gboolean
hook_gate(SluiceTaskContext *ctx, SluiceTaskNext next, gpointer next_data,
          gpointer user_data, GError **error)
{
  if (sluice_task_context_get_header(ctx, "blocked") != NULL)
    return sluice_task_context_fail(ctx, error, "blocked by the gate");
  return next(ctx, next_data, error);
}

START_TEST(worker_hooks_wrap_each_task_in_order)
{
  SluiceRegistry *registry;
  SluiceTestHarness *h = harness_new(&registry);
  SluiceWorker *worker = sluice_test_harness_get_worker(h);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *seen = NULL;

  ck_assert(sluice_worker_add_hook(worker, hook_around, "1", NULL, &error));
  ck_assert(sluice_worker_add_hook(worker, hook_around, "2", NULL, &error));
  id = sluice_client_enqueue(sluice_test_harness_get_client(h), "mw.headers",
                             NULL, NULL, &error);
  run(h);
  seen = trail_text();
  ck_assert_str_eq(seen, "1> 2> task(a=(null),b=(null)) <2 <1");
  /* Started: no more hooks. */
  ck_assert(!sluice_worker_add_hook(worker, hook_around, "3", NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_STATE));
  sluice_test_harness_free(h);
  sluice_registry_unref(registry);
}
END_TEST

START_TEST(worker_hooks_map_errors_and_short_circuit)
{
  SluiceRegistry *registry;
  SluiceTestHarness *h = harness_new(&registry);
  SluiceWorker *worker = sluice_test_harness_get_worker(h);
  SluiceClient *client = sluice_test_harness_get_client(h);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *denied = NULL, *gated = NULL;
  g_autoptr(SluiceResult) r1 = NULL, r2 = NULL;
  g_autoptr(GHashTable) headers = g_hash_table_new(g_str_hash, g_str_equal);
  SluiceEnqueueOptions eo;
  g_autofree gchar *seen = NULL;

  ck_assert(
      sluice_worker_add_hook(worker, hook_map_errors, NULL, NULL, &error));
  ck_assert(sluice_worker_add_hook(worker, hook_gate, NULL, NULL, &error));
  denied = sluice_client_enqueue(client, "mw.denied", NULL, NULL, &error);
  sluice_enqueue_options_init(&eo);
  g_hash_table_insert(headers, "blocked", "yes");
  eo.headers = headers;
  gated = sluice_client_enqueue(client, "mw.headers", NULL, &eo, &error);
  ck_assert(denied != NULL && gated != NULL);
  run(h);
  /* Mapped to fatal: buried at once, after one run. */
  r1 = sluice_test_harness_get_record(h, denied);
  ck_assert_int_eq(sluice_result_get_state(r1), SLUICE_STATE_DEAD_LETTERED);
  ck_assert_uint_eq(sluice_result_get_attempt(r1), 1);
  ck_assert_msg(strstr(sluice_result_get_error(r1), "not allowed: denied"),
                "%s", sluice_result_get_error(r1));
  /* Gated: the task never ran. */
  r2 = sluice_test_harness_get_record(h, gated);
  ck_assert_int_eq(sluice_result_get_state(r2), SLUICE_STATE_DEAD_LETTERED);
  seen = trail_text();
  ck_assert_str_eq(seen, "task");
  sluice_test_harness_free(h);
  sluice_registry_unref(registry);
}
END_TEST

START_TEST(process_isolation_refuses_worker_hooks)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  SluiceWorkerOptions o;
  SluiceTestHarness *h;

  sluice_worker_options_init(&o);
  o.isolation = SLUICE_ISOLATION_PROCESS;
  h = sluice_test_harness_new(registry, &o, &error);
  ck_assert_msg(h != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(!sluice_worker_add_hook(sluice_test_harness_get_worker(h),
                                    hook_around, "x", NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID));
  sluice_test_harness_free(h);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("middleware");
  TCase *tc = tcase_create("hooks");
  SRunner *runner;
  int failed;

  trail = g_string_new(NULL);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, producer_hooks_run_in_order_and_set_headers);
  tcase_add_test(tc, a_rejecting_producer_hook_enqueues_nothing);
  tcase_add_test(tc, worker_hooks_wrap_each_task_in_order);
  tcase_add_test(tc, worker_hooks_map_errors_and_short_circuit);
  tcase_add_test(tc, process_isolation_refuses_worker_hooks);
  suite_add_tcase(s, tc);
  runner = srunner_create(s);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  g_string_free(trail, TRUE);
  return failed == 0 ? 0 : 1;
}

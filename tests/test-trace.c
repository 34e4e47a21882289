/* test-trace.c - the producer's trace context: its format is checked at
 * enqueue, a hook can add it, the task reads it, and every log line the
 * worker writes about the task carries it (sluice-trace.h).
 *
 * The memory broker and the test harness only: no server. Retries,
 * deferrals and replays keeping the headers are conformance scenarios
 * (tests/conformance/conformance.c), run against every broker.
 *
 * The log lines are read from a writer installed in main() that keeps
 * every record's fields; Check forks each test from there, so each test
 * starts with an empty list.
 */
#include "config.h"

#include <check.h>
#include <string.h>

#include "lib/sluice-private.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TRACE_ID "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP_OTHER "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"

/* ---- Captured log records ------------------------------------------------ */

static GMutex log_lock;
static GPtrArray *records; /* GHashTable*: field name -> value */

static GLogWriterOutput
capture_writer(GLogLevelFlags level, const GLogField *fields, gsize n,
               gpointer data)
{
  GHashTable *record =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);

  for (gsize i = 0; i < n; i++)
    g_hash_table_replace(record, g_strdup(fields[i].key),
                         fields[i].length < 0
                             ? g_strdup(fields[i].value)
                             : g_strndup(fields[i].value, fields[i].length));
  g_mutex_lock(&log_lock);
  g_ptr_array_add(records, record);
  g_mutex_unlock(&log_lock);
  return G_LOG_WRITER_HANDLED;
}

/* Returns: (transfer container): the records with SLUICE_TASK_ID @id. */
static GPtrArray *
records_of(const gchar *id)
{
  GPtrArray *out = g_ptr_array_new();

  g_mutex_lock(&log_lock);
  for (guint i = 0; i < records->len; i++)
    if (g_strcmp0(g_hash_table_lookup(records->pdata[i], "SLUICE_TASK_ID"),
                  id) == 0)
      g_ptr_array_add(out, records->pdata[i]);
  g_mutex_unlock(&log_lock);
  return out;
}

static gboolean
has_message(GPtrArray *lines, const gchar *needle)
{
  for (guint i = 0; i < lines->len; i++)
    if (strstr(g_hash_table_lookup(lines->pdata[i], "MESSAGE"), needle) != NULL)
      return TRUE;
  return FALSE;
}

/* ---- Tasks --------------------------------------------------------------- */

/* What the last run saw of its trace context. */
static GMutex seen_lock;
static gchar *seen_traceparent;
static gchar *seen_tracestate;

static gboolean
task_traced(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_mutex_lock(&seen_lock);
  g_free(seen_traceparent);
  g_free(seen_tracestate);
  seen_traceparent =
      g_strdup(sluice_task_context_get_header(ctx, "traceparent"));
  seen_tracestate = g_strdup(sluice_task_context_get_header(ctx, "tracestate"));
  g_mutex_unlock(&seen_lock);
  sluice_task_context_log(ctx, G_LOG_LEVEL_MESSAGE, "hello from attempt %u",
                          sluice_task_context_get_attempt(ctx));
  if (sluice_task_context_get_attempt(ctx) == 1) {
    g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "first fails");
    return FALSE;
  }
  return TRUE;
}

static gchar *
seen(gchar **which)
{
  gchar *copy;

  g_mutex_lock(&seen_lock);
  copy = g_strdup(*which);
  g_mutex_unlock(&seen_lock);
  return copy;
}

static SluiceRegistry *
traced_registry(void)
{
  SluiceRegistry *registry = sluice_registry_new();
  g_autoptr(GError) error = NULL;

  ck_assert(sluice_registry_add(registry, "t.traced", task_traced, NULL, NULL,
                                NULL, &error));
  return registry;
}

static GHashTable *headers_new(const gchar *first_name,
                               ...) G_GNUC_NULL_TERMINATED;
static GHashTable *
headers_new(const gchar *first_name, ...)
{
  GHashTable *h =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  va_list ap;

  va_start(ap, first_name);
  for (const gchar *k = first_name; k != NULL; k = va_arg(ap, const gchar *))
    g_hash_table_insert(h, g_strdup(k), g_strdup(va_arg(ap, const gchar *)));
  va_end(ap);
  return h;
}

/* ---- The format ---------------------------------------------------------- */

START_TEST(traceparent_format)
{
  static const gchar *const good[] = {
      TP,
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
      /* A later version may add fields after a dash. */
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09",
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-next",
  };
  static const struct {
    const gchar *value, *why;
  } bad[] = {
      {"", "expected 00-"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "expected"},
      {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", "lower"},
      {"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", "expected"},
      {"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", "expected"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "expected"},
      {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version ff"},
      {"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
       "trace id is all zeros"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
       "parent id is all zeros"},
      {TP "-", "extra characters"},
      {"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09x",
       "extra characters"},
  };

  for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_trace_context_check(good[i], NULL, &error), "%s: %s",
                  good[i], error != NULL ? error->message : "");
  }
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!sluice_trace_context_check(bad[i].value, NULL, &error),
                  "accepted %s", bad[i].value);
    ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                              SLUICE_CLIENT_ERROR_INVALID));
    ck_assert_msg(strstr(error->message, bad[i].why) != NULL &&
                      strstr(error->message, "traceparent") != NULL,
                  "%s: %s", bad[i].value, error->message);
  }
}
END_TEST

START_TEST(tracestate_format)
{
  static const gchar *const good[] = {
      "congo=t61rcWkgMzE",
      "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
      " rojo=1 , congo=2 ",
      "rojo=1,,congo=2",
      "tenant1@vendor=x",
      "a/b*c_d-e=value with spaces",
      "",
  };
  static const gchar *const bad[] = {
      "Rojo=1",
      "rojo",
      "rojo=",
      "=1",
      "rojo=a=b",
      "ro jo=1",
      "rojo=1 x=y",
      "t@=1",
      "t@Vendor=1",
      "@v=1",
      "rojo=\x7f",
      "rojo=\xc3\xa9",
      "t@vendorwithaverylongname=1",
  };
  g_autoptr(GString) many = g_string_new(NULL);

  for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_trace_context_check(TP, good[i], &error), "[%s]: %s",
                  good[i], error != NULL ? error->message : "");
  }
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!sluice_trace_context_check(TP, bad[i], &error),
                  "accepted [%s]", bad[i]);
    ck_assert_msg(strstr(error->message, "tracestate") != NULL &&
                      g_utf8_validate(error->message, -1, NULL),
                  "%s", error->message);
  }
  for (guint i = 0; i < 33; i++)
    g_string_append_printf(many, "%sk%u=v", i > 0 ? "," : "", i);
  {
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_trace_context_check(TP, many->str, &error));
    ck_assert_msg(strstr(error->message, "more than 32") != NULL, "%s",
                  error->message);
  }
  {
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_trace_context_check(NULL, "rojo=1", &error));
    ck_assert_msg(strstr(error->message, "without a traceparent") != NULL, "%s",
                  error->message);
  }
  ck_assert(sluice_trace_context_check(NULL, NULL, NULL));
}
END_TEST

/* ---- Enqueue ------------------------------------------------------------- */

static gint64
ready_in_default(SluiceClient *client)
{
  const gchar *queues[] = {"default", NULL};
  SluiceBrokerStats st;
  g_autoptr(GError) error = NULL;
  gint64 n;

  ck_assert(sluice_client_get_stats(client, queues, &st, &error));
  n = ((SluiceQueueStats *)st.queues->pdata[0])->ready;
  sluice_broker_stats_clear(&st);
  return n;
}

START_TEST(malformed_trace_context_is_refused_and_nothing_enqueued)
{
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  g_autoptr(GHashTable) bad =
      headers_new("traceparent",
                  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", NULL);
  g_autoptr(GHashTable) good = headers_new("traceparent", TP, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;
  SluiceEnqueueOptions eo_bad, eo_good;
  SluiceEnqueueRequest batch[2];
  g_autoptr(GPtrArray) ids = NULL;

  sluice_enqueue_options_init(&eo_bad);
  eo_bad.headers = bad;
  sluice_enqueue_options_init(&eo_good);
  eo_good.headers = good;
  id = sluice_client_enqueue(client, "t.traced", NULL, &eo_bad, &error);
  ck_assert_ptr_null(id);
  ck_assert(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID));
  ck_assert_msg(strstr(error->message, "cannot enqueue “t.traced”: header "
                                       "traceparent") != NULL,
                "%s", error->message);
  g_clear_error(&error);

  /* One bad request fails the whole batch. */
  batch[0] = (SluiceEnqueueRequest){"t.traced", NULL, &eo_good};
  batch[1] = (SluiceEnqueueRequest){"t.traced", NULL, &eo_bad};
  ids = sluice_client_enqueue_batch(client, batch, 2, &error);
  ck_assert_ptr_null(ids);
  ck_assert(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID));
  ck_assert_int_eq(ready_in_default(client), 0);
}
END_TEST

/* The hook adds the enqueuing thread's context; the enqueue options'
 * headers win over it. */
static void
hook_from_thread(SluiceEnvelope *env, gpointer data)
{
  GPrivate *current = data;
  const gchar *tp = g_private_get(current);

  ck_assert_ptr_nonnull(env->id);
  ck_assert_str_eq(env->task, "t.traced");
  if (tp != NULL)
    sluice_envelope_set_header(env, "traceparent", tp);
}

static GPrivate current_traceparent = G_PRIVATE_INIT(NULL);

static gpointer
enqueue_on_other_thread(gpointer data)
{
  SluiceClient *client = data;

  /* This thread has no current span: the hook adds no traceparent. */
  return sluice_client_enqueue(client, "t.traced", NULL, NULL, NULL);
}

START_TEST(headers_hook_adds_the_callers_context)
{
  g_autoptr(SluiceRegistry) registry = traced_registry();
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) explicit = headers_new("traceparent", TP_OTHER, NULL);
  SluiceClientOptions co;
  SluiceEnqueueOptions eo;
  g_autofree gchar *id1 = NULL;
  g_autofree gchar *id2 = NULL;
  g_autofree gchar *id3 = NULL;
  g_autofree gchar *tp = NULL;

  h = sluice_test_harness_new(registry, NULL, &error);
  sluice_client_options_init(&co);
  co.headers_hook = hook_from_thread;
  co.headers_hook_data = &current_traceparent;
  client = sluice_client_new(sluice_test_harness_get_broker(h), &co, &error);

  g_private_set(&current_traceparent, (gpointer)TP);
  id1 = sluice_client_enqueue(client, "t.traced", NULL, NULL, &error);
  ck_assert_msg(id1 != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  tp = seen(&seen_traceparent);
  ck_assert_str_eq(tp, TP);
  g_clear_pointer(&tp, g_free);

  sluice_enqueue_options_init(&eo);
  eo.headers = explicit;
  id2 = sluice_client_enqueue(client, "t.traced", NULL, &eo, &error);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  tp = seen(&seen_traceparent);
  ck_assert_str_eq(tp, TP_OTHER);
  g_clear_pointer(&tp, g_free);

  {
    GThread *t = g_thread_new("producer", enqueue_on_other_thread, client);
    id3 = g_thread_join(t);
  }
  ck_assert_ptr_nonnull(id3);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  tp = seen(&seen_traceparent);
  ck_assert_ptr_null(tp);

  /* A malformed value from the hook is refused like any other. */
  g_private_set(&current_traceparent, (gpointer) "00-bad");
  ck_assert_ptr_null(
      sluice_client_enqueue(client, "t.traced", NULL, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID));
  g_private_set(&current_traceparent, NULL);
}
END_TEST

/* ---- Log lines ----------------------------------------------------------- */

/* Every line about the task, the worker's and the task's own, from both
 * attempts, carries the producer's trace context. */
START_TEST(every_log_line_of_the_task_carries_its_trace)
{
  g_autoptr(SluiceRegistry) registry = traced_registry();
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) headers =
      headers_new("traceparent", TP, "tracestate", "rojo=1", NULL);
  g_autoptr(GHashTable) none = NULL;
  g_autoptr(GPtrArray) lines = NULL;
  g_autoptr(GPtrArray) plain = NULL;
  SluiceWorkerOptions wo;
  SluiceEnqueueOptions eo;
  g_autofree gchar *id = NULL;
  g_autofree gchar *untraced = NULL;
  g_autofree gchar *ts = NULL;

  sluice_worker_options_init(&wo);
  wo.retry.jitter = SLUICE_OFF;
  wo.log_each_task = TRUE;
  h = sluice_test_harness_new(registry, &wo, &error);
  sluice_enqueue_options_init(&eo);
  eo.headers = headers;
  id = sluice_client_enqueue(sluice_test_harness_get_client(h), "t.traced",
                             NULL, &eo, &error);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  sluice_test_harness_advance(h, 1500);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  ts = seen(&seen_tracestate);
  ck_assert_str_eq(ts, "rojo=1");
  untraced = sluice_client_enqueue(sluice_test_harness_get_client(h),
                                   "t.traced", NULL, NULL, &error);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  sluice_test_harness_advance(h, 1500);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));

  lines = records_of(id);
  /* Its own two lines, the retry line and two "finished" lines. */
  ck_assert(has_message(lines, "hello from attempt 1"));
  ck_assert(has_message(lines, "hello from attempt 2"));
  ck_assert(has_message(lines, "retrying in"));
  ck_assert(has_message(lines, "succeeded in"));
  ck_assert_uint_ge(lines->len, 5);
  for (guint i = 0; i < lines->len; i++) {
    GHashTable *r = lines->pdata[i];
    ck_assert_msg(
        g_strcmp0(g_hash_table_lookup(r, "SLUICE_TRACEPARENT"), TP) == 0,
        "no traceparent on “%s”", (gchar *)g_hash_table_lookup(r, "MESSAGE"));
    ck_assert_str_eq(g_hash_table_lookup(r, "SLUICE_TRACE_ID"), TRACE_ID);
    ck_assert_str_eq(g_hash_table_lookup(r, "SLUICE_TASK"), "t.traced");
  }
  /* (Its last "finished" line may come a moment after run_until_idle.) */
  plain = records_of(untraced);
  ck_assert_uint_ge(plain->len, 4);
  for (guint i = 0; i < plain->len; i++)
    ck_assert(!g_hash_table_contains(plain->pdata[i], "SLUICE_TRACEPARENT"));
}
END_TEST

/* A producer in another language is not checked by this client: a value
 * that is no trace context reaches the task as it is, and stays out of
 * the log lines. */
START_TEST(foreign_malformed_traceparent_stays_out_of_logs)
{
  g_autoptr(SluiceRegistry) registry = traced_registry();
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(SluiceEnvelope) env = sluice_envelope_new();
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) lines = NULL;
  g_autofree gchar *tp = NULL;
  SluiceSubmit submit = {0};

  h = sluice_test_harness_new(registry, NULL, &error);
  env->id = g_strdup("foreign-1");
  env->task = g_strdup("t.traced");
  env->queue = g_strdup("default");
  env->enqueued_at = SLUICE_TEST_EPOCH_MS;
  env->opts.retry.max_attempts = 1;
  sluice_envelope_set_header(env, "traceparent", "not-a-trace\n\"x\"");
  payload = sluice_envelope_encode(NULL, env, &error);
  submit.id = env->id;
  submit.queue = env->queue;
  submit.payload = payload;
  ck_assert(sluice_broker_enqueue(sluice_test_harness_get_broker(h), &submit, 1,
                                  &error));
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  tp = seen(&seen_traceparent);
  ck_assert_str_eq(tp, "not-a-trace\n\"x\"");
  lines = records_of("foreign-1");
  ck_assert_uint_ge(lines->len, 1);
  for (guint i = 0; i < lines->len; i++)
    ck_assert(!g_hash_table_contains(lines->pdata[i], "SLUICE_TRACEPARENT"));
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("trace");
  TCase *format = tcase_create("format");
  TCase *flow = tcase_create("flow");
  SRunner *runner;
  int failed;

  records = g_ptr_array_new_with_free_func((GDestroyNotify)g_hash_table_unref);
  g_log_set_writer_func(capture_writer, NULL, NULL);

  tcase_set_timeout(format, 60);
  tcase_add_test(format, traceparent_format);
  tcase_add_test(format, tracestate_format);
  suite_add_tcase(s, format);

  tcase_set_timeout(flow, 120);
  tcase_add_test(flow, malformed_trace_context_is_refused_and_nothing_enqueued);
  tcase_add_test(flow, headers_hook_adds_the_callers_context);
  tcase_add_test(flow, every_log_line_of_the_task_carries_its_trace);
  tcase_add_test(flow, foreign_malformed_traceparent_stays_out_of_logs);
  suite_add_tcase(s, flow);

  runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

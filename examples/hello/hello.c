/* hello.c - Sluice in one page.
 *
 * Registers three tasks, enqueues them on the in-process memory broker and
 * runs a worker:
 *   - math.add returns the sum of its arguments; we await its result;
 *   - demo.flaky fails twice, then succeeds on its third attempt;
 *   - demo.broken always fails, and lands in the dead-letter queue.
 * Backoffs are shortened to 50 ms so the demo finishes in well under a
 * second; everything else is Sluice's defaults.
 *
 * Build and run: see README.md ("Quick start").
 */
#include <stdio.h>

#include <sluice/sluice.h>

static gboolean
math_add(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);
  gint64 sum = 0;
  msgpack_sbuffer buffer;
  msgpack_packer packer;
  g_autoptr(GBytes) result = NULL;

  if (args->type != MSGPACK_OBJECT_ARRAY)
    return sluice_task_context_fail(ctx, error, "math.add wants an array");
  for (guint32 i = 0; i < args->via.array.size; i++) {
    const msgpack_object *n = &args->via.array.ptr[i];
    if (n->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
      sum += (gint64)n->via.u64;
    else if (n->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
      sum += n->via.i64;
    else
      return sluice_task_context_fail(ctx, error,
                                      "argument %u is not an "
                                      "integer",
                                      i);
  }

  msgpack_sbuffer_init(&buffer);
  msgpack_packer_init(&packer, &buffer, msgpack_sbuffer_write);
  msgpack_pack_int64(&packer, sum);
  result = g_bytes_new(buffer.data, buffer.size);
  msgpack_sbuffer_destroy(&buffer);
  sluice_task_context_set_result(ctx, result);
  return TRUE;
}

static gboolean
demo_flaky(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  guint attempt = sluice_task_context_get_attempt(ctx);

  if (attempt < 3) {
    printf("  demo.flaky: attempt %u fails (the service is warming up)\n",
           attempt);
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
                "service not ready on attempt %u", attempt);
    return FALSE;
  }
  printf("  demo.flaky: attempt %u succeeds\n", attempt);
  return TRUE;
}

static gboolean
demo_broken(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  printf("  demo.broken: attempt %u fails, as always\n",
         sluice_task_context_get_attempt(ctx));
  g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                      "the disk is on fire");
  return FALSE;
}

static GLogWriterOutput
quiet_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
             gpointer user_data)
{
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
    return g_log_writer_default(level, fields, n_fields, user_data);
  return G_LOG_WRITER_HANDLED;
}

static int
fail(const gchar *what, GError *error)
{
  fprintf(stderr, "hello: %s: %s\n", what, error->message);
  return 1;
}

int
main(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(GBytes) numbers = NULL;
  g_autoptr(SluiceResult) sum = NULL;
  g_autoptr(SluiceResult) flaky = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  g_autofree gchar *add_id = NULL, *flaky_id = NULL, *broken_id = NULL;
  g_autofree gchar *sum_json = NULL;
  SluiceWorkerOptions options;

  /* Sluice logs every retry and burial as structured log lines; this demo
   * prints its own story instead and shows only errors. */
  g_log_set_writer_func(quiet_writer, NULL, NULL);
  if (!sluice_registry_add(registry, "math.add", math_add, NULL, NULL, NULL,
                           &error) ||
      !sluice_registry_add(registry, "demo.flaky", demo_flaky, NULL, NULL, NULL,
                           &error) ||
      !sluice_registry_add(registry, "demo.broken", demo_broken, NULL, NULL,
                           NULL, &error))
    return fail("registering tasks", error);

  client = sluice_client_new(broker, NULL, &error);
  sluice_worker_options_init(&options);
  options.concurrency = 2;
  options.retry.initial_backoff_ms = 50; /* short, for the demo */
  worker = sluice_worker_new(broker, registry, &options, &error);
  if (client == NULL || worker == NULL)
    return fail("setting up", error);

  numbers = sluice_args_from_json("[2, 3, 37]", -1, &error);
  add_id = sluice_client_enqueue(client, "math.add", numbers, NULL, &error);
  flaky_id = sluice_client_enqueue(client, "demo.flaky", NULL, NULL, &error);
  broken_id = sluice_client_enqueue(client, "demo.broken", NULL, NULL, &error);
  if (add_id == NULL || flaky_id == NULL || broken_id == NULL)
    return fail("enqueueing", error);
  printf("Enqueued math.add [2, 3, 37], demo.flaky and demo.broken.\n");

  if (!sluice_worker_start(worker, &error))
    return fail("starting the worker", error);

  sum = sluice_client_get_result(client, add_id, 10000, NULL, &error);
  if (sum == NULL)
    return fail("waiting for math.add", error);
  sum_json = sluice_args_to_json(sluice_result_get_value(sum), NULL);
  printf("Awaited math.add: %s, result %s\n",
         sluice_task_state_to_string(sluice_result_get_state(sum)), sum_json);

  flaky = sluice_client_get_result(client, flaky_id, 10000, NULL, &error);
  if (flaky == NULL)
    return fail("waiting for demo.flaky", error);
  printf("demo.flaky: %s on attempt %u (retried with backoff)\n",
         sluice_task_state_to_string(sluice_result_get_state(flaky)),
         sluice_result_get_attempt(flaky));

  g_clear_pointer(&flaky, sluice_result_unref);
  flaky = sluice_client_get_result(client, broken_id, 10000, NULL, &error);
  if (flaky == NULL)
    return fail("waiting for demo.broken", error);

  dead = sluice_client_dlq_list(client, NULL, 10, NULL, NULL, &error);
  if (dead == NULL)
    return fail("listing dead letters", error);
  for (guint i = 0; i < dead->len; i++) {
    SluiceDeadLetter *entry = dead->pdata[i];
    printf("Dead letter: %s (%s): %s\n", entry->task, entry->reason,
           entry->detail);
  }
  sluice_worker_stop(worker);
  return dead->len == 1 ? 0 : 1;
}

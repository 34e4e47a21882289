/* tour.c - README's tour: a task, a worker and a producer in one program,
 * on the in-process memory broker (no server needed). `make check` builds
 * and runs it, and checks that README.md quotes this file as it is. */
#include <sluice/sluice.h>

static gboolean
send_invoice(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  gint *rate_limited_once = user_data;
  g_autofree gchar *to = NULL;
  gint64 invoice, cents;

  /* A missing or mistyped argument can never succeed: no retry. */
  if (!sluice_task_context_get_int_arg(ctx, "invoice", &invoice, error) ||
      !sluice_task_context_get_int_arg(ctx, "cents", &cents, error) ||
      (to = sluice_task_context_dup_string_arg(ctx, "to", error)) == NULL)
    return FALSE;
  if (cents <= 0)
    return sluice_task_context_fail(
        ctx, error, "invoice %" G_GINT64_FORMAT " has no amount", invoice);
  /* The downstream API said "slow down": retry on our own schedule. */
  if (g_atomic_int_compare_and_exchange(rate_limited_once, 0, 1))
    return sluice_task_context_retry(ctx, 10, error, "rate limited");
  return sluice_task_context_set_result_fields(
      ctx, error, "invoice", SLUICE_FIELD_INT, invoice, "sent_to",
      SLUICE_FIELD_STRING, to, "attempt", SLUICE_FIELD_INT,
      (gint64)sluice_task_context_get_attempt(ctx), NULL);
}

static gboolean
tour(GError **error)
{
  static gint rate_limited_once = 0;
  /* The broker: memory here; sluice_redis_broker_new() in production. */
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GBytes) args = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *json = NULL;
  g_autoptr(SluiceResult) r = NULL;

  /* Registration, once per process, before the worker starts. */
  if (!sluice_registry_add(registry, "billing.send_invoice", send_invoice,
                           &rate_limited_once, NULL, NULL, error))
    return FALSE;

  /* The worker: its threads fetch, run, retry and settle. */
  worker = sluice_worker_new(broker, registry, NULL, error);
  if (worker == NULL || !sluice_worker_start(worker, error))
    return FALSE;

  /* The producer: enqueue, then wait for the result. */
  client = sluice_client_new(broker, NULL, error);
  args = sluice_args_from_json(
      "{\"invoice\": 17, \"cents\": 4200, \"to\": \"ada@example.com\"}", -1,
      error);
  if (client == NULL || args == NULL)
    return FALSE;
  id = sluice_client_enqueue(client, "billing.send_invoice", args, NULL, error);
  if (id == NULL)
    return FALSE;
  r = sluice_client_get_result(client, id, 30000, NULL, error);
  if (r == NULL)
    return FALSE;

  json = sluice_args_to_json(sluice_result_get_value(r), error);
  g_print("task %s %s: %s\n", id,
          sluice_task_state_to_string(sluice_result_get_state(r)), json);
  sluice_worker_stop(worker); /* graceful: waits for what runs */
  return sluice_result_get_state(r) == SLUICE_STATE_SUCCEEDED;
}

int
main(void)
{
  g_autoptr(GError) error = NULL;

  if (tour(&error))
    return 0;
  g_printerr("tour: %s\n", error != NULL ? error->message : "did not succeed");
  return 1;
}

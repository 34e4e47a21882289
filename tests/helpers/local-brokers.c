/* local-brokers.c - a program that wants only the brokers that need no
 * server: it runs one task through the memory broker (`local-brokers
 * memory`) or a SQLite database (`local-brokers sqlite DIR`), with the
 * public API only, built as a user's program is. tests/linked-libraries.sh
 * runs it and reads what it and libsluice link.
 */
#include <sluice/sluice.h>

static gboolean
double_it(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  gint64 n;

  if (!sluice_task_context_get_int_arg(ctx, "n", &n, error))
    return FALSE;
  return sluice_task_context_set_result_fields(ctx, error, "n",
                                               SLUICE_FIELD_INT, 2 * n, NULL);
}

static gboolean
run_one(SluiceBroker *broker, GError **error)
{
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(GBytes) args = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *json = NULL;

  if (!sluice_registry_add(registry, "local.double", double_it, NULL, NULL,
                           NULL, error))
    return FALSE;
  worker = sluice_worker_new(broker, registry, NULL, error);
  if (worker == NULL || !sluice_worker_start(worker, error))
    return FALSE;
  client = sluice_client_new(broker, NULL, error);
  args = sluice_args_from_json("{\"n\": 21}", -1, error);
  if (client == NULL || args == NULL)
    return FALSE;
  id = sluice_client_enqueue(client, "local.double", args, NULL, error);
  if (id == NULL)
    return FALSE;
  r = sluice_client_get_result(client, id, 30000, NULL, error);
  sluice_worker_stop(worker);
  if (r == NULL)
    return FALSE;
  json = sluice_args_to_json(sluice_result_get_value(r), error);
  if (json == NULL)
    return FALSE;
  g_print("%s %s\n", sluice_task_state_to_string(sluice_result_get_state(r)),
          json);
  return sluice_result_get_state(r) == SLUICE_STATE_SUCCEEDED;
}

int
main(int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;

  if (argc == 2 && g_str_equal(argv[1], "memory")) {
    broker = sluice_memory_broker_new(NULL, NULL);
  } else if (argc == 3 && g_str_equal(argv[1], "sqlite")) {
    g_autofree gchar *path = g_build_filename(argv[2], "local.db", NULL);
    SluiceSqliteOptions options;

    sluice_sqlite_options_init(&options);
    options.path = path;
    broker = sluice_sqlite_broker_new(&options, NULL, &error);
  } else {
    g_printerr("usage: local-brokers memory | local-brokers sqlite DIR\n");
    return 2;
  }
  if (broker == NULL || !run_one(broker, &error)) {
    g_printerr("local-brokers: %s\n",
               error != NULL ? error->message : "the task did not succeed");
    return 1;
  }
  return 0;
}

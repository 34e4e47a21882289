/* middleware.c - producer and worker hooks (sluice-middleware.h) in one
 * program, on the in-memory broker of the test harness, so it runs
 * anywhere: `make check` runs it.
 *
 *   - a producer hook stamps every message with the enqueuing tenant;
 *   - another refuses messages of an unknown tenant;
 *   - a worker hook times each task and logs it with its tenant;
 *   - another maps "permission denied" to a fatal error, so such a task is
 *     buried at once instead of being retried.
 */
#include <stdio.h>
#include <string.h>

#include <sluice/sluice.h>

/* Producer side: the tenant the enqueuing code acts for. A real program
 * would take it from its request context. */
static const gchar *current_tenant = "acme";

static gboolean
stamp_tenant(SluiceEnvelope *env, gpointer user_data, GError **error)
{
  sluice_envelope_set_header(env, "tenant", current_tenant);
  return TRUE;
}

static gboolean
known_tenants_only(SluiceEnvelope *env, gpointer user_data, GError **error)
{
  const gchar *const *known = user_data;
  const gchar *tenant = sluice_envelope_get_header(env, "tenant");

  if (tenant != NULL && g_strv_contains(known, tenant))
    return TRUE;
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
              "unknown tenant “%s”", tenant != NULL ? tenant : "(none)");
  return FALSE;
}

/* Worker side. */
static gboolean
timed(SluiceTaskContext *ctx, SluiceTaskNext next, gpointer next_data,
      gpointer user_data, GError **error)
{
  gint64 t0 = g_get_monotonic_time();
  gboolean ok = next(ctx, next_data, error);

  printf("%s for %s: %s in %" G_GINT64_FORMAT " us\n",
         sluice_task_context_get_name(ctx),
         sluice_task_context_get_header(ctx, "tenant"), ok ? "ok" : "failed",
         g_get_monotonic_time() - t0);
  return ok;
}

static gboolean
denied_is_fatal(SluiceTaskContext *ctx, SluiceTaskNext next, gpointer next_data,
                gpointer user_data, GError **error)
{
  GError *local = NULL;

  if (next(ctx, next_data, &local))
    return TRUE;
  if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED)) {
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                "%s (not retried)", local->message);
    g_error_free(local);
    return FALSE;
  }
  g_propagate_error(error, local);
  return FALSE;
}

static gboolean
report(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  return TRUE;
}

static gboolean
delete_all(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
              "only admins may delete everything");
  return FALSE;
}

int
main(void)
{
  static const gchar *const tenants[] = {"acme", "globex", NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autofree gchar *ok_id = NULL, *denied_id = NULL, *refused = NULL;
  SluiceClient *client;

  if (!sluice_registry_add(registry, "report", report, NULL, NULL, NULL,
                           &error) ||
      !sluice_registry_add(registry, "delete_all", delete_all, NULL, NULL, NULL,
                           &error) ||
      (h = sluice_test_harness_new(registry, NULL, &error)) == NULL) {
    fprintf(stderr, "middleware: %s\n", error->message);
    return 1;
  }
  client = sluice_test_harness_get_client(h);
  sluice_client_add_producer_hook(client, stamp_tenant, NULL, NULL);
  sluice_client_add_producer_hook(client, known_tenants_only, (gpointer)tenants,
                                  NULL);
  /* Hooks are added in order: `timed` is outermost, so it sees the error
   * `denied_is_fatal` made of the task's. */
  if (!sluice_worker_add_hook(sluice_test_harness_get_worker(h), timed, NULL,
                              NULL, &error) ||
      !sluice_worker_add_hook(sluice_test_harness_get_worker(h),
                              denied_is_fatal, NULL, NULL, &error)) {
    fprintf(stderr, "middleware: %s\n", error->message);
    return 1;
  }

  ok_id = sluice_client_enqueue(client, "report", NULL, NULL, &error);
  denied_id = sluice_client_enqueue(client, "delete_all", NULL, NULL, &error);
  current_tenant = "initech";
  refused = sluice_client_enqueue(client, "report", NULL, NULL, &error);
  if (ok_id == NULL || denied_id == NULL || refused != NULL) {
    fprintf(stderr, "middleware: the producer hooks did not act as shown\n");
    return 1;
  }
  printf("refused: %s\n", error->message);
  g_clear_error(&error);

  if (!sluice_test_harness_run_until_idle(h, &error)) {
    fprintf(stderr, "middleware: %s\n", error->message);
    return 1;
  }
  r = sluice_test_harness_get_record(h, denied_id);
  printf("delete_all: %s after %u attempt(s): %s\n",
         sluice_task_state_to_string(sluice_result_get_state(r)),
         sluice_result_get_attempt(r), sluice_result_get_error(r));
  return sluice_result_get_state(r) == SLUICE_STATE_DEAD_LETTERED &&
                 sluice_result_get_attempt(r) == 1
             ? 0
             : 1;
}

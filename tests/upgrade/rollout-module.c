/* rollout-module.c - a task module with a task the previous release's demo
 * module lacks: upgrade.py loads it into the current build's worker only,
 * so that during its rolling upgrade the old worker meets task names it
 * has not registered (a rollout in progress) and must defer them, never
 * bury them. */
#include <sluice/sluice.h>

/* Its result is its arguments, as demo.echo's: the test reads back that
 * the current build, and not the old one, ran it. */
static gboolean
rollout_added(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

SLUICE_MODULE_EXPORT gboolean
sluice_module_init(SluiceRegistry *registry, GError **error)
{
  return sluice_registry_add(registry, "rollout.added", rollout_added, NULL,
                             NULL, NULL, error);
}

/* middleware.c - producer hooks (a client's) and worker hooks (around
 * each task), sluice-middleware.h.
 *
 * Producer hooks may be added while other threads enqueue, so the list is
 * copy-on-write: an enqueue takes a reference to the list as it is, runs
 * it without a lock, and an add publishes a new list. Worker hooks are
 * fixed before the worker starts, so its executors read them unlocked.
 */
#include "config.h"

#include "lib/worker/worker-private.h"

typedef struct {
  SluiceProducerHook func;
  gpointer data;
  GDestroyNotify destroy;
} ProducerHook;

struct _SluiceHooks {
  GMutex lock;
  GPtrArray *all;       /* ProducerHook*, owned: freed with the client */
  GPtrArray *published; /* the current list (borrowed entries), shared */
};

static void
producer_hook_free(gpointer data)
{
  ProducerHook *h = data;
  if (h->destroy != NULL)
    h->destroy(h->data);
  g_free(h);
}

SluiceHooks *
sluice_hooks__new(void)
{
  SluiceHooks *hooks = g_new0(SluiceHooks, 1);

  g_mutex_init(&hooks->lock);
  hooks->all = g_ptr_array_new_with_free_func(producer_hook_free);
  hooks->published = g_ptr_array_new();
  return hooks;
}

void
sluice_hooks__free(SluiceHooks *hooks)
{
  g_ptr_array_unref(hooks->published);
  g_ptr_array_unref(hooks->all);
  g_mutex_clear(&hooks->lock);
  g_free(hooks);
}

void
sluice_hooks__add(SluiceHooks *hooks, SluiceProducerHook hook,
                  gpointer user_data, GDestroyNotify destroy)
{
  ProducerHook *h = g_new0(ProducerHook, 1);
  GPtrArray *next;

  h->func = hook;
  h->data = user_data;
  h->destroy = destroy;
  g_mutex_lock(&hooks->lock);
  g_ptr_array_add(hooks->all, h);
  next = g_ptr_array_copy(hooks->published, NULL, NULL);
  g_ptr_array_add(next, h);
  g_ptr_array_unref(hooks->published);
  hooks->published = next;
  g_mutex_unlock(&hooks->lock);
}

gboolean
sluice_hooks__run_producer(SluiceHooks *hooks, SluiceEnvelope *env,
                           GError **error)
{
  g_autoptr(GPtrArray) list = NULL;

  g_mutex_lock(&hooks->lock);
  list = g_ptr_array_ref(hooks->published);
  g_mutex_unlock(&hooks->lock);
  for (guint i = 0; i < list->len; i++) {
    ProducerHook *h = g_ptr_array_index(list, i);
    GError *local = NULL;

    if (!h->func(env, h->data, &local)) {
      if (local == NULL)
        g_set_error_literal(&local, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_INVALID,
                            "the hook returned FALSE without saying why");
      g_propagate_error(error, local);
      return FALSE;
    }
    /* A hook that says yes and sets an error breaks the GError rule:
     * the message goes, the stray error does not. */
    g_clear_error(&local);
  }
  return TRUE;
}

/* ---- Worker hooks -------------------------------------------------------- */

typedef struct {
  SluiceWorkerHook func;
  gpointer data;
  GDestroyNotify destroy;
} TaskHook;

gboolean
sluice_worker_add_hook(SluiceWorker *worker, SluiceWorkerHook hook,
                       gpointer user_data, GDestroyNotify destroy,
                       GError **error)
{
  TaskHook h = {hook, user_data, destroy};
  gboolean started;

  g_return_val_if_fail(worker != NULL && hook != NULL, FALSE);
  g_mutex_lock(&worker->lock);
  started = worker->state != WORKER_NEW;
  g_mutex_unlock(&worker->lock);
  if (started) {
    g_set_error_literal(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_STATE,
                        "worker hooks must be added before the worker "
                        "starts");
    return FALSE;
  }
  if (worker->options.isolation == SLUICE_ISOLATION_PROCESS) {
    g_set_error_literal(
        error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
        "worker hooks cannot wrap tasks that run in child processes "
        "(isolation = process): run the hook's work inside the task, or "
        "use thread isolation");
    return FALSE;
  }
  if (worker->task_hooks == NULL)
    worker->task_hooks = g_array_new(FALSE, TRUE, sizeof(TaskHook));
  g_array_append_val(worker->task_hooks, h);
  return TRUE;
}

void
sluice_worker__hooks_clear(SluiceWorker *worker)
{
  if (worker->task_hooks == NULL)
    return;
  for (guint i = 0; i < worker->task_hooks->len; i++) {
    TaskHook *h = &g_array_index(worker->task_hooks, TaskHook, i);
    if (h->destroy != NULL)
      h->destroy(h->data);
  }
  g_clear_pointer(&worker->task_hooks, g_array_unref);
}

/* One level of the chain: hook @index of @hooks, or the task past them. */
typedef struct {
  GArray *hooks;
  guint index;
  const SluiceTaskEntry *entry;
} Level;

static gboolean
run_level(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  const Level *level = data;
  Level inner;
  TaskHook *h;
  GError *local = NULL;
  gboolean ok;

  if (level->hooks == NULL || level->index >= level->hooks->len)
    return level->entry->func(ctx, level->entry->user_data, error);
  h = &g_array_index(level->hooks, TaskHook, level->index);
  inner = (Level){level->hooks, level->index + 1, level->entry};
  ok = h->func(ctx, run_level, &inner, h->data, &local);
  /* The task's outcome follows the GError rule whatever a hook did. */
  if (ok)
    g_clear_error(&local);
  else if (local == NULL)
    g_set_error(&local, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FAILED,
                "a worker hook returned FALSE without setting an error");
  if (local != NULL)
    g_propagate_error(error, local);
  return ok;
}

gboolean
sluice_worker__run_task(SluiceWorker *worker, Job *job, SluiceTaskContext *ctx,
                        GError **error)
{
  Level top = {worker->task_hooks, 0, job->entry};

  return run_level(ctx, &top, error);
}

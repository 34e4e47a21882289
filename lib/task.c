/* task.c - the task registry and the task context.
 *
 * The registry maps a task name to its function and options. Workers look
 * names up on every message, possibly while the application registers more,
 * so lookups take a read lock and entries are never removed or moved while
 * the registry lives: a looked-up entry stays valid for as long as the
 * caller holds a reference on the registry.
 *
 * The context is what a running task sees. Its arguments are unpacked on
 * first use (many tasks only need the raw bytes or none at all), into a
 * msgpack zone that dies with the context.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"
#include "serializers/mp-reader.h"

/* The first argument is the quark's name, not an expression. */
/* clang-format off */
G_DEFINE_QUARK(sluice-task-error-quark, sluice_task_error)
/* clang-format on */

struct _SluiceRegistry {
  gatomicrefcount ref_count;
  GRWLock lock;
  GHashTable *tasks; /* name -> SluiceTaskEntry* */
};

static void
task_entry_free(gpointer data)
{
  SluiceTaskEntry *entry = data;

  if (entry->destroy != NULL)
    entry->destroy(entry->user_data);
  g_free(entry->queue);
  sluice_rate_limit__free(entry->rate_limit);
  sluice_concurrency_limit__free(entry->concurrency_limit);
  g_free(entry->name);
  g_free(entry);
}

void
sluice_task_options_init(SluiceTaskOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  sluice_retry_policy_init_unset(&options->retry);
  options->store_result = SLUICE_UNSET;
  options->dead_letter = SLUICE_UNSET;
}

SluiceRegistry *
sluice_registry_new(void)
{
  SluiceRegistry *registry = g_new0(SluiceRegistry, 1);

  g_atomic_ref_count_init(&registry->ref_count);
  g_rw_lock_init(&registry->lock);
  registry->tasks =
      g_hash_table_new_full(g_str_hash, g_str_equal, NULL, task_entry_free);
  return registry;
}

SluiceRegistry *
sluice_registry_ref(SluiceRegistry *registry)
{
  g_return_val_if_fail(registry != NULL, NULL);
  g_atomic_ref_count_inc(&registry->ref_count);
  return registry;
}

void
sluice_registry_unref(SluiceRegistry *registry)
{
  if (registry == NULL || !g_atomic_ref_count_dec(&registry->ref_count))
    return;
  g_hash_table_unref(registry->tasks);
  g_rw_lock_clear(&registry->lock);
  g_free(registry);
}

gboolean
sluice_task__name_is_valid(const gchar *name, GError **error)
{
  g_autofree gchar *problem = sluice_name__problem(
      SLUICE_NAME_TASK, name, name != NULL ? strlen(name) : 0);

  if (problem == NULL)
    return TRUE;
  g_set_error_literal(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID,
                      problem);
  return FALSE;
}

gboolean
sluice_registry_add(SluiceRegistry *registry, const gchar *name,
                    SluiceTaskFunc func, gpointer user_data,
                    GDestroyNotify destroy, const SluiceTaskOptions *options,
                    GError **error)
{
  SluiceTaskEntry *entry;

  g_return_val_if_fail(registry != NULL, FALSE);
  g_return_val_if_fail(func != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  if (!sluice_task__name_is_valid(name, error))
    return FALSE;
  if (options != NULL && sluice_retry_policy__problem(&options->retry)) {
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID,
                "task “%s”: %s", name,
                sluice_retry_policy__problem(&options->retry));
    return FALSE;
  }
  if (options != NULL &&
      (options->timeout_ms < 0 || options->hard_timeout_ms < 0)) {
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID,
                "task “%s”: timeout_ms and hard_timeout_ms cannot be "
                "negative (0 means none)",
                name);
    return FALSE;
  }
  if (options != NULL && options->rate_limit != NULL) {
    g_autofree gchar *problem =
        sluice_rate_limit__problem(options->rate_limit, "rate_limit");
    if (problem != NULL) {
      g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID,
                  "task “%s”: %s", name, problem);
      return FALSE;
    }
  }
  if (options != NULL && options->concurrency_limit != NULL) {
    g_autofree gchar *problem = sluice_concurrency_limit__problem(
        options->concurrency_limit, "concurrency_limit");
    if (problem != NULL) {
      g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID,
                  "task “%s”: %s", name, problem);
      return FALSE;
    }
  }

  entry = g_new0(SluiceTaskEntry, 1);
  entry->name = g_strdup(name);
  entry->func = func;
  entry->user_data = user_data;
  if (options != NULL) {
    entry->options = *options;
    entry->queue = g_strdup(options->queue);
    if (options->rate_limit != NULL)
      entry->rate_limit = sluice_rate_limit__copy(options->rate_limit);
    if (options->concurrency_limit != NULL)
      entry->concurrency_limit =
          sluice_concurrency_limit__copy(options->concurrency_limit);
  } else {
    sluice_task_options_init(&entry->options);
  }
  entry->options.queue = entry->queue;
  entry->options.rate_limit = entry->rate_limit;
  entry->options.concurrency_limit = entry->concurrency_limit;

  g_rw_lock_writer_lock(&registry->lock);
  if (g_hash_table_contains(registry->tasks, name)) {
    g_rw_lock_writer_unlock(&registry->lock);
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_DUPLICATE,
                "a task named “%s” is registered already", name);
    /* The caller keeps @user_data: do not destroy it. */
    g_free(entry->queue);
    sluice_rate_limit__free(entry->rate_limit);
    sluice_concurrency_limit__free(entry->concurrency_limit);
    g_free(entry->name);
    g_free(entry);
    return FALSE;
  }
  entry->destroy = destroy;
  g_hash_table_insert(registry->tasks, entry->name, entry);
  g_rw_lock_writer_unlock(&registry->lock);
  return TRUE;
}

const SluiceTaskEntry *
sluice_registry__lookup(SluiceRegistry *registry, const gchar *name)
{
  const SluiceTaskEntry *entry;

  g_rw_lock_reader_lock(&registry->lock);
  entry = g_hash_table_lookup(registry->tasks, name);
  g_rw_lock_reader_unlock(&registry->lock);
  return entry;
}

gboolean
sluice_registry_contains(SluiceRegistry *registry, const gchar *name)
{
  g_return_val_if_fail(registry != NULL, FALSE);
  g_return_val_if_fail(name != NULL, FALSE);
  return sluice_registry__lookup(registry, name) != NULL;
}

gboolean
sluice_registry_get_options(SluiceRegistry *registry, const gchar *name,
                            SluiceTaskOptions *out)
{
  const SluiceTaskEntry *entry;

  g_return_val_if_fail(registry != NULL, FALSE);
  g_return_val_if_fail(name != NULL && out != NULL, FALSE);
  entry = sluice_registry__lookup(registry, name);
  if (entry == NULL)
    return FALSE;
  *out = entry->options;
  return TRUE;
}

/* g_ptr_array_sort() passes pointers to the elements, not the elements. */
static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return g_strcmp0(*(const gchar *const *)a, *(const gchar *const *)b);
}

gchar **
sluice_registry_list(SluiceRegistry *registry)
{
  GPtrArray *names = g_ptr_array_new();
  GHashTableIter iter;
  gpointer key;

  g_return_val_if_fail(registry != NULL, NULL);
  g_rw_lock_reader_lock(&registry->lock);
  g_hash_table_iter_init(&iter, registry->tasks);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    g_ptr_array_add(names, g_strdup(key));
  g_rw_lock_reader_unlock(&registry->lock);
  g_ptr_array_sort(names, compare_names);
  g_ptr_array_add(names, NULL);
  return (gchar **)g_ptr_array_free(names, FALSE);
}

/* ---- Task context -------------------------------------------------------- */

void
sluice_task_context__init(SluiceTaskContext *ctx, const SluiceEnvelope *env,
                          guint delivery_count, guint max_attempts,
                          GCancellable *(*cancellable_of)(gpointer job),
                          gpointer job)
{
  memset(ctx, 0, sizeof *ctx);
  ctx->envelope = env;
  ctx->delivery_count = delivery_count;
  ctx->max_attempts = max_attempts;
  ctx->cancellable_of = cancellable_of;
  ctx->job = job;
  ctx->retry_delay_ms = -1;
}

void
sluice_task_context__clear(SluiceTaskContext *ctx)
{
  if (ctx->args_unpacked)
    msgpack_zone_destroy(&ctx->zone);
  g_clear_pointer(&ctx->result, g_bytes_unref);
}

const gchar *
sluice_task_context_get_id(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, NULL);
  return ctx->envelope->id;
}

const gchar *
sluice_task_context_get_name(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, NULL);
  return ctx->envelope->task;
}

const gchar *
sluice_task_context_get_queue(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, NULL);
  return ctx->envelope->queue;
}

guint
sluice_task_context_get_attempt(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, 0);
  return ctx->envelope->attempt;
}

guint
sluice_task_context_get_retries(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, 0);
  return ctx->envelope->attempt - 1;
}

guint
sluice_task_context_get_max_attempts(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, 0);
  return ctx->max_attempts;
}

guint
sluice_task_context_get_delivery_count(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, 0);
  return ctx->delivery_count;
}

const msgpack_object *
sluice_task_context_get_args(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, NULL);

  if (!ctx->args_unpacked) {
    gsize size = 0;
    const gchar *data = g_bytes_get_data(ctx->envelope->args, &size);
    g_autoptr(GError) error = NULL;
    SluiceMpReader r;
    guint64 n_values = 0;

    /* Count first, so that the whole tree fits one zone chunk of exactly
     * its size: the decoder bounded that cost when it took the message. */
    sluice_mp_reader_init(&r, data, size);
    if (size > 0)
      sluice_mp_reader__skip_counting(&r, 1, G_MAXUINT, &n_values, NULL);
    msgpack_zone_init(&ctx->zone,
                      (size_t)MAX(SLUICE_MP_UNPACKED_BYTES(n_values), 64));
    ctx->args_unpacked = TRUE;
    /* The codec validated these bytes as exactly one value when the
     * envelope was decoded (and this reader has no depth limit of its
     * own), so this fails only for an envelope that never went through a
     * codec with bad args in it: a programming error. */
    if (size == 0 ||
        !sluice_mp__unpack(data, size, &ctx->zone, &ctx->args, &error)) {
      if (error != NULL)
        g_critical("sluice_task_context_get_args: the arguments of task %s "
                   "are not one msgpack value: %s",
                   ctx->envelope->id, error->message);
      ctx->args.type = MSGPACK_OBJECT_NIL;
    }
  }
  return &ctx->args;
}

GBytes *
sluice_task_context_get_args_bytes(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, NULL);
  return ctx->envelope->args;
}

const gchar *
sluice_task_context_get_header(SluiceTaskContext *ctx, const gchar *name)
{
  g_return_val_if_fail(ctx != NULL, NULL);
  g_return_val_if_fail(name != NULL, NULL);
  if (ctx->envelope->headers == NULL)
    return NULL;
  return g_hash_table_lookup(ctx->envelope->headers, name);
}

GCancellable *
sluice_task_context_get_cancellable(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, NULL);
  return ctx->cancellable_of(ctx->job);
}

void
sluice_task_context_set_result(SluiceTaskContext *ctx, GBytes *value)
{
  g_return_if_fail(ctx != NULL);
  g_clear_pointer(&ctx->result, g_bytes_unref);
  if (value != NULL)
    ctx->result = g_bytes_ref(value);
}

gboolean
sluice_task_context_retry(SluiceTaskContext *ctx, gint64 delay_ms,
                          GError **error, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  g_return_val_if_fail(ctx != NULL, FALSE);
  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  ctx->retry_delay_ms = MAX(delay_ms, 0);
  g_set_error_literal(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_RETRY,
                      message);
  return FALSE;
}

gboolean
sluice_task_context_fail(SluiceTaskContext *ctx, GError **error,
                         const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  g_return_val_if_fail(ctx != NULL, FALSE);
  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_set_error_literal(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                      message);
  return FALSE;
}

/* A snooze and a 429 share the delay slot of a retry: the executor tells
 * them apart by the error's code, in both isolation modes (a child sends
 * the code and the delay over its pipe). */
static gboolean
snooze_with(SluiceTaskContext *ctx, gint64 delay_ms, gint code,
            const gchar *what, GError **error)
{
  g_return_val_if_fail(ctx != NULL, FALSE);
  ctx->retry_delay_ms = MAX(delay_ms, 0);
  g_set_error(error, SLUICE_TASK_ERROR, code, "%s for %" G_GINT64_FORMAT " ms",
              what, ctx->retry_delay_ms);
  return FALSE;
}

gboolean
sluice_task_context_snooze(SluiceTaskContext *ctx, gint64 delay_ms,
                           GError **error)
{
  return snooze_with(ctx, delay_ms, SLUICE_TASK_ERROR_SNOOZE, "snoozed", error);
}

gboolean
sluice_task_context_rate_limited(SluiceTaskContext *ctx, gint64 delay_ms,
                                 GError **error)
{
  return snooze_with(ctx, delay_ms, SLUICE_TASK_ERROR_RATE_LIMITED,
                     "rate limited downstream", error);
}

gint64
sluice_task_context_get_admitted_at(SluiceTaskContext *ctx)
{
  g_return_val_if_fail(ctx != NULL, 0);
  return ctx->admitted_at;
}

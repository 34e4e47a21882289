/* demo.c - the `demo` task module: small tasks to try the `sluice` command
 * with, and to test it.
 *
 *   demo.noop                     succeeds, with no result
 *   demo.echo ARGS                succeeds; its result is its arguments
 *   demo.sleep {"ms": N}          sleeps N ms, or less if it is cancelled
 *                                 (timeout, revocation, shutdown); its
 *                                 result is {"slept_ms": N}
 *   demo.fail                     always fails, so it is retried until its
 *                                 attempts run out (dead letter max_attempts)
 *   demo.flaky {"fail_times": N}  fails its first N attempts (default 1),
 *                                 then succeeds with {"attempt": A}
 *   demo.fatal                    fails without retry (dead letter
 *                                 non_retryable)
 *   demo.crash                    aborts the worker process: a poison
 *                                 message (reliable mode buries it
 *                                 max_deliveries after enough crashes)
 *   demo.progress {"steps": N, "ms": M}
 *                                 N steps of M ms each (default 4 of
 *                                 300), reporting "step i of N" after
 *                                 each (sluice result --follow shows it)
 *
 * A task module is a shared object exporting sluice_module_init(), which
 * the `sluice worker --module PATH.so` command calls once with its
 * registry. Build one of your own like this one:
 *
 *     cc -shared -fPIC -o mytasks.so mytasks.c \
 *        $(pkg-config --cflags --libs sluice)
 */
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

/* ---- Arguments ----------------------------------------------------------- */

/* The value of key @name in the map @args, or NULL. */
static const msgpack_object *
arg(const msgpack_object *args, const gchar *name)
{
  gsize len = strlen(name);

  if (args->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (guint32 i = 0; i < args->via.map.size; i++) {
    const msgpack_object_kv *kv = &args->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == len &&
        memcmp(kv->key.via.str.ptr, name, len) == 0)
      return &kv->val;
  }
  return NULL;
}

/* Reads a non-negative integer argument; FALSE if it is there but not
 * one. An absent argument leaves @out as it is. */
static gboolean
arg_count(const msgpack_object *args, const gchar *name, guint64 *out)
{
  const msgpack_object *value = arg(args, name);

  if (value == NULL)
    return TRUE;
  if (value->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return FALSE;
  *out = value->via.u64;
  return TRUE;
}

/* Sets the task's result to the map {@key: @value}. */
static void
set_result_count(SluiceTaskContext *ctx, const gchar *key, guint64 value)
{
  msgpack_sbuffer buffer;
  msgpack_packer packer;
  g_autoptr(GBytes) result = NULL;
  gsize len = strlen(key);

  msgpack_sbuffer_init(&buffer);
  msgpack_packer_init(&packer, &buffer, msgpack_sbuffer_write);
  msgpack_pack_map(&packer, 1);
  msgpack_pack_str(&packer, len);
  msgpack_pack_str_body(&packer, key, len);
  msgpack_pack_uint64(&packer, value);
  result = g_bytes_new(buffer.data, buffer.size);
  msgpack_sbuffer_destroy(&buffer);
  sluice_task_context_set_result(ctx, result);
}

/* ---- Tasks --------------------------------------------------------------- */

static gboolean
demo_noop(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  return TRUE;
}

static gboolean
demo_echo(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

static gboolean
demo_sleep(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  GCancellable *cancellable = sluice_task_context_get_cancellable(ctx);
  guint64 ms = G_MAXUINT64;
  gint64 deadline;
  GPollFD fd;

  if (!arg_count(sluice_task_context_get_args(ctx), "ms", &ms) ||
      ms == G_MAXUINT64 || ms > G_MAXINT32)
    return sluice_task_context_fail(ctx, error,
                                    "demo.sleep wants {\"ms\": N} with N "
                                    "from 0 to 2147483647");

  /* Sleep on the cancellable's file descriptor rather than g_usleep(): a
   * timeout, a revocation or a stop past the shutdown timeout wakes us at
   * once. */
  deadline = g_get_monotonic_time() / 1000 + (gint64)ms;
  if (cancellable == NULL) {
    g_usleep(ms * 1000);
    set_result_count(ctx, "slept_ms", ms);
    return TRUE;
  }
  if (!g_cancellable_make_pollfd(cancellable, &fd))
    return sluice_task_context_fail(ctx, error, "no file descriptor left");
  for (;;) {
    gint64 left = deadline - g_get_monotonic_time() / 1000;
    if (left <= 0 || g_cancellable_is_cancelled(cancellable))
      break;
    g_poll(&fd, 1, (gint)MIN(left, G_MAXINT32));
  }
  g_cancellable_release_fd(cancellable);
  if (g_cancellable_set_error_if_cancelled(cancellable, error))
    return FALSE;
  set_result_count(ctx, "slept_ms", ms);
  return TRUE;
}

static gboolean
demo_fail(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
              "demo.fail fails on every attempt (this was attempt %u of %u)",
              sluice_task_context_get_attempt(ctx),
              sluice_task_context_get_max_attempts(ctx));
  return FALSE;
}

static gboolean
demo_flaky(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  guint attempt = sluice_task_context_get_attempt(ctx);
  guint64 fail_times = 1;

  if (!arg_count(sluice_task_context_get_args(ctx), "fail_times", &fail_times))
    return sluice_task_context_fail(ctx, error,
                                    "demo.flaky wants {\"fail_times\": N}");
  if (attempt <= fail_times) {
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
                "demo.flaky fails its first %" G_GUINT64_FORMAT
                " attempts (this was attempt %u)",
                fail_times, attempt);
    return FALSE;
  }
  set_result_count(ctx, "attempt", attempt);
  return TRUE;
}

static gboolean
demo_fatal(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  return sluice_task_context_fail(ctx, error, "demo.fatal fails without retry");
}

static gboolean
demo_crash(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  /* A task that takes its worker down with it, as a segfaulting library
   * would: nothing after this line runs, and no settlement is written. */
  abort();
}

static gboolean
demo_progress(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);
  GCancellable *cancellable = sluice_task_context_get_cancellable(ctx);
  guint64 steps = 4, ms = 300;

  if (!arg_count(args, "steps", &steps) || !arg_count(args, "ms", &ms) ||
      steps == 0 || steps > 10000 || ms > 60000)
    return sluice_task_context_fail(
        ctx, error,
        "demo.progress wants {\"steps\": 1..10000, \"ms\": 0..60000}");
  for (guint64 i = 1; i <= steps; i++) {
    g_autofree gchar *message = NULL;

    g_usleep(ms * 1000);
    if (g_cancellable_set_error_if_cancelled(cancellable, error))
      return FALSE;
    message = g_strdup_printf(
        "step %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT, i, steps);
    sluice_task_context_progress(ctx, (gdouble)i / (gdouble)steps, message);
  }
  return TRUE;
}

SLUICE_MODULE_EXPORT gboolean
sluice_module_init(SluiceRegistry *registry, GError **error)
{
  static const struct {
    const gchar *name;
    SluiceTaskFunc func;
  } tasks[] = {
      {"demo.noop", demo_noop},   {"demo.echo", demo_echo},
      {"demo.sleep", demo_sleep}, {"demo.fail", demo_fail},
      {"demo.flaky", demo_flaky}, {"demo.fatal", demo_fatal},
      {"demo.crash", demo_crash}, {"demo.progress", demo_progress},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(tasks); i++)
    if (!sluice_registry_add(registry, tasks[i].name, tasks[i].func, NULL, NULL,
                             NULL, error))
      return FALSE;
  return TRUE;
}

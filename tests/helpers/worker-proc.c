/* worker-proc.c - a small worker program for the process-level Redis tests
 * (crash, poison message, lease, shutdown, Redis restart).
 *
 * It connects to the Redis (or sqlite://) URL given on its command line, registers three
 * test tasks, installs sluice_worker_handle_signals() and runs until
 * SIGTERM or SIGINT (a graceful stop), then exits 0. Tests start it with
 * g_spawn_async_with_fds(), kill it by pid (SIGKILL, SIGTERM, SIGSTOP and
 * SIGCONT) and wait for it.
 *
 *   t.log    appends "<task id> <delivery count> <pid>\n" to the --log file
 *   t.sleep  {"ms": N}: appends the same line, then sleeps N ms, honouring
 *            its cancellable (a stop or a timeout ends it early, with the
 *            cancellation error)
 *   t.abort  appends the same line, then calls abort(): a poison message
 *   t.member [i, ms, fail_percent]: a workflow member: appends the line,
 *            sleeps ms (honouring its cancellable), fails its first
 *            attempt with a chance of fail_percent % (retried at once),
 *            else returns i
 *   t.collect a chord's callback: appends its line followed by its
 *            arguments as JSON ("<id> <count> <pid> <json>")
 *
 * The log is the fault tests' oracle (docs/redis.md): one line per execution,
 * written with O_APPEND in a single write(2), so lines of several worker
 * processes never interleave, and a line written before a crash survives
 * it (it is in the kernel already).
 *
 * It omits everything a real worker program would configure from files:
 * the options below are all it reads. It exits 2 on bad options and 1
 * when the worker cannot be made or started.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sluice/sluice-redis.h>
#include <sluice/sluice.h>

/* The options, read once by main() and only read afterwards; owned by
 * main(). */
typedef struct {
  gchar *log_path;
  gchar *slot_log_path;
} ProcConfig;

static void
append_text(const gchar *path, const gchar *line)
{
  gsize len = strlen(line);
  int fd;

  if (path == NULL)
    return;
  fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    g_printerr("worker-proc: cannot open %s: %s\n", path, g_strerror(errno));
    return;
  }
  /* One write: an O_APPEND write of a short line lands whole. */
  if (write(fd, line, len) != (gssize)len)
    g_printerr("worker-proc: short write to %s\n", path);
  close(fd);
}

/* "<id> <delivery count> <pid>[ <extra>]" to the execution log. */
static void
append_run(const ProcConfig *config, SluiceTaskContext *ctx, const gchar *extra)
{
  g_autofree gchar *line = g_strdup_printf(
      "%s %u %d%s%s\n", sluice_task_context_get_id(ctx),
      sluice_task_context_get_delivery_count(ctx), (int)getpid(),
      extra != NULL ? " " : "", extra != NULL ? extra : "");

  append_text(config->log_path, line);
}

static void
append_line(const ProcConfig *config, SluiceTaskContext *ctx)
{
  append_run(config, ctx, NULL);
}

/* The "ms" integer of a map of arguments, or @fallback. */
static gint64
arg_ms(SluiceTaskContext *ctx, gint64 fallback)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);

  if (args == NULL || args->type != MSGPACK_OBJECT_MAP)
    return fallback;
  for (guint32 i = 0; i < args->via.map.size; i++) {
    const msgpack_object_kv *kv = &args->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 2 &&
        memcmp(kv->key.via.str.ptr, "ms", 2) == 0 &&
        kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
      return (gint64)MIN(kv->val.via.u64, (guint64)G_MAXINT32);
  }
  return fallback;
}

static gboolean
task_log(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  append_line(user_data, ctx);
  return TRUE;
}

static gboolean
task_sleep(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  GCancellable *cancellable = sluice_task_context_get_cancellable(ctx);
  gint64 end = g_get_monotonic_time() + arg_ms(ctx, 1000) * 1000;

  append_line(user_data, ctx);
  /* Short naps rather than one: a stop or a timeout cancels it. */
  while (g_get_monotonic_time() < end) {
    if (g_cancellable_set_error_if_cancelled(cancellable, error))
      return FALSE;
    g_usleep(MIN(10000, MAX(end - g_get_monotonic_time(), 0)));
  }
  return TRUE;
}

/* Element @i of an array of integers, or @fallback. */
static gint64
arg_at(SluiceTaskContext *ctx, guint i, gint64 fallback)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);

  if (args == NULL || args->type != MSGPACK_OBJECT_ARRAY ||
      i >= args->via.array.size ||
      args->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return fallback;
  return (gint64)MIN(args->via.array.ptr[i].via.u64, (guint64)G_MAXINT32);
}

static gboolean
task_member(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  GCancellable *cancellable = sluice_task_context_get_cancellable(ctx);
  gint64 end = g_get_monotonic_time() + arg_at(ctx, 1, 0) * 1000;
  msgpack_sbuffer buf;
  msgpack_packer pk;
  g_autoptr(GBytes) result = NULL;

  append_line(user_data, ctx);
  while (g_get_monotonic_time() < end) {
    if (g_cancellable_set_error_if_cancelled(cancellable, error))
      return FALSE;
    g_usleep(MIN(5000, MAX(end - g_get_monotonic_time(), 0)));
  }
  if (sluice_task_context_get_attempt(ctx) == 1 &&
      g_random_int_range(0, 100) < arg_at(ctx, 2, 0))
    return sluice_task_context_retry(ctx, 0, error, "failed at random");
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_int64(&pk, arg_at(ctx, 0, -1));
  result = g_bytes_new(buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
  sluice_task_context_set_result(ctx, result);
  return TRUE;
}

static gboolean
task_collect(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  g_autofree gchar *json =
      sluice_args_to_json(sluice_task_context_get_args_bytes(ctx), error);

  if (json == NULL)
    return FALSE;
  append_run(user_data, ctx, json);
  return TRUE;
}

/* Under a concurrency limit: "start <id> <pid>" when it begins and "end
 * <id> <pid>" when it is done, around a nap of "ms" (300 by default). The
 * order of the lines in the log is the order things happened: a slot is
 * held from before the first line to after the second. */
static gboolean
task_slotted(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  const ProcConfig *config = user_data;
  g_autofree gchar *start = g_strdup_printf(
      "start %s %d\n", sluice_task_context_get_id(ctx), (int)getpid());
  g_autofree gchar *end = g_strdup_printf(
      "end %s %d\n", sluice_task_context_get_id(ctx), (int)getpid());

  append_text(config->slot_log_path, start);
  g_usleep((gulong)arg_ms(ctx, 300) * 1000);
  append_text(config->slot_log_path, end);
  return TRUE;
}

static gboolean
task_abort(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  append_line(user_data, ctx);
  abort();
}

int
main(int argc, char **argv)
{
  g_autofree gchar *url = NULL;
  g_autofree gchar *mode = NULL;
  g_autofree gchar *ns = NULL;
  g_autofree gchar *worker_id = NULL;
  g_autofree gchar *queues = NULL;
  gint concurrency = 4, prefetch = 4, max_deliveries = 5, slots = 0;
  SluiceConcurrencyLimit slot_limit = {0};
  SluiceTaskOptions slotted;
  gint64 visibility_ms = 1000, shutdown_ms = 30000;
  ProcConfig config = {NULL};
  GOptionEntry entries[] = {
      {"url", 0, 0, G_OPTION_ARG_STRING, &url, "Redis or sqlite:// URL", "URL"},
      {"mode", 0, 0, G_OPTION_ARG_STRING, &mode,
       "fast or reliable (default reliable)", "MODE"},
      {"namespace", 0, 0, G_OPTION_ARG_STRING, &ns, "key namespace", "NS"},
      {"worker-id", 0, 0, G_OPTION_ARG_STRING, &worker_id,
       "worker (consumer) id", "ID"},
      {"queues", 0, 0, G_OPTION_ARG_STRING, &queues,
       "queues in priority order, comma-separated", "Q"},
      {"concurrency", 0, 0, G_OPTION_ARG_INT, &concurrency, "task threads",
       "N"},
      {"prefetch", 0, 0, G_OPTION_ARG_INT, &prefetch, "extra deliveries held",
       "N"},
      {"visibility-timeout", 0, 0, G_OPTION_ARG_INT64, &visibility_ms,
       "lease in ms", "MS"},
      {"shutdown-timeout", 0, 0, G_OPTION_ARG_INT64, &shutdown_ms,
       "graceful stop limit in ms", "MS"},
      {"max-deliveries", 0, 0, G_OPTION_ARG_INT, &max_deliveries,
       "poison-message limit", "N"},
      {"log", 0, 0, G_OPTION_ARG_FILENAME, &config.log_path,
       "execution log (the oracle)", "FILE"},
      {"slots", 0, 0, G_OPTION_ARG_INT, &slots,
       "t.slotted runs at most N at once across workers (0: no limit)", "N"},
      {"slot-log", 0, 0, G_OPTION_ARG_FILENAME, &config.slot_log_path,
       "start and end lines of t.slotted", "FILE"},
      {NULL},
  };
  g_autoptr(GOptionContext) context =
      g_option_context_new("- a Sluice test worker");
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceRegistry) registry = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  g_auto(GStrv) queue_list = NULL;
  SluiceRedisOptions ropts;
  SluiceWorkerOptions wopts;
  int status = 0;

  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("worker-proc: %s\n", error->message);
    return 2;
  }
  if (url == NULL || concurrency < 1 || prefetch < 0 || max_deliveries < 1) {
    g_printerr("worker-proc: --url is required; --concurrency and "
               "--max-deliveries must be >= 1, --prefetch >= 0\n");
    return 2;
  }

  sluice_redis_options_init(&ropts);
  ropts.url = url;
  ropts.mode =
      g_strcmp0(mode, "fast") == 0 ? SLUICE_REDIS_FAST : SLUICE_REDIS_RELIABLE;
  ropts.ns = ns;
  ropts.reconnect_max_backoff_ms = 200;
  /* A sqlite:// URL: the SQLite broker's process tests share this program. */
  broker = sluice_url_is_sqlite(url)
               ? sluice_broker_new_for_url(url, NULL, NULL, &error)
               : sluice_redis_broker_new(&ropts, NULL, &error);
  registry = broker != NULL ? sluice_registry_new() : NULL;
  sluice_task_options_init(&slotted);
  slot_limit.max = (guint)MAX(slots, 0);
  if (slots > 0)
    slotted.concurrency_limit = &slot_limit;
  if (broker == NULL ||
      !sluice_registry_add(registry, "t.slotted", task_slotted, &config, NULL,
                           &slotted, &error) ||
      !sluice_registry_add(registry, "t.log", task_log, &config, NULL, NULL,
                           &error) ||
      !sluice_registry_add(registry, "t.sleep", task_sleep, &config, NULL, NULL,
                           &error) ||
      !sluice_registry_add(registry, "t.abort", task_abort, &config, NULL, NULL,
                           &error) ||
      !sluice_registry_add(registry, "t.member", task_member, &config, NULL,
                           NULL, &error) ||
      !sluice_registry_add(registry, "t.collect", task_collect, &config, NULL,
                           NULL, &error)) {
    g_printerr("worker-proc: %s\n", error->message);
    status = 1;
    goto out;
  }

  sluice_worker_options_init(&wopts);
  if (queues != NULL) {
    queue_list = g_strsplit(queues, ",", -1);
    wopts.queues = (const gchar *const *)queue_list;
  }
  wopts.worker_id = worker_id;
  wopts.concurrency = (guint)concurrency;
  wopts.prefetch = (guint)prefetch;
  wopts.max_deliveries = (guint)max_deliveries;
  wopts.visibility_timeout_ms = visibility_ms;
  wopts.shutdown_timeout_ms = shutdown_ms;
  worker = sluice_worker_new(broker, registry, &wopts, &error);
  if (worker == NULL || !sluice_worker_handle_signals(worker, &error) ||
      !sluice_worker_start(worker, &error)) {
    g_printerr("worker-proc: %s\n", error->message);
    status = 1;
    goto out;
  }
  sluice_worker_wait(worker);

out:
  g_clear_pointer(&worker, sluice_worker_unref);
  g_free(config.log_path);
  g_free(config.slot_log_path);
  return status;
}

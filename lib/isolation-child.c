/* isolation-child.c - a child process of process isolation: it runs
 * tasks, one at a time, for one executor of the worker (see
 * isolation-private.h).
 *
 * The main thread reads a RUN frame, decodes the envelope, runs the task
 * function of the registry the child inherited, and writes a RESULT frame;
 * when the worker closes its pipe the child exits. A watcher thread
 * waits for SIGUSR1 (the worker's "cancel") and cancels the running task's
 * cancellable, so that a task that honours it returns and the child lives
 * on. The child ignores SIGINT and SIGTERM: a Ctrl-C in the worker's
 * terminal reaches the whole process group, and whether a task stops is
 * the worker's decision.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <msgpack.h>

#include "lib/isolation-private.h"

/* The write end of the pipe that SIGUSR1 writes to. A signal handler can
 * reach nothing else; the child is a process of its own. */
static int cancel_pipe_write = -1;

/* The run in progress, shared by the main thread and the watcher. */
typedef struct {
  GMutex lock;
  guint32 number;            /* of the run in progress, or the last one */
  guint32 cancel_ahead;      /* a cancellation for a run not yet read */
  GCancellable *cancellable; /* made on first use */
  gboolean cancel_requested;
} Run;

static Run current;
/* Where results and last words go. */
static int worker_fd = -1;

static void
on_sigusr1(int signum, siginfo_t *info, void *context)
{
  guint32 number = (guint32)info->si_value.sival_int;
  /* One write of 4 bytes to a pipe is atomic. */
  ssize_t ignored = write(cancel_pipe_write, &number, sizeof number);

  (void)signum;
  (void)context;
  (void)ignored;
}

static gpointer
watcher_main(gpointer data)
{
  int fd = GPOINTER_TO_INT(data);

  for (;;) {
    guint32 number;
    GCancellable *cancellable = NULL;
    ssize_t r = read(fd, &number, sizeof number);

    if (r < 0 && errno == EINTR)
      continue;
    if (r != (ssize_t)sizeof number)
      return NULL;
    g_mutex_lock(&current.lock);
    if (number == current.number) {
      current.cancel_requested = TRUE;
      if (current.cancellable != NULL)
        cancellable = g_object_ref(current.cancellable);
    } else if ((gint32)(number - current.number) > 0) {
      /* The signal overtook its RUN frame. */
      current.cancel_ahead = number;
    } /* else: late, for a run that is over */
    g_mutex_unlock(&current.lock);
    /* Outside the lock: cancelling runs the task's handlers. */
    if (cancellable != NULL) {
      g_cancellable_cancel(cancellable);
      g_object_unref(cancellable);
    }
  }
}

static GCancellable *
run_cancellable(gpointer data)
{
  Run *run = data;
  gboolean cancel_now = FALSE;

  g_mutex_lock(&run->lock);
  if (run->cancellable == NULL) {
    run->cancellable = g_cancellable_new();
    cancel_now = run->cancel_requested;
  }
  g_mutex_unlock(&run->lock);
  if (cancel_now)
    g_cancellable_cancel(run->cancellable);
  return run->cancellable;
}

/* GLib aborts when it cannot allocate; first tell the worker why, so the
 * attempt's history says "memory limit" rather than "SIGABRT". */
static void
on_glib_error(const gchar *domain, GLogLevelFlags level, const gchar *message,
              gpointer data)
{
  if (message != NULL)
    sluice_frame__write(worker_fd, SLUICE_FRAME_DYING, message, strlen(message),
                        NULL, 0);
  g_log_default_handler(domain, level, message, NULL);
}

static void
pack_string(msgpack_packer *pk, const gchar *s)
{
  if (s == NULL) {
    msgpack_pack_nil(pk);
    return;
  }
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

/* Resident memory of this process, in bytes (0 if unknown). */
static guint64
resident_bytes(void)
{
  g_autofree gchar *statm = NULL;
  guint64 pages = 0;
  gchar *space;

  if (!g_file_get_contents("/proc/self/statm", &statm, NULL, NULL))
    return 0;
  space = strchr(statm, ' ');
  if (space != NULL)
    pages = g_ascii_strtoull(space + 1, NULL, 10);
  return pages * (guint64)sysconf(_SC_PAGESIZE);
}

static void
send_result(gboolean ok, gint64 retry_delay_ms, const GError *error,
            GBytes *result, gboolean report_rss)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  gsize len = 0;
  gconstpointer data = result != NULL ? g_bytes_get_data(result, &len) : NULL;

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 7);
  if (ok)
    msgpack_pack_true(&pk);
  else
    msgpack_pack_false(&pk);
  msgpack_pack_int64(&pk, retry_delay_ms);
  pack_string(&pk, error != NULL ? g_quark_to_string(error->domain) : NULL);
  msgpack_pack_int32(&pk, error != NULL ? error->code : 0);
  pack_string(&pk, error != NULL ? error->message : NULL);
  if (result != NULL) {
    msgpack_pack_bin(&pk, len);
    msgpack_pack_bin_body(&pk, data, len);
  } else {
    msgpack_pack_nil(&pk);
  }
  msgpack_pack_uint64(&pk, report_rss ? resident_bytes() : 0);
  if (!sluice_frame__write(worker_fd, SLUICE_FRAME_RESULT, buf.data, buf.size,
                           NULL, 0))
    _exit(0); /* the worker is gone */
  msgpack_sbuffer_destroy(&buf);
}

static void
run_one(SluiceRegistry *registry, const guint8 *payload, gsize len)
{
  g_autoptr(GBytes) envelope = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(GError) error = NULL;
  SluiceDecodeLimits limits;
  const SluiceTaskEntry *entry;
  SluiceTaskContext ctx;
  guint32 head[4];
  gboolean ok, report_rss;

  if (len < SLUICE_RUN_HEAD) {
    g_set_error_literal(&error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FAILED,
                        "the worker sent a malformed frame to its child");
    send_result(FALSE, -1, error, NULL, FALSE);
    return;
  }
  memcpy(head, payload, sizeof head);
  report_rss = (GUINT32_FROM_LE(head[3]) & SLUICE_RUN_REPORT_RSS) != 0;
  g_mutex_lock(&current.lock);
  current.number = GUINT32_FROM_LE(head[0]);
  g_clear_object(&current.cancellable);
  current.cancel_requested = current.cancel_ahead == current.number;
  g_mutex_unlock(&current.lock);
  envelope = g_bytes_new(payload + SLUICE_RUN_HEAD, len - SLUICE_RUN_HEAD);
  sluice_decode_limits_init(&limits);
  env = sluice_envelope_decode(envelope, &limits, &error);
  entry = env != NULL ? sluice_registry__lookup(registry, env->task) : NULL;
  if (entry == NULL) {
    if (error == NULL)
      g_set_error(&error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FAILED,
                  "no task named “%s” is registered in the worker's child "
                  "process: register every task before the worker starts",
                  env->task);
    send_result(FALSE, -1, error, NULL, FALSE);
    return;
  }

  sluice_task_context__init(&ctx, env, GUINT32_FROM_LE(head[1]),
                            GUINT32_FROM_LE(head[2]), run_cancellable,
                            &current);
  ok = entry->func(&ctx, entry->user_data, &error);
  if (!ok && error == NULL)
    g_set_error_literal(&error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FAILED,
                        "the task returned FALSE without setting an error");
  send_result(ok, ctx.retry_delay_ms, ok ? NULL : error, ok ? ctx.result : NULL,
              report_rss);
  sluice_task_context__clear(&ctx);
}

void
sluice_child__main(int in, int out, SluiceRegistry *registry,
                   guint64 data_limit)
{
  struct sigaction sa;
  sigset_t all;
  int pipefd[2];
  SluiceFrameReader reader;

  /* Dies with the zygote, which dies with the worker. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  if (data_limit > 0) {
    struct rlimit limit = {data_limit, data_limit};
    setrlimit(RLIMIT_DATA, &limit);
  }
  worker_fd = out;
  g_mutex_init(&current.lock);
  g_log_set_handler("GLib", G_LOG_LEVEL_ERROR | G_LOG_FLAG_FATAL, on_glib_error,
                    NULL);
  if (pipe(pipefd) != 0)
    _exit(1);
  cancel_pipe_write = pipefd[1];
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigusr1;
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(SIGUSR1, &sa, NULL);
  g_thread_unref(
      g_thread_new("sluice-cancel", watcher_main, GINT_TO_POINTER(pipefd[0])));

  sluice_frame_reader__init(&reader, in);
  for (;;) {
    guint8 type;
    const guint8 *payload;
    gsize len;

    if (!sluice_frame_reader__next(&reader, &type, &payload, &len))
      _exit(0); /* the worker closed it (or sent nonsense) */
    if (type == SLUICE_FRAME_RUN)
      run_one(registry, payload, len);
  }
}

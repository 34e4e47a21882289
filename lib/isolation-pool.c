/* isolation-pool.c - process isolation, the worker's side: the zygote,
 * one child per executor, and the monitor (see isolation-private.h for
 * the design and the frames).
 *
 * The zygote speaks to the worker over a SOCK_SEQPACKET pair with fixed
 * messages: the worker sends SPAWN with the child's ends of two new pipes
 * attached (SCM_RIGHTS); the zygote forks, answers SPAWNED with the
 * child's pid, and later EXITED with its wait status.
 *
 * An executor's run costs two system calls: it writes RUN and blocks
 * reading the answer (pipes: measured, a round trip over a pipe costs half
 * the CPU of one over a unix socket). Everything that must happen while
 * it blocks is the monitor's: one thread that reads the zygote's messages
 * and sleeps until the earliest deadline of any slot (hard timeout, the
 * grace after a cancellation, the next memory sample). A cancellation
 * reaches the monitor through the job's cancel hook and is forwarded to
 * the child at once as SIGUSR1; a child the monitor kills is marked with
 * why first, so the executor, whose read then ends, can say so. Signals go
 * through a pidfd, so that a child that died and was reaped meanwhile can
 * never have its pid, reused, signalled by mistake.
 */
/* pipe2() */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/isolation-private.h"
#include "serializers/mp-reader.h"

/* How often a child's resident memory is read while it runs a task, when
 * the worker has a memory limit. */
#define MEMORY_SAMPLE_MS 20
/* How long the worker waits for the zygote's word on a child that died. */
#define EXIT_STATUS_WAIT_MS 10000

typedef struct {
  gchar kind; /* 'S' spawn, 'P' spawned, 'X' exited */
  gint32 pid;
  gint32 status;
} ZygoteMessage;

/* Why the monitor killed a slot's child. */
typedef enum {
  KILLED_NOT,
  KILLED_HARD_TIMEOUT,
  KILLED_GRACE,
  KILLED_MEMORY,
  KILLED_FORCED,
} Killed;

typedef struct {
  SluicePool *pool;
  /* The executor's own: */
  int to_child; /* -1: no child */
  int from_child;
  SluiceFrameReader reader;
  guint tasks;
  /* Under pool->lock (the monitor reads them): */
  GPid pid;
  int pidfd;             /* -1 if the kernel has none */
  guint32 run;           /* number of the last RUN sent */
  gboolean running;      /* a RUN is out, its answer not read */
  gint64 hard_deadline;  /* monotonic us; 0 = none */
  gint64 grace_deadline; /* monotonic us; 0 = not cancelled */
  gint64 next_sample;    /* monotonic us; 0 = no memory limit */
  Killed killed;
  guint64 used; /* KILLED_MEMORY: the resident bytes seen */
} Slot;

struct _SluicePool {
  SluiceWorker *worker; /* borrowed: the worker owns the pool */
  int control;
  GPid zygote;
  GThread *monitor;
  int monitor_wake; /* eventfd: a deadline earlier than the monitor's */
  gint64 grace_us;
  GMutex spawn_lock; /* one spawn at a time */
  GMutex lock;       /* guards what follows, and the slots' shared part */
  GCond cond;
  GQueue spawned;     /* GINT_TO_POINTER(pid) answers, in order */
  GHashTable *exited; /* pid -> wait status + 1 */
  gboolean zygote_gone;
  gboolean stopping;
  gint64 monitor_until; /* when the monitor wakes by itself; 0 = never */
  Slot *slots;
  guint n_slots;
};

void
sluice_child_outcome__clear(SluiceChildOutcome *outcome)
{
  g_clear_error(&outcome->error);
  g_clear_pointer(&outcome->result, g_bytes_unref);
  g_clear_pointer(&outcome->death, g_free);
}

/* ---- Signals ------------------------------------------------------------ */

/* Sends @signum to @slot's child, with @value (SIGUSR1: the run number).
 * Called with pool->lock held. */
static void
signal_child(Slot *slot, int signum, int value)
{
  siginfo_t info;

  if (slot->pid <= 0)
    return;
  if (slot->pidfd >= 0) {
    memset(&info, 0, sizeof info);
    info.si_signo = signum;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_int = value;
    if (pidfd_send_signal(slot->pidfd, signum, &info, 0) == 0 ||
        errno != ENOSYS)
      return;
  }
  {
    union sigval v = {.sival_int = value};
    sigqueue(slot->pid, signum, v);
  }
}

/* Kills @slot's child for @why. Called with pool->lock held. */
static void
kill_child(Slot *slot, Killed why)
{
  if (slot->killed == KILLED_NOT)
    slot->killed = why;
  signal_child(slot, SIGKILL, 0);
}

static void
wake_monitor(SluicePool *pool)
{
  guint64 one = 1;
  ssize_t ignored = write(pool->monitor_wake, &one, sizeof one);

  (void)ignored;
}

/* Whether the monitor must be woken to see @deadline. pool->lock held. */
static gboolean
monitor_sleeps_past(SluicePool *pool, gint64 deadline)
{
  if (deadline == 0)
    return FALSE;
  if (pool->monitor_until == 0 || deadline < pool->monitor_until) {
    pool->monitor_until = deadline;
    return TRUE;
  }
  return FALSE;
}

/* The job's cancel hook: forwards the cancellation to the child at once,
 * and starts its grace. Runs under the job's cancel lock. */
static void
on_job_cancelled(gpointer data)
{
  Slot *slot = data;
  SluicePool *pool = slot->pool;
  gboolean wake = FALSE;

  g_mutex_lock(&pool->lock);
  if (slot->running && slot->grace_deadline == 0) {
    if (g_atomic_int_get(&pool->worker->force_stop)) {
      kill_child(slot, KILLED_FORCED); /* a forced stop waits for nothing */
    } else {
      slot->grace_deadline = g_get_monotonic_time() + pool->grace_us;
      signal_child(slot, SIGUSR1, (int)slot->run);
      wake = monitor_sleeps_past(pool, slot->grace_deadline);
    }
  } else if (slot->running && g_atomic_int_get(&pool->worker->force_stop)) {
    kill_child(slot, KILLED_FORCED);
  }
  g_mutex_unlock(&pool->lock);
  if (wake)
    wake_monitor(pool);
}

/* ---- The monitor --------------------------------------------------------- */

/* Resident memory of @pid in bytes, or 0. */
static guint64
resident_of(GPid pid)
{
  g_autofree gchar *path = g_strdup_printf("/proc/%d/statm", (int)pid);
  g_autofree gchar *statm = NULL;
  gchar *space;

  if (!g_file_get_contents(path, &statm, NULL, NULL))
    return 0;
  space = strchr(statm, ' ');
  return space != NULL ? g_ascii_strtoull(space + 1, NULL, 10) *
                             (guint64)sysconf(_SC_PAGESIZE)
                       : 0;
}

/* Kills what is past its deadline; returns the next deadline (0: none).
 * Called with pool->lock held. */
static gint64
enforce_deadlines(SluicePool *pool, gint64 now)
{
  const SluiceWorkerOptions *o = &pool->worker->options;
  gint64 next = 0;

  for (guint i = 0; i < pool->n_slots; i++) {
    Slot *slot = &pool->slots[i];
    gint64 deadlines[3];

    if (!slot->running || slot->killed != KILLED_NOT)
      continue;
    if (slot->hard_deadline > 0 && now >= slot->hard_deadline) {
      kill_child(slot, KILLED_HARD_TIMEOUT);
      continue;
    }
    if (slot->grace_deadline > 0 && now >= slot->grace_deadline) {
      kill_child(slot, KILLED_GRACE);
      continue;
    }
    if (slot->next_sample > 0 && now >= slot->next_sample) {
      /* Reading /proc under the lock is a few microseconds, every 20 ms. */
      guint64 used = resident_of(slot->pid);
      if (used > o->memory_limit_per_child) {
        slot->used = used;
        kill_child(slot, KILLED_MEMORY);
        continue;
      }
      slot->next_sample = now + MEMORY_SAMPLE_MS * 1000;
    }
    deadlines[0] = slot->hard_deadline;
    deadlines[1] = slot->grace_deadline;
    deadlines[2] = slot->next_sample;
    for (guint k = 0; k < 3; k++)
      if (deadlines[k] > 0 && (next == 0 || deadlines[k] < next))
        next = deadlines[k];
  }
  return next;
}

/* Reads one message of the zygote; FALSE when it is gone. pool->lock held
 * on return as on entry. */
static gboolean
read_zygote(SluicePool *pool)
{
  SluiceZygoteMessage m;
  ssize_t r;

  g_mutex_unlock(&pool->lock);
  do
    r = recv(pool->control, &m, sizeof m, MSG_DONTWAIT);
  while (r < 0 && errno == EINTR);
  g_mutex_lock(&pool->lock);
  if (r < 0 && errno == EAGAIN)
    return TRUE;
  if (r != (ssize_t)sizeof m)
    return FALSE;
  if (m.kind == 'P')
    g_queue_push_tail(&pool->spawned, GINT_TO_POINTER(m.pid));
  else if (m.kind == 'X')
    g_hash_table_insert(pool->exited, GINT_TO_POINTER(m.pid),
                        GINT_TO_POINTER(m.status + 1));
  g_cond_broadcast(&pool->cond);
  return TRUE;
}

static gpointer
monitor_main(gpointer data)
{
  SluicePool *pool = data;

  g_mutex_lock(&pool->lock);
  while (!pool->stopping) {
    /* Without the zygote no child can be reaped or started; deadlines
     * are still enforced on those that run. */
    struct pollfd fds[2] = {{pool->zygote_gone ? -1 : pool->control, POLLIN, 0},
                            {pool->monitor_wake, POLLIN, 0}};
    gint64 now = g_get_monotonic_time();
    gint64 next = enforce_deadlines(pool, now);
    int timeout = next > 0 ? (int)MAX((next - now + 999) / 1000, 0) : -1;

    pool->monitor_until = next;
    g_mutex_unlock(&pool->lock);
    if (poll(fds, 2, timeout) < 0 && errno != EINTR)
      g_usleep(1000); /* cannot happen with valid descriptors */
    if (fds[1].revents & POLLIN) {
      guint64 n;
      ssize_t ignored = read(pool->monitor_wake, &n, sizeof n);
      (void)ignored;
    }
    g_mutex_lock(&pool->lock);
    if (fds[0].revents != 0 && !read_zygote(pool)) {
      pool->zygote_gone = TRUE;
      g_cond_broadcast(&pool->cond);
    }
  }
  g_mutex_unlock(&pool->lock);
  return NULL;
}

/* ---- The pool ------------------------------------------------------------ */

SluicePool *
sluice_pool__new(SluiceWorker *worker, GError **error)
{
  const SluiceWorkerOptions *o = &worker->options;
  SluicePool *pool;
  guint64 data_limit = 0;
  int control = -1;
  GPid pid;

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  /* A backstop against a child that allocates faster than it is sampled;
   * a sanitizer's shadow memory cannot live under one. */
  if (o->memory_limit_per_child > 0)
    data_limit = MAX(o->memory_limit_per_child * 2,
                     o->memory_limit_per_child + ((guint64)256 << 20));
#endif
  pid = sluice_zygote__start(worker->registry, data_limit, &control, error);
  if (pid == 0)
    return NULL;

  pool = g_new0(SluicePool, 1);
  pool->worker = worker;
  pool->control = control;
  pool->zygote = pid;
  pool->grace_us = o->cancel_grace_ms * 1000;
  pool->monitor_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_mutex_init(&pool->spawn_lock);
  g_mutex_init(&pool->lock);
  g_cond_init(&pool->cond);
  g_queue_init(&pool->spawned);
  pool->exited = g_hash_table_new(NULL, NULL);
  pool->n_slots = o->concurrency;
  pool->slots = g_new0(Slot, pool->n_slots);
  for (guint i = 0; i < pool->n_slots; i++) {
    Slot *slot = &pool->slots[i];
    slot->pool = pool;
    slot->to_child = slot->from_child = -1;
    slot->pidfd = -1;
    sluice_frame_reader__init(&slot->reader, -1);
  }
  pool->monitor = g_thread_new("sluice-monitor", monitor_main, pool);
  return pool;
}

static void
close_pipes(Slot *slot)
{
  if (slot->to_child >= 0)
    close(slot->to_child);
  if (slot->from_child >= 0)
    close(slot->from_child);
  slot->to_child = slot->from_child = -1;
}

void
sluice_pool__free(SluicePool *pool)
{
  if (pool == NULL)
    return;
  g_mutex_lock(&pool->lock);
  pool->stopping = TRUE;
  g_mutex_unlock(&pool->lock);
  wake_monitor(pool);
  g_thread_join(pool->monitor);
  for (guint i = 0; i < pool->n_slots; i++) {
    close_pipes(&pool->slots[i]);
    if (pool->slots[i].pidfd >= 0)
      close(pool->slots[i].pidfd);
    sluice_frame_reader__clear(&pool->slots[i].reader);
  }
  /* The zygote sees its socket close, kills the children, exits. */
  close(pool->control);
  waitpid(pool->zygote, NULL, 0);
  close(pool->monitor_wake);
  g_hash_table_unref(pool->exited);
  g_queue_clear(&pool->spawned);
  g_cond_clear(&pool->cond);
  g_mutex_clear(&pool->lock);
  g_mutex_clear(&pool->spawn_lock);
  g_free(pool->slots);
  g_free(pool);
}

/* Starts the child of @slot. Returns FALSE with @why set if it cannot. */
static gboolean
spawn(SluicePool *pool, Slot *slot, gchar **why)
{
  int to_child[2], from_child[2];
  gint pid = 0;
  int control;

  if (pipe2(to_child, O_CLOEXEC) != 0) {
    *why = g_strdup_printf("cannot make a pipe: %s", g_strerror(errno));
    return FALSE;
  }
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    *why = g_strdup_printf("cannot make a pipe: %s", g_strerror(errno));
    close(to_child[0]);
    close(to_child[1]);
    return FALSE;
  }
  g_mutex_lock(&pool->spawn_lock);
  g_mutex_lock(&pool->lock);
  control = pool->zygote_gone ? -1 : pool->control;
  g_mutex_unlock(&pool->lock);
  if (control < 0 ||
      !sluice_zygote__request_spawn(control, to_child[0], from_child[1])) {
    g_mutex_unlock(&pool->spawn_lock);
    close(to_child[0]);
    close(to_child[1]);
    close(from_child[0]);
    close(from_child[1]);
    *why = g_strdup("the process that starts the worker's children is gone");
    return FALSE;
  }
  close(to_child[0]);
  close(from_child[1]);
  g_mutex_lock(&pool->lock);
  while (g_queue_is_empty(&pool->spawned) && !pool->zygote_gone)
    g_cond_wait(&pool->cond, &pool->lock);
  if (!g_queue_is_empty(&pool->spawned))
    pid = GPOINTER_TO_INT(g_queue_pop_head(&pool->spawned));
  g_mutex_unlock(&pool->lock);
  g_mutex_unlock(&pool->spawn_lock);
  if (pid <= 0) {
    close(to_child[1]);
    close(from_child[0]);
    *why = pid < 0
               ? g_strdup_printf("cannot fork a child: %s", g_strerror(-pid))
               : g_strdup("the process that starts the worker's "
                          "children is gone");
    return FALSE;
  }
  slot->to_child = to_child[1];
  slot->from_child = from_child[0];
  slot->tasks = 0;
  sluice_frame_reader__reset(&slot->reader, slot->from_child);
  g_mutex_lock(&pool->lock);
  slot->pid = pid;
  /* The child waits for its first RUN: it cannot have been reaped yet,
   * so this pidfd is of that very process. */
  slot->pidfd = pidfd_open(pid, 0);
  slot->killed = KILLED_NOT;
  g_mutex_unlock(&pool->lock);
  g_mutex_lock(&pool->worker->lock);
  pool->worker->stats.children_started++;
  g_mutex_unlock(&pool->worker->lock);
  return TRUE;
}

/* Waits for the zygote's word on @pid; returns its wait status, or -1. */
static gint
exit_status(SluicePool *pool, GPid pid)
{
  gint64 deadline = g_get_monotonic_time() + EXIT_STATUS_WAIT_MS * 1000;
  gpointer value = NULL;

  g_mutex_lock(&pool->lock);
  while (!g_hash_table_lookup_extended(pool->exited, GINT_TO_POINTER(pid), NULL,
                                       &value) &&
         !pool->zygote_gone)
    if (!g_cond_wait_until(&pool->cond, &pool->lock, deadline))
      break;
  g_hash_table_remove(pool->exited, GINT_TO_POINTER(pid));
  g_mutex_unlock(&pool->lock);
  return value != NULL ? GPOINTER_TO_INT(value) - 1 : -1;
}

/* Ends @slot's child (killed first if @kill_it) and waits for it. Returns
 * its wait status, or -1. */
static gint
retire(SluicePool *pool, Slot *slot, gboolean kill_it)
{
  GPid pid;
  gint status;

  if (slot->to_child < 0)
    return -1;
  g_mutex_lock(&pool->lock);
  if (kill_it)
    signal_child(slot, SIGKILL, 0);
  pid = slot->pid;
  g_mutex_unlock(&pool->lock);
  close_pipes(slot);
  status = exit_status(pool, pid);
  g_mutex_lock(&pool->lock);
  slot->pid = 0;
  if (slot->pidfd >= 0)
    close(slot->pidfd);
  slot->pidfd = -1;
  g_mutex_unlock(&pool->lock);
  return status;
}

static const gchar *
signal_name(int signum)
{
  static const struct {
    int signum;
    const gchar *name;
  } names[] = {
      {SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},
      {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},   {SIGKILL, "SIGKILL"},
      {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},
      {SIGPIPE, "SIGPIPE"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},
      {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGQUIT, "SIGQUIT"},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
    if (names[i].signum == signum)
      return names[i].name;
  return NULL;
}

static gchar *
describe_death(gint status)
{
  if (status >= 0 && WIFSIGNALED(status)) {
    const gchar *name = signal_name(WTERMSIG(status));
    return name != NULL
               ? g_strdup_printf("killed by %s", name)
               : g_strdup_printf("killed by signal %d", WTERMSIG(status));
  }
  if (status >= 0 && WIFEXITED(status))
    return g_strdup_printf("its process exited with status %d",
                           WEXITSTATUS(status));
  return g_strdup("its process ended, how is not known");
}

/* Decodes a RESULT frame into @out; FALSE if it is malformed. */
static gboolean
decode_result(const guint8 *frame, gsize frame_len, SluiceChildOutcome *out,
              guint64 *out_rss)
{
  SluiceMpReader r;
  SluiceMpValue v[8];
  g_autofree gchar *domain = NULL;
  g_autofree gchar *message = NULL;

  sluice_mp_reader_init(&r, frame, frame_len);
  if (!sluice_mp_reader__next(&r, &v[0], NULL) ||
      v[0].type != SLUICE_MP_ARRAY || v[0].count != 7)
    return FALSE;
  for (guint i = 1; i <= 7; i++)
    if (!sluice_mp_reader__next(&r, &v[i], NULL) ||
        v[i].type == SLUICE_MP_ARRAY || v[i].type == SLUICE_MP_MAP)
      return FALSE;
  if (v[1].type != SLUICE_MP_BOOL ||
      (v[2].type != SLUICE_MP_INT && v[2].type != SLUICE_MP_UINT) ||
      (v[4].type != SLUICE_MP_INT && v[4].type != SLUICE_MP_UINT) ||
      v[7].type != SLUICE_MP_UINT)
    return FALSE;
  out->ok = v[1].b;
  out->retry_delay_ms = v[2].type == SLUICE_MP_INT ? v[2].i : (gint64)v[2].u;
  if (v[3].type == SLUICE_MP_STR)
    domain = g_strndup(v[3].raw.data, v[3].raw.len);
  if (v[5].type == SLUICE_MP_STR)
    message = g_strndup(v[5].raw.data, v[5].raw.len);
  if (v[6].type == SLUICE_MP_BIN)
    out->result = g_bytes_new(v[6].raw.data, v[6].raw.len);
  *out_rss = v[7].u;
  if (!out->ok)
    out->error = g_error_new_literal(
        domain != NULL ? g_quark_from_string(domain) : SLUICE_TASK_ERROR,
        v[4].type == SLUICE_MP_INT ? (gint)v[4].i : (gint)v[4].u,
        message != NULL && g_utf8_validate(message, -1, NULL)
            ? message
            : "the task failed");
  return TRUE;
}

/* What the monitor's kill of a run means, for the attempt's history. */
static gchar *
describe_kill(SluicePool *pool, Job *job, Killed killed, guint64 used)
{
  const SluiceWorkerOptions *o = &pool->worker->options;

  switch (killed) {
  case KILLED_HARD_TIMEOUT:
    return g_strdup_printf("killed at its hard timeout of %" G_GINT64_FORMAT
                           " ms",
                           job->hard_timeout_ms);
  case KILLED_GRACE:
    return g_strdup_printf("killed: still running %" G_GINT64_FORMAT
                           " ms after it was cancelled",
                           o->cancel_grace_ms);
  case KILLED_MEMORY:
    return g_strdup_printf(
        "killed: it used %" G_GUINT64_FORMAT " MiB, over its memory limit "
        "of %" G_GUINT64_FORMAT " MiB (memory_limit_per_child)",
        used >> 20, o->memory_limit_per_child >> 20);
  case KILLED_FORCED:
    return g_strdup("killed: the worker's stop was forced");
  case KILLED_NOT:
  default:
    return NULL;
  }
}

void
sluice_pool__run(SluicePool *pool, guint index, Job *job,
                 SluiceChildOutcome *out)
{
  const SluiceWorkerOptions *o = &pool->worker->options;
  Slot *slot = &pool->slots[index];
  g_autofree gchar *dying = NULL;
  gsize len = 0;
  gconstpointer envelope = g_bytes_get_data(
      job->run_payload != NULL ? job->run_payload : job->delivery->payload,
      &len);
  guint32 head[4];
  guint64 rss = 0, used;
  gchar *why = NULL;
  gboolean wake = FALSE, returned = FALSE, sent;
  Killed killed;
  gint64 now;

  memset(out, 0, sizeof *out);
  out->retry_delay_ms = -1;
  if (slot->to_child < 0 && !spawn(pool, slot, &why)) {
    out->end = SLUICE_CHILD_DIED;
    out->death = g_strdup_printf("process isolation: %s", why);
    g_free(why);
    goto lost;
  }

  now = g_get_monotonic_time();
  g_mutex_lock(&pool->lock);
  slot->run++;
  slot->running = TRUE;
  slot->grace_deadline = 0;
  slot->hard_deadline =
      job->hard_timeout_ms > 0 ? now + job->hard_timeout_ms * 1000 : 0;
  slot->next_sample =
      o->memory_limit_per_child > 0 ? now + MEMORY_SAMPLE_MS * 1000 : 0;
  wake = monitor_sleeps_past(pool, slot->hard_deadline) ||
         monitor_sleeps_past(pool, slot->next_sample);
  head[0] = GUINT32_TO_LE(slot->run);
  g_mutex_unlock(&pool->lock);
  if (wake)
    wake_monitor(pool);
  head[1] = GUINT32_TO_LE(job->delivery->delivery_count);
  head[2] = GUINT32_TO_LE((guint32)job->policy.max_attempts);
  head[3] = GUINT32_TO_LE(o->max_rss_per_child > 0 ? SLUICE_RUN_REPORT_RSS : 0);

  sent = sluice_frame__write(slot->to_child, SLUICE_FRAME_RUN, head,
                             sizeof head, envelope, len);
  if (!sent && errno == EPIPE) {
    /* No reader: the child died between tasks (the OOM killer, an
     * operator's kill, a thread of the last task), which is not this
     * task's doing. One fresh child gets it. */
    retire(pool, slot, FALSE);
    if (!spawn(pool, slot, &why)) {
      out->end = SLUICE_CHILD_DIED;
      out->death = g_strdup_printf("process isolation: %s", why);
      g_free(why);
      g_mutex_lock(&pool->lock);
      slot->running = FALSE;
      g_mutex_unlock(&pool->lock);
      goto lost;
    }
    sent = sluice_frame__write(slot->to_child, SLUICE_FRAME_RUN, head,
                               sizeof head, envelope, len);
  }
  if (sent) {
    /* From now on cancellations reach the child; one that came first is
     * forwarded here. */
    if (sluice_job__set_cancel_hook(job, on_job_cancelled, slot))
      on_job_cancelled(slot);
    for (;;) {
      guint8 type = 0;
      const guint8 *frame;
      gsize frame_len;

      if (!sluice_frame_reader__next(&slot->reader, &type, &frame, &frame_len))
        break; /* the child is gone */
      if (type == SLUICE_FRAME_DYING) {
        g_free(dying);
        dying = g_strndup((const gchar *)frame, frame_len);
        continue;
      }
      if (type == SLUICE_FRAME_RESULT &&
          decode_result(frame, frame_len, out, &rss))
        returned = TRUE;
      else
        dying = g_strdup("it sent the worker a frame it cannot read");
      break;
    }
    sluice_job__set_cancel_hook(job, NULL, NULL);
  }

  g_mutex_lock(&pool->lock);
  slot->running = FALSE;
  killed = slot->killed;
  used = slot->used;
  g_mutex_unlock(&pool->lock);

  if (returned) {
    out->end = SLUICE_CHILD_RETURNED;
    slot->tasks++;
    /* A child the monitor killed as it answered is dead all the same; a
     * full one is recycled between tasks, where a leak stops growing. */
    if (killed != KILLED_NOT ||
        (o->max_tasks_per_child > 0 && slot->tasks >= o->max_tasks_per_child) ||
        (o->max_rss_per_child > 0 && rss > o->max_rss_per_child))
      retire(pool, slot, TRUE);
    return;
  }

  {
    gint status = retire(pool, slot, dying != NULL && killed == KILLED_NOT);
    g_autofree gchar *how = describe_death(status);

    out->death = describe_kill(pool, job, killed, used);
    if (out->death != NULL) {
      out->end = SLUICE_CHILD_KILLED;
      out->timed_out = killed == KILLED_HARD_TIMEOUT;
    } else if (dying != NULL && strstr(dying, "failed to allocate") != NULL &&
               o->memory_limit_per_child > 0) {
      out->end = SLUICE_CHILD_DIED;
      out->death = g_strdup_printf(
          "%s: it went over its memory limit of %" G_GUINT64_FORMAT
          " MiB (memory_limit_per_child): %s",
          how, o->memory_limit_per_child >> 20, dying);
    } else if (dying != NULL) {
      out->end = SLUICE_CHILD_DIED;
      out->death = g_strdup_printf("%s: %s", how, dying);
    } else {
      out->end = SLUICE_CHILD_DIED;
      out->death = g_steal_pointer(&how);
    }
  }
lost:
  g_mutex_lock(&pool->worker->lock);
  pool->worker->stats.children_lost++;
  g_mutex_unlock(&pool->worker->lock);
}

/* isolation-private.h - process isolation: task functions in child
 * processes (internal).
 *
 * With SLUICE_ISOLATION_PROCESS every executor thread of a worker owns one
 * child process and runs its tasks there, one at a time; the fetcher, the
 * settler and housekeeping stay in the worker. isolation-pool.c is the
 * worker's side, isolation-zygote.c the process that forks children,
 * isolation-child.c the child's side, isolation-frame.c the frames between
 * them.
 *
 * Where children come from: a *zygote*, forked by sluice_worker_start()
 * before the worker starts any thread of its own, keeps the registry (the
 * task functions, the modules loaded) and forks every child on request, so
 * a child always starts from that clean, single-threaded state, even when
 * it replaces one that died while the worker had a dozen threads running.
 * (A re-executed runner would start cleaner still, but could only run
 * tasks from loadable modules: functions a program registered itself would
 * be lost.) The zygote reports each child's exit status; when the worker
 * goes away its control socket closes, and the zygote kills its children
 * and exits.
 *
 * Between an executor and its child, over two pipes, frames of a 4-byte
 * length (little endian), a type byte and a payload:
 *
 *   RUN     worker -> child   run number, delivery count, max attempts,
 *                             flags (each u32 le; flag 1: report resident
 *                             memory), then the envelope's bytes, as
 *                             delivered
 *   RESULT  child -> worker   a msgpack array: [ok (bool), retry delay
 *                             (int, -1 none), error domain (str or nil),
 *                             error code (int), error message (str or
 *                             nil), result (bin or nil), resident bytes
 *                             (int, 0 unless asked)]
 *   DYING   child -> worker   a message, sent by a child that is about to
 *                             abort (GLib could not allocate memory)
 *
 * Cancellation is a signal, so a task's run costs no thread hop in the
 * child: SIGUSR1, queued with the run number as its value (sigqueue), makes
 * the child's watcher thread cancel that run's cancellable; the number
 * keeps a cancellation that arrives late from reaching the next task. A
 * child that does not return within cancel_grace_ms of it, or runs past
 * its hard timeout, or goes over its memory limit, is killed with SIGKILL.
 */
#pragma once

#include "lib/worker/worker-private.h"

G_BEGIN_DECLS

enum {
  SLUICE_FRAME_RUN = 'R',
  SLUICE_FRAME_RESULT = 'D',
  SLUICE_FRAME_DYING = 'X',
};

/* A frame's payload may not be larger than this (a result, or an
 * envelope, is at most a few MiB). */
#define SLUICE_FRAME_MAX (64 * 1024 * 1024)

#define SLUICE_FRAME_HEAD 5
#define SLUICE_RUN_HEAD 16
#define SLUICE_RUN_REPORT_RSS 1u

/* Writes one frame of @type whose payload is @a then @b (either may be
 * empty). Returns FALSE (errno set) if the peer is gone.
 * (isolation-frame.c) */
gboolean sluice_frame__write(int fd, guint8 type, gconstpointer a, gsize alen,
                             gconstpointer b, gsize blen);

/* Reads frames from a socket through a buffer. */
typedef struct {
  int fd;
  GByteArray *buf;
  gsize start; /* of the first unread byte */
} SluiceFrameReader;

void sluice_frame_reader__init(SluiceFrameReader *reader, int fd);
void sluice_frame_reader__clear(SluiceFrameReader *reader);
/* Forgets what was buffered, and reads from @fd from now on. */
void sluice_frame_reader__reset(SluiceFrameReader *reader, int fd);
/* The next frame, reading (blocking) as needed. @payload points into the
 * reader's buffer, valid until the next call. FALSE at end of file, on an
 * error, or on a frame over SLUICE_FRAME_MAX. */
gboolean sluice_frame_reader__next(SluiceFrameReader *reader, guint8 *type,
                                   const guint8 **payload, gsize *len);

/* ---- The child's side (isolation-child.c) -------------------------------- */

/* Runs the tasks read from @in, answering on @out, until the worker closes
 * @in; never returns. */
G_GNUC_NORETURN void sluice_child__main(int in, int out,
                                        SluiceRegistry *registry,
                                        guint64 data_limit);

/* ---- The zygote (isolation-zygote.c) ------------------------------------- */

typedef struct {
  gchar kind; /* 'S' spawn, 'P' spawned, 'X' exited */
  gint32 pid;
  gint32 status;
} SluiceZygoteMessage;

/* Forks the zygote; sets @out_control to the worker's end of its socket.
 * Returns its pid, or 0 with @error set. */
GPid sluice_zygote__start(SluiceRegistry *registry, guint64 data_limit,
                          int *out_control, GError **error);
/* Asks for a child reading @child_in and writing @child_out (the zygote
 * gets copies; the caller closes its own). FALSE if the zygote is gone. */
gboolean sluice_zygote__request_spawn(int control, int child_in, int child_out);

/* ---- The worker's side (isolation-pool.c) -------------------------------- */

typedef struct _SluicePool SluicePool;

/* How a run in a child ended. */
typedef enum {
  SLUICE_CHILD_RETURNED, /* the task returned: see ok / error */
  SLUICE_CHILD_DIED,     /* the child died under the task */
  SLUICE_CHILD_KILLED,   /* the worker killed it (hard timeout, memory,
                          * no return after a cancellation) */
} SluiceChildEnd;

typedef struct {
  SluiceChildEnd end;
  gboolean ok;
  GError *error;  /* a returned failure (owned) */
  GBytes *result; /* owned */
  gint64 retry_delay_ms;
  gchar *death;       /* DIED, KILLED: what happened, for the history */
  gboolean timed_out; /* KILLED at the hard timeout */
} SluiceChildOutcome;

void sluice_child_outcome__clear(SluiceChildOutcome *outcome);

/* Forks the zygote. Call before the worker starts its threads. */
SluicePool *sluice_pool__new(SluiceWorker *worker, GError **error);
/* Kills every child and the zygote, and frees @pool. */
void sluice_pool__free(SluicePool *pool);
/* Runs @job's task in the child of executor @slot (started on first use,
 * and after the last one was lost or retired), until it returns, dies or
 * is killed. Called by that executor thread only. */
void sluice_pool__run(SluicePool *pool, guint slot, Job *job,
                      SluiceChildOutcome *out);

G_END_DECLS

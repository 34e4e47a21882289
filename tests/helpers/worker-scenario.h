/* worker-scenario.h - worker processes on a Redis namespace, and what they
 * ran, for the fault tests of reliable mode (test-redis-reliable-faults).
 *
 * A Scenario is one namespace on a redis-server, a scratch directory, and
 * a broker and a client of its own. proc_start() runs a worker process in
 * it (tests/helpers/worker-proc), which dies with the test process
 * (PR_SET_PDEATHSIG), however that ends, and is signalled and reaped by
 * its pid. Every worker process appends one line per execution to the
 * scenario's execution log (task id, delivery count, pid): the oracle the
 * tests read with executions().
 *
 * Waits are for conditions, bounded generously; functions that may fail
 * the test use Check's assertions.
 */
#pragma once

#include <check.h>

#include <sluice/sluice.h>

#include "tests/helpers/redis-server.h"

G_BEGIN_DECLS

typedef struct _Scenario Scenario;

/* One worker process. */
typedef struct {
  Scenario *s; /* borrowed: what it runs on */
  GPid pid;
  gchar *id;
  gchar *err_path; /* its stderr */
  gboolean reaped;
  gint status;
} Proc;

/* Everything one process-level scenario uses. */
struct _Scenario {
  SluiceTestRedis *server; /* borrowed */
  gchar *ns;
  gchar *dir;      /* scratch directory */
  gchar *log_path; /* the execution log of every worker process */
  SluiceBroker *broker;
  SluiceClient *client;
};

/* Returns: (transfer full): a scenario on @server in namespace
 * "<name>-<pid>". */
Scenario *scenario_new(SluiceTestRedis *server, const gchar *name);

/* Removes the scratch directory and frees @s. */
void scenario_free(Scenario *s);

/* Starts worker @id on @s; the varargs are more worker-proc options,
 * NULL-terminated. Returns: (transfer full) */
Proc *proc_start(Scenario *s, const gchar *id, ...) G_GNUC_NULL_TERMINATED;

/* Waits up to @timeout_ms for the process to end. Returns: whether it did */
gboolean proc_wait(Proc *p, gint64 timeout_ms);

/* Sends @signum unless the process was reaped. */
void proc_signal(Proc *p, int signum);

gboolean proc_exited_ok(Proc *p);

/* Waits until @p holds a lease (it started and heartbeated). */
void proc_wait_ready(Scenario *s, Proc *p);

/* A graceful stop: SIGTERM once it runs (before, SIGTERM just kills it);
 * the exit status must be 0. */
void proc_stop(Proc *p);

/* Kills @p if it still runs, reaps it and frees it. NULL-safe. */
void proc_free(Proc *p);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Proc, proc_free)

gboolean proc_stderr_contains(Proc *p, const gchar *needle);

/* One line of the execution log. */
typedef struct {
  gchar *id;
  guint count;
  gint pid;
} Execution;

/* Returns: (transfer full) (element-type Execution): every line so far. */
GPtrArray *executions(Scenario *s);

/* How many times @id ran in @log. */
guint runs_of(GPtrArray *log, const gchar *id);

/* A condition on the execution log, for sluice_test_wait_for(). */
typedef struct {
  Scenario *s;
  guint lines;
  const gchar *id;
  guint count;
} LogCheck;

/* TRUE once c->id ran with delivery count c->count. */
gboolean log_has_run(gpointer c);

/* Waits until at least @n executions were logged. */
void wait_log_lines(Scenario *s, guint n);

/* Enqueues @task with @json_args (nullable). Returns: (transfer full) the
 * task id. */
gchar *enqueue_task(Scenario *s, const gchar *task, const gchar *json_args);

/* Enqueues @n tasks "t.log" in batches. Returns: (transfer full) their
 * ids. */
GPtrArray *enqueue_logs(Scenario *s, guint n);

/* Waits for @id's final record. Returns: (transfer full) */
SluiceResult *final_result(Scenario *s, const gchar *id);

/* How many of @ids have a final record, counted with pipelined GETs. */
guint count_final_records(Scenario *s, GPtrArray *ids);

/* Waits until nothing is ready and nothing pending in queue "default";
 * fails the test with what is left otherwise. */
void wait_drained(Scenario *s, gint64 timeout_ms);

G_END_DECLS

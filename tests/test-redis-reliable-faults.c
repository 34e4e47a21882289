/* test-redis-reliable-faults.c - rows of the fault matrix of docs/redis.md
 * (R1, R2/R3, R5, R6, R8, R13, R17, R19, R23, R24) against redis-reliable,
 * with real worker processes and real redis-servers.
 *
 * Worker processes (tests/helpers/worker-proc, run through
 * tests/helpers/worker-scenario.h) are killed, stopped and signalled by
 * pid; Redis is killed, restarted and stalled. The oracle is the execution
 * log the worker processes append to (one line per execution: task id,
 * delivery count, pid), plus the final records in Redis. One shared server
 * for the rows that leave Redis alone; rows that harm Redis start their
 * own.
 *
 * No assertion depends on timing: every wait is for a condition, bounded
 * generously, and leases are short (600-1000 ms) so each test stays well
 * under 30 s. Worker processes get PR_SET_PDEATHSIG, so a test that fails
 * or times out leaves none behind.
 *
 * To add a row: write START_TEST and add it to faults_suite();
 * scenario_new() gives a namespace, a scratch directory, a broker and a
 * client, and proc_start() a worker process.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/helpers/broker-calls.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/worker-scenario.h"

#define GROUP "sluice"

/* ---- faults -------------------------------------------------------------- */

/* R1: a worker killed with SIGKILL while running 4 long tasks; a second
 * worker completes all of them after the lease, with delivery count 2 and
 * the attempt unchanged. */
START_TEST(test_killed_worker_long_tasks_are_completed_by_a_peer)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "r1");
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) log = NULL;
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;

  for (guint i = 0; i < 4; i++)
    g_ptr_array_add(ids, enqueue_task(s, "t.sleep", "{\"ms\": 2000}"));
  a = proc_start(s, "wA", "--concurrency=4", "--prefetch=0",
                 "--visibility-timeout=600", NULL);
  wait_log_lines(s, 4);
  proc_signal(a, SIGKILL);
  ck_assert(proc_wait(a, 10000));

  b = proc_start(s, "wB", "--concurrency=4", "--prefetch=0",
                 "--visibility-timeout=600", NULL);
  for (guint i = 0; i < ids->len; i++) {
    g_autoptr(SluiceResult) r = final_result(s, ids->pdata[i]);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
    ck_assert_uint_eq(sluice_result_get_attempt(r), 1);
  }
  log = executions(s);
  ck_assert_uint_eq(log->len, 8);
  for (guint i = 0; i < log->len; i++) {
    Execution *e = log->pdata[i];
    ck_assert_uint_eq(e->count, e->pid == (gint)a->pid ? 1 : 2);
    ck_assert_int_eq(e->pid, e->count == 1 ? (gint)a->pid : (gint)b->pid);
  }
  for (guint i = 0; i < ids->len; i++)
    ck_assert_uint_eq(runs_of(log, ids->pdata[i]), 2);
  proc_stop(b);
  wait_drained(s, 10000);
  scenario_free(s);
}
END_TEST

/* R2/R3: a worker killed in the middle of a 20,000-task run loses nothing;
 * the only tasks that run twice are those it held at the kill. */
START_TEST(test_kill_during_a_run_loses_nothing)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  enum { TASKS = 20000, CONCURRENCY = 4, PREFETCH = 16 };
  Scenario *s = scenario_new(shared, "r2");
  g_autoptr(GPtrArray) ids = enqueue_logs(s, TASKS);
  g_autoptr(GPtrArray) log = NULL;
  g_autoptr(GHashTable) runs = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  guint twice = 0, redelivered = 0;

  a = proc_start(s, "wA", "--concurrency=4", "--prefetch=16",
                 "--visibility-timeout=1000", NULL);
  wait_log_lines(s, 2000);
  proc_signal(a, SIGKILL);
  ck_assert(proc_wait(a, 10000));
  b = proc_start(s, "wB", "--concurrency=4", "--prefetch=16",
                 "--visibility-timeout=1000", NULL);
  wait_drained(s, 60000);
  proc_stop(b);

  ck_assert_uint_eq(count_final_records(s, ids), TASKS);
  log = executions(s);
  for (guint i = 0; i < log->len; i++) {
    Execution *e = log->pdata[i];
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(runs, e->id));
    g_hash_table_insert(runs, e->id, GUINT_TO_POINTER(n + 1));
    if (e->count > 1) {
      redelivered++;
      ck_assert_int_eq(e->pid, (gint)b->pid);
    }
  }
  ck_assert_uint_eq(g_hash_table_size(runs), TASKS);
  for (guint i = 0; i < log->len; i++) {
    Execution *e = log->pdata[i];
    if (GPOINTER_TO_UINT(g_hash_table_lookup(runs, e->id)) > 1 &&
        e->pid == (gint)a->pid)
      twice++; /* ran by the killed worker, then again */
  }
  /* Only what the killed worker held can run again. */
  ck_assert_uint_le(redelivered, CONCURRENCY + PREFETCH);
  ck_assert_uint_le(twice, CONCURRENCY + PREFETCH);
  ck_assert_uint_eq(log->len, TASKS + twice);
  g_print("kill during a run: %u tasks, %u delivered again, %u ran twice\n",
          TASKS, redelivered, twice);
  scenario_free(s);
}
END_TEST

typedef struct {
  Scenario *s;
} DlqCheck;

static gboolean
has_dead_letter(gpointer data)
{
  DlqCheck *c = data;

  return sluice_test_redis_integer(c->s->server, "XLEN {%s}:dlq", c->s->ns) > 0;
}

/* R8: a task that kills its worker every time is dead-lettered
 * max_deliveries after exactly max_deliveries deliveries, while restarted
 * workers keep serving other tasks. */
START_TEST(test_poison_message_is_dead_lettered)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  enum { MAX_DELIVERIES = 3 };
  Scenario *s = scenario_new(shared, "r8");
  g_autofree gchar *poison = enqueue_task(s, "t.abort", NULL);
  g_autoptr(GPtrArray) ids = enqueue_logs(s, 10);
  g_autoptr(GArray) pids = g_array_new(FALSE, FALSE, sizeof(gint));
  g_autoptr(GPtrArray) log = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  DlqCheck dc = {s};
  SluiceDeadLetter *dl;
  Proc *last = NULL;
  guint restarts = 0;

  for (;;) {
    g_autofree gchar *id = g_strdup_printf("p%u", restarts);
    Proc *p =
        proc_start(s, id, "--concurrency=1", "--prefetch=0",
                   "--visibility-timeout=600", "--max-deliveries=3", NULL);
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

    g_array_append_val(pids, p->pid);
    while (!proc_wait(p, 50) && !has_dead_letter(&dc) &&
           g_get_monotonic_time() < deadline)
      ;
    if (!p->reaped) {
      ck_assert_msg(has_dead_letter(&dc), "the poison was never buried");
      last = p;
      break;
    }
    /* Killed by its task: the poison came back to it. */
    ck_assert_msg(WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGABRT,
                  "worker %s: status 0x%x", id, (unsigned)p->status);
    proc_free(p);
    ck_assert_uint_lt(++restarts, 10);
    /* More work arrives while the poison comes and goes. */
    {
      g_autoptr(GPtrArray) more = enqueue_logs(s, 3);
      for (guint i = 0; i < more->len; i++)
        g_ptr_array_add(ids, g_strdup(more->pdata[i]));
    }
  }
  ck_assert_uint_eq(restarts, MAX_DELIVERIES);

  for (guint i = 0; i < ids->len; i++) {
    g_autoptr(SluiceResult) r = final_result(s, ids->pdata[i]);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  }
  proc_stop(last);
  proc_free(last);

  dead = sluice_client_dlq_list(s->client, NULL, 10, NULL, NULL, &error);
  ck_assert_uint_eq(dead->len, 1);
  dl = dead->pdata[0];
  ck_assert_str_eq(dl->reason, SLUICE_DLQ_MAX_DELIVERIES);
  ck_assert_str_eq(dl->task_id, poison);
  ck_assert_uint_eq(dl->deliveries, MAX_DELIVERIES + 1);

  /* Exactly max_deliveries executions, one per delivery, and restarted
   * workers served other tasks before the poison came back to them. */
  log = executions(s);
  ck_assert_uint_eq(runs_of(log, poison), MAX_DELIVERIES);
  for (guint k = 1; k <= MAX_DELIVERIES; k++) {
    LogCheck c = {s, 0, poison, k};
    ck_assert(log_has_run(&c));
  }
  {
    gint second = g_array_index(pids, gint, 1);
    gboolean served = FALSE;
    for (guint i = 0; i < log->len; i++) {
      Execution *e = log->pdata[i];
      if (e->pid == second && strcmp(e->id, poison) != 0)
        served = TRUE;
    }
    ck_assert_msg(served, "the restarted worker served nothing else");
  }
  scenario_free(s);
}
END_TEST

static gboolean
proc_logged_lease_lost(gpointer data)
{
  return proc_stderr_contains(data,
                              "lease lost; message may be executed again");
}

/* Logged right after the settle returns, so possibly a moment after the
 * stale counter moved in Redis. */
static gboolean
proc_logged_settle_refused(gpointer data)
{
  return proc_stderr_contains(data, "settle refused");
}

typedef struct {
  SluiceBroker *broker;
  gint64 at_least;
} StaleCheck;

static gboolean
stale_reached(gpointer data)
{
  StaleCheck *c = data;

  return sluice_test_stale_settles(c->broker) >= c->at_least;
}

/* R5: a worker stopped past its lease (SIGSTOP), then continued: it logs
 * "lease lost", a peer has reclaimed and completed its task, and its late
 * settle is refused as stale. */
START_TEST(test_stalled_worker_loses_its_lease_and_its_settle)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "r5");
  g_autofree gchar *id = NULL;
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GPtrArray) log = NULL;
  LogCheck started = {s, 0, NULL, 1};
  LogCheck reclaimed = {s, 0, NULL, 2};
  StaleCheck stale = {s->broker, 1};

  a = proc_start(s, "wA", "--concurrency=1", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  proc_wait_ready(s, a);
  id = enqueue_task(s, "t.sleep", "{\"ms\": 5000}");
  started.id = reclaimed.id = id;
  ck_assert(sluice_test_wait_for(log_has_run, &started, 20000));
  proc_signal(a, SIGSTOP);

  b = proc_start(s, "wB", "--concurrency=1", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  ck_assert_msg(sluice_test_wait_for(log_has_run, &reclaimed, 20000),
                "the stalled worker's task was never reclaimed");
  g_usleep(500 * 1000); /* well past the lease */
  proc_signal(a, SIGCONT);

  ck_assert_msg(sluice_test_wait_for(proc_logged_lease_lost, a, 20000),
                "the stalled worker did not log that it lost its lease");
  ck_assert_msg(sluice_test_wait_for(stale_reached, &stale, 20000),
                "the stalled worker's late settle was not refused");
  ck_assert_msg(sluice_test_wait_for(proc_logged_settle_refused, a, 20000),
                "the stalled worker did not log its refused settle");
  r = final_result(s, id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  ck_assert_uint_eq(sluice_result_get_attempt(r), 1);
  wait_drained(s, 20000);
  log = executions(s);
  ck_assert_uint_eq(runs_of(log, id), 2);
  ck_assert_int_eq(sluice_test_stale_settles(s->broker), 1);
  proc_stop(a);
  proc_stop(b);
  scenario_free(s);
}
END_TEST

static gboolean
proc_logged_lease_lost_at_settle(gpointer data)
{
  return proc_stderr_contains(data, "by the time it settled no worker held");
}

typedef struct {
  Scenario *s;
  const gchar *id;
} DoneCheck;

static gboolean
task_succeeded(gpointer data)
{
  DoneCheck *c = data;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GError) error = NULL;

  r = sluice_client_inspect(c->s->client, c->id, &error);
  return r != NULL && sluice_result_get_state(r) == SLUICE_STATE_SUCCEEDED;
}

/* R5, when the peer is faster: a worker stopped past its lease while its
 * task ran, and continued only after a peer reclaimed the task and
 * finished it. The task returns at once (its time has passed) and its
 * settle finds the delivery gone: that is a lost lease, and said so, not a
 * delivery the broker lost under a lease that held. */
START_TEST(test_stalled_worker_whose_task_a_peer_finished_lost_its_lease)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "r5b");
  g_autofree gchar *id = NULL;
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GPtrArray) log = NULL;
  LogCheck started = {s, 0, NULL, 1};
  LogCheck reclaimed = {s, 0, NULL, 2};
  DoneCheck done = {s, NULL};
  StaleCheck stale = {s->broker, 1};

  a = proc_start(s, "wA", "--concurrency=1", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  proc_wait_ready(s, a);
  id = enqueue_task(s, "t.sleep", "{\"ms\": 1500}");
  started.id = reclaimed.id = done.id = id;
  ck_assert(sluice_test_wait_for(log_has_run, &started, 20000));
  proc_signal(a, SIGSTOP);

  b = proc_start(s, "wB", "--concurrency=1", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  ck_assert_msg(sluice_test_wait_for(log_has_run, &reclaimed, 20000),
                "the stalled worker's task was never reclaimed");
  /* The peer finished it (1.5 s after it took it over): by then the
   * stopped worker's own 1.5 s have passed too. */
  ck_assert(sluice_test_wait_for(task_succeeded, &done, 20000));
  proc_signal(a, SIGCONT);

  ck_assert_msg(sluice_test_wait_for(stale_reached, &stale, 20000),
                "the stalled worker's late settle was not refused");
  ck_assert_msg(
      sluice_test_wait_for(proc_logged_lease_lost_at_settle, a, 20000),
      "the stalled worker did not say its settle came after a lost lease");
  ck_assert(proc_stderr_contains(a, "lease lost; message may be executed "
                                    "again"));
  ck_assert_msg(!proc_stderr_contains(a, "no worker holds this delivery any "
                                         "more"),
                "a lost lease was reported as a delivery the broker lost");
  r = final_result(s, id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  wait_drained(s, 20000);
  log = executions(s);
  ck_assert_uint_eq(runs_of(log, id), 2);
  proc_stop(a);
  proc_stop(b);
  scenario_free(s);
}
END_TEST

/* R6: a task running for five leases, its worker healthy beside a peer,
 * is never reclaimed. */
START_TEST(test_long_task_of_a_live_worker_is_never_reclaimed)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "r6");
  g_autofree gchar *id = NULL;
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GPtrArray) log = NULL;

  a = proc_start(s, "wA", "--visibility-timeout=1000", NULL);
  b = proc_start(s, "wB", "--visibility-timeout=1000", NULL);
  proc_wait_ready(s, a);
  proc_wait_ready(s, b);
  id = enqueue_task(s, "t.sleep", "{\"ms\": 5000}");
  r = final_result(s, id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  log = executions(s);
  ck_assert_uint_eq(log->len, 1);
  ck_assert_uint_eq(((Execution *)log->pdata[0])->count, 1);
  proc_stop(a);
  proc_stop(b);
  ck_assert(!proc_stderr_contains(a, "deliveries from dead or stalled"));
  ck_assert(!proc_stderr_contains(b, "deliveries from dead or stalled"));
  wait_drained(s, 10000);
  scenario_free(s);
}
END_TEST

/* R23: SIGTERM during a task longer than shutdown_timeout: the worker
 * leaves it in the PEL, drops its liveness key and exits; a peer takes it
 * without waiting for a lease and completes it. */
static gboolean
proc_logged_gone(gpointer data)
{
  return proc_stderr_contains(data, "no worker holds this delivery any more");
}

/* A delivery that vanished from Redis while it ran (a restart without its
 * latest writes; here deleted by hand) is reported as gone when its settle
 * is refused, not as taken by another worker. */
START_TEST(test_settle_of_a_vanished_delivery_says_so)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "gone");
  g_autofree gchar *id = NULL;
  g_autofree gchar *entry = NULL;
  g_autoptr(Proc) a = NULL;
  g_autoptr(SluiceResult) r = NULL;
  redisReply *p;

  a = proc_start(s, "wA", "--concurrency=1", "--prefetch=0", NULL);
  id = enqueue_task(s, "t.sleep", "{\"ms\": 1500}");
  wait_log_lines(s, 1);
  p = sluice_test_redis_command(
      shared, "XPENDING {%s}:s:default " GROUP " - + 1", s->ns);
  ck_assert(p != NULL && p->type == REDIS_REPLY_ARRAY && p->elements == 1);
  entry =
      g_strndup(p->element[0]->element[0]->str, p->element[0]->element[0]->len);
  freeReplyObject(p);
  ck_assert_int_eq(sluice_test_redis_integer(shared,
                                             "XACK {%s}:s:default " GROUP " %s",
                                             s->ns, entry),
                   1);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "XDEL {%s}:s:default %s", s->ns, entry),
      1);
  r = final_result(s, id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  ck_assert(sluice_test_wait_for(proc_logged_gone, a, 30000));
  ck_assert(!proc_stderr_contains(a, "another worker owns"));
  proc_stop(a);
  scenario_free(s);
}
END_TEST

START_TEST(test_sigterm_gives_a_long_task_to_a_peer)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "r23");
  g_autofree gchar *id = NULL;
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GPtrArray) log = NULL;
  g_autoptr(GBytes) record = NULL;
  g_autoptr(GError) error = NULL;

  a = proc_start(s, "wA", "--concurrency=1", "--prefetch=0",
                 "--visibility-timeout=1000", "--shutdown-timeout=300", NULL);
  id = enqueue_task(s, "t.sleep", "{\"ms\": 3000}");
  wait_log_lines(s, 1);
  proc_stop(a);
  ck_assert(proc_stderr_contains(a, "released for redelivery"));

  /* Given back, not acknowledged as done: requeued at the end of the
   * stream for any peer's next fetch, and off the pending list. */
  ck_assert_int_eq(sluice_test_redis_pending(shared, s->ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, s->ns, "default"), 1);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "EXISTS {%s}:alive:wA", s->ns), 0);
  ck_assert(sluice_broker_get_record(s->broker, id, &record, &error));
  ck_assert_ptr_null(record);

  b = proc_start(s, "wB", "--concurrency=1", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  r = final_result(s, id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  ck_assert_uint_eq(sluice_result_get_attempt(r), 1);
  log = executions(s);
  ck_assert_uint_eq(log->len, 2);
  /* A release is not a delivery toward max_deliveries. */
  ck_assert_uint_eq(((Execution *)log->pdata[1])->count, 1);
  ck_assert_int_eq(((Execution *)log->pdata[1])->pid, (gint)b->pid);
  proc_stop(b);
  wait_drained(s, 10000);
  scenario_free(s);
}
END_TEST

/* R23's other half: SIGTERM with short tasks running finishes them and
 * acknowledges them before exiting. */
START_TEST(test_sigterm_finishes_and_acks_short_tasks)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "f2");
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(Proc) a = NULL;
  g_autoptr(GPtrArray) log = NULL;

  a = proc_start(s, "wA", "--concurrency=4", "--prefetch=0",
                 "--visibility-timeout=1000", "--shutdown-timeout=20000", NULL);
  for (guint i = 0; i < 4; i++)
    g_ptr_array_add(ids, enqueue_task(s, "t.sleep", "{\"ms\": 700}"));
  wait_log_lines(s, 4);
  proc_stop(a);

  ck_assert_int_eq(sluice_test_redis_pending(shared, s->ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, s->ns, "default"), 0);
  ck_assert_uint_eq(count_final_records(s, ids), 4);
  log = executions(s);
  ck_assert_uint_eq(log->len, 4);
  for (guint i = 0; i < ids->len; i++) {
    g_autoptr(SluiceResult) r = final_result(s, ids->pdata[i]);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  }
  scenario_free(s);
}
END_TEST

/* R24: SIGTERM while the worker is blocked in XREADGROUP, with a task
 * arriving at that moment: whether the stopping worker ran it, handed it
 * back pending, or never fetched it, a peer sees it through. */
START_TEST(test_sigterm_during_a_blocked_fetch_loses_nothing)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  Scenario *s = scenario_new(shared, "r24");
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(Proc) b = NULL;

  for (guint i = 0; i < 5; i++) {
    g_autofree gchar *name = g_strdup_printf("w%u", i);
    g_autoptr(Proc) a = proc_start(s, name, "--concurrency=1", "--prefetch=0",
                                   "--visibility-timeout=1000", NULL);
    proc_wait_ready(s, a);
    g_usleep(100 * 1000); /* blocked in its fetch by now */
    proc_signal(a, SIGTERM);
    g_ptr_array_add(ids, enqueue_task(s, "t.sleep", "{\"ms\": 50}"));
    ck_assert(proc_wait(a, 30000));
    ck_assert_msg(proc_exited_ok(a), "worker %s: status 0x%x", name,
                  (unsigned)a->status);
  }
  b = proc_start(s, "wB", "--visibility-timeout=1000", NULL);
  for (guint i = 0; i < ids->len; i++) {
    g_autoptr(SluiceResult) r = final_result(s, ids->pdata[i]);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  }
  proc_stop(b);
  wait_drained(s, 10000);
  scenario_free(s);
}
END_TEST

typedef struct {
  Scenario *s;
  GPtrArray *ids; /* acknowledged to the producer */
  guint total;
  gint stop;
} Producer;

/* Enqueues t.log tasks with caller-chosen ids, retrying each until Redis
 * acknowledges it (the id makes a retry idempotent). */
static gpointer
producer_main(gpointer data)
{
  Producer *p = data;

  for (guint i = 0; i < p->total && !g_atomic_int_get(&p->stop); i++) {
    g_autofree gchar *id = g_strdup_printf("job-%05u", i);
    SluiceEnqueueOptions eo;

    sluice_enqueue_options_init(&eo);
    eo.id = id;
    for (;;) {
      g_autoptr(GError) error = NULL;
      g_autofree gchar *got =
          sluice_client_enqueue(p->s->client, "t.log", NULL, &eo, &error);
      if (got != NULL)
        break;
      g_usleep(20 * 1000);
    }
    g_ptr_array_add(p->ids, g_steal_pointer(&id));
  }
  return NULL;
}

static gboolean
producer_halfway(gpointer data)
{
  Producer *p = data;

  return (guint)g_atomic_int_get((gint *)&p->ids->len) >= p->total / 2;
}

/* R13: Redis killed with SIGKILL and restarted (appendonly, appendfsync
 * always) while tasks flow: nothing acknowledged to the producer is lost,
 * and the workers carry on without a restart. */
START_TEST(test_redis_restart_loses_nothing_acknowledged)
{
  SluiceTestRedisOptions opts = {.appendonly = TRUE};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(&opts);
  Scenario *s = scenario_new(server, "r13");
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) log = NULL;
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  Producer producer = {s, ids, 3000, 0};
  GThread *thread;

  a = proc_start(s, "wA", "--visibility-timeout=1000", NULL);
  b = proc_start(s, "wB", "--visibility-timeout=1000", NULL);
  thread = g_thread_new("producer", producer_main, &producer);
  ck_assert(sluice_test_wait_for(producer_halfway, &producer, 30000));
  sluice_test_redis_kill(server, SIGKILL);
  g_usleep(300 * 1000);
  ck_assert(sluice_test_redis_restart(server, &error));
  g_thread_join(thread);
  ck_assert_uint_eq(ids->len, 3000);

  for (guint i = 0; i < ids->len; i++) {
    g_autoptr(SluiceResult) r = final_result(s, ids->pdata[i]);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  }
  wait_drained(s, 30000);
  proc_stop(a);
  proc_stop(b);
  log = executions(s);
  for (guint i = 0; i < log->len; i++)
    g_hash_table_add(seen, ((Execution *)log->pdata[i])->id);
  ck_assert_uint_eq(g_hash_table_size(seen), 3000);
  g_print("redis restart: 3000 acknowledged, 0 lost, %u ran twice\n",
          log->len - 3000);
  scenario_free(s);
}
END_TEST

/* R17: Redis stalled for more than three leases (SIGSTOP), then resumed:
 * every liveness key and every pending entry looks expired to it, yet the
 * idle peer does not take over the tasks its live neighbour still runs. */
START_TEST(test_redis_stall_causes_no_mass_reclaim)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  Scenario *s = scenario_new(server, "r17");
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  g_autoptr(GPtrArray) log = NULL;
  guint twice = 0;

  /* A runs all four; B, beside it, has room for four more. */
  a = proc_start(s, "wA", "--concurrency=4", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  for (guint i = 0; i < 4; i++)
    g_ptr_array_add(ids, enqueue_task(s, "t.sleep", "{\"ms\": 6000}"));
  wait_log_lines(s, 4);
  b = proc_start(s, "wB", "--concurrency=4", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  proc_wait_ready(s, b);
  g_usleep(400 * 1000); /* B's reclaimer is ticking */
  kill(sluice_test_redis_pid(server), SIGSTOP);
  g_usleep(3500 * 1000);
  kill(sluice_test_redis_pid(server), SIGCONT);

  for (guint i = 0; i < ids->len; i++) {
    g_autoptr(SluiceResult) r = final_result(s, ids->pdata[i]);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  }
  wait_drained(s, 20000);
  proc_stop(a);
  proc_stop(b);
  log = executions(s);
  for (guint i = 0; i < ids->len; i++) {
    guint n = runs_of(log, ids->pdata[i]);
    ck_assert_uint_le(n, 2); /* bounded in any case */
    if (n == 2)
      twice++;
  }
  ck_assert_msg(twice == 0, "%u of 4 tasks ran twice after the stall", twice);
  scenario_free(s);
}
END_TEST

typedef struct {
  SluiceTestRedis *server;
  gint stop;
  guint kills;
} Killer;

static gpointer
killer_main(gpointer data)
{
  Killer *k = data;
  redisContext *c = sluice_test_redis_connect(k->server);

  while (c != NULL && !g_atomic_int_get(&k->stop)) {
    redisReply *r = redisCommand(c, "CLIENT KILL TYPE normal SKIPME yes");
    if (r != NULL)
      freeReplyObject(r);
    k->kills++;
    g_usleep(200 * 1000);
  }
  if (c != NULL)
    redisFree(c);
  return NULL;
}

/* R19: every connection killed every 200 ms while a run drains: progress
 * continues and nothing is lost. */
START_TEST(test_killed_connections_lose_nothing)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  Scenario *s = scenario_new(server, "r19");
  g_autoptr(GPtrArray) ids = enqueue_logs(s, 5000);
  g_autoptr(Proc) a = NULL;
  g_autoptr(Proc) b = NULL;
  Killer killer = {server, 0, 0};
  GThread *thread;

  thread = g_thread_new("killer", killer_main, &killer);
  a = proc_start(s, "wA", "--visibility-timeout=1000", NULL);
  b = proc_start(s, "wB", "--visibility-timeout=1000", NULL);
  wait_drained(s, 120000);
  g_atomic_int_set(&killer.stop, 1);
  g_thread_join(thread);
  proc_stop(a);
  proc_stop(b);
  ck_assert_uint_gt(killer.kills, 0);
  ck_assert_uint_eq(count_final_records(s, ids), ids->len);
  scenario_free(s);
}
END_TEST

/* ---- Suite --------------------------------------------------------------- */

static Suite *
faults_suite(void)
{
  Suite *s = suite_create("redis-reliable-faults");
  TCase *faults = tcase_create("faults");

  tcase_add_unchecked_fixture(faults, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(faults, 180);
  tcase_add_test(faults, test_killed_worker_long_tasks_are_completed_by_a_peer);
  tcase_add_test(faults, test_kill_during_a_run_loses_nothing);
  tcase_add_test(faults, test_poison_message_is_dead_lettered);
  tcase_add_test(faults, test_stalled_worker_loses_its_lease_and_its_settle);
  tcase_add_test(faults,
                 test_stalled_worker_whose_task_a_peer_finished_lost_its_lease);
  tcase_add_test(faults, test_long_task_of_a_live_worker_is_never_reclaimed);
  tcase_add_test(faults, test_sigterm_gives_a_long_task_to_a_peer);
  tcase_add_test(faults, test_settle_of_a_vanished_delivery_says_so);
  tcase_add_test(faults, test_sigterm_finishes_and_acks_short_tasks);
  tcase_add_test(faults, test_sigterm_during_a_blocked_fetch_loses_nothing);
  tcase_add_test(faults, test_redis_restart_loses_nothing_acknowledged);
  tcase_add_test(faults, test_redis_stall_causes_no_mass_reclaim);
  tcase_add_test(faults, test_killed_connections_lose_nothing);
  suite_add_tcase(s, faults);
  return s;
}

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  SRunner *runner = srunner_create(faults_suite());
  int failed;

  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

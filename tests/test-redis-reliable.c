/* test-redis-reliable.c - the redis-reliable broker against real
 * redis-servers and real worker processes.
 *
 * Three test cases:
 *  - "contract": the slots whose behaviour is reliable mode's own (fetch
 *    priority and caps, fencing, heartbeats, reclaim, release, group
 *    re-creation, consumer clean-up, stats, OOM), at the broker level, on
 *    one shared server; each test runs in its own process (CK_FORK) and
 *    namespace ("t<pid>").
 *  - "faults": rows of the fault matrix of docs/redis.md (R1, R2/R3, R5,
 *    R6, R8, R13, R17, R19, R23, R24), with worker processes
 *    (tests/helpers/worker-proc) killed, stopped and signalled by pid, and
 *    Redis killed, restarted and stalled. The oracle is the execution log
 *    the worker processes append to (one line per execution: task id,
 *    delivery count, pid), plus the final records in Redis.
 *  - "load": R25, a run of 100,000 tasks that must leave the streams, the
 *    PEL and the dead letters empty; it prints Redis CPU and commands per
 *    task.
 *
 * No assertion depends on timing: every wait is for a condition, bounded
 * generously, and leases are short (500-1000 ms) so each test stays well
 * under 30 s. Worker processes get PR_SET_PDEATHSIG, so a test that fails
 * or times out leaves none behind.
 *
 * To add a test: write START_TEST and add it to the right TCase in
 * reliable_suite(); scenario_new() gives a namespace, a scratch directory,
 * a broker and a client, and proc_start() a worker process.
 */
#include "config.h"

#include "core/sluice-private.h"

#include <check.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brokers/redis/transport-reliable.h"
#include "brokers/redis/redis-broker.h"
#include "tests/helpers/fault-proxy.h"
#include "tests/helpers/redis-server.h"

#define GROUP "sluice"

static SluiceTestRedis *shared;

/* ---- Log capture ----------------------------------------------------------
 * Installed once in main(); each test is a fresh forked process. */

static GMutex log_lock;
static GString *log_text;

static GLogWriterOutput
capture_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
               gpointer user_data)
{
  g_mutex_lock(&log_lock);
  if (log_text == NULL)
    log_text = g_string_new(NULL);
  for (gsize i = 0; i < n_fields; i++) {
    if (g_strcmp0(fields[i].key, "MESSAGE") == 0) {
      g_string_append(log_text, fields[i].value);
      g_string_append_c(log_text, '\n');
    }
  }
  g_mutex_unlock(&log_lock);
  return g_log_writer_default(level, fields, n_fields, user_data);
}

static gboolean
log_contains(const gchar *needle)
{
  gboolean found;

  g_mutex_lock(&log_lock);
  found = log_text != NULL && strstr(log_text->str, needle) != NULL;
  g_mutex_unlock(&log_lock);
  return found;
}

/* ---- Fixtures and helpers -------------------------------------------------
 */

static void
shared_setup(void)
{
  g_autoptr(GError) error = NULL;

  shared = sluice_test_redis_start(NULL, &error);
  if (shared == NULL) {
    fprintf(stderr, "cannot start redis-server: %s\n", error->message);
    exit(1);
  }
}

static void
shared_teardown(void)
{
  g_clear_pointer(&shared, sluice_test_redis_stop);
}

static SluiceTestRedis *
own_server(const SluiceTestRedisOptions *options)
{
  g_autoptr(GError) error = NULL;
  SluiceTestRedis *server = sluice_test_redis_start(options, &error);

  ck_assert_msg(server != NULL, "redis-server: %s",
                error != NULL ? error->message : "?");
  return server;
}

static SluiceBroker *
broker_for(const gchar *url, const gchar *ns)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;
  SluiceBroker *broker;

  sluice_redis_options_init(&options);
  options.mode = SLUICE_REDIS_RELIABLE;
  options.url = url;
  options.namespace_ = ns;
  options.reconnect_max_backoff_ms = 200;
  broker = sluice_redis_broker_new(&options, NULL, &error);
  ck_assert_msg(broker != NULL, "broker: %s",
                error != NULL ? error->message : "?");
  return broker;
}

static gchar *
test_namespace(void)
{
  return g_strdup_printf("t%d", (int)getpid());
}

static SluiceBroker *
test_broker(void)
{
  g_autofree gchar *ns = test_namespace();

  return broker_for(sluice_test_redis_url(shared), ns);
}

static GBytes *
text(const gchar *s)
{
  return g_bytes_new(s, strlen(s));
}

static gboolean
bytes_is(GBytes *b, const gchar *s)
{
  gsize len = 0;
  gconstpointer data;

  if (b == NULL)
    return s == NULL;
  data = g_bytes_get_data(b, &len);
  return s != NULL && len == strlen(s) && memcmp(data, s, len) == 0;
}

static gchar *
bytes_str(GBytes *b)
{
  gsize len = 0;
  gconstpointer data = g_bytes_get_data(b, &len);

  return g_strndup(data, len);
}

static void
enqueue(SluiceBroker *b, const gchar *id, const gchar *queue,
        const gchar *payload)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = text(payload);
  SluiceSubmit item = {.id = id, .queue = queue, .payload = p};

  ck_assert_msg(sluice_broker_enqueue(b, &item, 1, &error), "enqueue: %s",
                error != NULL ? error->message : "?");
}

static GPtrArray *
fetch_as(SluiceBroker *b, const gchar *consumer, const gchar *const *queues,
         guint max, gint64 block_ms)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  ck_assert_msg(
      sluice_broker_fetch(b, consumer, queues, max, block_ms, out, &error),
      "fetch: %s", error != NULL ? error->message : "?");
  return out;
}

static GPtrArray *
reclaim_as(SluiceBroker *b, const gchar *consumer, const gchar *const *queues,
           guint max, gint64 idle_ms)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  ck_assert_msg(
      sluice_broker_reclaim(b, consumer, queues, max, idle_ms, out, &error),
      "reclaim: %s", error != NULL ? error->message : "?");
  return out;
}

static void
heartbeat(SluiceBroker *b, const gchar *consumer, gint64 lease_ms,
          GPtrArray *held)
{
  g_autoptr(GError) error = NULL;

  ck_assert_msg(sluice_broker_heartbeat(
                    b, consumer, lease_ms,
                    held != NULL ? (SluiceDelivery *const *)held->pdata : NULL,
                    held != NULL ? held->len : 0, &error),
                "heartbeat: %s", error != NULL ? error->message : "?");
}

static SluiceDelivery *
delivery_at(GPtrArray *a, guint i)
{
  return g_ptr_array_index(a, i);
}

static const gchar *const q_default[] = {"default", NULL};

/* Settles one delivery; returns its status. */
static SluiceSettleStatus
settle_one(SluiceBroker *b, const gchar *consumer, SluiceSettlement *s)
{
  g_autoptr(GError) error = NULL;

  ck_assert_msg(sluice_broker_settle(b, consumer, s, 1, &error), "settle: %s",
                error != NULL ? error->message : "?");
  return s->status;
}

static SluiceSettleStatus
ack(SluiceBroker *b, const gchar *consumer, SluiceDelivery *d)
{
  SluiceSettlement s = {.delivery = d, .action = SLUICE_SETTLE_ACK};

  return settle_one(b, consumer, &s);
}

static gint64
xlen(SluiceTestRedis *server, const gchar *ns, const gchar *queue)
{
  return sluice_test_redis_integer(server, "XLEN {%s}:s:%s", ns, queue);
}

/* The group's pending count for @queue (0 without a group). */
static gint64
pending(SluiceTestRedis *server, const gchar *ns, const gchar *queue)
{
  redisReply *r =
      sluice_test_redis_command(server, "XPENDING {%s}:s:%s " GROUP, ns, queue);
  gint64 n = 0;

  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
      r->element[0]->type == REDIS_REPLY_INTEGER)
    n = r->element[0]->integer;
  if (r != NULL)
    freeReplyObject(r);
  return n;
}

/* Who holds @handle, and its delivery count; NULL if it is not pending. */
static gchar *
owner_of(SluiceTestRedis *server, const gchar *ns, const gchar *queue,
         const gchar *handle, gint64 *out_count)
{
  redisReply *r =
      sluice_test_redis_command(server, "XPENDING {%s}:s:%s " GROUP " %s %s 1",
                                ns, queue, handle, handle);
  gchar *owner = NULL;

  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
    redisReply *e = r->element[0];
    owner = g_strndup(e->element[1]->str, e->element[1]->len);
    if (out_count != NULL)
      *out_count = e->element[3]->integer;
  }
  if (r != NULL)
    freeReplyObject(r);
  return owner;
}

static gint64
consumers_in_group(SluiceTestRedis *server, const gchar *ns, const gchar *queue)
{
  redisReply *r = sluice_test_redis_command(
      server, "XINFO CONSUMERS {%s}:s:%s " GROUP, ns, queue);
  gint64 n = -1;

  if (r != NULL && r->type == REDIS_REPLY_ARRAY)
    n = (gint64)r->elements;
  if (r != NULL)
    freeReplyObject(r);
  return n;
}

static gint64
stale_settles(SluiceBroker *b)
{
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats stats;
  gint64 n;

  sluice_broker_stats_init(&stats);
  ck_assert_msg(sluice_broker_stats(b, NULL, &stats, &error), "stats: %s",
                error != NULL ? error->message : "?");
  n = stats.stale_settles;
  sluice_broker_stats_clear(&stats);
  return n;
}

static gint64
queue_ready(SluiceBrokerStats *stats, const gchar *name)
{
  for (guint i = 0; i < stats->queues->len; i++) {
    SluiceQueueStats *q = g_ptr_array_index(stats->queues, i);
    if (strcmp(q->name, name) == 0)
      return q->ready;
  }
  return -1;
}

/* Polls @check every 20 ms for up to @timeout_ms of real time. */
static gboolean
wait_for(gboolean (*check)(gpointer), gpointer data, gint64 timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  while (!check(data)) {
    if (g_get_monotonic_time() >= deadline)
      return check(data);
    g_usleep(20 * 1000);
  }
  return TRUE;
}

/* ---- contract: fetch --------------------------------------------------- */

START_TEST(test_fetch_ack_deletes_the_entry)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) rec = text("done");
  g_autoptr(GBytes) again = text("again");
  g_autoptr(GBytes) read = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) dead =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  SluiceDeadLetter dl = {0};
  SluiceSettlement s[4] = {{0}};

  ck_assert_str_eq(sluice_broker_get_name(b), "redis-reliable");
  ck_assert_uint_eq(sluice_broker_get_caps(b),
                    SLUICE_BROKER_CAP_SHARED | SLUICE_BROKER_CAP_DURABLE |
                        SLUICE_BROKER_CAP_LEASES | SLUICE_BROKER_CAP_FENCING |
                        SLUICE_BROKER_CAP_IN_FLIGHT);
  enqueue(b, "m1", "default", "p1");
  enqueue(b, "m2", "default", "p2");
  enqueue(b, "m3", "default", "p3");
  enqueue(b, "m4", "default", "p4");
  got = fetch_as(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 4);
  for (guint i = 0; i < 4; i++) {
    g_autofree gchar *want = g_strdup_printf("p%u", i + 1);
    ck_assert(bytes_is(delivery_at(got, i)->payload, want));
    ck_assert_ptr_nonnull(delivery_at(got, i)->handle);
    ck_assert_uint_eq(delivery_at(got, i)->delivery_count, 1);
    ck_assert_str_eq(delivery_at(got, i)->queue, "default");
  }
  ck_assert_int_eq(xlen(shared, ns, "default"), 4);
  ck_assert_int_eq(pending(shared, ns, "default"), 4);
  /* R15: the test server keeps nothing on disk, and the first fetch says
   * what that means for reliable mode. */
  ck_assert(log_contains("runs with appendonly no"));

  dl.task_id = "m4";
  dl.task = "t.x";
  dl.reason = "max_attempts";
  dl.detail = "it failed";
  s[0] = (SluiceSettlement){.delivery = delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "m1",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = delivery_at(got, 1),
                            .action = SLUICE_SETTLE_ACK};
  s[2] = (SluiceSettlement){.delivery = delivery_at(got, 2),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "m3",
                            .reschedule_payload = again,
                            .reschedule_at = 5000};
  s[3] = (SluiceSettlement){.delivery = delivery_at(got, 3),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "m4",
                            .dead_letter = &dl};
  ck_assert(sluice_broker_settle(b, "c1", s, 4, &error));
  for (guint i = 0; i < 4; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_DONE);

  /* Acknowledged entries are gone from the stream and the PEL. */
  ck_assert_int_eq(xlen(shared, ns, "default"), 0);
  ck_assert_int_eq(pending(shared, ns, "default"), 0);
  ck_assert(sluice_broker_get_record(b, "m1", &read, &error));
  ck_assert(bytes_is(read, "done"));
  ck_assert_int_eq(sluice_test_redis_integer(shared, "ZCARD {%s}:schedule", ns),
                   1);
  ck_assert(sluice_broker_dlq_list(b, NULL, 10, dead, &error));
  ck_assert_uint_eq(dead->len, 1);
  ck_assert(bytes_is(((SluiceDeadLetter *)dead->pdata[0])->payload, "p4"));
  ck_assert_uint_eq(((SluiceDeadLetter *)dead->pdata[0])->deliveries, 1);

  /* A settle repeated after a lost reply finds nothing to own: refused as
   * gone (no consumer holds it), and nothing is written twice. */
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 1)), SLUICE_SETTLE_GONE);
}
END_TEST

START_TEST(test_fetch_keeps_strict_priority)
{
  g_autoptr(SluiceBroker) b = test_broker();
  const gchar *const queues[] = {"hi", "lo", NULL};
  g_autoptr(GPtrArray) first = NULL;
  g_autoptr(GPtrArray) second = NULL;
  g_autoptr(GPtrArray) third = NULL;

  enqueue(b, "l1", "lo", "l1");
  enqueue(b, "l2", "lo", "l2");
  enqueue(b, "h1", "hi", "h1");
  enqueue(b, "h2", "hi", "h2");
  first = fetch_as(b, "c1", queues, 3, 0);
  ck_assert_uint_eq(first->len, 3);
  ck_assert(bytes_is(delivery_at(first, 0)->payload, "h1"));
  ck_assert(bytes_is(delivery_at(first, 1)->payload, "h2"));
  ck_assert(bytes_is(delivery_at(first, 2)->payload, "l1"));
  ck_assert_str_eq(delivery_at(first, 2)->queue, "lo");

  enqueue(b, "h3", "hi", "h3");
  second = fetch_as(b, "c1", queues, 1, 1000);
  ck_assert_uint_eq(second->len, 1);
  ck_assert(bytes_is(delivery_at(second, 0)->payload, "h3"));
  third = fetch_as(b, "c1", queues, 10, 1000);
  ck_assert_uint_eq(third->len, 1);
  ck_assert(bytes_is(delivery_at(third, 0)->payload, "l2"));
}
END_TEST

/* The blocking read over several queues answers up to COUNT per queue when
 * they all have data at once: the transport keeps what was asked for and
 * hands the rest back, never losing or holding it. */
START_TEST(test_blocking_fetch_never_returns_more_than_asked)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  const gchar *const queues[] = {"a", "b", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) rest = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 1; i <= 3; i++) {
    g_autofree gchar *a = g_strdup_printf("a%u", i);
    g_autofree gchar *bb = g_strdup_printf("b%u", i);
    enqueue(b, a, "a", a);
    enqueue(b, bb, "b", bb);
  }
  sluice_redis__reliable_test_skip_priority_read(b, TRUE);
  got = fetch_as(b, "c1", queues, 2, 1000);
  ck_assert_uint_eq(got->len, 2);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "a1"));
  ck_assert(bytes_is(delivery_at(got, 1)->payload, "a2"));
  /* Only what was handed out is pending; b1 and b2 are ready again. */
  ck_assert_int_eq(pending(shared, ns, "a"), 2);
  ck_assert_int_eq(pending(shared, ns, "b"), 0);
  ck_assert_int_eq(xlen(shared, ns, "b"), 3);

  sluice_redis__reliable_test_skip_priority_read(b, FALSE);
  rest = fetch_as(b, "c1", queues, 10, 0);
  ck_assert_uint_eq(rest->len, 4);
  ck_assert(bytes_is(delivery_at(rest, 0)->payload, "a3"));
  for (guint i = 0; i < rest->len; i++) {
    ck_assert_uint_eq(delivery_at(rest, i)->delivery_count, 1);
    g_hash_table_add(seen, bytes_str(delivery_at(rest, i)->payload));
  }
  ck_assert(g_hash_table_contains(seen, "b1"));
  ck_assert(g_hash_table_contains(seen, "b2"));
  ck_assert(g_hash_table_contains(seen, "b3"));
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  const gchar *const *queues;
  gint64 block_ms;
  GPtrArray *got;
} FetchJob;

static gpointer
fetch_thread(gpointer data)
{
  FetchJob *job = data;

  job->got = fetch_as(job->broker, "c1", job->queues, 5, job->block_ms);
  return NULL;
}

static gboolean
someone_blocked(gpointer data)
{
  return sluice_test_redis_info_int(shared, "clients", "blocked_clients") >= 1;
}

START_TEST(test_blocking_fetch_wakes_on_data_and_on_wakeup)
{
  g_autoptr(SluiceBroker) b = test_broker();
  const gchar *const queues[] = {"a", "b", NULL};
  FetchJob job = {b, queues, 20000, NULL};
  GThread *thread;

  /* Blocked on both queues, woken by an entry on the second. */
  thread = g_thread_new("fetch", fetch_thread, &job);
  ck_assert(wait_for(someone_blocked, NULL, 10000));
  enqueue(b, "b1", "b", "b1");
  g_thread_join(thread);
  ck_assert_uint_eq(job.got->len, 1);
  ck_assert_str_eq(delivery_at(job.got, 0)->queue, "b");
  g_ptr_array_unref(job.got);

  /* One queue, woken by `wakeup` with nothing. */
  job.queues = q_default;
  thread = g_thread_new("fetch", fetch_thread, &job);
  ck_assert(wait_for(someone_blocked, NULL, 10000));
  sluice_broker_wakeup(b);
  g_thread_join(thread);
  ck_assert_uint_eq(job.got->len, 0);
  g_ptr_array_unref(job.got);
}
END_TEST

/* ---- contract: fencing, heartbeats, reclaim ------------------------------ */

START_TEST(test_fencing_refuses_a_late_settle)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) taken = NULL;
  g_autoptr(GBytes) late = text("late");
  g_autoptr(GBytes) retry = text("retry");
  g_autoptr(GBytes) read = NULL;
  g_autoptr(GError) error = NULL;
  SluiceDeadLetter dl = {.reason = "max_attempts"};
  SluiceSettlement s[3] = {{0}};

  enqueue(b, "x1", "default", "x1");
  enqueue(b, "x2", "default", "x2");
  enqueue(b, "x3", "default", "x3");
  /* c1 never heartbeats: it has no lease, so c2 may take its entries. */
  got = fetch_as(b, "c1", q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  heartbeat(b, "c2", 60000, NULL);
  taken = reclaim_as(b, "c2", q_default, 10, 60000);
  ck_assert_uint_eq(taken->len, 3);
  for (guint i = 0; i < 3; i++) {
    ck_assert_str_eq(delivery_at(taken, i)->handle,
                     delivery_at(got, i)->handle);
    ck_assert_uint_eq(delivery_at(taken, i)->delivery_count, 2);
    ck_assert(g_bytes_equal(delivery_at(taken, i)->payload,
                            delivery_at(got, i)->payload));
  }

  s[0] = (SluiceSettlement){.delivery = delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "x1",
                            .record = late,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = delivery_at(got, 1),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "x2",
                            .reschedule_payload = retry,
                            .reschedule_at = 1};
  s[2] = (SluiceSettlement){.delivery = delivery_at(got, 2),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "x3",
                            .dead_letter = &dl};
  ck_assert(sluice_broker_settle(b, "c1", s, 3, &error));
  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_STALE);
  /* Refused: not acknowledged, not scheduled, not buried; the record is
   * written all the same (the last to finish wins). */
  ck_assert_int_eq(pending(shared, ns, "default"), 3);
  ck_assert_int_eq(sluice_test_redis_integer(shared, "ZCARD {%s}:schedule", ns),
                   0);
  ck_assert_int_eq(sluice_test_redis_integer(shared, "XLEN {%s}:dlq", ns), 0);
  ck_assert(sluice_broker_get_record(b, "x1", &read, &error));
  ck_assert(bytes_is(read, "late"));
  ck_assert_int_eq(stale_settles(b), 3);
  /* Stats of another process see them: the counter lives in Redis. */
  {
    g_autoptr(SluiceBroker) other = test_broker();
    ck_assert_int_eq(stale_settles(other), 3);
  }

  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(ack(b, "c2", delivery_at(taken, i)), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(pending(shared, ns, "default"), 0);
  ck_assert_int_eq(xlen(shared, ns, "default"), 0);
}
END_TEST

START_TEST(test_reclaim_takes_only_dead_or_overdue_deliveries)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) live = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(GPtrArray) r0 = NULL;
  g_autoptr(GPtrArray) r1 = NULL;
  g_autoptr(GPtrArray) r2 = NULL;
  g_autoptr(GPtrArray) r3 = NULL;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("e%u", i);
    enqueue(b, id, "default", id);
  }
  heartbeat(b, "alive", 60000, NULL);
  live = fetch_as(b, "alive", q_default, 2, 0);
  dead = fetch_as(b, "gone", q_default, 1, 0);
  ck_assert_uint_eq(live->len, 2);
  ck_assert_uint_eq(dead->len, 1);

  /* A reclaimer without a lease of its own takes nothing: it may be back
   * from a stall in which every key lapsed. */
  r0 = reclaim_as(b, "r0", q_default, 10, 60000);
  ck_assert_uint_eq(r0->len, 0);
  ck_assert(log_contains("consumer r0 holds no lease"));

  /* Only the dead consumer's entry; never a live one's under the limit
   * (r1 itself holds a lease, so r2 finds nothing to take). */
  heartbeat(b, "r1", 60000, NULL);
  heartbeat(b, "r2", 60000, NULL);
  heartbeat(b, "r3", 60000, NULL);
  r1 = reclaim_as(b, "r1", q_default, 10, 60000);
  ck_assert_uint_eq(r1->len, 1);
  ck_assert_str_eq(delivery_at(r1, 0)->handle, delivery_at(dead, 0)->handle);
  ck_assert_uint_eq(delivery_at(r1, 0)->delivery_count, 2);
  r2 = reclaim_as(b, "r2", q_default, 10, 60000);
  ck_assert_uint_eq(r2->len, 0);

  /* A live consumer's entries that sat idle past the limit (it held them
   * without renewing them) are taken too. */
  g_usleep(500 * 1000);
  r3 = reclaim_as(b, "r3", q_default, 1, 300);
  ck_assert_uint_eq(r3->len, 1); /* never more than asked */
  ck_assert_uint_eq(delivery_at(r3, 0)->delivery_count, 2);
}
END_TEST

START_TEST(test_heartbeat_keeps_held_deliveries_and_reports_a_lapse)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GPtrArray) held = NULL;
  g_autoptr(GPtrArray) none = NULL;
  g_autoptr(GPtrArray) taken = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *owner = NULL;
  g_autofree gchar *owner2 = NULL;
  gint64 count = 0;

  enqueue(b, "long", "default", "long");
  heartbeat(b, "c1", 600, NULL);
  held = fetch_as(b, "c1", q_default, 1, 0);
  ck_assert_uint_eq(held->len, 1);
  /* Renewed for twice the lease: neither the consumer nor its entry look
   * dead or idle, and the self-claims do not count as deliveries. */
  for (guint i = 0; i < 5; i++) {
    g_usleep(250 * 1000);
    heartbeat(b, "c1", 600, held);
  }
  heartbeat(b, "c2", 60000, NULL);
  none = reclaim_as(b, "c2", q_default, 10, 600);
  ck_assert_uint_eq(none->len, 0);
  owner = owner_of(shared, ns, "default", delivery_at(held, 0)->handle, &count);
  ck_assert_str_eq(owner, "c1");
  ck_assert_int_eq(count, 1);

  /* Renewals stop (a paused process): the lease lapses and a peer takes
   * the entry over. */
  g_usleep(800 * 1000);
  heartbeat(b, "c3", 60000, NULL);
  taken = reclaim_as(b, "c3", q_default, 10, 600);
  ck_assert_uint_eq(taken->len, 1);
  ck_assert_uint_eq(delivery_at(taken, 0)->delivery_count, 2);

  /* The late renewal renews, does not take the entry back, and fails so
   * that the worker logs "lease lost". */
  ck_assert(!sluice_broker_heartbeat(
      b, "c1", 600, (SluiceDelivery *const *)held->pdata, 1, &error));
  ck_assert_msg(strstr(error->message, "LEASE") != NULL &&
                    strstr(error->message, "1 of them") != NULL,
                "%s", error->message);
  g_clear_error(&error);
  heartbeat(b, "c1", 600, held);
  owner2 =
      owner_of(shared, ns, "default", delivery_at(held, 0)->handle, &count);
  ck_assert_str_eq(owner2, "c3");
  ck_assert_int_eq(count, 2);
  ck_assert_int_eq(ack(b, "c1", delivery_at(held, 0)), SLUICE_SETTLE_STALE);
  ck_assert_int_eq(ack(b, "c3", delivery_at(taken, 0)), SLUICE_SETTLE_DONE);
}
END_TEST

/* A release is a requeue in the settle script: the entry leaves the PEL at
 * once, any consumer can read it with its next fetch (no reclaim, no
 * lease to wait for), and the next delivery reports the same count, so a
 * graceful stop never counts toward max_deliveries. */
START_TEST(test_release_requeues_for_anyone_without_counting)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) again = NULL;
  g_autoptr(GPtrArray) third = NULL;
  g_autoptr(GPtrArray) reclaimed = NULL;
  SluiceSettlement s = {0};

  enqueue(b, "r1", "default", "r1");
  heartbeat(b, "c1", 60000, NULL);
  got = fetch_as(b, "c1", q_default, 1, 0);
  ck_assert_uint_eq(delivery_at(got, 0)->delivery_count, 1);
  s.delivery = delivery_at(got, 0);
  s.action = SLUICE_SETTLE_RELEASE;
  s.id = "r1";
  ck_assert_int_eq(settle_one(b, "c1", &s), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(pending(shared, ns, "default"), 0);
  ck_assert_int_eq(xlen(shared, ns, "default"), 1);
  /* Nothing to reclaim: the owner is alive and holds nothing. */
  heartbeat(b, "c2", 60000, NULL);
  reclaimed = reclaim_as(b, "c2", q_default, 10, 60000);
  ck_assert_uint_eq(reclaimed->len, 0);
  again = fetch_as(b, "c2", q_default, 10, 0);
  ck_assert_uint_eq(again->len, 1);
  ck_assert(bytes_is(delivery_at(again, 0)->payload, "r1"));
  ck_assert_uint_eq(delivery_at(again, 0)->delivery_count, 1);

  /* A delivery that came after a takeover keeps its count through a
   * release: the count is carried by the requeued entry. */
  delivery_at(again, 0)->delivery_count = 3;
  s.delivery = delivery_at(again, 0);
  ck_assert_int_eq(settle_one(b, "c2", &s), SLUICE_SETTLE_DONE);
  third = fetch_as(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(third->len, 1);
  ck_assert_uint_eq(delivery_at(third, 0)->delivery_count, 3);
  ck_assert_int_eq(ack(b, "c1", delivery_at(third, 0)), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(xlen(shared, ns, "default"), 0);
}
END_TEST

/* R12: an enqueue whose reply was lost is sent once more on a fresh
 * connection; the replay finds the claim it made itself, writes nothing
 * twice and reports the task as new, not as "existed". */
START_TEST(test_replayed_enqueue_recognises_its_own_write)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestProxy) proxy =
      sluice_test_proxy_start(sluice_test_redis_port(shared), &error);
  g_autofree gchar *ns = test_namespace();
  g_autofree gchar *url = NULL;
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *again = NULL;
  SluiceEnqueueOptions eo;
  gboolean existed = TRUE;

  ck_assert_msg(proxy != NULL, "%s", error != NULL ? error->message : "");
  url =
      g_strdup_printf("redis://127.0.0.1:%u/0", sluice_test_proxy_port(proxy));
  b = broker_for(url, ns);
  ck_assert(sluice_redis_broker_ping(b, &error));
  client = sluice_client_new(b, NULL, &error);
  sluice_enqueue_options_init(&eo);
  eo.id = "replayed";
  sluice_test_proxy_drop_next_reply(proxy);
  id = sluice_client_enqueue_full(client, "t.x", NULL, &eo, &existed, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(sluice_test_proxy_dropped(proxy), 1);
  ck_assert(!existed);
  ck_assert_int_eq(xlen(shared, ns, "default"), 1);
  /* A second enqueue of the id, by another call, did exist. */
  again =
      sluice_client_enqueue_full(client, "t.x", NULL, &eo, &existed, &error);
  ck_assert_ptr_nonnull(again);
  ck_assert(existed);
  ck_assert_int_eq(xlen(shared, ns, "default"), 1);
}
END_TEST

/* R26: entries trimmed while pending are reported and dropped, never
 * looped on. */
START_TEST(test_reclaim_reports_trimmed_entries)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) r1 = NULL;
  g_autoptr(GPtrArray) r2 = NULL;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("t%u", i);
    enqueue(b, id, "default", id);
  }
  got = fetch_as(b, "c1", q_default, 3, 0);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "XTRIM {%s}:s:default MAXLEN 0", ns),
      3);
  ck_assert_int_eq(pending(shared, ns, "default"), 3);
  heartbeat(b, "c2", 60000, NULL);
  r1 = reclaim_as(b, "c2", q_default, 10, 60000);
  ck_assert_uint_eq(r1->len, 0);
  ck_assert(log_contains("3 pending messages of queue “default” had been "
                         "deleted"));
  ck_assert_int_eq(pending(shared, ns, "default"), 0);
  r2 = reclaim_as(b, "c2", q_default, 10, 60000);
  ck_assert_uint_eq(r2->len, 0);
  /* Lost with the trim: the settle says the delivery is gone, not that a
   * peer owns it. */
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 0)), SLUICE_SETTLE_GONE);
}
END_TEST

/* Acknowledged entries are removed by trimming where that provably keeps
 * every unacknowledged one, and one by one above a still-pending entry;
 * ids with different numbers of digits (written by hand here) must not
 * fool the comparison. */
START_TEST(test_trim_removes_only_acknowledged_entries)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  static const gchar *const ids[] = {"9-9", "10-0", "10-10", "100-1", "100-2"};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceSettlement s[3] = {{0}};

  for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
    redisReply *r = sluice_test_redis_command(
        shared, "XADD {%s}:s:default %s p %s", ns, ids[i], ids[i]);
    ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
  }
  got = fetch_as(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 5);
  ck_assert_str_eq(delivery_at(got, 2)->handle, "10-10");

  /* 9-9 stays pending: 10-0, 100-1 and 100-2 go, 10-10 stays pending. */
  s[0] = (SluiceSettlement){.delivery = delivery_at(got, 4),
                            .action = SLUICE_SETTLE_ACK};
  s[1] = (SluiceSettlement){.delivery = delivery_at(got, 1),
                            .action = SLUICE_SETTLE_ACK};
  s[2] = (SluiceSettlement){.delivery = delivery_at(got, 3),
                            .action = SLUICE_SETTLE_ACK};
  ck_assert(sluice_broker_settle(b, "c1", s, 3, &error));
  ck_assert_int_eq(xlen(shared, ns, "default"), 2);
  ck_assert_int_eq(pending(shared, ns, "default"), 2);
  {
    g_autofree gchar *o1 = owner_of(shared, ns, "default", "9-9", NULL);
    g_autofree gchar *o2 = owner_of(shared, ns, "default", "10-10", NULL);
    redisReply *r =
        sluice_test_redis_command(shared, "XRANGE {%s}:s:default - +", ns);
    ck_assert_str_eq(o1, "c1");
    ck_assert_str_eq(o2, "c1");
    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ck_assert_str_eq(r->element[0]->element[0]->str, "9-9");
    ck_assert_str_eq(r->element[1]->element[0]->str, "10-10");
    freeReplyObject(r);
  }

  /* The oldest goes: the trim may now reach up to the newest acked. */
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 0)), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(xlen(shared, ns, "default"), 1);
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 2)), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(xlen(shared, ns, "default"), 0);
  ck_assert_int_eq(pending(shared, ns, "default"), 0);
}
END_TEST

/* The trimming proof, checked: consumers fetch, take over each other's
 * entries and settle random subsets in random order, over ids of several
 * milliseconds with sequence numbers of one to three digits; after every
 * settle the stream holds exactly the entries not acknowledged. */
START_TEST(test_trim_is_exact_under_random_settles)
{
  enum { BATCHES = 6, PER_BATCH = 150, ENTRIES = BATCHES * PER_BATCH };
  static const gchar *const names[] = {"A", "B", "C"};
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GRand) rand = g_rand_new_with_seed(20240607);
  GPtrArray *held[3] = {NULL, NULL, NULL};
  g_autoptr(GHashTable) acked =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GBytes) p = text("p");
  g_autoptr(GError) error = NULL;
  guint fetched = 0;

  for (guint k = 0; k < BATCHES; k++) {
    SluiceSubmit items[PER_BATCH];
    for (guint i = 0; i < PER_BATCH; i++)
      items[i] = (SluiceSubmit){.id = "x", .queue = "default", .payload = p};
    ck_assert(sluice_broker_enqueue(b, items, PER_BATCH, &error));
    g_usleep(3000); /* the next batch gets ids of a later millisecond */
  }
  for (guint i = 0; i < 3; i++)
    held[i] =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  for (guint round = 0; round < 400; round++) {
    guint who = (guint)g_rand_int_range(rand, 0, 3);
    gint op = g_rand_int_range(rand, 0, 3);

    if (op == 0) {
      g_autoptr(GPtrArray) got = fetch_as(
          b, names[who], q_default, (guint)g_rand_int_range(rand, 1, 40), 0);
      fetched += got->len;
      while (got->len > 0)
        g_ptr_array_add(held[who], g_ptr_array_steal_index(got, 0));
    } else if (op == 1) {
      /* Take some of another consumer's entries over (as reclaim does). */
      guint from = (who + 1) % 3;
      for (guint i = 0; i < held[from]->len;) {
        SluiceDelivery *d = held[from]->pdata[i];
        if (g_rand_int_range(rand, 0, 8) != 0) {
          i++;
          continue;
        }
        freeReplyObject(sluice_test_redis_command(
            shared, "XCLAIM {%s}:s:default " GROUP " %s 0 %s JUSTID", ns,
            names[who], d->handle));
        g_ptr_array_add(held[who], g_ptr_array_steal_index(held[from], i));
      }
    } else if (held[who]->len > 0) {
      guint n = 0;
      g_autofree SluiceSettlement *s = g_new0(SluiceSettlement, held[who]->len);
      g_autoptr(GPtrArray) done =
          g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
      redisReply *r;

      /* A random subset, in random order. */
      for (guint i = 0; i < held[who]->len;) {
        if (g_rand_boolean(rand)) {
          guint at = n > 0 ? (guint)g_rand_int_range(rand, 0, (gint)n + 1) : 0;
          g_ptr_array_insert(done, (gint)at,
                             g_ptr_array_steal_index(held[who], i));
          n++;
        } else {
          i++;
        }
      }
      for (guint i = 0; i < n; i++)
        s[i] = (SluiceSettlement){.delivery = done->pdata[i],
                                  .action = SLUICE_SETTLE_ACK};
      ck_assert(sluice_broker_settle(b, names[who], s, n, &error));
      for (guint i = 0; i < n; i++) {
        ck_assert_int_eq(s[i].status, SLUICE_SETTLE_DONE);
        g_hash_table_add(acked,
                         g_strdup(((SluiceDelivery *)done->pdata[i])->handle));
      }
      r = sluice_test_redis_command(shared, "XRANGE {%s}:s:default - +", ns);
      ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
      ck_assert_msg(r->elements == ENTRIES - g_hash_table_size(acked),
                    "round %u: %zu entries in the stream, %u expected", round,
                    r->elements, ENTRIES - g_hash_table_size(acked));
      for (size_t i = 0; i < r->elements; i++)
        ck_assert_msg(
            !g_hash_table_contains(acked, r->element[i]->element[0]->str),
            "round %u: acknowledged %s still in the stream", round,
            r->element[i]->element[0]->str);
      freeReplyObject(r);
    }
  }
  ck_assert_uint_gt(fetched, ENTRIES / 2);
  ck_assert_uint_gt(g_hash_table_size(acked), ENTRIES / 4);
  for (guint i = 0; i < 3; i++)
    g_ptr_array_unref(held[i]);
}
END_TEST

/* R27: consumers of departed workers do not pile up in the group, and one
 * that still holds entries is never deleted with them. */
START_TEST(test_consumers_do_not_pile_up)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) held = NULL;
  g_autoptr(GPtrArray) taken = NULL;

  for (guint i = 0; i < 50; i++) {
    g_autofree gchar *c = g_strdup_printf("left-%u", i);
    g_autoptr(GPtrArray) got = NULL;
    heartbeat(b, c, 60000, NULL);
    enqueue(b, c, "default", c);
    got = fetch_as(b, c, q_default, 1, 0);
    ck_assert_int_eq(ack(b, c, delivery_at(got, 0)), SLUICE_SETTLE_DONE);
    ck_assert(sluice_broker_leave(b, c, &error));
  }
  ck_assert_int_eq(consumers_in_group(shared, ns, "default"), 0);

  /* Crashed with nothing held, and one crashed holding an entry. */
  for (guint i = 0; i < 50; i++) {
    g_autofree gchar *c = g_strdup_printf("crashed-%u", i);
    g_autoptr(GPtrArray) got = NULL;
    enqueue(b, c, "default", c);
    got = fetch_as(b, c, q_default, 1, 0);
    ck_assert_int_eq(ack(b, c, delivery_at(got, 0)), SLUICE_SETTLE_DONE);
  }
  enqueue(b, "h", "default", "h");
  held = fetch_as(b, "holder", q_default, 1, 0);
  ck_assert_int_eq(consumers_in_group(shared, ns, "default"), 51);

  g_usleep(400 * 1000);
  heartbeat(b, "reclaimer", 60000, NULL);
  taken = reclaim_as(b, "reclaimer", q_default, 10, 300);
  ck_assert_uint_eq(taken->len, 1);
  /* Every dead one is gone, the holder too once its entry was taken; the
   * reclaimer remains (it holds the entry now). */
  ck_assert_int_eq(consumers_in_group(shared, ns, "default"), 1);
}
END_TEST

/* ---- contract: groups, stats, OOM ---------------------------------------- */

/* R16: a restart without persistence loses the group; fetch re-creates it
 * and carries on, with one warning. */
START_TEST(test_group_recreated_after_restart_without_persistence)
{
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
  g_autoptr(SluiceBroker) b = broker_for(sluice_test_redis_url(server), "r16");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) first = NULL;
  g_autoptr(GPtrArray) second = NULL;
  gboolean back = FALSE;

  enqueue(b, "before", "default", "before");
  first = fetch_as(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(first->len, 1);
  ck_assert(!log_contains("was missing"));

  ck_assert(sluice_test_redis_restart(server, &error));
  for (guint i = 0; i < 200 && !back; i++) {
    back = sluice_redis_broker_ping(b, NULL);
    if (!back)
      g_usleep(50 * 1000);
  }
  ck_assert(back);
  enqueue(b, "after", "default", "after");
  second = fetch_as(b, "c1", q_default, 10, 1000);
  ck_assert_uint_eq(second->len, 1);
  ck_assert(bytes_is(delivery_at(second, 0)->payload, "after"));
  ck_assert(log_contains("the consumer group of queue “default” was missing"));
  /* The old delivery is gone with the data: its settle is refused as
   * gone, not as owned by a peer. */
  ck_assert_int_eq(ack(b, "c1", delivery_at(first, 0)), SLUICE_SETTLE_GONE);
  ck_assert_int_eq(ack(b, "c1", delivery_at(second, 0)), SLUICE_SETTLE_DONE);
}
END_TEST

START_TEST(test_stats_depth_in_flight_and_purge)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  const gchar *const only_a[] = {"a", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats stats;
  guint64 removed = 0;

  for (guint i = 0; i < 5; i++) {
    g_autofree gchar *id = g_strdup_printf("a%u", i);
    enqueue(b, id, "a", id);
  }
  enqueue(b, "b0", "b", "b0");
  got = fetch_as(b, "c1", only_a, 2, 0);
  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_int_eq(queue_ready(&stats, "a"), 3);
  ck_assert_int_eq(queue_ready(&stats, "b"), 1);
  ck_assert_int_eq(stats.in_flight, 2);
  ck_assert_int_eq(stats.stale_settles, 0);
  sluice_broker_stats_clear(&stats);

  /* Purge deletes what is ready, never what is pending. */
  ck_assert(sluice_broker_purge(b, "a", &removed, &error));
  ck_assert_uint_eq(removed, 3);
  ck_assert(sluice_broker_purge(b, "b", &removed, &error)); /* no group */
  ck_assert_uint_eq(removed, 1);
  ck_assert_int_eq(pending(shared, ns, "a"), 2);
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 0)), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 1)), SLUICE_SETTLE_DONE);
  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_int_eq(queue_ready(&stats, "a"), 0);
  ck_assert_int_eq(stats.in_flight, 0);
  sluice_broker_stats_clear(&stats);
  ck_assert_int_eq(xlen(shared, ns, "a"), 0);
}
END_TEST

/* R29: a full Redis refuses new work, and workers still fetch, renew,
 * reclaim and settle. */
START_TEST(test_oom_refuses_work_but_drains)
{
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
  g_autoptr(SluiceBroker) b = broker_for(sluice_test_redis_url(server), "oom");
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = text("p");
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) fresh = NULL;
  g_autoptr(GPtrArray) taken = NULL;
  const gchar *const new_queue[] = {"new", NULL};
  SluiceSubmit item = {.id = "new", .queue = "default", .payload = p};
  redisReply *r;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("o%u", i);
    enqueue(b, id, "default", id);
  }
  dead = fetch_as(b, "gone", q_default, 1, 0);
  freeReplyObject(sluice_test_redis_command(server, "SCRIPT FLUSH"));
  r = sluice_test_redis_command(server, "CONFIG SET maxmemory 1");
  ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);

  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FULL),
      "%s", error->message);
  g_clear_error(&error);

  heartbeat(b, "c1", 60000, NULL);
  got = fetch_as(b, "c1", q_default, 5, 0);
  ck_assert_uint_eq(got->len, 2);
  heartbeat(b, "c1", 60000, got);
  fresh = fetch_as(b, "c1", new_queue, 5, 0); /* makes a group: allowed */
  ck_assert_uint_eq(fresh->len, 0);
  heartbeat(b, "c2", 60000, NULL);
  taken = reclaim_as(b, "c2", q_default, 5, 60000);
  ck_assert_uint_eq(taken->len, 1);
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 0)), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(ack(b, "c1", delivery_at(got, 1)), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(ack(b, "c2", delivery_at(taken, 0)), SLUICE_SETTLE_DONE);
  ck_assert(sluice_broker_leave(b, "c1", &error));

  freeReplyObject(sluice_test_redis_command(server, "CONFIG SET maxmemory 0"));
  ck_assert(sluice_broker_enqueue(b, &item, 1, &error));
}
END_TEST

/* ---- Worker processes ------------------------------------------------------
 */

typedef struct _Scenario Scenario;

/* One worker process (tests/helpers/worker-proc). */
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

static Scenario *
scenario_new(SluiceTestRedis *server, const gchar *name)
{
  Scenario *s = g_new0(Scenario, 1);
  g_autoptr(GError) error = NULL;

  s->server = server;
  s->ns = g_strdup_printf("%s-%d", name, (int)getpid());
  s->dir = g_dir_make_tmp("sluice-reliable-XXXXXX", &error);
  ck_assert_msg(s->dir != NULL, "%s", error != NULL ? error->message : "");
  s->log_path = g_build_filename(s->dir, "executions.log", NULL);
  s->broker = broker_for(sluice_test_redis_url(server), s->ns);
  s->client = sluice_client_new(s->broker, NULL, &error);
  ck_assert_msg(s->client != NULL, "%s", error != NULL ? error->message : "");
  return s;
}

static void
scenario_free(Scenario *s)
{
  GDir *dir = g_dir_open(s->dir, 0, NULL);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
    g_autofree gchar *path = g_build_filename(s->dir, name, NULL);
    g_unlink(path);
  }
  if (dir != NULL)
    g_dir_close(dir);
  g_rmdir(s->dir);
  sluice_client_unref(s->client);
  sluice_broker_unref(s->broker);
  g_free(s->log_path);
  g_free(s->dir);
  g_free(s->ns);
  g_free(s);
}

static void
proc_child_setup(gpointer data)
{
  /* Dies with the test process, however that ends. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Starts worker @id on @s; the varargs are more options, NULL-terminated.
 */
static Proc *
proc_start(Scenario *s, const gchar *id, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  Proc *p = g_new0(Proc, 1);
  const gchar *option;
  va_list ap;
  int fd;

  g_ptr_array_add(argv, g_strdup(TEST_BUILDDIR "/tests/helpers/worker-proc"));
  g_ptr_array_add(
      argv, g_strdup_printf("--url=%s", sluice_test_redis_url(s->server)));
  g_ptr_array_add(argv, g_strdup_printf("--namespace=%s", s->ns));
  g_ptr_array_add(argv, g_strdup_printf("--worker-id=%s", id));
  g_ptr_array_add(argv, g_strdup_printf("--log=%s", s->log_path));
  va_start(ap, id);
  while ((option = va_arg(ap, const gchar *)) != NULL)
    g_ptr_array_add(argv, g_strdup(option));
  va_end(ap);
  g_ptr_array_add(argv, NULL);

  p->s = s;
  p->id = g_strdup(id);
  p->err_path = g_strdup_printf("%s/%s.err", s->dir, id);
  fd = open(p->err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ck_assert_int_ge(fd, 0);
  ck_assert_msg(g_spawn_async_with_fds(NULL, (gchar **)argv->pdata, NULL,
                                       G_SPAWN_DO_NOT_REAP_CHILD,
                                       proc_child_setup, NULL, &p->pid, -1, fd,
                                       fd, &error),
                "spawn worker-proc: %s", error != NULL ? error->message : "");
  close(fd);
  return p;
}

/* Waits up to @timeout_ms for the process to end. */
static gboolean
proc_wait(Proc *p, gint64 timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  while (!p->reaped) {
    pid_t r = waitpid(p->pid, &p->status, WNOHANG);
    if (r == p->pid)
      p->reaped = TRUE;
    else if (r < 0 && errno != EINTR)
      return FALSE;
    else if (g_get_monotonic_time() >= deadline)
      return FALSE;
    else
      g_usleep(10 * 1000);
  }
  return TRUE;
}

static void
proc_signal(Proc *p, int signum)
{
  if (!p->reaped)
    kill(p->pid, signum);
}

static gboolean
proc_exited_ok(Proc *p)
{
  return p->reaped && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0;
}

static void proc_wait_ready(Scenario *s, Proc *p);

/* A graceful stop: SIGTERM once it runs (before, SIGTERM just kills it),
 * then the exit status must be 0. */
static void
proc_stop(Proc *p)
{
  if (!p->reaped)
    proc_wait_ready(p->s, p);
  proc_signal(p, SIGTERM);
  ck_assert_msg(proc_wait(p, 60000), "worker %s did not stop", p->id);
  ck_assert_msg(proc_exited_ok(p), "worker %s: status 0x%x", p->id,
                (unsigned)p->status);
}

static void
proc_free(Proc *p)
{
  if (p == NULL)
    return;
  if (!p->reaped) {
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &p->status, 0);
  }
  g_spawn_close_pid(p->pid);
  g_free(p->err_path);
  g_free(p->id);
  g_free(p);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Proc, proc_free)

static gboolean
proc_stderr_contains(Proc *p, const gchar *needle)
{
  g_autofree gchar *contents = NULL;

  return g_file_get_contents(p->err_path, &contents, NULL, NULL) &&
         strstr(contents, needle) != NULL;
}

typedef struct {
  Scenario *s;
  const gchar *id;
} AliveCheck;

static gboolean
worker_alive(gpointer data)
{
  AliveCheck *c = data;

  return sluice_test_redis_integer(c->s->server, "EXISTS {%s}:alive:%s",
                                   c->s->ns, c->id) == 1;
}

/* Waits until worker @p holds a lease (it started and heartbeated). */
static void
proc_wait_ready(Scenario *s, Proc *p)
{
  AliveCheck c = {s, p->id};

  ck_assert_msg(wait_for(worker_alive, &c, 20000),
                "worker %s never became alive", p->id);
}

/* ---- The execution log (the oracle) -------------------------------------
 */

typedef struct {
  gchar *id;
  guint count;
  gint pid;
} Execution;

static void
execution_free(Execution *e)
{
  g_free(e->id);
  g_free(e);
}

/* Returns: (transfer full) (element-type Execution): every line so far. */
static GPtrArray *
executions(Scenario *s)
{
  GPtrArray *out =
      g_ptr_array_new_with_free_func((GDestroyNotify)execution_free);
  g_autofree gchar *contents = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents(s->log_path, &contents, NULL, NULL))
    return out;
  lines = g_strsplit(contents, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], " ", -1);
    Execution *e;
    if (g_strv_length(f) != 3)
      continue; /* the last, empty line */
    e = g_new0(Execution, 1);
    e->id = g_strdup(f[0]);
    e->count = (guint)g_ascii_strtoull(f[1], NULL, 10);
    e->pid = (gint)g_ascii_strtoll(f[2], NULL, 10);
    g_ptr_array_add(out, e);
  }
  return out;
}

static guint
runs_of(GPtrArray *log, const gchar *id)
{
  guint n = 0;

  for (guint i = 0; i < log->len; i++)
    if (strcmp(((Execution *)log->pdata[i])->id, id) == 0)
      n++;
  return n;
}

typedef struct {
  Scenario *s;
  guint lines;
  const gchar *id;
  guint count;
} LogCheck;

static gboolean
log_has_lines(gpointer data)
{
  LogCheck *c = data;
  g_autoptr(GPtrArray) log = executions(c->s);

  return log->len >= c->lines;
}

/* TRUE once @id ran with delivery count @count. */
static gboolean
log_has_run(gpointer data)
{
  LogCheck *c = data;
  g_autoptr(GPtrArray) log = executions(c->s);

  for (guint i = 0; i < log->len; i++) {
    Execution *e = log->pdata[i];
    if (strcmp(e->id, c->id) == 0 && e->count == c->count)
      return TRUE;
  }
  return FALSE;
}

static void
wait_log_lines(Scenario *s, guint n)
{
  LogCheck c = {s, n, NULL, 0};

  ck_assert_msg(wait_for(log_has_lines, &c, 30000),
                "fewer than %u executions logged", n);
}

static gchar *
enqueue_task(Scenario *s, const gchar *task, const gchar *json_args)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = NULL;
  gchar *id;

  if (json_args != NULL) {
    args = sluice_args_from_json(json_args, -1, &error);
    ck_assert_msg(args != NULL, "%s", error->message);
  }
  id = sluice_client_enqueue(s->client, task, args, NULL, &error);
  ck_assert_msg(id != NULL, "enqueue %s: %s", task,
                error != NULL ? error->message : "");
  return id;
}

/* Enqueues @n tasks "t.log" in batches; returns their ids. */
static GPtrArray *
enqueue_logs(Scenario *s, guint n)
{
  GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
  g_autofree SluiceEnqueueRequest *requests =
      g_new0(SluiceEnqueueRequest, 1000);

  for (guint i = 0; i < 1000; i++)
    requests[i].task = "t.log";
  for (guint done = 0; done < n;) {
    g_autoptr(GError) error = NULL;
    guint k = MIN(1000, n - done);
    g_autoptr(GPtrArray) batch =
        sluice_client_enqueue_batch(s->client, requests, k, &error);
    ck_assert_msg(batch != NULL, "enqueue: %s", error->message);
    for (guint i = 0; i < batch->len; i++)
      g_ptr_array_add(ids, g_strdup(batch->pdata[i]));
    done += k;
  }
  return ids;
}

/* Waits for @id's final record and returns it. */
static SluiceResult *
final_result(Scenario *s, const gchar *id)
{
  g_autoptr(GError) error = NULL;
  SluiceResult *r = sluice_client_get_result(s->client, id, 30000, &error);

  ck_assert_msg(r != NULL, "task %s: %s", id,
                error != NULL ? error->message : "");
  return r;
}

/* How many of @ids have a final record, counted with pipelined GETs. */
static guint
count_final_records(Scenario *s, GPtrArray *ids)
{
  redisContext *c = sluice_test_redis_connect(s->server);
  guint n = 0;

  ck_assert_ptr_nonnull(c);
  for (guint at = 0; at < ids->len; at += 1000) {
    guint k = MIN(1000, ids->len - at);
    for (guint i = 0; i < k; i++)
      redisAppendCommand(c, "GET {%s}:r:%s", s->ns,
                         (const gchar *)ids->pdata[at + i]);
    for (guint i = 0; i < k; i++) {
      redisReply *r = NULL;
      ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
      if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->str[0] == 'F')
        n++;
      freeReplyObject(r);
    }
  }
  redisFree(c);
  return n;
}

typedef struct {
  Scenario *s;
  const gchar *queue;
} DrainCheck;

/* Nothing ready and nothing pending in the queue. */
static gboolean
queue_drained(gpointer data)
{
  DrainCheck *c = data;

  return xlen(c->s->server, c->s->ns, c->queue) == 0 &&
         pending(c->s->server, c->s->ns, c->queue) == 0;
}

/* What is left in a queue's stream, for failure messages. */
static gchar *
stream_dump(SluiceTestRedis *server, const gchar *ns, const gchar *queue)
{
  GString *out = g_string_new(NULL);
  redisReply *r = sluice_test_redis_command(
      server, "XRANGE {%s}:s:%s - + COUNT 10", ns, queue);

  if (r != NULL && r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements; i++)
      g_string_append_printf(out, " %s", r->element[i]->element[0]->str);
  if (r != NULL)
    freeReplyObject(r);
  r = sluice_test_redis_command(server, "XINFO GROUPS {%s}:s:%s", ns, queue);
  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
    redisReply *g = r->element[0];
    for (size_t i = 0; i + 1 < g->elements; i += 2)
      if (g->element[i + 1]->type == REDIS_REPLY_STRING)
        g_string_append_printf(out, "; %s %s", g->element[i]->str,
                               g->element[i + 1]->str);
  }
  if (r != NULL)
    freeReplyObject(r);
  return g_string_free(out, FALSE);
}

static void
wait_drained(Scenario *s, gint64 timeout_ms)
{
  DrainCheck c = {s, "default"};
  g_autofree gchar *dump = NULL;

  if (wait_for(queue_drained, &c, timeout_ms))
    return;
  dump = stream_dump(s->server, s->ns, "default");
  ck_abort_msg("queue not drained: %" G_GINT64_FORMAT
               " in the stream, %" G_GINT64_FORMAT " pending:%s",
               xlen(s->server, s->ns, "default"),
               pending(s->server, s->ns, "default"), dump);
}

/* ---- faults ---------------------------------------------------------------
 */

/* R1: a worker killed with SIGKILL while running 4 long tasks; a second
 * worker completes all of them after the lease, with delivery count 2 and
 * the attempt unchanged. */
START_TEST(test_killed_worker_long_tasks_are_completed_by_a_peer)
{
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

  return stale_settles(c->broker) >= c->at_least;
}

/* R5: a worker stopped past its lease (SIGSTOP), then continued: it logs
 * "lease lost", a peer has reclaimed and completed its task, and its late
 * settle is refused as stale. */
START_TEST(test_stalled_worker_loses_its_lease_and_its_settle)
{
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
  ck_assert(wait_for(log_has_run, &started, 20000));
  proc_signal(a, SIGSTOP);

  b = proc_start(s, "wB", "--concurrency=1", "--prefetch=0",
                 "--visibility-timeout=1000", NULL);
  ck_assert_msg(wait_for(log_has_run, &reclaimed, 20000),
                "the stalled worker's task was never reclaimed");
  g_usleep(500 * 1000); /* well past the lease */
  proc_signal(a, SIGCONT);

  ck_assert_msg(wait_for(proc_logged_lease_lost, a, 20000),
                "the stalled worker did not log that it lost its lease");
  ck_assert_msg(wait_for(stale_reached, &stale, 20000),
                "the stalled worker's late settle was not refused");
  ck_assert_msg(wait_for(proc_logged_settle_refused, a, 20000),
                "the stalled worker did not log its refused settle");
  r = final_result(s, id);
  ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
  ck_assert_uint_eq(sluice_result_get_attempt(r), 1);
  wait_drained(s, 20000);
  log = executions(s);
  ck_assert_uint_eq(runs_of(log, id), 2);
  ck_assert_int_eq(stale_settles(s->broker), 1);
  proc_stop(a);
  proc_stop(b);
  scenario_free(s);
}
END_TEST

/* R6: a task running for five leases, its worker healthy beside a peer,
 * is never reclaimed. */
START_TEST(test_long_task_of_a_live_worker_is_never_reclaimed)
{
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
  ck_assert(wait_for(proc_logged_gone, a, 30000));
  ck_assert(!proc_stderr_contains(a, "another worker owns"));
  proc_stop(a);
  scenario_free(s);
}
END_TEST

START_TEST(test_sigterm_gives_a_long_task_to_a_peer)
{
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
  ck_assert_int_eq(pending(shared, s->ns, "default"), 0);
  ck_assert_int_eq(xlen(shared, s->ns, "default"), 1);
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

  ck_assert_int_eq(pending(shared, s->ns, "default"), 0);
  ck_assert_int_eq(xlen(shared, s->ns, "default"), 0);
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
  g_autoptr(SluiceTestRedis) server = own_server(&opts);
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
  ck_assert(wait_for(producer_halfway, &producer, 30000));
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
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
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
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
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

/* ---- load ------------------------------------------------------------------
 */

static gboolean
task_noop(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return TRUE;
}

static gdouble
redis_cpu_s(SluiceTestRedis *server)
{
  redisReply *r = sluice_test_redis_command(server, "INFO cpu");
  gdouble total = 0;

  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    const gchar *u = strstr(r->str, "used_cpu_user:");
    const gchar *sy = strstr(r->str, "used_cpu_sys:");
    if (u != NULL)
      total += g_ascii_strtod(u + strlen("used_cpu_user:"), NULL);
    if (sy != NULL)
      total += g_ascii_strtod(sy + strlen("used_cpu_sys:"), NULL);
  }
  if (r != NULL)
    freeReplyObject(r);
  return total;
}

static gint64
commands_processed(SluiceTestRedis *server)
{
  return sluice_test_redis_info_int(server, "stats",
                                    "total_commands_processed");
}

typedef struct {
  SluiceTestRedis *server;
  const gchar *ns;
  guint64 want;
  SluiceWorker *worker;
} RunCheck;

static gboolean
run_done(gpointer data)
{
  RunCheck *c = data;
  SluiceWorkerStats st;

  sluice_worker_get_stats(c->worker, &st);
  return st.succeeded >= c->want;
}

/* Runs @n no-op tasks through one in-process worker and prints what they
 * cost Redis. */
static void
run_and_measure(SluiceTestRedis *server, const gchar *ns, guint n,
                gboolean results)
{
  g_autoptr(SluiceBroker) b = broker_for(sluice_test_redis_url(server), ns);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree SluiceEnqueueRequest *requests =
      g_new0(SluiceEnqueueRequest, 1000);
  SluiceTaskOptions topts;
  SluiceWorkerOptions wopts;
  gdouble cpu0, cpu1, cpu2;
  gint64 cmd0, cmd1, cmd2, t1, t2;
  RunCheck check;

  sluice_task_options_init(&topts);
  topts.store_result = results ? SLUICE_ON : SLUICE_OFF;
  ck_assert(sluice_registry_add(registry, "t.noop", task_noop, NULL, NULL,
                                &topts, &error));
  client = sluice_client_new(b, NULL, &error);
  for (guint i = 0; i < 1000; i++)
    requests[i].task = "t.noop";

  cpu0 = redis_cpu_s(server);
  cmd0 = commands_processed(server);
  for (guint done = 0; done < n; done += 1000) {
    g_autoptr(GPtrArray) batch = sluice_client_enqueue_batch(
        client, requests, MIN(1000, n - done), &error);
    ck_assert_msg(batch != NULL, "%s", error != NULL ? error->message : "");
  }
  if (g_getenv("SLUICE_TEST_COMMANDSTATS") != NULL)
    freeReplyObject(sluice_test_redis_command(server, "CONFIG RESETSTAT"));
  cpu1 = redis_cpu_s(server);
  cmd1 = commands_processed(server);

  sluice_worker_options_init(&wopts);
  wopts.concurrency = 4;
  wopts.prefetch = 252;
  wopts.settle_batch = 256;
  worker = sluice_worker_new(b, registry, &wopts, &error);
  ck_assert(worker != NULL);
  t1 = g_get_monotonic_time();
  ck_assert(sluice_worker_start(worker, &error));
  check = (RunCheck){server, ns, n, worker};
  ck_assert(wait_for(run_done, &check, 600000));
  t2 = g_get_monotonic_time();
  cpu2 = redis_cpu_s(server);
  cmd2 = commands_processed(server);
  sluice_worker_stop(worker);

  if (g_getenv("SLUICE_TEST_COMMANDSTATS") != NULL) {
    redisReply *r = sluice_test_redis_command(server, "INFO commandstats");
    g_print("%s\n", r->str);
    freeReplyObject(r);
    r = sluice_test_redis_command(server, "INFO cpu");
    g_print("%s\n", r->str);
    freeReplyObject(r);
  }
  /* R25: nothing left behind. */
  ck_assert_int_eq(xlen(server, ns, "default"), 0);
  ck_assert_int_eq(pending(server, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_integer(server, "XLEN {%s}:dlq", ns), 0);
  ck_assert_int_eq(consumers_in_group(server, ns, "default"), 0);
  g_print("%u tasks, results %s: consumed at %.0f tasks/s (one worker, "
          "concurrency 4, prefetch 252); Redis CPU per task %.2f us "
          "enqueue + %.2f us consume; commands per task %.3f enqueue + "
          "%.3f consume\n",
          n, results ? "on" : "off", n / ((t2 - t1) / 1e6),
          (cpu1 - cpu0) * 1e6 / n, (cpu2 - cpu1) * 1e6 / n,
          (gdouble)(cmd1 - cmd0) / n, (gdouble)(cmd2 - cmd1) / n);
}

/* R25: after 100,000 tasks the stream, the PEL and the dead letters are
 * back to empty; prints the cost per task. */
START_TEST(test_run_of_100000_leaves_nothing_behind)
{
  g_autoptr(SluiceTestRedis) server = own_server(NULL);

  run_and_measure(server, "load-off", 100000, FALSE);
  run_and_measure(server, "load-on", 40000, TRUE);
}
END_TEST

/* ---- Suite ----------------------------------------------------------------
 */

static Suite *
reliable_suite(void)
{
  Suite *s = suite_create("redis-reliable");
  TCase *contract = tcase_create("contract");
  TCase *faults = tcase_create("faults");
  TCase *load = tcase_create("load");

  tcase_add_unchecked_fixture(contract, shared_setup, shared_teardown);
  tcase_set_timeout(contract, 60);
  tcase_add_test(contract, test_fetch_ack_deletes_the_entry);
  tcase_add_test(contract, test_fetch_keeps_strict_priority);
  tcase_add_test(contract, test_blocking_fetch_never_returns_more_than_asked);
  tcase_add_test(contract, test_blocking_fetch_wakes_on_data_and_on_wakeup);
  tcase_add_test(contract, test_fencing_refuses_a_late_settle);
  tcase_add_test(contract, test_reclaim_takes_only_dead_or_overdue_deliveries);
  tcase_add_test(contract,
                 test_heartbeat_keeps_held_deliveries_and_reports_a_lapse);
  tcase_add_test(contract, test_release_requeues_for_anyone_without_counting);
  tcase_add_test(contract, test_reclaim_reports_trimmed_entries);
  tcase_add_test(contract, test_replayed_enqueue_recognises_its_own_write);
  tcase_add_test(contract, test_trim_removes_only_acknowledged_entries);
  tcase_add_test(contract, test_trim_is_exact_under_random_settles);
  tcase_add_test(contract, test_consumers_do_not_pile_up);
  tcase_add_test(contract,
                 test_group_recreated_after_restart_without_persistence);
  tcase_add_test(contract, test_stats_depth_in_flight_and_purge);
  tcase_add_test(contract, test_oom_refuses_work_but_drains);
  suite_add_tcase(s, contract);

  tcase_add_unchecked_fixture(faults, shared_setup, shared_teardown);
  tcase_set_timeout(faults, 180);
  tcase_add_test(faults, test_killed_worker_long_tasks_are_completed_by_a_peer);
  tcase_add_test(faults, test_kill_during_a_run_loses_nothing);
  tcase_add_test(faults, test_poison_message_is_dead_lettered);
  tcase_add_test(faults, test_stalled_worker_loses_its_lease_and_its_settle);
  tcase_add_test(faults, test_long_task_of_a_live_worker_is_never_reclaimed);
  tcase_add_test(faults, test_sigterm_gives_a_long_task_to_a_peer);
  tcase_add_test(faults, test_settle_of_a_vanished_delivery_says_so);
  tcase_add_test(faults, test_sigterm_finishes_and_acks_short_tasks);
  tcase_add_test(faults, test_sigterm_during_a_blocked_fetch_loses_nothing);
  tcase_add_test(faults, test_redis_restart_loses_nothing_acknowledged);
  tcase_add_test(faults, test_redis_stall_causes_no_mass_reclaim);
  tcase_add_test(faults, test_killed_connections_lose_nothing);
  suite_add_tcase(s, faults);

  tcase_set_timeout(load, 900);
  tcase_add_test(load, test_run_of_100000_leaves_nothing_behind);
  suite_add_tcase(s, load);
  return s;
}

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  SRunner *runner;
  int failed;

  g_log_set_writer_func(capture_writer, NULL, NULL);
  runner = srunner_create(reliable_suite());
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

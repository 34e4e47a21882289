/* test-redis-fast.c - the redis-fast broker against a real redis-server.
 *
 * Two test cases:
 *  - "contract": every slot of sluice/sys/broker.h at the broker level, on one
 *    shared server started once (unchecked fixture); each test runs in its
 *    own process (CK_FORK) and namespace ("t<pid>").
 *  - "redis": what only a real Redis shows (reconnection, restarts,
 *    NOSCRIPT, AUTH, key layout, TTLs, OOM); tests that change the server
 *    start their own.
 *
 * Round trips are counted with INFO commandstats / total_commands_processed
 * of the server, never with timers: no assertion here depends on how fast
 * the machine is.
 *
 * To add a test: write START_TEST, add it to the right TCase in
 * redis_suite(); use test_broker() for a broker in the test's namespace.
 */
#include "config.h"

#include "core/sluice-private.h"

#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brokers/redis/redis-broker.h"
#include "tests/helpers/redis-server.h"

static SluiceTestRedis *shared;

/* ---- Fixtures and helpers ------------------------------------------------ */

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

static gchar *
test_namespace(void)
{
  return g_strdup_printf("t%d", (int)getpid());
}

static SluiceBroker *
broker_for(const gchar *url, const gchar *ns, guint dead_letter_max)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;
  SluiceBroker *broker;

  sluice_redis_options_init(&options);
  options.mode = SLUICE_REDIS_FAST;
  options.url = url;
  options.namespace_ = ns;
  options.dead_letter_max = dead_letter_max;
  options.reconnect_max_backoff_ms = 200;
  broker = sluice_redis_broker_new(&options, NULL, &error);
  ck_assert_msg(broker != NULL, "broker: %s",
                error != NULL ? error->message : "?");
  return broker;
}

static SluiceBroker *
test_broker(void)
{
  g_autofree gchar *ns = test_namespace();

  return broker_for(sluice_test_redis_url(shared), ns, 0);
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

static void
enqueue(SluiceBroker *b, const gchar *id, const gchar *queue,
        const gchar *payload, gint64 due_at)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = text(payload);
  SluiceSubmit item = {
      .id = id, .queue = queue, .payload = p, .due_at = due_at};

  ck_assert_msg(sluice_broker_enqueue(b, &item, 1, &error), "enqueue: %s",
                error != NULL ? error->message : "?");
}

static GPtrArray *
fetch(SluiceBroker *b, const gchar *const *queues, guint max, gint64 block_ms)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  ck_assert_msg(
      sluice_broker_fetch(b, "c1", queues, max, block_ms, out, &error),
      "fetch: %s", error != NULL ? error->message : "?");
  return out;
}

static const gchar *const q_default[] = {"default", NULL};

static SluiceDelivery *
delivery_at(GPtrArray *a, guint i)
{
  return g_ptr_array_index(a, i);
}

static gint64
cmd_calls(SluiceTestRedis *server, const gchar *command)
{
  redisReply *reply = sluice_test_redis_command(server, "INFO commandstats");
  g_autofree gchar *needle = g_strdup_printf("cmdstat_%s:calls=", command);
  gint64 calls = 0;

  if (reply != NULL && reply->type == REDIS_REPLY_STRING) {
    const gchar *at = strstr(reply->str, needle);
    if (at != NULL)
      calls = g_ascii_strtoll(at + strlen(needle), NULL, 10);
  }
  if (reply != NULL)
    freeReplyObject(reply);
  return calls;
}

static gint64
llen(SluiceTestRedis *server, const gchar *ns, const gchar *queue)
{
  return sluice_test_redis_integer(server, "LLEN {%s}:q:%s", ns, queue);
}

static void
settle(SluiceBroker *b, SluiceSettlement *items, guint n)
{
  g_autoptr(GError) error = NULL;

  ck_assert_msg(sluice_broker_settle(b, "c1", items, n, &error), "settle: %s",
                error != NULL ? error->message : "?");
}

static SluiceDeadLetter *
dead_letter(const gchar *task_id, const gchar *reason, const gchar *payload)
{
  SluiceDeadLetter *dl = sluice_dead_letter_new();

  dl->task_id = g_strdup(task_id);
  dl->task = g_strdup("tasks.add");
  dl->reason = g_strdup(reason);
  dl->detail = g_strdup("it failed");
  dl->source = g_strdup("default");
  dl->deliveries = 2;
  dl->at = 1700000000000;
  dl->payload = text(payload);
  return dl;
}

/* Buries one message of queue "default" with @reason. */
static void
bury(SluiceBroker *b, const gchar *id, const gchar *reason)
{
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  SluiceSettlement s = {0};

  enqueue(b, id, "default", id, 0);
  got = fetch(b, q_default, 1, 0);
  ck_assert_uint_eq(got->len, 1);
  dl = dead_letter(id, reason, id);
  s.delivery = delivery_at(got, 0);
  s.action = SLUICE_SETTLE_DEAD_LETTER;
  s.id = id;
  s.dead_letter = dl;
  settle(b, &s, 1);
}

/* ---- Log capture (reconnection lines) --------------------------------- */

static gint lost_lines;
static gint back_lines;
static gint policy_lines;

static GLogWriterOutput
count_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
             gpointer data)
{
  for (gsize i = 0; i < n_fields; i++) {
    if (strcmp(fields[i].key, "MESSAGE") == 0) {
      const gchar *m = fields[i].value;
      if (strstr(m, "lost connection to") != NULL)
        g_atomic_int_inc(&lost_lines);
      if (strstr(m, "is back after") != NULL)
        g_atomic_int_inc(&back_lines);
      if (strstr(m, "maxmemory-policy allkeys-lru") != NULL)
        g_atomic_int_inc(&policy_lines);
    }
  }
  return g_log_writer_default(level, fields, n_fields, data);
}

/* ---- produce ------------------------------------------------------------ */

START_TEST(test_enqueue_fetch_one)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) got = NULL;

  enqueue(b, "id-1", "default", "hello", 0);
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "hello"));
  ck_assert_str_eq(delivery_at(got, 0)->queue, "default");
  ck_assert_uint_eq(delivery_at(got, 0)->delivery_count, 1);
  g_clear_pointer(&got, g_ptr_array_unref);
  /* Handed out once only. */
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 0);
}
END_TEST

START_TEST(test_enqueue_batch_one_round_trip)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  SluiceSubmit items[50];
  GBytes *payloads[50];
  gchar *ids[50];
  gint64 before, pushes, fetches, sadds;
  guint seen = 0;

  /* A scheduled item goes through the script: this loads it. */
  enqueue(b, "warm-up", "other", "x", 1);
  for (guint i = 0; i < 50; i++) {
    ids[i] = g_strdup_printf("id-%02u", i);
    payloads[i] = text(ids[i]);
    items[i] = (SluiceSubmit){
        .id = ids[i], .queue = "default", .payload = payloads[i]};
  }
  /* Plain items (no claim, record or due time) skip Lua: one LPUSH for
   * the whole batch, sent with its SADD in one round trip. */
  before = cmd_calls(shared, "evalsha");
  pushes = cmd_calls(shared, "lpush");
  sadds = cmd_calls(shared, "sadd");
  ck_assert(sluice_broker_enqueue(b, items, 49, &error));
  ck_assert_int_eq(cmd_calls(shared, "evalsha") - before, 0);
  ck_assert_int_eq(cmd_calls(shared, "lpush") - pushes, 1);
  ck_assert_int_eq(cmd_calls(shared, "sadd") - sadds, 1);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "SISMEMBER {%s}:queues default", ns),
      1);
  /* The queue is known now: a single enqueue is one command. */
  pushes = cmd_calls(shared, "lpush");
  sadds = cmd_calls(shared, "sadd");
  ck_assert(sluice_broker_enqueue(b, &items[49], 1, &error));
  ck_assert_int_eq(cmd_calls(shared, "lpush") - pushes, 1);
  ck_assert_int_eq(cmd_calls(shared, "sadd") - sadds, 0);
  ck_assert_int_eq(llen(shared, ns, "default"), 50);
  /* With idempotency claims the batch needs the script: still one call. */
  for (guint i = 0; i < 50; i++)
    items[i].dedup_ttl_ms = 60000;
  before = cmd_calls(shared, "evalsha");
  ck_assert(sluice_broker_enqueue(b, items, 50, &error));
  ck_assert_int_eq(cmd_calls(shared, "evalsha") - before, 1);
  ck_assert_int_eq(llen(shared, ns, "default"), 100);
  for (guint i = 0; i < 50; i++) {
    g_autoptr(GPtrArray) got = fetch(b, q_default, 1, 0);
    ck_assert_uint_eq(got->len, 1); /* drop the claimed copies */
  }

  /* Many per fetch, first in first out. */
  fetches = cmd_calls(shared, "lmpop");
  while (seen < 50) {
    g_autoptr(GPtrArray) got = fetch(b, q_default, 20, 0);
    ck_assert_uint_gt(got->len, 0);
    for (guint k = 0; k < got->len; k++, seen++)
      ck_assert(bytes_is(delivery_at(got, k)->payload, ids[seen]));
  }
  ck_assert_int_eq(cmd_calls(shared, "lmpop") - fetches, 3);
  for (guint i = 0; i < 50; i++) {
    g_free(ids[i]);
    g_bytes_unref(payloads[i]);
  }
}
END_TEST

START_TEST(test_enqueue_idempotent)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = text("payload");
  g_autoptr(GBytes) rec = text("queued");
  g_autoptr(GBytes) got = NULL;
  SluiceSubmit items[3] = {
      {.id = "dup",
       .queue = "default",
       .payload = p,
       .dedup_ttl_ms = 60000,
       .record = rec,
       .record_ttl_ms = 60000},
      {.id = "dup", .queue = "default", .payload = p, .dedup_ttl_ms = 60000},
      {.id = "other", .queue = "default", .payload = p, .dedup_ttl_ms = 60000},
  };

  ck_assert(sluice_broker_enqueue(b, items, 3, &error));
  ck_assert(!items[0].existed);
  ck_assert(items[1].existed); /* same id later in the same batch */
  ck_assert(!items[2].existed);
  ck_assert_int_eq(llen(shared, ns, "default"), 2);

  /* A producer that retries after a lost reply writes nothing twice. */
  ck_assert(sluice_broker_enqueue(b, items, 1, &error));
  ck_assert(items[0].existed);
  ck_assert_int_eq(llen(shared, ns, "default"), 2);

  /* The non-final record went in with the first write. */
  ck_assert(sluice_broker_get_record(b, "dup", &got, &error));
  ck_assert(bytes_is(got, "queued"));
  ck_assert_int_gt(sluice_test_redis_integer(shared, "PTTL {%s}:dedup:dup", ns),
                   0);
}
END_TEST

START_TEST(test_enqueue_mixed_batch_keeps_order)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p1 = text("1");
  g_autoptr(GBytes) p2 = text("2");
  g_autoptr(GBytes) p3 = text("3");
  g_autoptr(GBytes) p4 = text("4");
  g_autoptr(GBytes) p5 = text("5");
  g_autoptr(GBytes) p6 = text("6");
  g_autoptr(GBytes) rec = text("queued");
  g_autoptr(GPtrArray) got = NULL;
  SluiceBrokerStats stats;
  /* Plain pushes and full submits interleaved, two queues, one delayed. */
  SluiceSubmit items[6] = {
      {.id = "m1", .queue = "default", .payload = p1},
      {.id = "m2", .queue = "default", .payload = p2, .dedup_ttl_ms = 60000},
      {.id = "m3", .queue = "other", .payload = p3},
      {.id = "m4",
       .queue = "default",
       .payload = p4,
       .record = rec,
       .record_ttl_ms = 60000},
      {.id = "m5", .queue = "default", .payload = p5, .due_at = 5000},
      {.id = "m6", .queue = "default", .payload = p6},
  };

  ck_assert(sluice_broker_enqueue(b, items, 6, &error));
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 4);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "1"));
  ck_assert(bytes_is(delivery_at(got, 1)->payload, "2"));
  ck_assert(bytes_is(delivery_at(got, 2)->payload, "4"));
  ck_assert(bytes_is(delivery_at(got, 3)->payload, "6"));
  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_int_eq(stats.scheduled, 1);
  ck_assert_uint_eq(stats.queues->len, 2);
  sluice_broker_stats_clear(&stats);
}
END_TEST

START_TEST(test_schedule_and_promote)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  guint promoted = 99;
  gint64 next = -1;

  enqueue(b, "late", "default", "late", 3000);
  enqueue(b, "early", "default", "early", 1000);
  enqueue(b, "middle", "default", "middle", 2000);

  /* Nothing ready before its time. */
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 0);
  g_clear_pointer(&got, g_ptr_array_unref);
  ck_assert(sluice_broker_promote_due(b, 999, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 0);
  ck_assert_int_eq(next, 1000);

  /* Earliest first, at most max, and the next due time reported. */
  ck_assert(sluice_broker_promote_due(b, 2500, 1, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  ck_assert_int_eq(next, 2000);
  ck_assert(sluice_broker_promote_due(b, 2500, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  ck_assert_int_eq(next, 3000);
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 2);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "early"));
  ck_assert(bytes_is(delivery_at(got, 1)->payload, "middle"));
  g_clear_pointer(&got, g_ptr_array_unref);

  ck_assert(sluice_broker_promote_due(b, 5000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  ck_assert_int_eq(next, 0); /* empty */
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "late"));
  g_clear_pointer(&got, g_ptr_array_unref);
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  gint64 now;
  guint promoted;
} PromoteJob;

static gpointer
promote_thread(gpointer data)
{
  PromoteJob *job = data;
  gint64 next;

  for (guint round = 0; round < 20; round++) {
    guint n = 0;
    if (!sluice_broker_promote_due(job->broker, job->now, 7, &n, &next, NULL))
      break;
    job->promoted += n;
  }
  return NULL;
}

START_TEST(test_promote_concurrent_once)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  PromoteJob jobs[3];
  GThread *threads[3];

  for (guint i = 0; i < 60; i++) {
    g_autofree gchar *id = g_strdup_printf("s%u", i);
    enqueue(b, id, "default", id, 100 + i);
  }
  for (guint t = 0; t < 3; t++) {
    jobs[t] = (PromoteJob){b, 1000, 0};
    threads[t] = g_thread_new("promote", promote_thread, &jobs[t]);
  }
  for (guint t = 0; t < 3; t++)
    g_thread_join(threads[t]);
  ck_assert_uint_eq(jobs[0].promoted + jobs[1].promoted + jobs[2].promoted, 60);
  ck_assert_int_eq(llen(shared, ns, "default"), 60);
}
END_TEST

/* ---- consume ------------------------------------------------------------ */

START_TEST(test_fetch_priority_and_count)
{
  g_autoptr(SluiceBroker) b = test_broker();
  const gchar *const queues[] = {"high", "low", NULL};
  g_autoptr(GPtrArray) got = NULL;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *lo = g_strdup_printf("low-%u", i);
    g_autofree gchar *hi = g_strdup_printf("high-%u", i);
    enqueue(b, lo, "low", lo, 0);
    enqueue(b, hi, "high", hi, 0);
  }
  /* COUNT 2 takes two, from the first non-empty queue. */
  got = fetch(b, queues, 2, 0);
  ck_assert_uint_eq(got->len, 2);
  ck_assert_str_eq(delivery_at(got, 0)->queue, "high");
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "high-0"));
  ck_assert(bytes_is(delivery_at(got, 1)->payload, "high-1"));
  g_clear_pointer(&got, g_ptr_array_unref);
  /* What is left of "high" goes before anything of "low". */
  got = fetch(b, queues, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "high-2"));
  g_clear_pointer(&got, g_ptr_array_unref);
  got = fetch(b, queues, 10, 0);
  ck_assert_uint_eq(got->len, 3);
  ck_assert_str_eq(delivery_at(got, 0)->queue, "low");
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "low-0"));
  g_clear_pointer(&got, g_ptr_array_unref);
  got = NULL;
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  gint64 block_ms;
  GPtrArray *got;
  GError *error;
  gboolean ok;
} FetchJob;

static gpointer
fetch_thread(gpointer data)
{
  FetchJob *job = data;

  job->got =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
  job->ok = sluice_broker_fetch(job->broker, "c1", q_default, 10, job->block_ms,
                                job->got, &job->error);
  return NULL;
}

/* Waits until @n clients are blocked on the server (bounded). */
static void
wait_blocked(SluiceTestRedis *server, gint64 n)
{
  for (guint i = 0; i < 1000; i++) {
    if (sluice_test_redis_info_int(server, "clients", "blocked_clients") >= n)
      return;
    g_usleep(10 * 1000);
  }
  ck_abort_msg("no client blocked on the server");
}

START_TEST(test_fetch_blocking_and_not)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(SluiceBroker) producer = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  gint64 blmpop = cmd_calls(shared, "blmpop");
  FetchJob job = {b, 60000, NULL, NULL, FALSE};
  GThread *thread;

  /* block_ms 0 never blocks (LMPOP), even on an empty queue. */
  got = fetch(b, q_default, 5, 0);
  ck_assert_uint_eq(got->len, 0);
  ck_assert_int_eq(cmd_calls(shared, "blmpop"), blmpop);

  /* A blocked fetch gets what another client pushes. */
  thread = g_thread_new("fetch", fetch_thread, &job);
  wait_blocked(shared, 1);
  enqueue(producer, "late", "default", "arrived", 0);
  g_thread_join(thread);
  ck_assert_msg(job.ok, "%s", job.error != NULL ? job.error->message : "");
  ck_assert_uint_eq(job.got->len, 1);
  ck_assert(bytes_is(delivery_at(job.got, 0)->payload, "arrived"));
  g_ptr_array_unref(job.got);
}
END_TEST

START_TEST(test_wakeup_interrupts_fetch)
{
  g_autoptr(SluiceBroker) b = test_broker();
  FetchJob job = {b, 600000, NULL, NULL, FALSE};
  GThread *thread;

  thread = g_thread_new("fetch", fetch_thread, &job);
  wait_blocked(shared, 1);
  sluice_broker_wakeup(b);
  /* Without the wakeup this join would outlast the test's timeout. */
  g_thread_join(thread);
  ck_assert_msg(job.ok, "%s", job.error != NULL ? job.error->message : "");
  ck_assert_uint_eq(job.got->len, 0);
  g_ptr_array_unref(job.got);
  /* The fetch connection went back to the pool in a usable state. */
  enqueue(b, "after", "default", "after", 0);
  g_ptr_array_unref(fetch(b, q_default, 1, 0));
}
END_TEST

/* ---- settle ------------------------------------------------------------- */

START_TEST(test_settle_ack_with_record)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) rec = text("succeeded:42");
  g_autoptr(GBytes) read = NULL;
  SluiceSettlement s = {0};
  gint64 pttl;

  enqueue(b, "t1", "default", "work", 0);
  got = fetch(b, q_default, 1, 0);
  s.delivery = delivery_at(got, 0);
  s.action = SLUICE_SETTLE_ACK;
  s.id = "t1";
  s.record = rec;
  s.record_final = TRUE;
  s.record_ttl_ms = 60000;
  settle(b, &s, 1);
  ck_assert_int_eq(s.status, SLUICE_SETTLE_DONE);
  ck_assert(sluice_broker_get_record(b, "t1", &read, &error));
  ck_assert(bytes_is(read, "succeeded:42"));
  pttl = sluice_test_redis_integer(shared, "PTTL {%s}:r:t1", ns);
  ck_assert_int_gt(pttl, 0);
  ck_assert_int_le(pttl, 60000);
}
END_TEST

START_TEST(test_settle_noop_costs_nothing)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  SluiceSettlement s[3] = {{0}};
  gint64 c0, c1, c2;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("n%u", i);
    enqueue(b, id, "default", id, 0);
  }
  got = fetch(b, q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  for (guint i = 0; i < 3; i++) {
    s[i].delivery = delivery_at(got, i);
    s[i].action = SLUICE_SETTLE_ACK;
    s[i].id = "n";
  }
  c0 = sluice_test_redis_info_int(shared, "stats", "total_commands_processed");
  c1 = sluice_test_redis_info_int(shared, "stats", "total_commands_processed");
  settle(b, s, 3);
  c2 = sluice_test_redis_info_int(shared, "stats", "total_commands_processed");
  /* Between two INFOs: only the INFO itself, as with nothing between. */
  ck_assert_int_eq(c2 - c1, c1 - c0);
  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_DONE);
}
END_TEST

START_TEST(test_settle_batch_one_round_trip)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) rec = text("done");
  g_autoptr(GBytes) retry = text("retry-payload");
  g_autoptr(SluiceDeadLetter) dl = dead_letter("b3", "max_attempts", "b3");
  SluiceSettlement s[4] = {{0}};
  SluiceSettlement loader = {0};
  gint64 before, sets;

  for (guint i = 0; i < 5; i++) {
    g_autofree gchar *id = g_strdup_printf("b%u", i);
    enqueue(b, id, "default", id, 0);
  }
  got = fetch(b, q_default, 5, 0);
  ck_assert_uint_eq(got->len, 5);
  for (guint i = 0; i < 4; i++) {
    s[i].delivery = delivery_at(got, i);
    s[i].record = rec;
    s[i].record_final = TRUE;
    s[i].record_ttl_ms = 60000;
  }
  s[0].action = SLUICE_SETTLE_ACK;
  s[0].id = "b0";
  s[1].action = SLUICE_SETTLE_ACK;
  s[1].id = "b1";
  s[2].action = SLUICE_SETTLE_RETRY;
  s[2].id = "b2";
  s[2].record = NULL;
  s[2].reschedule_payload = retry;
  s[2].reschedule_at = 5000;
  s[3].action = SLUICE_SETTLE_DEAD_LETTER;
  s[3].id = "b3";
  s[3].dead_letter = dl;
  /* Records only (results on, fast mode): no script, pipelined SETs. */
  before = cmd_calls(shared, "evalsha");
  sets = cmd_calls(shared, "set");
  settle(b, s, 2);
  ck_assert_int_eq(cmd_calls(shared, "evalsha") - before, 0);
  ck_assert_int_eq(cmd_calls(shared, "set") - sets, 2);
  /* A retry and a dead letter need the script: one call for both. */
  loader.delivery = delivery_at(got, 4);
  loader.action = SLUICE_SETTLE_RETRY;
  loader.id = "b4";
  loader.reschedule_payload = retry;
  loader.reschedule_at = 5000;
  settle(b, &loader, 1); /* loads the script */
  before = cmd_calls(shared, "evalsha");
  settle(b, s + 2, 2);
  ck_assert_int_eq(cmd_calls(shared, "evalsha") - before, 1);
}
END_TEST

START_TEST(test_settle_retry)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) retry = text("attempt-2");
  g_autoptr(GBytes) rec = text("retrying");
  g_autoptr(GBytes) read = NULL;
  SluiceBrokerStats stats;
  SluiceSettlement s = {0};
  guint promoted;
  gint64 next;

  enqueue(b, "r1", "jobs", "attempt-1", 0);
  got = fetch(b, (const gchar *const[]){"jobs", NULL}, 1, 0);
  s.delivery = delivery_at(got, 0);
  s.action = SLUICE_SETTLE_RETRY;
  s.id = "r1";
  s.reschedule_payload = retry;
  s.reschedule_at = 7000;
  s.record = rec;
  s.record_ttl_ms = 60000;
  settle(b, &s, 1);
  g_clear_pointer(&got, g_ptr_array_unref);

  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_int_eq(stats.scheduled, 1);
  sluice_broker_stats_clear(&stats);
  ck_assert(sluice_broker_get_record(b, "r1", &read, &error));
  ck_assert(bytes_is(read, "retrying"));

  ck_assert(sluice_broker_promote_due(b, 6999, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 0);
  ck_assert_int_eq(next, 7000);
  ck_assert(sluice_broker_promote_due(b, 7000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  /* Promoted to the queue it was fetched from, with the new envelope. */
  got = fetch(b, (const gchar *const[]){"jobs", NULL}, 1, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "attempt-2"));
}
END_TEST

START_TEST(test_settle_dead_letter_fields)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(SluiceDeadLetter) got = NULL;
  SluiceDeadLetter *e;

  bury(b, "d1", SLUICE_DLQ_NON_RETRYABLE);
  ck_assert(sluice_broker_dlq_list(b, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 1);
  e = g_ptr_array_index(list, 0);
  ck_assert_ptr_nonnull(e->entry_id);
  ck_assert_str_eq(e->task_id, "d1");
  ck_assert_str_eq(e->task, "tasks.add");
  ck_assert_str_eq(e->reason, SLUICE_DLQ_NON_RETRYABLE);
  ck_assert_str_eq(e->detail, "it failed");
  ck_assert_str_eq(e->source, "default");
  ck_assert_uint_eq(e->deliveries, 2);
  ck_assert_int_eq(e->at, 1700000000000);
  ck_assert(bytes_is(e->payload, "d1"));

  ck_assert(sluice_broker_dlq_get(b, e->entry_id, &got, &error));
  ck_assert_str_eq(got->entry_id, e->entry_id);
  ck_assert(bytes_is(got->payload, "d1"));
}
END_TEST

START_TEST(test_settle_malformed_dead_letter)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  SluiceDeadLetter *dl = sluice_dead_letter_new();
  SluiceDeadLetter *e;
  SluiceSettlement s = {0};

  /* A message without id or task: kept raw, nothing else written. */
  enqueue(b, "ignored", "default", "\xff\x00garbage", 0);
  got = fetch(b, q_default, 1, 0);
  dl->reason = g_strdup(SLUICE_DLQ_MALFORMED);
  dl->source = g_strdup("default");
  s.delivery = delivery_at(got, 0);
  s.action = SLUICE_SETTLE_DEAD_LETTER;
  s.dead_letter = dl;
  settle(b, &s, 1);
  ck_assert(sluice_broker_dlq_list(b, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 1);
  e = g_ptr_array_index(list, 0);
  ck_assert_ptr_null(e->task_id);
  ck_assert_ptr_null(e->task);
  ck_assert_str_eq(e->reason, SLUICE_DLQ_MALFORMED);
  ck_assert(g_bytes_equal(e->payload, delivery_at(got, 0)->payload));
  sluice_dead_letter_free(dl);
}
END_TEST

START_TEST(test_settle_release_goes_first)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GPtrArray) first = NULL;
  g_autoptr(GPtrArray) again = NULL;
  SluiceSettlement s = {0};

  enqueue(b, "a", "default", "A", 0);
  enqueue(b, "b", "default", "B", 0);
  first = fetch(b, q_default, 1, 0);
  ck_assert(bytes_is(delivery_at(first, 0)->payload, "A"));
  s.delivery = delivery_at(first, 0);
  s.action = SLUICE_SETTLE_RELEASE;
  s.id = "a";
  settle(b, &s, 1);
  ck_assert_int_eq(s.status, SLUICE_SETTLE_DONE);
  /* Repeating the settlement (after a lost reply) releases nothing more. */
  settle(b, &s, 1);
  ck_assert_int_eq(llen(shared, ns, "default"), 2);
  /* Released to the consuming end: fetched before B. */
  again = fetch(b, q_default, 2, 0);
  ck_assert_uint_eq(again->len, 2);
  ck_assert(bytes_is(delivery_at(again, 0)->payload, "A"));
  ck_assert(bytes_is(delivery_at(again, 1)->payload, "B"));
}
END_TEST

/* ---- schedule: cancel --------------------------------------------------- */

START_TEST(test_cancel_scheduled)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) rec = text("cancelled");
  g_autoptr(GBytes) read = NULL;
  gboolean removed = FALSE;
  guint promoted;
  gint64 next;

  enqueue(b, "later", "default", "later", 5000);
  ck_assert(
      sluice_broker_cancel_scheduled(b, "later", rec, 60000, &removed, &error));
  ck_assert(removed);
  ck_assert(sluice_broker_get_record(b, "later", &read, &error));
  ck_assert(bytes_is(read, "cancelled"));
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "HLEN {%s}:sched:payload", ns), 0);
  ck_assert(sluice_broker_promote_due(b, 9000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 0);

  /* Not scheduled: nothing removed, nothing written. */
  ck_assert(
      sluice_broker_cancel_scheduled(b, "never", rec, 60000, &removed, &error));
  ck_assert(!removed);
  g_clear_pointer(&read, g_bytes_unref);
  ck_assert(sluice_broker_get_record(b, "never", &read, &error));
  ck_assert_ptr_null(read);
}
END_TEST

/* ---- results ------------------------------------------------------------ */

START_TEST(test_records_put_get)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) running = text("running");
  g_autoptr(GBytes) empty = g_bytes_new(NULL, 0);
  GBytes *read = NULL;

  ck_assert(sluice_broker_get_record(b, "x", &read, &error));
  ck_assert_ptr_null(read);
  ck_assert(sluice_broker_put_record(b, "x", running, FALSE, 60000, &error));
  ck_assert(sluice_broker_get_record(b, "x", &read, &error));
  ck_assert(bytes_is(read, "running"));
  g_bytes_unref(read);
  /* An empty record is a record, not "none". */
  ck_assert(sluice_broker_put_record(b, "x", empty, TRUE, 60000, &error));
  ck_assert(sluice_broker_get_record(b, "x", &read, &error));
  ck_assert_ptr_nonnull(read);
  ck_assert_uint_eq(g_bytes_get_size(read), 0);
  g_bytes_unref(read);
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  SluiceTestRedis *server;
  gchar *channel;
} PutJob;

static gpointer
put_final_thread(gpointer data)
{
  PutJob *job = data;
  g_autoptr(GBytes) rec = text("final");

  /* Wait until the waiter listens, then write the final record. */
  for (guint i = 0; i < 1000; i++) {
    redisReply *r = sluice_test_redis_command(job->server, "PUBSUB NUMSUB %s",
                                              job->channel);
    gboolean listening = r != NULL && r->type == REDIS_REPLY_ARRAY &&
                         r->elements == 2 && r->element[1]->integer == 1;
    if (r != NULL)
      freeReplyObject(r);
    if (listening)
      break;
    g_usleep(10 * 1000);
  }
  sluice_broker_put_record(job->broker, "w1", rec, TRUE, 60000, NULL);
  return NULL;
}

START_TEST(test_wait_record_wakes_on_notification)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(SluiceBroker) writer = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pending = text("running");
  g_autoptr(GBytes) read = NULL;
  PutJob job;
  GThread *thread;

  ck_assert(sluice_broker_put_record(b, "w1", pending, FALSE, 60000, &error));
  /* No safety-net poll: only the notification can end this wait before
   * the test times out. */
  ((SluiceRedisBroker *)b)->wait_poll_ms = G_MAXINT;
  job.broker = writer;
  job.server = shared;
  job.channel = g_strdup_printf("{%s}:done:w1", ns);
  thread = g_thread_new("put", put_final_thread, &job);
  ck_assert(sluice_broker_wait_record(b, "w1", 3600 * 1000, &read, &error));
  g_thread_join(thread);
  ck_assert(bytes_is(read, "final"));
  g_free(job.channel);
  /* The subscriber connection went back clean (or was dropped). */
  ck_assert_int_eq(
      sluice_test_redis_info_int(shared, "stats", "pubsub_channels"), 0);
}
END_TEST

START_TEST(test_wait_record_final_and_timeout)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pending = text("running");
  g_autoptr(GBytes) done = text("succeeded");
  GBytes *read = NULL;

  /* Nothing at all: NULL after the timeout. */
  ck_assert(sluice_broker_wait_record(b, "none", 100, &read, &error));
  ck_assert_ptr_null(read);
  /* Not final: the record as it stands after the timeout. */
  ck_assert(sluice_broker_put_record(b, "p", pending, FALSE, 60000, &error));
  ck_assert(sluice_broker_wait_record(b, "p", 200, &read, &error));
  ck_assert(bytes_is(read, "running"));
  g_bytes_unref(read);
  /* Final before the wait: returned without waiting for a message (the
   * poll is switched off, so a wait would last the test's timeout). */
  ((SluiceRedisBroker *)b)->wait_poll_ms = G_MAXINT;
  ck_assert(sluice_broker_put_record(b, "f", done, TRUE, 60000, &error));
  ck_assert(sluice_broker_wait_record(b, "f", 3600 * 1000, &read, &error));
  ck_assert(bytes_is(read, "succeeded"));
  g_bytes_unref(read);
}
END_TEST

/* ---- revocation --------------------------------------------------------- */

static SluiceRevocation *
rev_at(GPtrArray *a, guint i)
{
  return g_ptr_array_index(a, i);
}

START_TEST(test_revocations)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  GPtrArray *list;

  ck_assert(sluice_broker_revoke(b, "a", 1000, &error));
  ck_assert(sluice_broker_revoke(b, "b", 2000, &error));
  ck_assert(sluice_broker_revoke(b, "c", 3000, &error));
  ck_assert(sluice_broker_revoke(b, "c", 2500, &error)); /* never shorter */

  list = g_ptr_array_new_with_free_func((GDestroyNotify)sluice_revocation_free);
  ck_assert(sluice_broker_list_revocations(b, 0, 500, list, &error));
  ck_assert_uint_eq(list->len, 3);
  ck_assert_str_eq(rev_at(list, 0)->id, "a");
  ck_assert_int_eq(rev_at(list, 0)->expires_at, 1000);
  ck_assert_str_eq(rev_at(list, 2)->id, "c");
  ck_assert_int_eq(rev_at(list, 2)->expires_at, 3000);
  g_ptr_array_set_size(list, 0);

  /* The cursor is exclusive. */
  ck_assert(sluice_broker_list_revocations(b, 2000, 500, list, &error));
  ck_assert_uint_eq(list->len, 1);
  ck_assert_str_eq(rev_at(list, 0)->id, "c");
  g_ptr_array_set_size(list, 0);

  /* Lapsed ones are left out and pruned. */
  ck_assert(sluice_broker_list_revocations(b, 0, 1500, list, &error));
  ck_assert_uint_eq(list->len, 2);
  ck_assert_str_eq(rev_at(list, 0)->id, "b");
  ck_assert_int_eq(sluice_test_redis_integer(shared, "ZCARD {%s}:revoked", ns),
                   2);
  g_ptr_array_unref(list);
}
END_TEST

/* ---- periodic ----------------------------------------------------------- */

typedef struct {
  SluiceBroker *broker;
  gint64 occurrence;
  gboolean claimed;
  GMutex *start;
} ClaimJob;

static gpointer
claim_thread(gpointer data)
{
  ClaimJob *job = data;
  g_autoptr(GBytes) p = text("tick");
  g_autofree gchar *id =
      g_strdup_printf("tick@%" G_GINT64_FORMAT, job->occurrence);
  SluiceSubmit item = {.id = id, .queue = "default", .payload = p};

  g_mutex_lock(job->start); /* both threads start together */
  g_mutex_unlock(job->start);
  ck_assert(sluice_broker_claim_periodic(job->broker, "tick", job->occurrence,
                                         &item, &job->claimed, NULL));
  return NULL;
}

START_TEST(test_periodic_cas_race)
{
  g_autoptr(SluiceBroker) b1 = test_broker();
  g_autoptr(SluiceBroker) b2 = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = text("tick");
  GMutex start;
  ClaimJob jobs[2];
  GThread *threads[2];
  gint64 last = -1;
  gboolean claimed = TRUE;
  SluiceSubmit item = {.id = "old", .queue = "default", .payload = p};

  ck_assert(sluice_broker_last_periodic(b1, "tick", &last, &error));
  ck_assert_int_eq(last, 0);

  for (gint64 occurrence = 1000; occurrence <= 5000; occurrence += 1000) {
    g_mutex_init(&start);
    g_mutex_lock(&start);
    jobs[0] = (ClaimJob){b1, occurrence, FALSE, &start};
    jobs[1] = (ClaimJob){b2, occurrence, FALSE, &start};
    threads[0] = g_thread_new("claim", claim_thread, &jobs[0]);
    threads[1] = g_thread_new("claim", claim_thread, &jobs[1]);
    g_mutex_unlock(&start);
    g_thread_join(threads[0]);
    g_thread_join(threads[1]);
    g_mutex_clear(&start);
    ck_assert_int_eq(jobs[0].claimed + jobs[1].claimed, 1);
  }
  /* Each occurrence dispatched once. */
  ck_assert_int_eq(llen(shared, ns, "default"), 5);
  ck_assert(sluice_broker_last_periodic(b1, "tick", &last, &error));
  ck_assert_int_eq(last, 5000);

  /* Never one older than the newest dispatched. */
  ck_assert(
      sluice_broker_claim_periodic(b1, "tick", 4000, &item, &claimed, &error));
  ck_assert(!claimed);
  ck_assert_int_eq(llen(shared, ns, "default"), 5);
}
END_TEST

/* ---- dead letters ------------------------------------------------------- */

static gint64
reason_count(SluiceBrokerStats *stats, const gchar *reason)
{
  gint64 *n = g_hash_table_lookup(stats->dead_letters_by_reason, reason);
  return n != NULL ? *n : 0;
}

START_TEST(test_dlq_cap_and_counts)
{
  g_autofree gchar *ns = test_namespace();
  g_autoptr(SluiceBroker) b = broker_for(sluice_test_redis_url(shared), ns, 3);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  SluiceBrokerStats stats;

  bury(b, "e1", SLUICE_DLQ_MAX_ATTEMPTS);
  bury(b, "e2", SLUICE_DLQ_EXPIRED);
  bury(b, "e3", SLUICE_DLQ_MAX_ATTEMPTS);
  bury(b, "e4", SLUICE_DLQ_UNKNOWN_TASK);
  bury(b, "e5", SLUICE_DLQ_UNKNOWN_TASK);

  /* The two oldest were dropped, exactly. */
  ck_assert(sluice_broker_dlq_list(b, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 3);
  ck_assert_str_eq(((SluiceDeadLetter *)g_ptr_array_index(list, 0))->task_id,
                   "e3");
  ck_assert_str_eq(((SluiceDeadLetter *)g_ptr_array_index(list, 2))->task_id,
                   "e5");

  /* And the counts by reason follow. */
  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_int_eq(stats.dead_letters, 3);
  ck_assert_int_eq(reason_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS), 1);
  ck_assert_int_eq(reason_count(&stats, SLUICE_DLQ_EXPIRED), 0);
  ck_assert_int_eq(reason_count(&stats, SLUICE_DLQ_UNKNOWN_TASK), 2);
  sluice_broker_stats_clear(&stats);
  ck_assert_int_eq(sluice_test_redis_integer(shared, "XLEN {%s}:dlq", ns), 3);
}
END_TEST

START_TEST(test_dlq_replay_delete_list)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(GPtrArray) page =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(GBytes) fresh = text("replayed");
  g_autoptr(GPtrArray) got = NULL;
  g_autofree gchar *first = NULL;
  g_autofree gchar *second = NULL;
  SluiceDeadLetter *missing = NULL;
  SluiceBrokerStats stats;
  gboolean found = FALSE;
  SluiceSubmit item = {.id = "x1", .queue = "default", .payload = fresh};

  bury(b, "x1", SLUICE_DLQ_MAX_ATTEMPTS);
  bury(b, "x2", SLUICE_DLQ_MAX_ATTEMPTS);
  bury(b, "x3", SLUICE_DLQ_EXPIRED);
  ck_assert(sluice_broker_dlq_list(b, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 3);
  first = g_strdup(((SluiceDeadLetter *)g_ptr_array_index(list, 0))->entry_id);
  second = g_strdup(((SluiceDeadLetter *)g_ptr_array_index(list, 1))->entry_id);

  /* Paging: `after` is exclusive, oldest first. */
  ck_assert(sluice_broker_dlq_list(b, first, 1, page, &error));
  ck_assert_uint_eq(page->len, 1);
  ck_assert_str_eq(((SluiceDeadLetter *)g_ptr_array_index(page, 0))->entry_id,
                   second);

  /* Replay: gone from the DLQ, back in its queue, counts follow. */
  ck_assert(sluice_broker_dlq_replay(b, first, &item, &found, &error));
  ck_assert(found);
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "replayed"));
  ck_assert(sluice_broker_dlq_replay(b, first, &item, &found, &error));
  ck_assert(!found);
  ck_assert_int_eq(llen(shared, ns, "default"), 0);
  ck_assert(!sluice_broker_dlq_get(b, first, &missing, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_NOT_FOUND));
  g_clear_error(&error);
  ck_assert(!sluice_broker_dlq_get(b, "not-an-id", &missing, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_NOT_FOUND));
  g_clear_error(&error);

  /* Delete. */
  ck_assert(sluice_broker_dlq_delete(b, second, &found, &error));
  ck_assert(found);
  ck_assert(sluice_broker_dlq_delete(b, second, &found, &error));
  ck_assert(!found);

  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_int_eq(stats.dead_letters, 1);
  ck_assert_int_eq(reason_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS), 0);
  ck_assert_int_eq(reason_count(&stats, SLUICE_DLQ_EXPIRED), 1);
  sluice_broker_stats_clear(&stats);
}
END_TEST

/* ---- admin -------------------------------------------------------------- */

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

START_TEST(test_stats_and_purge)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  const gchar *const only_a[] = {"a", NULL};
  SluiceBrokerStats stats;
  guint64 removed = 0;

  enqueue(b, "1", "a", "1", 0);
  enqueue(b, "2", "a", "2", 0);
  enqueue(b, "3", "b", "3", 0);
  enqueue(b, "4", "b", "4", 9000);
  ck_assert(sluice_broker_heartbeat(b, "worker-1", 30000, NULL, 0, &error));
  ck_assert(sluice_broker_heartbeat(b, "worker-2", 30000, NULL, 0, &error));

  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_uint_eq(stats.queues->len, 2);
  ck_assert_int_eq(queue_ready(&stats, "a"), 2);
  ck_assert_int_eq(queue_ready(&stats, "b"), 1);
  ck_assert_int_eq(stats.scheduled, 1);
  ck_assert_int_eq(stats.in_flight, -1);
  ck_assert_int_eq(stats.dead_letters, 0);
  ck_assert_int_eq(stats.stale_settles, 0);
  ck_assert_uint_eq(stats.workers->len, 2);
  ck_assert_int_gt(
      ((SluiceWorkerInfo *)g_ptr_array_index(stats.workers, 0))->last_seen_ms,
      0);
  sluice_broker_stats_clear(&stats);

  ck_assert(sluice_broker_leave(b, "worker-2", &error));
  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, only_a, &stats, &error));
  ck_assert_uint_eq(stats.queues->len, 1);
  ck_assert_int_eq(queue_ready(&stats, "a"), 2);
  ck_assert_uint_eq(stats.workers->len, 1);
  ck_assert_str_eq(
      ((SluiceWorkerInfo *)g_ptr_array_index(stats.workers, 0))->id,
      "worker-1");
  sluice_broker_stats_clear(&stats);

  ck_assert(sluice_broker_purge(b, "a", &removed, &error));
  ck_assert_uint_eq(removed, 2);
  ck_assert(sluice_broker_purge(b, "a", &removed, &error));
  ck_assert_uint_eq(removed, 0);
}
END_TEST

/* ---- Redis specifics ---------------------------------------------------- */

START_TEST(test_reconnect_after_client_kill)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  FetchJob job = {b, 600000, NULL, NULL, FALSE};
  GThread *thread;
  redisReply *r;

  g_log_set_writer_func(count_writer, NULL, NULL);
  enqueue(b, "k1", "default", "before", 0); /* an idle pooled connection */

  /* Kill every client: one blocked in a fetch and an idle one. */
  g_ptr_array_unref(fetch(b, q_default, 10, 0));
  thread = g_thread_new("fetch", fetch_thread, &job);
  wait_blocked(shared, 1);
  enqueue(b, "k-other", "other", "x", 0); /* a second, idle connection */
  r = sluice_test_redis_command(shared, "CLIENT KILL TYPE normal SKIPME yes");
  ck_assert(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
  freeReplyObject(r);
  g_thread_join(thread);
  ck_assert(!job.ok);
  ck_assert(g_error_matches(job.error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNAVAILABLE));
  ck_assert(strstr(job.error->message, sluice_test_redis_url(shared)) != NULL);
  g_clear_error(&job.error);
  g_ptr_array_unref(job.got);

  /* The next operations reconnect by themselves; nothing was lost. */
  enqueue(b, "k2", "default", "after", 0);
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "after"));
  ck_assert_int_eq(g_atomic_int_get(&lost_lines), 1);
  ck_assert_int_eq(g_atomic_int_get(&back_lines), 1);
}
END_TEST

/* Producers, consumers and a client killer at once (docs/redis.md, R19): the
 * pool stays consistent, producers that retry after a lost reply create
 * no duplicate (idempotency claims), and what is lost is bounded by the
 * fetches whose reply was lost (at most once). */
#define CHURN_PRODUCERS 3
#define CHURN_PER_PRODUCER 400
#define CHURN_FETCH_MAX 50

typedef struct {
  SluiceBroker *broker;
  GMutex lock;
  GHashTable *seen; /* payload -> count */
  guint dups;
  guint failed_fetches;
  gint producers_left;
  gint stop;
  guint producer;
  SluiceTestRedis *server;
} Churn;

typedef struct {
  Churn *churn;
  guint index;
} ChurnProducer;

static gpointer
churn_producer(gpointer data)
{
  ChurnProducer *cp = data;
  Churn *c = cp->churn;

  for (guint i = 0; i < CHURN_PER_PRODUCER; i++) {
    g_autofree gchar *id = g_strdup_printf("p%u-%04u", cp->index, i);
    g_autoptr(GBytes) p = text(id);
    SluiceSubmit item = {
        .id = id, .queue = "default", .payload = p, .dedup_ttl_ms = 600000};

    for (;;) {
      g_autoptr(GError) error = NULL;
      if (sluice_broker_enqueue(c->broker, &item, 1, &error))
        break;
      ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                    SLUICE_BROKER_ERROR_UNAVAILABLE),
                    "%s", error->message);
      g_usleep(5 * 1000);
    }
  }
  g_atomic_int_add(&c->producers_left, -1);
  return NULL;
}

static gpointer
churn_consumer(gpointer data)
{
  Churn *c = data;
  GPtrArray *got =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  while (!g_atomic_int_get(&c->stop)) {
    g_autoptr(GError) error = NULL;

    g_ptr_array_set_size(got, 0);
    if (!sluice_broker_fetch(c->broker, "c", q_default, CHURN_FETCH_MAX, 50,
                             got, &error)) {
      ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_UNAVAILABLE));
      g_mutex_lock(&c->lock);
      c->failed_fetches++;
      g_mutex_unlock(&c->lock);
      g_usleep(5 * 1000);
      continue;
    }
    g_mutex_lock(&c->lock);
    for (guint k = 0; k < got->len; k++) {
      gsize len;
      const gchar *d = g_bytes_get_data(delivery_at(got, k)->payload, &len);
      gchar *key = g_strndup(d, len);
      if (g_hash_table_contains(c->seen, key)) {
        c->dups++;
        g_free(key);
      } else {
        g_hash_table_add(c->seen, key);
      }
    }
    g_mutex_unlock(&c->lock);
  }
  g_ptr_array_unref(got);
  return NULL;
}

static gpointer
churn_killer(gpointer data)
{
  Churn *c = data;
  redisContext *ctx = sluice_test_redis_connect(c->server);

  ck_assert_ptr_nonnull(ctx);
  while (g_atomic_int_get(&c->producers_left) > 0) {
    redisReply *r = redisCommand(ctx, "CLIENT KILL TYPE normal SKIPME yes");
    if (r != NULL)
      freeReplyObject(r);
    g_usleep(50 * 1000);
  }
  redisFree(ctx);
  return NULL;
}

START_TEST(test_churn_with_killed_connections)
{
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
  Churn c = {0};
  ChurnProducer producers[CHURN_PRODUCERS];
  GThread *threads[CHURN_PRODUCERS + 3];
  guint total = CHURN_PRODUCERS * CHURN_PER_PRODUCER;
  guint fetched;

  c.broker = broker_for(sluice_test_redis_url(server), "churn", 0);
  c.server = server;
  c.seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_mutex_init(&c.lock);
  c.producers_left = CHURN_PRODUCERS;
  for (guint i = 0; i < CHURN_PRODUCERS; i++) {
    producers[i] = (ChurnProducer){&c, i};
    threads[i] = g_thread_new("producer", churn_producer, &producers[i]);
  }
  threads[CHURN_PRODUCERS] = g_thread_new("consumer", churn_consumer, &c);
  threads[CHURN_PRODUCERS + 1] = g_thread_new("consumer", churn_consumer, &c);
  threads[CHURN_PRODUCERS + 2] = g_thread_new("killer", churn_killer, &c);
  for (guint i = 0; i < CHURN_PRODUCERS; i++)
    g_thread_join(threads[i]);
  g_thread_join(threads[CHURN_PRODUCERS + 2]);
  /* Let the consumers drain what is left. */
  /* (A failed LLEN, on a connection the killer closed, is not 0.) */
  while (llen(server, "churn", "default") != 0)
    g_usleep(10 * 1000);
  g_atomic_int_set(&c.stop, 1);
  g_thread_join(threads[CHURN_PRODUCERS]);
  g_thread_join(threads[CHURN_PRODUCERS + 1]);

  fetched = g_hash_table_size(c.seen);
  ck_assert_uint_eq(c.dups, 0);
  ck_assert_uint_le(fetched, total);
  ck_assert_msg(total - fetched <= c.failed_fetches * CHURN_FETCH_MAX,
                "lost %u with %u failed fetches", total - fetched,
                c.failed_fetches);
  g_hash_table_unref(c.seen);
  g_mutex_clear(&c.lock);
  sluice_broker_unref(c.broker);
}
END_TEST

START_TEST(test_restart_loses_nothing_acknowledged)
{
  SluiceTestRedisOptions opts = {.appendonly = TRUE};
  g_autoptr(SluiceTestRedis) server = own_server(&opts);
  g_autoptr(SluiceBroker) b =
      broker_for(sluice_test_redis_url(server), "restart", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  guint acknowledged = 0;
  gboolean back = FALSE;

  g_log_set_writer_func(count_writer, NULL, NULL);
  for (guint i = 0; i < 200; i++) {
    g_autofree gchar *id = g_strdup_printf("m%03u", i);
    enqueue(b, id, "default", id, i % 2 == 0 ? 0 : 1000 + i);
    acknowledged++;
  }
  sluice_test_redis_kill(server, SIGKILL);

  /* Down: UNAVAILABLE naming the URL, and a single warning however many
   * calls fail. */
  for (guint i = 0; i < 3; i++) {
    g_autoptr(GBytes) p = text("x");
    SluiceSubmit item = {.id = "down", .queue = "default", .payload = p};
    ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNAVAILABLE));
    ck_assert(strstr(error->message, sluice_test_redis_url(server)) != NULL);
    g_clear_error(&error);
  }
  ck_assert_int_eq(g_atomic_int_get(&lost_lines), 1);

  ck_assert(sluice_test_redis_restart(server, &error));
  for (guint i = 0; i < 200 && !back; i++) {
    back = sluice_redis_broker_ping(b, NULL);
    if (!back)
      g_usleep(50 * 1000); /* the backoff period */
  }
  ck_assert(back);
  ck_assert_int_eq(g_atomic_int_get(&lost_lines), 1);
  ck_assert_int_eq(g_atomic_int_get(&back_lines), 1);

  {
    guint promoted;
    gint64 next;
    ck_assert(
        sluice_broker_promote_due(b, 10000, 1000, &promoted, &next, &error));
    ck_assert_uint_eq(promoted, 100);
  }
  for (;;) {
    g_autoptr(GPtrArray) got = fetch(b, q_default, 64, 0);
    if (got->len == 0)
      break;
    for (guint k = 0; k < got->len; k++) {
      gsize len;
      const gchar *data = g_bytes_get_data(delivery_at(got, k)->payload, &len);
      g_hash_table_add(seen, g_strndup(data, len));
    }
  }
  ck_assert_uint_eq(g_hash_table_size(seen), acknowledged);
}
END_TEST

START_TEST(test_eviction_policy_warned_once)
{
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
  g_autoptr(SluiceBroker) b =
      broker_for(sluice_test_redis_url(server), "evict", 0);
  g_autoptr(GError) error = NULL;
  FetchJob job = {b, 600000, NULL, NULL, FALSE};
  GThread *thread;

  g_log_set_writer_func(count_writer, NULL, NULL);
  freeReplyObject(sluice_test_redis_command(
      server, "CONFIG SET maxmemory-policy allkeys-lru"));
  /* Several connections (one blocked in a fetch), one warning. */
  thread = g_thread_new("fetch", fetch_thread, &job);
  wait_blocked(server, 1);
  ck_assert(sluice_redis_broker_ping(b, &error));
  enqueue(b, "e1", "other", "x", 0);
  sluice_broker_wakeup(b);
  g_thread_join(thread);
  g_ptr_array_unref(job.got);
  ck_assert_int_eq(g_atomic_int_get(&policy_lines), 1);
}
END_TEST

START_TEST(test_noscript_after_flush)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  redisReply *r;

  enqueue(b, "s1", "default", "one", 0);
  r = sluice_test_redis_command(shared, "SCRIPT FLUSH");
  ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  enqueue(b, "s2", "default", "two", 0);
  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 2);
}
END_TEST

START_TEST(test_auth)
{
  SluiceTestRedisOptions opts = {.requirepass = "s3cret:@/pw",
                                 .acl_user = "sluice",
                                 .acl_password = "user-pw"};
  g_autoptr(SluiceTestRedis) server = own_server(&opts);
  guint16 port = sluice_test_redis_port(server);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *acl_url =
      g_strdup_printf("redis://sluice:user-pw@127.0.0.1:%u/0", port);
  g_autofree gchar *wrong_pw =
      g_strdup_printf("redis://:not-it@127.0.0.1:%u/0", port);
  g_autofree gchar *wrong_user =
      g_strdup_printf("redis://nobody:user-pw@127.0.0.1:%u/0", port);
  g_autofree gchar *no_pw = g_strdup_printf("redis://127.0.0.1:%u/0", port);
  SluiceBroker *b;

  /* requirepass, percent-encoded in the URL. */
  b = broker_for(sluice_test_redis_url(server), "auth", 0);
  ck_assert_msg(sluice_redis_broker_ping(b, &error), "%s",
                error != NULL ? error->message : "");
  enqueue(b, "a1", "default", "x", 0);
  sluice_broker_unref(b);

  /* An ACL user. */
  b = broker_for(acl_url, "auth", 0);
  ck_assert_msg(sluice_redis_broker_ping(b, &error), "%s",
                error != NULL ? error->message : "");
  g_ptr_array_unref(fetch(b, q_default, 1, 0));
  sluice_broker_unref(b);

  /* Wrong password, wrong user, none: AUTH errors that say what to do and
   * never show a password. */
  b = broker_for(wrong_pw, "auth", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert(strstr(error->message, "password") != NULL);
  ck_assert(strstr(error->message, "not-it") == NULL);
  ck_assert(strstr(error->message, "***") != NULL);
  g_clear_error(&error);
  sluice_broker_unref(b);

  b = broker_for(wrong_user, "auth", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert(strstr(error->message, "user-pw") == NULL);
  g_clear_error(&error);
  sluice_broker_unref(b);

  b = broker_for(no_pw, "auth", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert(strstr(error->message, "requires a password") != NULL);
  g_clear_error(&error);
  sluice_broker_unref(b);
}
END_TEST

START_TEST(test_unreachable_url)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *url = NULL;
  g_autofree gchar *shown = NULL;
  SluiceBroker *b;
  int fd;
  guint16 port;

  /* A port nothing listens on: bind one, note it, close it. */
  {
    struct sockaddr_in addr = {0};
    socklen_t len = sizeof addr;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    getsockname(fd, (struct sockaddr *)&addr, &len);
    port = ntohs(addr.sin_port);
    close(fd);
  }
  url = g_strdup_printf("redis://me:hunter2@127.0.0.1:%u/3", port);
  shown = g_strdup_printf("redis://me:***@127.0.0.1:%u/3", port);
  b = broker_for(url, "down", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNAVAILABLE));
  ck_assert_msg(strstr(error->message, shown) != NULL, "%s", error->message);
  ck_assert(strstr(error->message, "hunter2") == NULL);
  g_clear_error(&error);
  /* Within the backoff period the next call fails at once, the same way. */
  {
    g_autoptr(GPtrArray) out = g_ptr_array_new();
    ck_assert(!sluice_broker_fetch(b, "c", q_default, 1, 0, out, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNAVAILABLE));
    ck_assert(strstr(error->message, shown) != NULL);
  }
  sluice_broker_unref(b);
}
END_TEST

START_TEST(test_options_checked)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;
  const gchar *bad_urls[] = {
      "http://localhost",    "redis://",
      "redis://host/notadb", "redis://user@host",
      "rediss://host",       "unix://relative/path",
      "unix:///tmp/s?db=x",  "redis://host:6379/1?x=y",
  };

  sluice_redis_options_init(&options);
  for (gsize i = 0; i < G_N_ELEMENTS(bad_urls); i++) {
    options.url = bad_urls[i];
    ck_assert_ptr_null(sluice_redis_broker_new(&options, NULL, &error));
    ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                  SLUICE_BROKER_ERROR_INVALID),
                  "%s", bad_urls[i]);
    g_clear_error(&error);
  }
  options.url = NULL;
  options.namespace_ = "bad{ns}";
  ck_assert_ptr_null(sluice_redis_broker_new(&options, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  g_clear_error(&error);

  options.namespace_ = NULL;
  options.mode = (SluiceRedisMode)42;
  ck_assert_ptr_null(sluice_redis_broker_new(&options, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  ck_assert(strstr(error->message, "SLUICE_REDIS_FAST") != NULL);
  g_clear_error(&error);

  /* The reliable mode is built too (tests/test-redis-reliable.c). */
  options.mode = SLUICE_REDIS_RELIABLE;
  {
    g_autoptr(SluiceBroker) b = sluice_redis_broker_new(&options, NULL, &error);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(sluice_broker_get_name(b), "redis-reliable");
  }

  /* Defaults: reliable mode (the CLI's too), a valid broker without
   * connecting. */
  {
    g_autoptr(SluiceBroker) b = sluice_redis_broker_new(NULL, NULL, &error);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(sluice_broker_get_name(b), "redis-reliable");
  }
  options.mode = SLUICE_REDIS_FAST;
  {
    g_autoptr(SluiceBroker) b = sluice_redis_broker_new(&options, NULL, &error);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(sluice_broker_get_name(b), "redis-fast");
    ck_assert_uint_eq(sluice_broker_get_caps(b),
                      SLUICE_BROKER_CAP_SHARED | SLUICE_BROKER_CAP_DURABLE);
  }
}
END_TEST

START_TEST(test_url_parsing)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisUrl url;

  ck_assert(sluice_redis_url__parse("redis://us%40r:p%40ss%3Aw@[::1]:7000/4",
                                    &url, &error));
  ck_assert(!url.is_unix);
  ck_assert_str_eq(url.host, "::1");
  ck_assert_int_eq(url.port, 7000);
  ck_assert_int_eq(url.db, 4);
  ck_assert_str_eq(url.user, "us@r");
  ck_assert_str_eq(url.password, "p@ss:w");
  ck_assert_str_eq(url.display, "redis://us%40r:***@[::1]:7000/4");
  sluice_redis_url__clear(&url);

  ck_assert(sluice_redis_url__parse("redis://localhost", &url, &error));
  ck_assert_int_eq(url.port, 6379);
  ck_assert_int_eq(url.db, 0);
  ck_assert_ptr_null(url.password);
  sluice_redis_url__clear(&url);

  ck_assert(
      sluice_redis_url__parse("unix:///run/redis.sock?db=2", &url, &error));
  ck_assert(url.is_unix);
  ck_assert_str_eq(url.path, "/run/redis.sock");
  ck_assert_int_eq(url.db, 2);
  sluice_redis_url__clear(&url);
}
END_TEST

START_TEST(test_unix_socket_and_db)
{
  SluiceTestRedisOptions opts = {.unix_socket = TRUE};
  g_autoptr(SluiceTestRedis) server = own_server(&opts);
  g_autofree gchar *url =
      g_strdup_printf("%s?db=2", sluice_test_redis_socket_url(server));
  g_autoptr(SluiceBroker) b = broker_for(url, "unix", 0);
  g_autoptr(GPtrArray) got = NULL;
  redisReply *r;

  enqueue(b, "u1", "default", "via-socket", 0);
  r = sluice_test_redis_command(server, "SELECT 2");
  freeReplyObject(r);
  ck_assert_int_eq(sluice_test_redis_integer(server, "LLEN {unix}:q:default"),
                   1);
  got = fetch(b, q_default, 1, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "via-socket"));
}
END_TEST

/* A workload that touches every kind of key. */
static void
varied_workload(SluiceBroker *b)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) rec = text("rec");
  g_autoptr(GBytes) p = text("p");
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(SluiceDeadLetter) dl = dead_letter("v3", "expired", "v3");
  SluiceSubmit items[3] = {
      {.id = "v1",
       .queue = "q1",
       .payload = p,
       .dedup_ttl_ms = 60000,
       .record = rec,
       .record_ttl_ms = 60000},
      {.id = "v2", .queue = "q2", .payload = p, .due_at = 99999},
      {.id = "v3", .queue = "q1", .payload = p},
  };
  SluiceSettlement s[2] = {{0}};
  SluiceSubmit tick = {
      .id = "tick@1", .queue = "q1", .payload = p, .dedup_ttl_ms = 60000};
  gboolean claimed;

  ck_assert(sluice_broker_enqueue(b, items, 3, &error));
  got = fetch(b, (const gchar *const[]){"q1", NULL}, 2, 0);
  ck_assert_uint_eq(got->len, 2);
  s[0] = (SluiceSettlement){.delivery = delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "v1",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = delivery_at(got, 1),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "v3",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000,
                            .dead_letter = dl};
  ck_assert(sluice_broker_settle(b, "w", s, 2, &error));
  ck_assert(sluice_broker_put_record(b, "v2", rec, FALSE, 60000, &error));
  ck_assert(sluice_broker_revoke(b, "v2", 99999999999, &error));
  ck_assert(
      sluice_broker_claim_periodic(b, "tick", 1, &tick, &claimed, &error));
  ck_assert(sluice_broker_heartbeat(b, "w", 30000, NULL, 0, &error));
  enqueue(b, "v4", "q3", "p", 0);
}

START_TEST(test_every_key_tagged_and_per_task_keys_expire)
{
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
  g_autoptr(SluiceBroker) b =
      broker_for(sluice_test_redis_url(server), "tagged", 0);
  const gchar *shared_keys[] = {"{tagged}:q:q1",
                                "{tagged}:q:q3",
                                "{tagged}:schedule",
                                "{tagged}:sched:payload",
                                "{tagged}:sched:queue",
                                "{tagged}:revoked",
                                "{tagged}:periodic:tick",
                                "{tagged}:dlq",
                                "{tagged}:dlq:count",
                                "{tagged}:queues",
                                "{tagged}:workers",
                                "{tagged}:meta",
                                "{tagged}:revoked:seq",
                                "{tagged}:revoked:n",
                                "{tagged}:dlq:ids",
                                "{tagged}:dlq:dropped",
                                NULL};
  gchar *cursor = g_strdup("0");
  guint keys = 0, per_task = 0;

  varied_workload(b);
  do {
    redisReply *r =
        sluice_test_redis_command(server, "SCAN %s COUNT 100", cursor);
    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    g_free(cursor);
    cursor = g_strdup(r->element[0]->str);
    for (size_t i = 0; i < r->element[1]->elements; i++) {
      const gchar *key = r->element[1]->element[i]->str;
      keys++;
      ck_assert_msg(g_str_has_prefix(key, "{tagged}:"), "untagged key %s", key);
      if (!g_strv_contains(shared_keys, key)) {
        per_task++;
        ck_assert_msg(sluice_test_redis_integer(server, "PTTL %s", key) > 0,
                      "per-task key %s has no TTL", key);
      }
    }
    freeReplyObject(r);
  } while (strcmp(cursor, "0") != 0);
  g_free(cursor);
  /* r:v1, r:v2, r:v3, dedup:v1, dedup:tick@1 */
  ck_assert_uint_eq(per_task, 5);
  /* The 11 shared keys the workload makes, plus meta, revoked:seq,
   * revoked:n and dlq:ids. */
  ck_assert_uint_eq(keys, 5 + 15);
}
END_TEST

static gboolean
task_ok_for_mode(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return TRUE;
}

/* One mode per namespace: the first client records it; a producer or a
 * worker of the other mode is refused with an error naming both, so a fast
 * producer and a reliable worker never silently miss each other. */
static void
assert_mode_refused(const gchar *ns, SluiceRedisMode first,
                    SluiceRedisMode second)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;
  g_autoptr(SluiceBroker) a = NULL;
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceWorker) worker = NULL;
  g_autofree gchar *id = NULL;
  const gchar *theirs = first == SLUICE_REDIS_FAST ? "fast" : "reliable";
  const gchar *mine = second == SLUICE_REDIS_FAST ? "fast" : "reliable";

  sluice_redis_options_init(&options);
  options.url = sluice_test_redis_url(shared);
  options.namespace_ = ns;
  options.mode = first;
  a = sluice_redis_broker_new(&options, NULL, &error);
  client = sluice_client_new(a, NULL, &error);
  id = sluice_client_enqueue(client, "t.x", NULL, NULL, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  g_clear_pointer(&client, sluice_client_unref);

  options.mode = second;
  b = sluice_redis_broker_new(&options, NULL, &error);
  client = sluice_client_new(b, NULL, &error);
  ck_assert_ptr_null(sluice_client_enqueue(client, "t.x", NULL, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  ck_assert_msg(strstr(error->message, theirs) != NULL &&
                    strstr(error->message, mine) != NULL &&
                    strstr(error->message, "SluiceRedisOptions.mode") != NULL,
                "%s", error->message);
  g_clear_error(&error);
  ck_assert(sluice_registry_add(registry, "t.x", task_ok_for_mode, NULL, NULL,
                                NULL, &error));
  worker = sluice_worker_new(b, registry, NULL, &error);
  ck_assert_ptr_nonnull(worker);
  ck_assert(!sluice_worker_start(worker, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
}

START_TEST(test_one_mode_per_namespace)
{
  assert_mode_refused("mode-a", SLUICE_REDIS_FAST, SLUICE_REDIS_RELIABLE);
  assert_mode_refused("mode-b", SLUICE_REDIS_RELIABLE, SLUICE_REDIS_FAST);
}
END_TEST

START_TEST(test_namespaces_isolated)
{
  g_autoptr(SluiceBroker) a =
      broker_for(sluice_test_redis_url(shared), "iso-a", 0);
  g_autoptr(SluiceBroker) b =
      broker_for(sluice_test_redis_url(shared), "iso-b", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) rec = text("final");
  g_autoptr(GPtrArray) got = NULL;
  GBytes *read = NULL;
  SluiceBrokerStats stats;

  bury(a, "buried", SLUICE_DLQ_EXPIRED);
  enqueue(a, "same-id", "default", "from-a", 0);
  ck_assert(sluice_broker_put_record(a, "same-id", rec, TRUE, 60000, &error));

  got = fetch(b, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 0);
  ck_assert(sluice_broker_wait_record(b, "same-id", 100, &read, &error));
  ck_assert_ptr_null(read);
  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_uint_eq(stats.queues->len, 0);
  ck_assert_int_eq(stats.dead_letters, 0);
  sluice_broker_stats_clear(&stats);

  g_clear_pointer(&got, g_ptr_array_unref);
  got = fetch(a, q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(bytes_is(delivery_at(got, 0)->payload, "from-a"));
  /* Clean up the shared server for the other tests. */
  sluice_test_redis_integer(shared, "DEL {iso-a}:q:default {iso-a}:dlq");
}
END_TEST

START_TEST(test_oom_refuses_work_but_drains)
{
  g_autoptr(SluiceTestRedis) server = own_server(NULL);
  g_autoptr(SluiceBroker) b =
      broker_for(sluice_test_redis_url(server), "oom", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = text("p");
  g_autoptr(GBytes) rec = text("done");
  g_autoptr(GBytes) retry = text("again");
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) read = NULL;
  SluiceSubmit item = {.id = "new", .queue = "default", .payload = p};
  SluiceSettlement s[2] = {{0}};
  redisReply *r;

  enqueue(b, "o1", "default", "one", 0);
  enqueue(b, "o2", "default", "two", 0);
  enqueue(b, "o3", "default", "three", 0);
  got = fetch(b, q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  /* Fresh scripts on the server, so the drain below also loads one. */
  freeReplyObject(sluice_test_redis_command(server, "SCRIPT FLUSH"));
  r = sluice_test_redis_command(server, "CONFIG SET maxmemory 1");
  ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);

  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FULL),
      "%s", error->message);
  g_clear_error(&error);

  s[0] = (SluiceSettlement){.delivery = delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "o1",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = delivery_at(got, 1),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "o2",
                            .reschedule_payload = retry,
                            .reschedule_at = 1};
  ck_assert_msg(sluice_broker_settle(b, "w", s, 2, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_broker_get_record(b, "o1", &read, &error));
  ck_assert(bytes_is(read, "done"));
  g_clear_pointer(&read, g_bytes_unref);
  /* Records only: the plain SET is refused, the allow-oom script is not. */
  s[0] = (SluiceSettlement){.delivery = delivery_at(got, 2),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "o3",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  ck_assert_msg(sluice_broker_settle(b, "w", s, 1, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_broker_get_record(b, "o3", &read, &error));
  ck_assert(bytes_is(read, "done"));

  r = sluice_test_redis_command(server, "CONFIG SET maxmemory 0");
  freeReplyObject(r);
  ck_assert(sluice_broker_enqueue(b, &item, 1, &error));
}
END_TEST

/* ---- Suite --------------------------------------------------------------- */

static Suite *
redis_suite(void)
{
  Suite *s = suite_create("redis-fast");
  TCase *contract = tcase_create("contract");
  TCase *redis = tcase_create("redis");

  tcase_add_unchecked_fixture(contract, shared_setup, shared_teardown);
  tcase_set_timeout(contract, 60);
  tcase_add_test(contract, test_enqueue_fetch_one);
  tcase_add_test(contract, test_enqueue_batch_one_round_trip);
  tcase_add_test(contract, test_enqueue_idempotent);
  tcase_add_test(contract, test_enqueue_mixed_batch_keeps_order);
  tcase_add_test(contract, test_schedule_and_promote);
  tcase_add_test(contract, test_promote_concurrent_once);
  tcase_add_test(contract, test_fetch_priority_and_count);
  tcase_add_test(contract, test_fetch_blocking_and_not);
  tcase_add_test(contract, test_wakeup_interrupts_fetch);
  tcase_add_test(contract, test_settle_ack_with_record);
  tcase_add_test(contract, test_settle_noop_costs_nothing);
  tcase_add_test(contract, test_settle_batch_one_round_trip);
  tcase_add_test(contract, test_settle_retry);
  tcase_add_test(contract, test_settle_dead_letter_fields);
  tcase_add_test(contract, test_settle_malformed_dead_letter);
  tcase_add_test(contract, test_settle_release_goes_first);
  tcase_add_test(contract, test_cancel_scheduled);
  tcase_add_test(contract, test_records_put_get);
  tcase_add_test(contract, test_wait_record_wakes_on_notification);
  tcase_add_test(contract, test_wait_record_final_and_timeout);
  tcase_add_test(contract, test_revocations);
  tcase_add_test(contract, test_periodic_cas_race);
  tcase_add_test(contract, test_dlq_cap_and_counts);
  tcase_add_test(contract, test_dlq_replay_delete_list);
  tcase_add_test(contract, test_stats_and_purge);
  suite_add_tcase(s, contract);

  tcase_add_unchecked_fixture(redis, shared_setup, shared_teardown);
  tcase_set_timeout(redis, 90);
  tcase_add_test(redis, test_reconnect_after_client_kill);
  tcase_add_test(redis, test_churn_with_killed_connections);
  tcase_add_test(redis, test_restart_loses_nothing_acknowledged);
  tcase_add_test(redis, test_eviction_policy_warned_once);
  tcase_add_test(redis, test_noscript_after_flush);
  tcase_add_test(redis, test_auth);
  tcase_add_test(redis, test_unreachable_url);
  tcase_add_test(redis, test_options_checked);
  tcase_add_test(redis, test_url_parsing);
  tcase_add_test(redis, test_unix_socket_and_db);
  tcase_add_test(redis, test_every_key_tagged_and_per_task_keys_expire);
  tcase_add_test(redis, test_namespaces_isolated);
  tcase_add_test(redis, test_one_mode_per_namespace);
  tcase_add_test(redis, test_oom_refuses_work_but_drains);
  suite_add_tcase(s, redis);
  return s;
}

int
main(void)
{
  g_autofree gchar *server = sluice_test_redis_require();
  SRunner *runner = srunner_create(redis_suite());
  int failed;

  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

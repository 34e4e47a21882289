/* test-redis-partitions.c - namespaces split in partitions
 * (brokers/redis/redis-partitioned.c) beyond the conformance suite
 * (test-redis-partitions-conformance):
 *
 *   spread     12 partitions on a local cluster of three masters: each
 *              master serves 4 partitions (their tags cover the slot
 *              space evenly) and holds exactly their keys (DBSIZE per
 *              node)
 *   number     the number of partitions a namespace records: a client of
 *              another number is refused while the namespace holds tasks,
 *              and allowed once it is empty; an unpartitioned namespace
 *              with tasks refuses a partitioned client; the URL's
 *              ?partitions=N and SluiceRedisOptions.partitions
 *   fairness   two partitions both with work: one consumer, fetching one
 *              message at a time, takes from both in turn, and so does a
 *              worker of one executor; a blocked fetch gets a message that
 *              lands in either partition
 *   routing    a task's partition is a hash of its id, and its record is
 *              found there; each partition's tag sits in its share of the
 *              slot space
 */
#include "config.h"

#include <check.h>
#include <string.h>
#include <sys/wait.h>

#include <sluice/sluice.h>

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/redis-partitions.h"
#include "brokers/redis/net/redis-net.h"
#include "tests/helpers/broker-calls.h"
#include "tests/helpers/redis-cluster-fixture.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/redis-replace.h"

static const gchar *const q_default[] = {"default", NULL};

/* The field "partitions" of {ns}:meta, or NULL. */
static gchar *
recorded_partitions(SluiceTestRedis *server, const gchar *ns)
{
  redisReply *r =
      sluice_test_redis_command(server, "HGET {%s}:meta partitions", ns);
  gchar *value;

  ck_assert_ptr_nonnull(r);
  value = r->type == REDIS_REPLY_STRING ? g_strdup(r->str) : NULL;
  freeReplyObject(r);
  return value;
}

static SluiceBroker *
partitioned_new(SluiceRedisMode mode, const gchar *url, const gchar *ns,
                guint partitions, GError **error)
{
  SluiceRedisOptions options;

  sluice_redis_options_init(&options);
  options.mode = mode;
  options.url = url;
  options.ns = ns;
  options.partitions = partitions;
  options.reconnect_max_backoff_ms = 200;
  return sluice_redis_broker_new(&options, NULL, error);
}

static SluiceBroker *
partitioned(const gchar *url, const gchar *ns, guint partitions)
{
  g_autoptr(GError) error = NULL;
  SluiceBroker *b =
      partitioned_new(SLUICE_REDIS_RELIABLE, url, ns, partitions, &error);

  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  return b;
}

/* An id whose partition among @n is @k (the @nth such, from "t<k>-..."). */
static gchar *
id_in_partition(guint k, guint n, guint nth)
{
  for (guint i = 0;; i++) {
    gchar *id = g_strdup_printf("t%u-%u", k, i);

    if (sluice_redis__partition_of(id, n) == k && nth-- == 0)
      return id;
    g_free(id);
  }
}

/* ---- spread -------------------------------------------------------------- */

START_TEST(test_every_master_holds_some_partition)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(3, 0, &error);
  g_autoptr(SluiceBroker) b = NULL;
  gint64 expected[3] = {0, 0, 0};
  guint partitions_of[3] = {0, 0, 0};

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  b = partitioned(sluice_test_cluster_url(cluster), "spread", 12);
  /* 240 tasks with records: each partition gets about 20, and writes its
   * queue, its records and its known-queues set in its own slot. */
  for (guint i = 0; i < 240; i++) {
    g_autofree gchar *id = g_strdup_printf("spread-%u", i);
    g_autoptr(GBytes) payload = sluice_test_text(id);
    g_autoptr(GBytes) record = sluice_test_text("queued");
    SluiceSubmit item = {.id = id,
                         .queue = "default",
                         .payload = payload,
                         .record = record,
                         .record_ttl_ms = 600000};

    ck_assert(sluice_broker_enqueue(b, &item, 1, &error));
  }
  /* Where each partition's keys are: the master serving its slot. */
  for (guint k = 0; k < 12; k++) {
    SluiceRedisBroker *part =
        SLUICE_REDIS_BROKER(sluice_redis__partition_at(b, k));
    SluiceTestRedis *owner =
        sluice_test_cluster_owner(cluster, part->keys.slot);
    gint64 tasks = 0;
    guint m;

    ck_assert_ptr_nonnull(owner);
    for (m = 0; m < 3 && sluice_test_cluster_node(cluster, m) != owner; m++)
      ;
    ck_assert_uint_lt(m, 3);
    partitions_of[m]++;
    for (guint i = 0; i < 240; i++) {
      g_autofree gchar *id = g_strdup_printf("spread-%u", i);
      tasks += sluice_redis__partition_of(id, 12) == k;
    }
    /* A record per task, and the stream, the known-queues set and
     * {ns#k}:meta (the mode) of a partition that was written to. */
    expected[m] += tasks > 0 ? tasks + 3 : 0;
  }
  /* {spread}:meta, which records the number of partitions (and the mode
   * of the client that read it), is a key of its own slot. */
  {
    SluiceTestRedis *owner = sluice_test_cluster_owner(
        cluster, sluice_test_cluster_keyslot(cluster, "{spread}:meta"));
    for (guint m = 0; m < 3; m++)
      if (sluice_test_cluster_node(cluster, m) == owner)
        expected[m]++;
  }
  for (guint m = 0; m < 3; m++) {
    gint64 keys =
        sluice_test_cluster_dbsize(sluice_test_cluster_node(cluster, m));

    g_print("master=%u partitions=%u keys=%" G_GINT64_FORMAT "\n", m,
            partitions_of[m], keys);
    ck_assert_uint_eq(partitions_of[m], 4);
    ck_assert_int_gt(keys, 0);
    ck_assert_int_eq(keys, expected[m]);
  }
}
END_TEST

/* ---- number -------------------------------------------------------------- */

static void
assert_refused(const gchar *url, const gchar *ns, guint partitions,
               const gchar *says)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) b =
      partitioned_new(SLUICE_REDIS_RELIABLE, url, ns, partitions, &error);
  g_autoptr(GBytes) payload = sluice_test_text("refused");
  SluiceSubmit item = {.id = "refused", .queue = "default", .payload = payload};

  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(!sluice_broker_check(b, &error));
  ck_assert_msg(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID),
      "%s", error->message);
  ck_assert_msg(strstr(error->message, says) != NULL, "%s", error->message);
  g_clear_error(&error);
  /* Nothing is written: not even by a producer that never checks. */
  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
}

static void
drain(SluiceBroker *b, guint expected)
{
  g_autoptr(GPtrArray) got = sluice_test_fetch(b, "c1", q_default, 100, 0);

  ck_assert_uint_eq(got->len, expected);
  for (guint i = 0; i < got->len; i++)
    ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, i)),
                     SLUICE_SETTLE_DONE);
}

START_TEST(test_changing_the_number_needs_an_empty_namespace)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  const gchar *url = sluice_test_redis_url(server);
  g_autoptr(SluiceBroker) four = partitioned(url, "number", 4);
  g_autoptr(SluiceBroker) eight = NULL;
  g_autoptr(SluiceBroker) one = NULL;
  g_autoptr(GError) error = NULL;

  sluice_test_enqueue(four, "a", "default", "a", 0);
  sluice_test_enqueue(four, "b", "default", "b", 0);
  /* Live with 4: 1 and 8 are refused, and told what to set. */
  assert_refused(url, "number", 1, "use partitions=4");
  assert_refused(url, "number", 8, "use partitions=4");
  {
    g_autofree gchar *n = recorded_partitions(server, "number");
    ck_assert_str_eq(n, "4");
  }
  /* A task still scheduled counts too. */
  drain(four, 2);
  sluice_test_enqueue(four, "later", "default", "later", G_MAXINT64 / 2);
  assert_refused(url, "number", 8, "1 task");
  {
    gboolean removed = FALSE;
    ck_assert(sluice_broker_cancel_scheduled(four, "later", NULL, 0, &removed,
                                             &error));
    ck_assert(removed);
  }
  /* Empty: 8 is allowed, recorded, and then 4 is refused once 8 holds a
   * task. */
  eight = partitioned(url, "number", 8);
  ck_assert(sluice_broker_check(eight, &error));
  sluice_test_enqueue(eight, "c", "default", "c", 0);
  {
    g_autofree gchar *n = recorded_partitions(server, "number");
    ck_assert_str_eq(n, "8");
  }
  assert_refused(url, "number", 4, "use partitions=8");
  drain(eight, 1);
  /* Back to one hash tag: allowed on the empty namespace. */
  one = partitioned(url, "number", 1);
  ck_assert(sluice_broker_check(one, &error));
  ck_assert_uint_eq(sluice_redis__partition_count(one), 1);
  {
    g_autofree gchar *n = recorded_partitions(server, "number");
    ck_assert_ptr_null(n); /* 1 is recorded as nothing, as it always was */
  }
  sluice_test_enqueue(one, "d", "default", "d", 0);
  assert_refused(url, "number", 8, "use partitions=1");
}
END_TEST

/* The layout version is the namespace's and each partition's: the check
 * of a namespace of partitions records it in {ns}:meta and every
 * {ns#k}:meta, and a partition one version newer is refused by a client
 * of this one, as a whole namespace would be. */
START_TEST(test_every_partition_records_its_layout)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  const gchar *url = sluice_test_redis_url(server);
  g_autoptr(SluiceBroker) three = partitioned(url, "versions", 3);
  g_autoptr(SluiceBroker) again = NULL;
  g_autoptr(GError) error = NULL;

  ck_assert_msg(sluice_broker_check(three, &error), "%s",
                error != NULL ? error->message : "");
  for (gint k = -1; k < 3; k++) {
    const gchar *key =
        k < 0 ? "{versions}:meta"
              : SLUICE_REDIS_BROKER(sluice_redis__partition_at(three, (guint)k))
                    ->meta_key;
    redisReply *r =
        sluice_test_redis_command(server, "HMGET %s layout scripts", key);

    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ck_assert_msg(r->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(r->element[0]->str, "1") == 0 &&
                      r->element[1]->type == REDIS_REPLY_STRING,
                  "%s records no layout version or script set", key);
    freeReplyObject(r);
  }
  sluice_test_redis_integer(
      server, "HSET %s layout 2",
      SLUICE_REDIS_BROKER(sluice_redis__partition_at(three, 2))->meta_key);
  again = partitioned(url, "versions", 3);
  ck_assert(!sluice_broker_check(again, &error));
  ck_assert_msg(strstr(error->message, "newer than this program's") != NULL,
                "%s", error->message);
}
END_TEST

START_TEST(test_an_unpartitioned_namespace_with_tasks_stays_so)
{
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autoptr(SluiceBroker) plain =
      sluice_test_redis_broker(SLUICE_REDIS_RELIABLE, url, "legacy", 0);

  /* A namespace of before partitions records nothing: it reads as 1. */
  sluice_test_enqueue(plain, "old", "default", "old", 0);
  assert_refused(url, "legacy", 4, "use partitions=1");
}
END_TEST

START_TEST(test_the_number_comes_from_the_url_or_the_options)
{
  g_autofree gchar *url = g_strdup_printf(
      "%s?partitions=3", sluice_test_redis_url(sluice_test_redis_shared()));
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) from_url =
      partitioned_new(SLUICE_REDIS_RELIABLE, url, "fromurl", 0, &error);
  g_autoptr(SluiceBroker) same =
      partitioned_new(SLUICE_REDIS_RELIABLE, url, "fromurl", 3, &error);
  SluiceBroker *b;
  SluiceRedisUrl parsed = {0};
  SluiceRedisUrlParams params;

  ck_assert_msg(from_url != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(sluice_redis__partition_count(from_url), 3);
  ck_assert_ptr_nonnull(same);
  ck_assert(sluice_redis__is_partitioned(same));
  /* Two different numbers: refused, saying where they came from. */
  b = partitioned_new(SLUICE_REDIS_RELIABLE, url, "fromurl", 4, &error);
  ck_assert_ptr_null(b);
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  ck_assert_ptr_nonnull(strstr(error->message, "partitions=3"));
  g_clear_error(&error);
  /* Every form of URL takes it; 0 and too many are refused. */
  ck_assert(sluice_redis__parse_url(
      "redis+cluster://h:7000,h:7001?partitions=12", &parsed, &params, &error));
  ck_assert_uint_eq(params.partitions, 12);
  ck_assert_uint_eq(parsed.n_seeds, 2);
  sluice_redis_url__clear(&parsed);
  ck_assert(sluice_redis__parse_url("redis+cluster://h:7000/0?partitions=2",
                                    &parsed, &params, &error));
  ck_assert_uint_eq(params.partitions, 2);
  sluice_redis_url__clear(&parsed);
  ck_assert(sluice_redis__parse_url("unix:///tmp/r.sock?db=2&partitions=5",
                                    &parsed, &params, &error));
  ck_assert_uint_eq(params.partitions, 5);
  ck_assert_int_eq(parsed.db, 2);
  sluice_redis_url__clear(&parsed);
  ck_assert(sluice_redis__parse_url("redis://h:6379/1?partitions=7", &parsed,
                                    &params, &error));
  ck_assert_uint_eq(params.partitions, 7);
  ck_assert_int_eq(parsed.db, 1);
  sluice_redis_url__clear(&parsed);
  ck_assert(!sluice_redis__parse_url("redis://h/0?partitions=0", &parsed,
                                     &params, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "partitions=N takes a number"));
  g_clear_error(&error);
  ck_assert(!sluice_redis__parse_url("redis://h/0?partitions=100000", &parsed,
                                     &params, &error));
  g_clear_error(&error);
  ck_assert(
      !sluice_redis__parse_url("redis://h/0?db=1", &parsed, &params, &error));
  ck_assert_ptr_nonnull(
      strstr(error->message, "the parameters are partitions"));
  g_clear_error(&error);
  ck_assert(!sluice_redis__parse_url("redis+cluster://h:7000#frag", &parsed,
                                     &params, &error));
}
END_TEST

/* The sluice command takes the number from its URL: enqueue and stats on
 * 4 partitions, then a command of another number is refused with exit
 * status 2 and told the recorded one. */
START_TEST(test_the_command_takes_partitions_from_its_url)
{
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autofree gchar *sluice =
      g_build_filename(TEST_BUILDDIR, "cli", "sluice", NULL);
  g_autofree gchar *four = g_strdup_printf("--url=%s?partitions=4", url);
  g_autofree gchar *two = g_strdup_printf("--url=%s?partitions=2", url);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) b = partitioned(url, "cli", 4);
  SluiceBrokerStats stats;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *out = NULL, *err = NULL;
    gint status = 0;
    const gchar *argv[] = {sluice,    "enqueue", four, "--namespace=cli",
                           "t.hello", "[1]",     NULL};

    ck_assert(g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                           NULL, &out, &err, &status, &error));
    ck_assert_msg(g_spawn_check_wait_status(status, NULL), "%s%s", out, err);
  }
  /* What the command enqueued is where a broker of 4 partitions finds it. */
  stats = sluice_test_stats(b, NULL);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "default"), 3);
  sluice_broker_stats_clear(&stats);
  {
    g_autofree gchar *out = NULL, *err = NULL;
    gint status = 0;
    const gchar *argv[] = {sluice, "stats", two, "--namespace=cli", NULL};

    ck_assert(g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                           NULL, &out, &err, &status, &error));
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 2);
    ck_assert_msg(strstr(err, "use partitions=4") != NULL, "%s", err);
  }
}
END_TEST

/* ---- fairness ------------------------------------------------------------ */

START_TEST(test_one_consumer_takes_from_both_partitions)
{
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autoptr(SluiceBroker) b = partitioned(url, "fair", 2);
  guint from[2] = {0, 0};

  /* Both partitions with more work than the consumer takes. */
  for (guint k = 0; k < 2; k++)
    for (guint i = 0; i < 20; i++) {
      g_autofree gchar *id = id_in_partition(k, 2, i);
      sluice_test_enqueue(b, id, "default", id, 0);
    }
  for (guint round = 0; round < 10; round++) {
    g_autoptr(GPtrArray) got = sluice_test_fetch(b, "c1", q_default, 1, 0);
    SluiceDelivery *d;
    g_autofree gchar *id = NULL;

    ck_assert_uint_eq(got->len, 1);
    d = sluice_test_delivery_at(got, 0);
    id = g_strndup(g_bytes_get_data(d->payload, NULL),
                   g_bytes_get_size(d->payload));
    from[sluice_redis__partition_of(id, 2)]++;
    ck_assert_int_eq(sluice_test_ack(b, "c1", d), SLUICE_SETTLE_DONE);
  }
  /* Neither starves: the sweep starts at the next partition each time. */
  ck_assert_uint_eq(from[0], 5);
  ck_assert_uint_eq(from[1], 5);
}
END_TEST

static gboolean
record_id(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  GPtrArray *ran = user_data;

  (void)error;
  g_ptr_array_add(ran, g_strdup(sluice_task_context_get_id(ctx)));
  return TRUE;
}

/* A worker with one executor and no prefetch, on two partitions that both
 * have 20 tasks: in every stretch of its first 20 runs, it took from both
 * partitions in turn (neither waits for the other to run dry). */
START_TEST(test_one_worker_alternates_between_busy_partitions)
{
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autoptr(SluiceBroker) b = partitioned(url, "fairworker", 2);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(GPtrArray) ran = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  SluiceTestHarness *h;
  SluiceWorkerOptions o;
  guint switches = 0;

  ck_assert(sluice_registry_add(registry, "t.record", record_id, ran, NULL,
                                NULL, &error));
  sluice_worker_options_init(&o);
  o.concurrency = 1;
  o.prefetch = 0;
  h = sluice_test_harness_new_with_broker(b, registry, &o, &error);
  ck_assert_msg(h != NULL, "%s", error != NULL ? error->message : "");
  for (guint k = 0; k < 2; k++)
    for (guint i = 0; i < 20; i++) {
      g_autofree gchar *id = id_in_partition(k, 2, i);
      SluiceEnqueueOptions eo;
      g_autofree gchar *got = NULL;

      sluice_enqueue_options_init(&eo);
      eo.id = id;
      got = sluice_client_enqueue(sluice_test_harness_get_client(h), "t.record",
                                  NULL, &eo, &error);
      ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
    }
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  ck_assert_uint_eq(ran->len, 40);
  for (guint i = 1; i < 20; i++)
    switches += sluice_redis__partition_of(ran->pdata[i], 2) !=
                sluice_redis__partition_of(ran->pdata[i - 1], 2);
  /* Taken one at a time from a start that rotates: every fetch goes to
   * the other partition first. Housekeeping's own fetches of nothing may
   * shift the turn now and then, so not all 19 are demanded. */
  g_print("switches=%u of 19\n", switches);
  ck_assert_uint_ge(switches, 10);
  sluice_test_harness_free(h);
}
END_TEST

/* A fetch blocked on an idle namespace gets a message whichever partition
 * it lands in. */
START_TEST(test_a_blocked_fetch_sees_every_partition)
{
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autoptr(SluiceBroker) b = partitioned(url, "blocked", 4);

  for (guint k = 0; k < 4; k++) {
    g_autofree gchar *id = id_in_partition(k, 4, 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) got = NULL;
    SluiceTestFetch *f = sluice_test_fetch_start(b, q_default, 10, 60000);

    sluice_test_enqueue(b, id, "default", id, 0);
    got = sluice_test_fetch_join(f, &error);
    ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_uint_eq(got->len, 1);
    ck_assert(
        sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, id));
    ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 0)),
                     SLUICE_SETTLE_DONE);
  }
}
END_TEST

/* ---- routing ------------------------------------------------------------- */

START_TEST(test_a_task_lives_in_its_ids_partition)
{
  SluiceTestRedis *server = sluice_test_redis_shared();
  const gchar *url = sluice_test_redis_url(server);
  g_autoptr(SluiceBroker) b = partitioned(url, "route", 5);
  g_autoptr(GBytes) record = sluice_test_text("done");
  g_autoptr(GBytes) read = NULL;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < 10; i++) {
    g_autofree gchar *id = g_strdup_printf("r%u", i);
    guint k = sluice_redis__partition_of(id, 5);

    ck_assert(sluice_broker_put_record(b, id, record, TRUE, 60000, &error));
    for (guint j = 0; j < 5; j++) {
      SluiceRedisBroker *part =
          SLUICE_REDIS_BROKER(sluice_redis__partition_at(b, j));
      ck_assert_int_eq(sluice_test_redis_integer(server, "EXISTS %sr:%s",
                                                 part->keys.prefix, id),
                       j == k);
    }
    ck_assert(sluice_broker_get_record(b, id, &read, &error));
    ck_assert(sluice_test_bytes_is(read, "done"));
    g_clear_pointer(&read, g_bytes_unref);
  }
  /* Each partition's tag is in its fifth of the slot space: "{route#k}"
   * when that lands there, else "{route#k.j}". */
  for (guint k = 0; k < 5; k++) {
    SluiceRedisBroker *part =
        SLUICE_REDIS_BROKER(sluice_redis__partition_at(b, k));
    g_autofree gchar *plain = g_strdup_printf("{route#%u}:", k);
    g_autofree gchar *tagged = g_strdup_printf("{route#%u.", k);

    ck_assert_uint_ge(part->keys.slot, (k * 16384 + 4) / 5);
    ck_assert_uint_lt(part->keys.slot, (k + 1) * 16384 / 5);
    ck_assert(g_str_equal(part->keys.prefix, plain) ||
              g_str_has_prefix(part->keys.prefix, tagged));
    ck_assert_uint_eq(part->keys.slot,
                      sluice_redis_slot__of_key(part->keys.prefix,
                                                strlen(part->keys.prefix)));
  }
  /* The hash is FNV-1a: what other clients must compute. */
  ck_assert_uint_eq(sluice_redis__partition_of("", 7), 2166136261u % 7);
  ck_assert_uint_eq(sluice_redis__partition_of("a", 1000), 3826002220u % 1000);
}
END_TEST

/* ---- rewriting ----------------------------------------------------------- */

/* replace_payloads on @b (of @mode, @n partitions): each item goes to the
 * partition that holds its message (a queued one's handle "<k>/...", a
 * scheduled one's task id, a dead letter's "<k>/<stream id>"), and is
 * replaced there as in one namespace; a stale one changes nothing. A
 * partition's messages replaced in listing order stay in that order in
 * both modes (a stream's copies are added in that order). */
static void
check_replace(SluiceBroker *b, SluiceRedisMode mode, guint n)
{
  g_autoptr(GPtrArray) page = NULL;
  g_autoptr(GPtrArray) after = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) bytes =
      g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  g_autoptr(GBytes) wrong = sluice_test_text("wrong");
  g_autoptr(GError) error = NULL;
  g_autofree SluiceReplacement *items = NULL;
  const gchar *const q_work[] = {"work", NULL};
  SluiceListedMessage *first;
  guint n_items;

  sluice_test_redis_replace_scheduled_and_dead(b, FALSE);

  /* Two tasks in each partition. */
  for (guint k = 0; k < n; k++)
    for (guint i = 0; i < 2; i++) {
      gchar *id = id_in_partition(k, n, i);
      g_ptr_array_add(keep, id);
      sluice_test_enqueue(b, id, "work", id, 0);
    }
  page = sluice_test_list_queued_all(b, "work");
  ck_assert_uint_eq(page->len, 2 * n);
  /* Each as listed, to its id with a NUL and "'"; then a stale one under
   * the first message's handle. */
  n_items = page->len + 1;
  items = g_new0(SluiceReplacement, n_items);
  for (guint i = 0; i < page->len; i++) {
    SluiceListedMessage *m = page->pdata[i];
    g_autofree gchar *text = sluice_test_bytes_str(m->payload);
    GString *r = g_string_new(text);

    g_string_append_len(r, "\0'", 2);
    g_ptr_array_add(bytes, g_string_free_to_bytes(r));
    if (n > 1)
      ck_assert(m->handle != NULL && strchr(m->handle, '/') != NULL);
    items[i] = (SluiceReplacement){.place = SLUICE_WAITING_QUEUED,
                                   .queue = "work",
                                   .handle = m->handle,
                                   .payload = m->payload,
                                   .replacement = bytes->pdata[i]};
  }
  first = page->pdata[0];
  items[page->len] = (SluiceReplacement){.place = SLUICE_WAITING_QUEUED,
                                         .queue = "work",
                                         .handle = first->handle,
                                         .payload = wrong,
                                         .replacement = wrong};
  ck_assert_msg(sluice_broker_replace_payloads(b, items, n_items, &error), "%s",
                error != NULL ? error->message : "");
  for (guint i = 0; i < page->len; i++)
    ck_assert_msg(items[i].replaced, "item %u", i);
  ck_assert(!items[page->len].replaced);
  after = sluice_test_list_queued_all(b, "work");
  ck_assert_uint_eq(after->len, page->len);
  for (guint i = 0; i < after->len; i++)
    ck_assert_msg(
        g_bytes_equal(((SluiceListedMessage *)after->pdata[i])->payload,
                      bytes->pdata[i]),
        "message %u", i);

  /* Named by its bytes alone (no handle): fast mode finds it in whichever
   * partition holds it; reliable mode needs the entry's handle. */
  ck_assert(sluice_test_replace(b, SLUICE_WAITING_QUEUED, "work", NULL,
                                bytes->pdata[after->len - 1],
                                wrong) == (mode == SLUICE_REDIS_FAST));
  if (mode == SLUICE_REDIS_FAST)
    ck_assert(sluice_test_replace(b, SLUICE_WAITING_QUEUED, "work", NULL, wrong,
                                  bytes->pdata[after->len - 1]));

  /* Fetched since it was listed: every message is taken, then none of the
   * listed ones is replaced any more. */
  got = g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
  for (guint round = 0; round < 100 && got->len < after->len; round++)
    ck_assert(sluice_broker_fetch(b, "c1", q_work, 100, 0, got, &error));
  ck_assert_uint_eq(got->len, after->len);
  for (guint i = 0; i < after->len; i++) {
    SluiceListedMessage *m = after->pdata[i];
    ck_assert(!sluice_test_replace(b, SLUICE_WAITING_QUEUED, "work", m->handle,
                                   m->payload, wrong));
  }
  g_clear_pointer(&page, g_ptr_array_unref);
  page = sluice_test_list_queued_all(b, "work");
  ck_assert_uint_eq(page->len, 0);
}

START_TEST(test_replace_payloads_goes_to_each_messages_partition)
{
  const gchar *url = sluice_test_redis_url(sluice_test_redis_shared());
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) fast =
      partitioned_new(SLUICE_REDIS_FAST, url, "replace-fast", 4, &error);
  g_autoptr(SluiceBroker) reliable = partitioned(url, "replace-reliable", 4);

  ck_assert_msg(fast != NULL, "%s", error != NULL ? error->message : "");
  check_replace(fast, SLUICE_REDIS_FAST, 4);
  check_replace(reliable, SLUICE_REDIS_RELIABLE, 4);
}
END_TEST

/* The same on a cluster of three masters: a namespace in one slot (its
 * script touches only keys of its tag), and one in 12 partitions spread
 * over the masters. */
START_TEST(test_replace_payloads_on_a_cluster)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(3, 0, &error);
  g_autoptr(SluiceBroker) one = NULL;
  g_autoptr(SluiceBroker) fast = NULL;
  g_autoptr(SluiceBroker) reliable = NULL;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  one = partitioned(sluice_test_cluster_url(cluster), "replace-one", 0);
  check_replace(one, SLUICE_REDIS_RELIABLE, 1);
  fast = partitioned_new(SLUICE_REDIS_FAST, sluice_test_cluster_url(cluster),
                         "replace-fast", 12, &error);
  ck_assert_msg(fast != NULL, "%s", error != NULL ? error->message : "");
  check_replace(fast, SLUICE_REDIS_FAST, 12);
  reliable = partitioned(sluice_test_cluster_url(cluster), "replace-rel", 12);
  check_replace(reliable, SLUICE_REDIS_RELIABLE, 12);
}
END_TEST

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  Suite *s = suite_create("redis-partitions");
  TCase *single = tcase_create("single");
  TCase *cluster = tcase_create("cluster");
  SRunner *runner;
  int failed;

  tcase_add_unchecked_fixture(single, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(single, 120);
  tcase_add_test(single, test_changing_the_number_needs_an_empty_namespace);
  tcase_add_test(single, test_an_unpartitioned_namespace_with_tasks_stays_so);
  tcase_add_test(single, test_every_partition_records_its_layout);
  tcase_add_test(single, test_the_number_comes_from_the_url_or_the_options);
  tcase_add_test(single, test_the_command_takes_partitions_from_its_url);
  tcase_add_test(single, test_one_consumer_takes_from_both_partitions);
  tcase_add_test(single, test_one_worker_alternates_between_busy_partitions);
  tcase_add_test(single, test_a_blocked_fetch_sees_every_partition);
  tcase_add_test(single, test_a_task_lives_in_its_ids_partition);
  tcase_add_test(single, test_replace_payloads_goes_to_each_messages_partition);
  suite_add_tcase(s, single);
  tcase_set_timeout(cluster, 300);
  tcase_add_test(cluster, test_every_master_holds_some_partition);
  tcase_add_test(cluster, test_replace_payloads_on_a_cluster);
  suite_add_tcase(s, cluster);
  runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

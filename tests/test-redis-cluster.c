/* test-redis-cluster.c - Redis Cluster beyond the conformance suite
 * (test-redis-cluster-conformance): redis+cluster:// URLs, the slot of a
 * key against what Redis says, and the two events of a cluster's life
 * while producers and a reliable worker run on a local cluster of three
 * masters and three replicas (tests/helpers/redis-cluster-fixture.c):
 *
 *   failover  kill -9 of the master that serves the namespace's slot; its
 *             replica takes over. Prints enqueued, completed, lost and
 *             duplicated as key=value lines: what an asynchronous replica
 *             had not received is lost (docs/limits.md), so only the
 *             recovery is asserted (everything enqueued after the failover
 *             completes).
 *   reshard   the namespace's slot moved to another master by hand
 *             (SETSLOT IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT
 *             NODE) under load: nothing acknowledged is lost, and the
 *             router followed at least one ASK and one MOVED (its counts,
 *             SluiceRedisClusterStats).
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <string.h>

#include <sluice/sluice.h>

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/net/redis-net.h"
#include "tests/helpers/broker-calls.h"
#include "tests/helpers/redis-cluster-fixture.h"
#include "tests/helpers/redis-fixture.h"

/* ---- URLs and slots ------------------------------------------------------ */

START_TEST(test_cluster_url)
{
  SluiceRedisUrl url = {0};
  SluiceRedisUrlParams params;
  g_autoptr(GError) error = NULL;

  ck_assert(sluice_redis_url__parse(
      "redis+cluster://app:s3cr%40t@10.0.0.1:7000,10.0.0.2,[::1]:7002/0", &url,
      &error));
  ck_assert(url.is_cluster);
  ck_assert_uint_eq(url.n_seeds, 3);
  ck_assert_str_eq(url.seed_hosts[0], "10.0.0.1");
  ck_assert_int_eq(url.seed_ports[0], 7000);
  ck_assert_str_eq(url.seed_hosts[1], "10.0.0.2");
  ck_assert_int_eq(url.seed_ports[1], 6379);
  ck_assert_str_eq(url.seed_hosts[2], "::1");
  ck_assert_int_eq(url.seed_ports[2], 7002);
  ck_assert_str_eq(url.user, "app");
  ck_assert_str_eq(url.password, "s3cr@t");
  ck_assert_int_eq(url.db, 0);
  ck_assert_str_eq(url.display, "redis+cluster://app:***@10.0.0.1:7000,"
                                "10.0.0.2:6379,[::1]:7002/0");
  ck_assert_ptr_null(strstr(url.display, "s3cr"));
  {
    SluiceRedisUrl copy = {0};

    sluice_redis_url__copy(&url, &copy);
    ck_assert_uint_eq(copy.n_seeds, 3);
    ck_assert_str_eq(copy.seed_hosts[2], "::1");
    ck_assert_int_eq(copy.seed_ports[2], 7002);
    sluice_redis_url__clear(&copy);
  }
  sluice_redis_url__clear(&url);

  /* A cluster has database 0 alone, and these URLs take no query. */
  ck_assert(!sluice_redis_url__parse("redis+cluster://h:1/2", &url, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  ck_assert_ptr_nonnull(strstr(error->message, "database 0"));
  g_clear_error(&error);
  ck_assert(!sluice_redis__parse_url("redis+cluster://h:1?db=1", &url, &params,
                                     &error));
  g_clear_error(&error);
  ck_assert(!sluice_redis_url__parse("redis+cluster://h:1,,h:2", &url, &error));
  g_clear_error(&error);
  ck_assert(!sluice_redis_url__parse("redis+cluster://h:99999", &url, &error));
  g_clear_error(&error);
  ck_assert(!sluice_redis_url__parse("redis+cluster://:pw@", &url, &error));
  ck_assert_ptr_null(strstr(error->message, "pw"));
  g_clear_error(&error);
}
END_TEST

/* The slot of a key as the Cluster specification computes it, against
 * CLUSTER KEYSLOT of a real node, for keys with and without hash tags. */
START_TEST(test_key_slots_match_redis)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(1, 0, &error);
  const gchar *keys[] = {
      "123456789",
      "foo",
      "{sluice}:meta",
      "{sluice}:s:default",
      "{ns#3}:q:x",
      "{user1000}.a",
      "foo{}{bar}",
      "foo{{bar}}zap",
      "foo{bar}{zap}",
      "{}",
      "{",
      "x}y{z",
  };

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(sluice_redis_slot__of_key("123456789", 9), 12739);
  for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
    ck_assert_uint_eq(sluice_redis_slot__of_key(keys[i], strlen(keys[i])),
                      sluice_test_cluster_keyslot(cluster, keys[i]));
}
END_TEST

/* The sluice command takes redis+cluster:// URLs: an enqueue, then stats
 * that count it, through the cluster. */
START_TEST(test_cli_on_a_cluster)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(1, 0, &error);
  g_autofree gchar *sluice =
      g_build_filename(TEST_BUILDDIR, "cli", "sluice", NULL);
  g_autofree gchar *url_opt = NULL;
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = 0;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  url_opt = g_strdup_printf("--url=%s", sluice_test_cluster_url(cluster));
  {
    const gchar *argv[] = {sluice,    "enqueue", url_opt, "--namespace=cli",
                           "t.hello", "[1]",     NULL};
    ck_assert(g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                           NULL, &out, &err, &status, &error));
    ck_assert_msg(g_spawn_check_wait_status(status, NULL), "%s%s", out, err);
    ck_assert_uint_gt(strlen(out), 1);
  }
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);
  {
    const gchar *argv[] = {sluice, "stats", url_opt, "--namespace=cli", NULL};
    ck_assert(g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_DEFAULT, NULL,
                           NULL, &out, &err, &status, &error));
    ck_assert_msg(g_spawn_check_wait_status(status, NULL), "%s%s", out, err);
    ck_assert_msg(strstr(out, "default") != NULL, "%s", out);
  }
}
END_TEST

/* The namespace's mode is checked on a cluster too, wherever its meta key
 * lives: a namespace first used in reliable mode refuses a fast client. */
START_TEST(test_mode_is_checked_on_a_cluster)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(3, 0, &error);
  const gchar *url;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  url = sluice_test_cluster_url(cluster);
  for (guint i = 0; i < 6; i++) {
    g_autofree gchar *ns = g_strdup_printf("mode%u", i);
    g_autoptr(SluiceBroker) reliable =
        sluice_test_redis_broker(SLUICE_REDIS_RELIABLE, url, ns, 0);
    g_autoptr(SluiceBroker) fast =
        sluice_test_redis_broker(SLUICE_REDIS_FAST, url, ns, 0);

    sluice_test_enqueue(reliable, "t1", "default", "t1", 0);
    ck_assert(!sluice_redis_broker_ping(fast, &error));
    ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                  SLUICE_BROKER_ERROR_INVALID),
                  "%s", error->message);
    ck_assert_ptr_nonnull(strstr(error->message, "reliable mode"));
    g_clear_error(&error);
  }
}
END_TEST

/* A user who may not run CLUSTER SHARDS (as on Redis before 7.0, which
 * lacks it) gets the map from CLUSTER SLOTS. */
START_TEST(test_slot_map_from_cluster_slots)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(1, 0, &error);
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autofree gchar *url = NULL;
  SluiceTestRedis *node;
  const gchar *queues[] = {"default", NULL};
  gint64 slots_before;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  node = sluice_test_cluster_node(cluster, 0);
  ck_assert_msg(
      sluice_test_redis_acl_setuser(
          node, "noshards on >pw ~* &* +@all -cluster|shards", &error),
      "%s", error != NULL ? error->message : "");
  url = g_strdup_printf("redis+cluster://noshards:pw@127.0.0.1:%u",
                        sluice_test_redis_port(node));
  slots_before = sluice_test_redis_calls(node, "cluster|slots");
  b = sluice_test_redis_broker(SLUICE_REDIS_RELIABLE, url, "slots", 0);
  sluice_test_enqueue(b, "t1", "default", "t1", 0);
  got = sluice_test_fetch(b, "c1", queues, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert_int_gt(sluice_test_redis_calls(node, "cluster|slots"),
                   slots_before);
}
END_TEST

/* A redis:// URL naming one node of a cluster: a namespace served by
 * another node fails with an error that names redis+cluster://. */
START_TEST(test_plain_url_on_a_cluster_node_says_what_to_do)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(3, 0, &error);
  SluiceTestRedis *node;
  g_autofree gchar *url = NULL;
  g_autofree gchar *ns = NULL;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  node = sluice_test_cluster_node(cluster, 0);
  for (guint i = 0; ns == NULL; i++) {
    g_autofree gchar *tag = g_strdup_printf("{plain%u}", i);

    if (sluice_test_cluster_owner(
            cluster, sluice_test_cluster_keyslot(cluster, tag)) != node)
      ns = g_strdup_printf("plain%u", i);
  }
  url = g_strdup_printf("redis://127.0.0.1:%u/0", sluice_test_redis_port(node));
  {
    g_autoptr(SluiceBroker) b =
        sluice_test_redis_broker(SLUICE_REDIS_RELIABLE, url, ns, 0);
    g_autoptr(SluiceClient) client = sluice_client_new(b, NULL, &error);
    g_autofree gchar *id =
        sluice_client_enqueue(client, "t.x", NULL, NULL, &error);

    ck_assert_ptr_null(id);
    ck_assert_msg(strstr(error->message, "redis+cluster://") != NULL, "%s",
                  error->message);
  }
}
END_TEST

/* ---- Waiting out TRYAGAIN and CLUSTERDOWN ---------------------------------- */

typedef struct {
  SluiceBroker *broker;
  gboolean (*met)(const SluiceRedisClusterStats *st);
} StatsWait;

static gboolean
stats_met(gpointer data)
{
  StatsWait *w = data;
  SluiceRedisClusterStats st;

  ck_assert(sluice_redis_pool__get_cluster_stats(
      SLUICE_REDIS_BROKER(w->broker)->pool, &st));
  return w->met(&st);
}

static gboolean
saw_clusterdown(const SluiceRedisClusterStats *st)
{
  return st->clusterdown >= 1;
}

static gboolean
saw_tryagain(const SluiceRedisClusterStats *st)
{
  return st->tryagain >= 1;
}

static gboolean
saw_ask_wait(const SluiceRedisClusterStats *st)
{
  return st->ask_waits >= 1;
}

typedef struct {
  SluiceBroker *broker;
  const gchar *const *queues;
  gboolean ok;
  guint got;
  gchar *message;
  gboolean plain; /* an LMPOP of the queues, not the fetch slot */
} FetchCall;

static gboolean
plain_pop(FetchCall *f, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(f->broker);
  guint n = g_strv_length((gchar **)f->queues);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, n + 6, n * 32);
  sluice_redis_argv__add_str(&a, "LMPOP");
  sluice_redis_argv__add_int(&a, n);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_QUEUE,
                               f->queues[i]);
  sluice_redis_argv__add_str(&a, "RIGHT");
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, 10);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "test", FALSE, &a, 0, &reply, error);
  if (ok && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2)
    f->got = (guint)reply->element[1]->elements;
  if (reply != NULL)
    freeReplyObject(reply);
  sluice_redis_argv__clear(&a);
  return ok;
}

static gpointer
fetch_in_thread(gpointer data)
{
  FetchCall *f = data;
  g_autoptr(GPtrArray) out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
  g_autoptr(GError) error = NULL;

  if (f->plain) {
    f->ok = plain_pop(f, &error);
  } else {
    f->ok = sluice_broker_fetch(f->broker, "c1", f->queues, 10, 0, out, &error);
    f->got = out->len;
  }
  f->message = error != NULL ? g_strdup(error->message) : NULL;
  return NULL;
}

/* The namespace's slot not served for a while (CLUSTER DELSLOTS): a call
 * meets CLUSTERDOWN, waits, and is carried out once the slot is back. */
START_TEST(test_clusterdown_is_waited_out)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(1, 0, &error);
  g_autoptr(SluiceBroker) b = NULL;
  SluiceTestRedis *node;
  const gchar *queues[] = {"default", NULL};
  FetchCall f = {0};
  StatsWait w;
  GThread *thread;
  redisReply *reply;
  guint slot;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  node = sluice_test_cluster_node(cluster, 0);
  b = sluice_test_redis_broker(SLUICE_REDIS_FAST,
                               sluice_test_cluster_url(cluster), "cd", 0);
  sluice_test_enqueue(b, "t1", "default", "t1", 0);
  slot = SLUICE_REDIS_BROKER(b)->keys.slot;

  reply = sluice_test_redis_command(node, "CLUSTER DELSLOTS %u", slot);
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  f = (FetchCall){b, queues, FALSE, 0, NULL, FALSE};
  thread = g_thread_new("fetch", fetch_in_thread, &f);
  w = (StatsWait){b, saw_clusterdown};
  ck_assert(sluice_test_wait_for(stats_met, &w, 60000));
  reply = sluice_test_redis_command(node, "CLUSTER ADDSLOTS %u", slot);
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  g_thread_join(thread);
  ck_assert_msg(f.ok, "%s", f.message);
  ck_assert_uint_eq(f.got, 1);
  g_free(f.message);
}
END_TEST

/* A plain read of two queues while one has moved to the importing node
 * and the other not: the source says ASK, the target TRYAGAIN; the call
 * waits and is carried out on the new owner once the migration ends
 * (MOVED). The fetch slot's script meanwhile is answered ASK, which a
 * script waits out too (docs/redis.md: a script is never sent after an
 * ASK). */
START_TEST(test_tryagain_is_waited_out)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(3, 0, &error);
  g_autoptr(SluiceBroker) b = NULL;
  SluiceTestRedis *from, *to;
  const gchar *queues[] = {"a", "b", NULL};
  FetchCall f = {0};
  FetchCall script = {0};
  StatsWait w;
  GThread *thread, *script_thread;
  redisReply *reply;
  guint slot;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  b = sluice_test_redis_broker(SLUICE_REDIS_FAST,
                               sluice_test_cluster_url(cluster), "ta", 0);
  sluice_test_enqueue(b, "t1", "a", "t1", 0);
  sluice_test_enqueue(b, "t2", "b", "t2", 0);
  slot = SLUICE_REDIS_BROKER(b)->keys.slot;
  from = sluice_test_cluster_owner(cluster, slot);
  to = sluice_test_cluster_other_master(cluster, from);

  ck_assert(sluice_test_cluster_migrate_begin(cluster, slot, from, to, &error));
  reply =
      sluice_test_redis_command(from, "MIGRATE 127.0.0.1 %u {ta}:q:a 0 10000",
                                sluice_test_redis_port(to));
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  f = (FetchCall){b, queues, FALSE, 0, NULL, TRUE};
  thread = g_thread_new("pop", fetch_in_thread, &f);
  w = (StatsWait){b, saw_tryagain};
  ck_assert(sluice_test_wait_for(stats_met, &w, 60000));
  script = (FetchCall){b, queues, FALSE, 0, NULL, FALSE};
  script_thread = g_thread_new("fetch", fetch_in_thread, &script);
  w = (StatsWait){b, saw_ask_wait};
  ck_assert(sluice_test_wait_for(stats_met, &w, 60000));
  while (sluice_test_cluster_migrate_keys(cluster, slot, from, to, 50, &error) >
         0)
    ;
  ck_assert(sluice_test_cluster_migrate_end(cluster, slot, to, &error));
  g_thread_join(thread);
  g_thread_join(script_thread);
  ck_assert_msg(f.ok, "%s", f.message);
  ck_assert_msg(script.ok, "%s", script.message);
  /* Each pops from the first queue that has something: one each. */
  ck_assert_uint_eq(f.got + script.got, 2);
  g_free(f.message);
  g_free(script.message);
}
END_TEST

/* ---- Under load ----------------------------------------------------------- */

/* Every execution of a task, by id. Test code: the task function has no
 * other way to tell the test. */
typedef struct {
  GMutex lock;
  GHashTable *runs; /* id (owned) -> GUINT count */
} Executions;

static gboolean
task_record(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  Executions *ex = data;
  const gchar *id = sluice_task_context_get_id(ctx);

  g_mutex_lock(&ex->lock);
  g_hash_table_insert(
      ex->runs, g_strdup(id),
      GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(ex->runs, id)) +
                       1));
  g_mutex_unlock(&ex->lock);
  return TRUE;
}

typedef struct {
  SluiceClient *client;
  const gchar *prefix;
  GMutex lock;
  GPtrArray *acked; /* ids whose enqueue was acknowledged */
  gint stop;
  guint failures; /* enqueue calls that failed and were retried */
} Producer;

/* Enqueues one task at a time with ids "<prefix>-<n>"; a failed enqueue is
 * retried with the same id (idempotent), so an id is acknowledged once. */
static gpointer
producer_run(gpointer data)
{
  Producer *p = data;

  for (guint n = 0; !g_atomic_int_get(&p->stop); n++) {
    g_autofree gchar *id = g_strdup_printf("%s-%u", p->prefix, n);
    SluiceEnqueueOptions options;

    sluice_enqueue_options_init(&options);
    options.id = id;
    for (;;) {
      g_autoptr(GError) error = NULL;
      g_autofree gchar *got =
          sluice_client_enqueue(p->client, "t.record", NULL, &options, &error);

      if (got != NULL)
        break;
      p->failures++;
      if (g_atomic_int_get(&p->stop))
        return NULL;
      g_usleep(20 * 1000);
    }
    g_mutex_lock(&p->lock);
    g_ptr_array_add(p->acked, g_strdup(id));
    g_mutex_unlock(&p->lock);
  }
  return NULL;
}

static guint
acked_count(Producer *p)
{
  guint n;

  g_mutex_lock(&p->lock);
  n = p->acked->len;
  g_mutex_unlock(&p->lock);
  return n;
}

typedef struct {
  Producer *producer;
  Executions *ex;
  guint from; /* the first acknowledged id to look at */
  guint at_least;
} Progress;

static gboolean
acked_at_least(gpointer data)
{
  Progress *g = data;

  return acked_count(g->producer) >= g->at_least;
}

/* Acknowledged ids from @from on that never ran. */
static guint
missing_from(Producer *p, Executions *ex, guint from)
{
  guint missing = 0;

  g_mutex_lock(&p->lock);
  g_mutex_lock(&ex->lock);
  for (guint i = from; i < p->acked->len; i++)
    if (!g_hash_table_contains(ex->runs, g_ptr_array_index(p->acked, i)))
      missing++;
  g_mutex_unlock(&ex->lock);
  g_mutex_unlock(&p->lock);
  return missing;
}

static gboolean
all_ran_from(gpointer data)
{
  Progress *g = data;

  return missing_from(g->producer, g->ex, g->from) == 0;
}

static gboolean
ran_at_least(gpointer data)
{
  Progress *g = data;
  guint n;

  g_mutex_lock(&g->ex->lock);
  n = g_hash_table_size(g->ex->runs);
  g_mutex_unlock(&g->ex->lock);
  return n >= g->at_least;
}

static guint
duplicated(Executions *ex)
{
  GHashTableIter iter;
  gpointer value;
  guint extra = 0;

  g_mutex_lock(&ex->lock);
  g_hash_table_iter_init(&iter, ex->runs);
  while (g_hash_table_iter_next(&iter, NULL, &value))
    extra += GPOINTER_TO_UINT(value) - 1;
  g_mutex_unlock(&ex->lock);
  return extra;
}

typedef struct {
  SluiceTestCluster *cluster;
  SluiceBroker *producer_broker;
  SluiceBroker *worker_broker;
  SluiceClient *client;
  SluiceRegistry *registry;
  SluiceWorker *worker;
  Executions ex;
  Producer producer;
  GThread *thread;
} Load;

/* @query: NULL, or what the cluster's URL ends with ("?...") */
static void
load_start(Load *l, SluiceTestCluster *cluster, const gchar *ns,
           const gchar *query)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *url = g_strconcat(sluice_test_cluster_url(cluster),
                                      query != NULL ? query : "", NULL);
  SluiceTaskOptions topts;
  SluiceWorkerOptions wopts;

  memset(l, 0, sizeof *l);
  l->cluster = cluster;
  l->producer_broker =
      sluice_test_redis_broker(SLUICE_REDIS_RELIABLE, url, ns, 0);
  l->worker_broker =
      sluice_test_redis_broker(SLUICE_REDIS_RELIABLE, url, ns, 0);
  g_mutex_init(&l->ex.lock);
  l->ex.runs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  l->registry = sluice_registry_new();
  sluice_task_options_init(&topts);
  topts.store_result = SLUICE_ON;
  ck_assert(sluice_registry_add(l->registry, "t.record", task_record, &l->ex,
                                NULL, &topts, &error));
  l->client = sluice_client_new(l->producer_broker, NULL, &error);
  ck_assert(l->client != NULL);
  sluice_worker_options_init(&wopts);
  wopts.concurrency = 4;
  wopts.visibility_timeout_ms = 3000;
  l->worker = sluice_worker_new(l->worker_broker, l->registry, &wopts, &error);
  ck_assert_msg(l->worker != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(sluice_worker_start(l->worker, &error));

  l->producer.client = l->client;
  l->producer.prefix = ns;
  g_mutex_init(&l->producer.lock);
  l->producer.acked = g_ptr_array_new_with_free_func(g_free);
  l->thread = g_thread_new("producer", producer_run, &l->producer);
}

static void
load_stop_producer(Load *l)
{
  g_atomic_int_set(&l->producer.stop, 1);
  g_clear_pointer(&l->thread, g_thread_join);
}

static void
load_free(Load *l)
{
  load_stop_producer(l);
  sluice_worker_stop(l->worker);
  g_clear_pointer(&l->worker, sluice_worker_unref);
  g_clear_pointer(&l->client, sluice_client_unref);
  g_clear_pointer(&l->registry, sluice_registry_unref);
  g_clear_pointer(&l->producer_broker, sluice_broker_unref);
  g_clear_pointer(&l->worker_broker, sluice_broker_unref);
  g_ptr_array_unref(l->producer.acked);
  g_hash_table_unref(l->ex.runs);
}

static void
cluster_stats(SluiceBroker *b, SluiceRedisClusterStats *st)
{
  ck_assert(
      sluice_redis_pool__get_cluster_stats(SLUICE_REDIS_BROKER(b)->pool, st));
}

static void
print_stats(const gchar *test, const gchar *who, SluiceBroker *b)
{
  SluiceRedisClusterStats st;

  cluster_stats(b, &st);
  g_print("%s.%s.moved=%" G_GUINT64_FORMAT "\n%s.%s.ask=%" G_GUINT64_FORMAT
          "\n%s.%s.ask_waits=%" G_GUINT64_FORMAT
          "\n%s.%s.tryagain=%" G_GUINT64_FORMAT
          "\n%s.%s.clusterdown=%" G_GUINT64_FORMAT
          "\n%s.%s.map_reads=%" G_GUINT64_FORMAT "\n",
          test, who, st.moved, test, who, st.ask, test, who, st.ask_waits, test,
          who, st.tryagain, test, who, st.clusterdown, test, who, st.refreshes);
}

/* _i bit 0: with min_replicas_ack=1, where nothing acknowledged may be
 * lost (else as Redis replicates by default); bit 1: the namespace in 12
 * partitions, 4 on each master, one of which dies. */
START_TEST(test_failover_under_load)
{
  static const gchar *const names[] = {"failover", "failover_acked",
                                       "failover_p12", "failover_p12_acked"};
  static const gchar *const queries[] = {NULL, "?min_replicas_ack=1",
                                         "?partitions=12",
                                         "?partitions=12&min_replicas_ack=1"};
  gboolean acked = (_i & 1) != 0;
  gboolean partitioned = (_i & 2) != 0;
  const gchar *name = names[_i];
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(3, 1, &error);
  SluiceTestRedis *victim;
  Load l;
  Progress g;
  guint slot, after_failover, lost;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  load_start(&l, cluster, name, queries[_i]);
  /* Partitioned: slot 0's master serves 4 of the 12 partitions. */
  slot = partitioned ? 0 : SLUICE_REDIS_BROKER(l.worker_broker)->keys.slot;
  victim = sluice_test_cluster_owner(cluster, slot);
  ck_assert(victim != NULL);

  g = (Progress){&l.producer, &l.ex, 0, 300};
  ck_assert(sluice_test_wait_for(acked_at_least, &g, 120000));
  g.at_least = 100;
  ck_assert(sluice_test_wait_for(ran_at_least, &g, 120000));

  sluice_test_redis_kill(victim, SIGKILL);
  ck_assert_msg(sluice_test_cluster_wait_ok(cluster, 180000, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_test_cluster_owner(cluster, slot) != NULL);
  ck_assert(sluice_test_cluster_owner(cluster, slot) != victim);
  if (acked) {
    /* The promoted replica has no replica of its own until the old master
     * is back (as one of it): until then every WAIT is short. */
    ck_assert_msg(sluice_test_redis_restart(victim, &error), "%s",
                  error != NULL ? error->message : "");
    ck_assert_msg(sluice_test_cluster_wait_ok(cluster, 180000, &error), "%s",
                  error != NULL ? error->message : "");
  }

  /* The cluster is whole again: what is enqueued from now on must run. */
  after_failover = acked_count(&l.producer);
  g = (Progress){&l.producer, &l.ex, after_failover, after_failover + 300};
  ck_assert(sluice_test_wait_for(acked_at_least, &g, 180000));
  load_stop_producer(&l);
  ck_assert_msg(sluice_test_wait_for(all_ran_from, &g, 180000),
                "%u tasks enqueued after the failover never ran",
                missing_from(&l.producer, &l.ex, after_failover));

  /* What was acknowledged before the kill but not yet on the replica
   * never runs: wait for reclaims (leases of 3 s) a while, then count. */
  g.from = 0;
  sluice_test_wait_for(all_ran_from, &g, 30000);
  /* Completed counts acknowledged ids only: an enqueue given up when the
   * producer stopped may have run without being acknowledged. */
  lost = missing_from(&l.producer, &l.ex, 0);
  g_print("%s.enqueued=%u\n%s.completed=%u\n%s.lost=%u\n"
          "%s.duplicated=%u\n%s.enqueue_retries=%u\n",
          name, acked_count(&l.producer), name, acked_count(&l.producer) - lost,
          name, lost, name, duplicated(&l.ex), name, l.producer.failures);
  if (!partitioned) {
    /* A partitioned broker's routers are its partitions'. */
    print_stats(name, "producer", l.producer_broker);
    print_stats(name, "worker", l.worker_broker);
  }
  if (acked)
    ck_assert_msg(lost == 0, "%u acknowledged tasks lost with min_replicas_ack",
                  lost);
  load_free(&l);
}
END_TEST

START_TEST(test_reshard_under_load)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster =
      sluice_test_cluster_start(3, 1, &error);
  SluiceTestRedis *from, *to;
  SluiceRedisClusterStats st;
  g_autoptr(GBytes) record = NULL;
  g_autofree gchar *record_key = NULL;
  redisReply *reply;
  Load l;
  Progress g;
  guint slot, batches = 0, before;
  gint moved_keys;

  ck_assert_msg(cluster != NULL, "%s", error != NULL ? error->message : "");
  load_start(&l, cluster, "rs", NULL);
  slot = SLUICE_REDIS_BROKER(l.worker_broker)->keys.slot;
  ck_assert_uint_eq(slot, sluice_test_cluster_keyslot(cluster, "{rs}"));
  from = sluice_test_cluster_owner(cluster, slot);
  to = sluice_test_cluster_other_master(cluster, from);
  ck_assert(from != NULL && to != NULL);

  g = (Progress){&l.producer, &l.ex, 0, 200};
  ck_assert(sluice_test_wait_for(ran_at_least, &g, 120000));
  g = (Progress){&l.producer, &l.ex, 0, 1};
  ck_assert(sluice_test_wait_for(all_ran_from, &g, 120000));
  ck_assert(
      sluice_broker_get_record(l.producer_broker, "rs-0", &record, &error));
  ck_assert(record != NULL);
  g_clear_pointer(&record, g_bytes_unref);

  /* The slot MIGRATING, one record already on the target: reading it is
   * an ASK the router follows. */
  ck_assert_msg(
      sluice_test_cluster_migrate_begin(cluster, slot, from, to, &error), "%s",
      error != NULL ? error->message : "");
  record_key = g_strdup("{rs}:r:rs-0");
  reply = sluice_test_redis_command(from, "MIGRATE 127.0.0.1 %u %s 0 10000",
                                    sluice_test_redis_port(to), record_key);
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  ck_assert_msg(
      sluice_broker_get_record(l.producer_broker, "rs-0", &record, &error),
      "%s", error != NULL ? error->message : "");
  ck_assert_msg(record != NULL, "the record on the target was not found");
  cluster_stats(l.producer_broker, &st);
  ck_assert_uint_ge(st.ask, 1);

  /* The rest in batches while producer and worker go on. */
  do {
    moved_keys =
        sluice_test_cluster_migrate_keys(cluster, slot, from, to, 20, &error);
    ck_assert_msg(moved_keys >= 0, "%s", error != NULL ? error->message : "");
    batches++;
  } while (moved_keys > 0);
  ck_assert_msg(sluice_test_cluster_migrate_end(cluster, slot, to, &error),
                "%s", error != NULL ? error->message : "");
  ck_assert(sluice_test_cluster_owner(cluster, slot) == to);

  /* Work goes on on the new owner, found through MOVED. */
  before = acked_count(&l.producer);
  g = (Progress){&l.producer, &l.ex, before, before + 200};
  ck_assert(sluice_test_wait_for(acked_at_least, &g, 120000));
  load_stop_producer(&l);
  g.from = 0;
  ck_assert_msg(sluice_test_wait_for(all_ran_from, &g, 180000),
                "%u acknowledged tasks were lost in the reshard",
                missing_from(&l.producer, &l.ex, 0));
  {
    SluiceRedisClusterStats pst, wst;

    cluster_stats(l.producer_broker, &pst);
    cluster_stats(l.worker_broker, &wst);
    g_print("reshard.enqueued=%u\nreshard.completed=%u\nreshard.lost=0\n"
            "reshard.duplicated=%u\nreshard.migrate_batches=%u\n",
            acked_count(&l.producer), acked_count(&l.producer),
            duplicated(&l.ex), batches);
    print_stats("reshard", "producer", l.producer_broker);
    print_stats("reshard", "worker", l.worker_broker);
    ck_assert_uint_ge(pst.moved + wst.moved, 1);
    ck_assert_uint_ge(pst.ask + wst.ask, 1);
  }
  load_free(&l);
}
END_TEST

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  Suite *s = suite_create("redis-cluster");
  TCase *units = tcase_create("units");
  TCase *load = tcase_create("load");
  SRunner *runner;
  int failed;

  tcase_set_timeout(units, 120);
  tcase_add_test(units, test_cluster_url);
  tcase_add_test(units, test_key_slots_match_redis);
  tcase_add_test(units, test_clusterdown_is_waited_out);
  tcase_add_test(units, test_cli_on_a_cluster);
  tcase_add_test(units, test_mode_is_checked_on_a_cluster);
  tcase_add_test(units, test_slot_map_from_cluster_slots);
  tcase_add_test(units, test_plain_url_on_a_cluster_node_says_what_to_do);
  tcase_add_test(units, test_tryagain_is_waited_out);
  suite_add_tcase(s, units);
  tcase_set_timeout(load, 900);
  tcase_add_test(load, test_reshard_under_load);
  tcase_add_loop_test(load, test_failover_under_load, 0, 4);
  suite_add_tcase(s, load);
  runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

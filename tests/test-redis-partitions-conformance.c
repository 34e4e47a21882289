/* test-redis-partitions-conformance.c - the broker conformance suite
 * (tests/conformance/) against namespaces split in partitions
 * (brokers/redis/redis-partitioned.c): 4 partitions on one redis-server,
 * then 12 on a local Redis Cluster of three masters and three replicas
 * (tests/helpers/redis-cluster-fixture.c), in reliable mode and then in
 * fast mode. The scenarios that need SLUICE_BROKER_CAP_ORDERED check what
 * is left without it (every message handed out once); the others run as
 * for any broker. SLUICE_TEST_PARTITIONS_RUN=single|cluster and
 * SLUICE_TEST_PARTITIONS_MODE=reliable|fast pick one run.
 */
#include "config.h"

#include <unistd.h>

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/redis-partitions.h"
#include "tests/conformance/conformance.h"
#include "tests/helpers/log-capture.h"
#include "tests/helpers/redis-cluster-fixture.h"
#include "tests/helpers/redis-fixture.h"

typedef struct {
  SluiceRedisMode mode;
  const gchar *url;
  guint partitions;
  gint serial;
} PartitionsFactoryData;

static SluiceBroker *
create_partitioned_broker(SluiceClock *clock, guint dead_letter_max,
                          gpointer data, GError **error)
{
  PartitionsFactoryData *d = data;
  /* The time as well as the pid: each scenario is a process of its own,
   * and over a long run on a busy machine pids come round again (a
   * namespace met again keeps its mode and its keys). */
  g_autofree gchar *ns =
      g_strdup_printf("pc%d-%" G_GINT64_FORMAT "-%d", (int)getpid(),
                      g_get_real_time(), g_atomic_int_add(&d->serial, 1));
  SluiceRedisOptions options;
  SluiceBroker *broker;

  sluice_redis_options_init(&options);
  options.mode = d->mode;
  options.url = d->url;
  options.ns = ns;
  options.dead_letter_max = dead_letter_max;
  options.reconnect_max_backoff_ms = 200;
  options.partitions = d->partitions;
  broker = sluice_redis_broker_new(&options, clock, error);
  if (broker == NULL)
    return NULL;
  g_assert(sluice_redis__partition_count(broker) == d->partitions);
  /* As for one Redis (redis-conformance.c): completion must wake
   * get_result through the notification, not the safety-net poll. */
  for (guint k = 0; k < d->partitions; k++)
    ((SluiceRedisBroker *)sluice_redis__partition_at(broker, k))->wait_poll_ms =
        G_MAXINT;
  return broker;
}

static int
run_suite(SluiceRedisMode mode, const gchar *name, const gchar *url,
          guint partitions)
{
  PartitionsFactoryData data = {mode, url, partitions, 0};
  SluiceConformanceFactory factory = {
      .name = name,
      .create = create_partitioned_broker,
      .data = &data,
      .scale = 0.2,
  };
  SRunner *runner = srunner_create(sluice_conformance_suite(&factory));
  int failed;

  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed;
}

static gboolean
wanted(const gchar *variable, const gchar *value)
{
  const gchar *only = g_getenv(variable);

  return only == NULL || g_strcmp0(only, value) == 0;
}

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  int failed = 0;

  sluice_test_log_capture_install();
  if (wanted("SLUICE_TEST_PARTITIONS_RUN", "single")) {
    g_autoptr(GError) error = NULL;
    SluiceTestRedis *server = sluice_test_redis_start(NULL, &error);
    const gchar *url;

    if (server == NULL) {
      g_printerr("cannot start redis-server: %s\n", error->message);
      return 1;
    }
    url = sluice_test_redis_url(server);
    if (wanted("SLUICE_TEST_PARTITIONS_MODE", "reliable"))
      failed += run_suite(SLUICE_REDIS_RELIABLE, "redis-4-partitions-reliable",
                          url, 4);
    if (wanted("SLUICE_TEST_PARTITIONS_MODE", "fast"))
      failed += run_suite(SLUICE_REDIS_FAST, "redis-4-partitions-fast", url, 4);
    sluice_test_redis_stop(server);
  }
  if (wanted("SLUICE_TEST_PARTITIONS_RUN", "cluster")) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceTestCluster) cluster =
        sluice_test_cluster_start(3, 1, &error);

    if (cluster == NULL) {
      g_printerr("cannot start a Redis Cluster: %s\n", error->message);
      return 1;
    }
    if (wanted("SLUICE_TEST_PARTITIONS_MODE", "reliable"))
      failed += run_suite(SLUICE_REDIS_RELIABLE,
                          "redis-cluster-12-partitions-reliable",
                          sluice_test_cluster_url(cluster), 12);
    if (wanted("SLUICE_TEST_PARTITIONS_MODE", "fast"))
      failed += run_suite(SLUICE_REDIS_FAST, "redis-cluster-12-partitions-fast",
                          sluice_test_cluster_url(cluster), 12);
  }
  return failed == 0 ? 0 : 1;
}

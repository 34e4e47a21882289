/* test-redis-cluster-conformance.c - the broker conformance suite
 * (tests/conformance/) against a local Redis Cluster of three masters and
 * three replicas (tests/helpers/redis-cluster-fixture.c), through a
 * redis+cluster:// URL, in reliable mode and then in fast mode. Each
 * scenario has a namespace of its own, so the namespaces' slots fall on
 * all three masters: every script, command and blocking read of the suite
 * goes through the routing of brokers/redis/net/cluster.c, and a key
 * outside its namespace's hash tag would fail with CROSSSLOT or "Script
 * attempted to access a non local key".
 */
#include "config.h"

#include <unistd.h>

#include "brokers/redis/redis-broker.h"
#include "tests/conformance/conformance.h"
#include "tests/helpers/log-capture.h"
#include "tests/helpers/redis-cluster-fixture.h"
#include "tests/helpers/redis-fixture.h"

typedef struct {
  SluiceRedisMode mode;
  const gchar *url;
  gint serial;
} ClusterFactoryData;

static SluiceBroker *
create_cluster_broker(SluiceClock *clock, guint dead_letter_max, gpointer data,
                      GError **error)
{
  ClusterFactoryData *d = data;
  /* The time as well as the pid: each scenario is a process of its own,
   * and over a long run on a busy machine pids come round again (a
   * namespace met again keeps its mode and its keys). */
  g_autofree gchar *ns =
      g_strdup_printf("cc%d-%" G_GINT64_FORMAT "-%d", (int)getpid(),
                      g_get_real_time(), g_atomic_int_add(&d->serial, 1));
  SluiceBroker *broker = sluice_test_redis_broker_new(
      d->mode, d->url, ns, dead_letter_max, clock, error);

  /* As for one Redis (redis-conformance.c): completion must wake
   * get_result through the notification, not the safety-net poll. */
  if (broker != NULL)
    ((SluiceRedisBroker *)broker)->wait_poll_ms = G_MAXINT;
  return broker;
}

static int
run_suite(SluiceRedisMode mode, const gchar *name, const gchar *url)
{
  ClusterFactoryData data = {mode, url, 0};
  SluiceConformanceFactory factory = {
      .name = name,
      .create = create_cluster_broker,
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

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestCluster) cluster = NULL;
  const gchar *only = g_getenv("SLUICE_TEST_CLUSTER_MODE");
  int failed = 0;

  cluster = sluice_test_cluster_start(3, 1, &error);
  if (cluster == NULL) {
    g_printerr("cannot start a Redis Cluster: %s\n", error->message);
    return 1;
  }
  sluice_test_log_capture_install();
  if (only == NULL || g_strcmp0(only, "reliable") == 0)
    failed += run_suite(SLUICE_REDIS_RELIABLE, "redis-cluster-reliable",
                        sluice_test_cluster_url(cluster));
  if (only == NULL || g_strcmp0(only, "fast") == 0)
    failed += run_suite(SLUICE_REDIS_FAST, "redis-cluster-fast",
                        sluice_test_cluster_url(cluster));
  return failed == 0 ? 0 : 1;
}

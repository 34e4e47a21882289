/* test-redis-reliable-conformance.c - the broker conformance suite against
 * redis-reliable, through the same test code as every other broker.
 *
 * One redis-server for the whole run, started before the runner forks its
 * test processes; every broker the suite asks for gets a namespace of its
 * own ("c<pid>-<n>"), so scenarios never see each other's keys.
 * redis-reliable declares LEASES, FENCING and IN_FLIGHT, so the scenarios
 * gated on them run; only those gated on SLUICE_BROKER_CAP_CLOCK_TTL are
 * skipped (record TTLs follow the Redis server's clock, not the fake one).
 *
 * The fault scenarios that need worker processes and a misbehaving Redis
 * are in test-redis-reliable.c.
 */
#include "config.h"

#include "core/sluice-private.h"

#include <unistd.h>

#include "tests/conformance/conformance.h"
#include "tests/helpers/redis-server.h"

typedef struct {
  SluiceTestRedis *server;
  gint serial;
} RedisFactoryData;

static SluiceBroker *
create_redis_reliable(SluiceClock *clock, guint dead_letter_max, gpointer data,
                      GError **error)
{
  RedisFactoryData *d = data;
  g_autofree gchar *ns = NULL;
  SluiceRedisOptions options;

  ns =
      g_strdup_printf("c%d-%d", (int)getpid(), g_atomic_int_add(&d->serial, 1));
  sluice_redis_options_init(&options);
  options.mode = SLUICE_REDIS_RELIABLE;
  options.url = sluice_test_redis_url(d->server);
  options.namespace_ = ns;
  options.dead_letter_max = dead_letter_max;
  options.reconnect_max_backoff_ms = 500;
  return sluice_redis_broker_new(&options, clock, error);
}

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  g_autoptr(GError) error = NULL;
  RedisFactoryData data = {NULL, 0};
  SluiceConformanceFactory factory = {
      .name = "redis-reliable",
      .create = create_redis_reliable,
      .data = &data,
      .scale = 0.2,
  };
  SRunner *runner;
  int failed;

  data.server = sluice_test_redis_start(NULL, &error);
  if (data.server == NULL) {
    fprintf(stderr, "cannot start redis-server: %s\n", error->message);
    return 1;
  }
  sluice_test_log_capture_install();
  runner = srunner_create(sluice_conformance_suite(&factory));
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  sluice_test_redis_stop(data.server);
  return failed == 0 ? 0 : 1;
}

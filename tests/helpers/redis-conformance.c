/* redis-conformance.c - the conformance suite against a Redis broker, the
 * same for every mode, so the modes cannot drift apart in how they are
 * tested.
 *
 * Each scenario gets a namespace of its own ("c<pid>-<n>") on one shared
 * redis-server, so scenarios never see each other's keys. Scenarios gated
 * on capabilities a mode lacks are skipped by the suite itself (record TTLs
 * follow the Redis server's clock, so SLUICE_BROKER_CAP_CLOCK_TTL never
 * holds here).
 */
#include "config.h"

#include <unistd.h>

#include "brokers/redis/redis-broker.h"
#include "tests/conformance/conformance.h"
#include "tests/helpers/redis-conformance.h"
#include "tests/helpers/redis-fixture.h"

typedef struct {
  SluiceRedisMode mode;
  gint serial;
} RedisFactoryData;

static SluiceBroker *
create_redis(SluiceClock *clock, guint dead_letter_max, gpointer data,
             GError **error)
{
  RedisFactoryData *d = data;
  /* The time too: a pid comes back once a busy machine wraps its pid
   * space, and a namespace left by a scenario of the other mode would then
   * refuse this one. */
  g_autofree gchar *ns =
      g_strdup_printf("c%d-%d-%" G_GINT64_FORMAT, (int)getpid(),
                      g_atomic_int_add(&d->serial, 1), g_get_real_time());
  SluiceBroker *broker = sluice_test_redis_broker_new(
      d->mode, sluice_test_redis_url(sluice_test_redis_shared()), ns,
      dead_letter_max, clock, error);

  /* No safety-net poll in wait_record: the scenario "get_result wakes on
   * completion" must then be woken by the notification the settle
   * publishes, or it does not end. */
  if (broker != NULL)
    ((SluiceRedisBroker *)broker)->wait_poll_ms = G_MAXINT;
  return broker;
}

int
sluice_test_redis_conformance_main(SluiceRedisMode mode, const gchar *name)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  RedisFactoryData data = {mode, 0};
  SluiceConformanceFactory factory = {
      .name = name,
      .create = create_redis,
      .data = &data,
      .scale = 0.2,
  };
  SRunner *runner;
  int failed;

  sluice_test_redis_shared_setup();
  sluice_test_log_capture_install();
  runner = srunner_create(sluice_conformance_suite(&factory));
  /* Each scenario in its own process, even when CK_FORK=no is set for a
   * sanitizer run: a scenario's broker threads end with its process. */
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  sluice_test_redis_shared_teardown();
  return failed == 0 ? 0 : 1;
}

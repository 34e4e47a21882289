/* test-redis-reliable-conformance.c - the broker conformance suite against
 * redis-reliable (see tests/helpers/redis-conformance.c). It declares
 * LEASES, FENCING and IN_FLIGHT, so the scenarios gated on them run. What
 * the slots do to streams and the PEL is test-redis-reliable-broker.c; the
 * fault rows with worker processes and a misbehaving Redis are
 * test-redis-reliable-faults.c.
 */
#include "config.h"

#include "tests/helpers/redis-conformance.h"

int
main(void)
{
  return sluice_test_redis_conformance_main(SLUICE_REDIS_RELIABLE,
                                            "redis-reliable");
}

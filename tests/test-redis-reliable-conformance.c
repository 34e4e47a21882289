/* test-redis-reliable-conformance.c - the broker conformance suite against
 * redis-reliable (see tests/helpers/redis-conformance.c). It declares
 * LEASES, FENCING and IN_FLIGHT, so the scenarios gated on them run. The
 * fault scenarios that need worker processes and a misbehaving Redis are in
 * test-redis-reliable.c.
 */
#include "config.h"

#include "tests/helpers/redis-conformance.h"

int
main(void)
{
  return sluice_test_redis_conformance_main(SLUICE_REDIS_RELIABLE,
                                            "redis-reliable");
}

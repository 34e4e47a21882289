/* test-redis-fast-conformance.c - the broker conformance suite against
 * redis-fast (see tests/helpers/redis-conformance.c). redis-fast declares
 * none of LEASES, FENCING or CLOCK_TTL: the scenarios gated on them are
 * skipped by the suite.
 */
#include "config.h"

#include "tests/helpers/redis-conformance.h"

int
main(void)
{
  return sluice_test_redis_conformance_main(SLUICE_REDIS_FAST, "redis-fast");
}

/* redis-conformance.h - the conformance suite against a Redis broker. */
#pragma once

#include <sluice/sluice-redis.h>

/* Starts a redis-server of its own, runs tests/conformance/ against a
 * broker of @mode named @name (a fresh namespace per scenario), stops the
 * server. Returns: the exit status for main(). */
int sluice_test_redis_conformance_main(SluiceRedisMode mode, const gchar *name);

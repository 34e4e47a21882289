/* redis-sentinel-fixture.h - a Redis Sentinel set-up for tests: a master,
 * one replica and three sentinels, each a redis-server of
 * tests/helpers/redis-server.c (free loopback port, own directory, stopped
 * by pid).
 *
 * The sentinels watch the master under SLUICE_TEST_SENTINEL_MASTER with a
 * quorum of 2, down-after-milliseconds 1000 and failover-timeout 5000, so
 * that a paused master is replaced within seconds.
 */
#pragma once

#include "tests/helpers/redis-server.h"

G_BEGIN_DECLS

#define SLUICE_TEST_SENTINEL_MASTER "sluicetest"
#define SLUICE_TEST_SENTINELS 3

typedef struct {
  SluiceTestRedis *master;  /* the first master */
  SluiceTestRedis *replica; /* its replica, the one a failover promotes */
  SluiceTestRedis *sentinels[SLUICE_TEST_SENTINELS];
  gchar *url; /* redis+sentinel://127.0.0.1:P1,...,127.0.0.1:P3/sluicetest/0 */
} SluiceTestSentinel;

/**
 * sluice_test_sentinel_start:
 *
 * Starts the master, the replica (and waits until it is in sync), then the
 * sentinels, and waits until every sentinel knows the replica and the
 * other sentinels (a failover needs both).
 * Returns: (transfer full): the set-up, or NULL and @error.
 */
SluiceTestSentinel *sluice_test_sentinel_start(GError **error);

/** sluice_test_sentinel_stop: stops every server (resuming a paused one
 * first) and frees @s. NULL-safe. */
void sluice_test_sentinel_stop(SluiceTestSentinel *s);

/**
 * sluice_test_sentinel_master_port:
 * @sentinel: which sentinel to ask
 * Returns: the port that sentinel names for the master, or 0.
 */
guint16 sluice_test_sentinel_master_port(SluiceTestSentinel *s, guint sentinel);

/**
 * sluice_test_sentinel_wait_master:
 * Waits (up to @timeout_s) until every sentinel names @port as the master.
 * Returns: whether they did.
 */
gboolean sluice_test_sentinel_wait_master(SluiceTestSentinel *s, guint16 port,
                                          guint timeout_s);

/**
 * sluice_test_sentinel_wait_synced:
 * Waits (up to @timeout_s) until @replica says its link to its master is
 * up (master_link_status:up) and, when @master_port is non-zero, that this
 * master is on @master_port.
 */
gboolean sluice_test_sentinel_wait_synced(SluiceTestRedis *replica,
                                          guint16 master_port, guint timeout_s);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceTestSentinel, sluice_test_sentinel_stop)

G_END_DECLS

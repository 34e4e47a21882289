/* redis-cluster-fixture.h - a throwaway Redis Cluster for the test suites.
 *
 * A SluiceTestCluster is masters x (1 + replicas) redis-server processes
 * of tests/helpers/redis-server.c (free loopback ports, their own
 * directories, stopped by pid), started with cluster-enabled and a small
 * cluster-node-timeout, joined with `redis-cli --cluster create` (or, for
 * fewer than three masters, which redis-cli refuses, with CLUSTER
 * ADDSLOTSRANGE, MEET and REPLICATE). The start returns once every node
 * says cluster_state:ok with all 16384 slots served and every replica is
 * in sync with its master.
 */
#pragma once

#include "tests/helpers/redis-server.h"

G_BEGIN_DECLS

typedef struct _SluiceTestCluster SluiceTestCluster;

/* The cluster-node-timeout of the fixture's nodes: small, so a failover
 * takes seconds. */
#define SLUICE_TEST_CLUSTER_NODE_TIMEOUT_MS 2000

/**
 * sluice_test_cluster_start:
 * @masters: >= 1
 * @replicas: replicas per master
 *
 * Returns: (transfer full): the cluster, ready; or NULL and @error.
 */
SluiceTestCluster *sluice_test_cluster_start(guint masters, guint replicas,
                                             GError **error);

/**
 * sluice_test_cluster_start_tls:
 * @tls: (nullable): NULL: as sluice_test_cluster_start(); else the
 *   tls_cert_file, tls_key_file, tls_ca_cert_file and tls_auth_clients of
 *   every node (borrowed for the call), which then speak TLS only, to
 *   clients and to each other (tls-cluster yes, tls-replication yes; the
 *   certificate must allow clientAuth too); the URL is rediss+cluster://
 *   with tls_ca_file
 */
SluiceTestCluster *
sluice_test_cluster_start_tls(guint masters, guint replicas,
                              const SluiceTestRedisOptions *tls,
                              GError **error);

/** sluice_test_cluster_stop: stops every node by its pid, frees @c.
 * NULL-safe. */
void sluice_test_cluster_stop(SluiceTestCluster *c);

/** Returns: (transfer none): redis+cluster://127.0.0.1:<port>,... naming
 * every node. */
const gchar *sluice_test_cluster_url(SluiceTestCluster *c);

/** Returns: how many nodes the cluster has (masters and replicas). */
guint sluice_test_cluster_n_nodes(SluiceTestCluster *c);

/** Returns: (transfer none): node @i (0 ... n_nodes - 1); a node killed by
 * the test stays in the list with pid 0. */
SluiceTestRedis *sluice_test_cluster_node(SluiceTestCluster *c, guint i);

/**
 * sluice_test_cluster_wait_ok:
 * Waits up to @timeout_ms until every live node says cluster_state:ok with
 * cluster_slots_ok:16384 and no slot failing.
 * Returns: FALSE and @error when it did not happen in time.
 */
gboolean sluice_test_cluster_wait_ok(SluiceTestCluster *c, gint64 timeout_ms,
                                     GError **error);

/** Returns: the slot of @key, from CLUSTER KEYSLOT on a live node. */
guint sluice_test_cluster_keyslot(SluiceTestCluster *c, const gchar *key);

/** Returns: (transfer none) (nullable): the live master that says it
 * serves @slot (CLUSTER NODES, its own line). */
SluiceTestRedis *sluice_test_cluster_owner(SluiceTestCluster *c, guint slot);

/** Returns: (transfer none) (nullable): a live master other than @not. */
SluiceTestRedis *sluice_test_cluster_other_master(SluiceTestCluster *c,
                                                  SluiceTestRedis * not );

/** Returns: how many keys live master @node holds (DBSIZE). */
gint64 sluice_test_cluster_dbsize(SluiceTestRedis *node);

/**
 * sluice_test_cluster_migrate_begin:
 * Marks @slot IMPORTING on @to and MIGRATING on @from (the first step of a
 * reshard). Returns: FALSE and @error when a node refuses.
 */
gboolean sluice_test_cluster_migrate_begin(SluiceTestCluster *c, guint slot,
                                           SluiceTestRedis *from,
                                           SluiceTestRedis *to, GError **error);

/**
 * sluice_test_cluster_migrate_keys:
 * Moves up to @max keys of @slot from @from to @to (GETKEYSINSLOT, then
 * MIGRATE ... KEYS). Returns: how many moved, or -1 and @error.
 */
gint sluice_test_cluster_migrate_keys(SluiceTestCluster *c, guint slot,
                                      SluiceTestRedis *from,
                                      SluiceTestRedis *to, guint max,
                                      GError **error);

/**
 * sluice_test_cluster_migrate_end:
 * Gives @slot to @to on every live master (CLUSTER SETSLOT ... NODE), the
 * last step of a reshard. Returns: FALSE and @error when a node refuses.
 */
gboolean sluice_test_cluster_migrate_end(SluiceTestCluster *c, guint slot,
                                         SluiceTestRedis *to, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceTestCluster, sluice_test_cluster_stop)

G_END_DECLS

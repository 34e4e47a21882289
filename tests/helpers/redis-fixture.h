/* redis-fixture.h - the redis-server a test program shares, Redis brokers
 * on it, and the Redis commands its tests look at.
 *
 * A program registers sluice_test_redis_shared_setup() and _teardown() as
 * an unchecked fixture of its test cases (or calls them around the runner
 * in main()): one server, started before Check forks a process per test.
 * Each test then works in a namespace of its own, sluice_test_namespace()
 * ("t<pid>"), so tests never see each other's keys. A test that changes
 * its server (restarts it, sets a password, fills its memory) starts one
 * of its own with sluice_test_redis_own().
 *
 * The functions that may fail a test use Check's assertions.
 */
#pragma once

#include <check.h>

#include <sluice/sluice-redis.h>

#include "tests/helpers/redis-server.h"

G_BEGIN_DECLS

/* Starts the shared server (exits the program if it cannot). */
void sluice_test_redis_shared_setup(void);

/* Stops it. */
void sluice_test_redis_shared_teardown(void);

/* Returns: (transfer none): the shared server. */
SluiceTestRedis *sluice_test_redis_shared(void);

/* Returns: (transfer full): a server of the test's own, with @options
 * (nullable). */
SluiceTestRedis *sluice_test_redis_own(const SluiceTestRedisOptions *options);

/* Returns: (transfer full): the test's namespace, "t<pid>". */
gchar *sluice_test_namespace(void);

/* Returns: (transfer full): a broker of @mode on @url and @ns, keeping at
 * most @dead_letter_max dead letters (0 = the default), on @clock
 * (nullable), reconnecting within 200 ms; or NULL and @error. */
SluiceBroker *sluice_test_redis_broker_new(SluiceRedisMode mode,
                                           const gchar *url, const gchar *ns,
                                           guint dead_letter_max,
                                           SluiceClock *clock, GError **error);

/* The same, failing the test instead of returning NULL. */
SluiceBroker *sluice_test_redis_broker(SluiceRedisMode mode, const gchar *url,
                                       const gchar *ns, guint dead_letter_max);

/* Returns: (transfer full): a broker of @mode on the shared server, in the
 * test's namespace. */
SluiceBroker *sluice_test_redis_shared_broker(SluiceRedisMode mode);

/* Returns: a TCP port on 127.0.0.1 that nothing listens on (bound, then
 * closed). */
guint16 sluice_test_closed_port(void);

/* How many times @server ran @command (lower case), from INFO
 * commandstats. */
gint64 sluice_test_redis_calls(SluiceTestRedis *server, const gchar *command);

/* Waits (bounded; fails the test) until @n clients are blocked in a
 * command on @server. */
void sluice_test_redis_wait_blocked(SluiceTestRedis *server, gint64 n);

/* Makes @server full (maxmemory 1), with its script cache emptied so that
 * the next script is loaded while it is full. */
void sluice_test_redis_fill(SluiceTestRedis *server);

/* Lifts the limit again. */
void sluice_test_redis_unfill(SluiceTestRedis *server);

/* The length of queue @queue's list (fast mode) in namespace @ns. */
gint64 sluice_test_redis_llen(SluiceTestRedis *server, const gchar *ns,
                              const gchar *queue);

/* The length of queue @queue's stream (reliable mode). */
gint64 sluice_test_redis_xlen(SluiceTestRedis *server, const gchar *ns,
                              const gchar *queue);

/* The consumer group's pending count for @queue (0 without a group). */
gint64 sluice_test_redis_pending(SluiceTestRedis *server, const gchar *ns,
                                 const gchar *queue);

/* Returns: (transfer full) (nullable): the consumer that holds stream
 * entry @handle of @queue, and its delivery count in @out_count
 * (nullable); NULL when it is not pending. */
gchar *sluice_test_redis_owner(SluiceTestRedis *server, const gchar *ns,
                               const gchar *queue, const gchar *handle,
                               gint64 *out_count);

/* How many consumers @queue's group has, or -1. */
gint64 sluice_test_redis_consumers(SluiceTestRedis *server, const gchar *ns,
                                   const gchar *queue);

G_END_DECLS

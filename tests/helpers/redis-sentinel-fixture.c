/* redis-sentinel-fixture.c - a master, a replica and three sentinels for
 * the Sentinel tests (see redis-sentinel-fixture.h).
 *
 * Order matters: the replica is in sync before the sentinels start, so
 * that the sentinels' first INFO of the master lists it (they look again
 * only every 10 s), and a test may pause the master only once every
 * sentinel knows the replica and its two peers; the fixture waits for
 * both. Waits poll the servers' own answers with generous deadlines:
 * nothing depends on how fast a busy machine runs them.
 */
#include "config.h"

#include "tests/helpers/redis-sentinel-fixture.h"

#include <signal.h>
#include <string.h>

#define POLL_US (50 * 1000)
#define READY_TIMEOUT_S 60

static gboolean
is_synced(SluiceTestRedis *replica, guint16 master_port)
{
  redisReply *reply = sluice_test_redis_command(replica, "INFO replication");
  gboolean ok = FALSE;

  if (reply != NULL && reply->type == REDIS_REPLY_STRING) {
    g_autofree gchar *port = g_strdup_printf("master_port:%u\r", master_port);
    ok = strstr(reply->str, "master_link_status:up") != NULL &&
         (master_port == 0 || strstr(reply->str, port) != NULL);
  }
  if (reply != NULL)
    freeReplyObject(reply);
  return ok;
}

gboolean
sluice_test_sentinel_wait_synced(SluiceTestRedis *replica, guint16 master_port,
                                 guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time() + timeout_s * G_USEC_PER_SEC;

  while (!is_synced(replica, master_port)) {
    if (g_get_monotonic_time() > deadline)
      return FALSE;
    g_usleep(POLL_US);
  }
  return TRUE;
}

/* The number of entries SENTINEL @what (replicas, sentinels) lists. */
static gsize
count_known(SluiceTestRedis *sentinel, const gchar *what)
{
  redisReply *reply = sluice_test_redis_command(
      sentinel, "SENTINEL %s %s", what, SLUICE_TEST_SENTINEL_MASTER);
  gsize n = 0;

  if (reply != NULL && reply->type == REDIS_REPLY_ARRAY)
    n = reply->elements;
  if (reply != NULL)
    freeReplyObject(reply);
  return n;
}

guint16
sluice_test_sentinel_master_port(SluiceTestSentinel *s, guint sentinel)
{
  redisReply *reply;
  guint64 port = 0;

  g_return_val_if_fail(sentinel < SLUICE_TEST_SENTINELS, 0);
  reply = sluice_test_redis_command(s->sentinels[sentinel],
                                    "SENTINEL get-master-addr-by-name %s",
                                    SLUICE_TEST_SENTINEL_MASTER);
  if (reply != NULL && reply->type == REDIS_REPLY_ARRAY &&
      reply->elements == 2 && reply->element[1]->type == REDIS_REPLY_STRING)
    g_ascii_string_to_unsigned(reply->element[1]->str, 10, 1, 65535, &port,
                               NULL);
  if (reply != NULL)
    freeReplyObject(reply);
  return (guint16)port;
}

gboolean
sluice_test_sentinel_wait_master(SluiceTestSentinel *s, guint16 port,
                                 guint timeout_s)
{
  gint64 deadline = g_get_monotonic_time() + timeout_s * G_USEC_PER_SEC;

  for (;;) {
    guint agree = 0;

    for (guint i = 0; i < SLUICE_TEST_SENTINELS; i++)
      if (sluice_test_sentinel_master_port(s, i) == port)
        agree++;
    if (agree == SLUICE_TEST_SENTINELS)
      return TRUE;
    if (g_get_monotonic_time() > deadline)
      return FALSE;
    g_usleep(POLL_US);
  }
}

SluiceTestSentinel *
sluice_test_sentinel_start(GError **error)
{
  g_autoptr(SluiceTestSentinel) s = g_new0(SluiceTestSentinel, 1);
  g_autofree gchar *master_port = NULL;
  g_autofree gchar *config = NULL;
  g_autoptr(GString) url = g_string_new("redis+sentinel://");
  gint64 deadline;

  s->master = sluice_test_redis_start(NULL, error);
  if (s->master == NULL)
    return NULL;
  master_port = g_strdup_printf("%u", sluice_test_redis_port(s->master));
  {
    const gchar *replicaof[] = {"--replicaof", "127.0.0.1", master_port, NULL};
    SluiceTestRedisOptions options = {0};

    options.extra_args = replicaof;
    s->replica = sluice_test_redis_start(&options, error);
    if (s->replica == NULL)
      return NULL;
  }
  if (!sluice_test_sentinel_wait_synced(
          s->replica, sluice_test_redis_port(s->master), READY_TIMEOUT_S)) {
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                "the replica did not sync with the master within %d s",
                READY_TIMEOUT_S);
    return NULL;
  }

  config = g_strdup_printf(
      "sentinel monitor %s 127.0.0.1 %s 2\n"
      "sentinel down-after-milliseconds %s 1000\n"
      "sentinel failover-timeout %s 5000\n"
      "sentinel parallel-syncs %s 1\n",
      SLUICE_TEST_SENTINEL_MASTER, master_port, SLUICE_TEST_SENTINEL_MASTER,
      SLUICE_TEST_SENTINEL_MASTER, SLUICE_TEST_SENTINEL_MASTER);
  for (guint i = 0; i < SLUICE_TEST_SENTINELS; i++) {
    SluiceTestRedisOptions options = {0};

    options.sentinel_config = config;
    s->sentinels[i] = sluice_test_redis_start(&options, error);
    if (s->sentinels[i] == NULL)
      return NULL;
    g_string_append_printf(url, "%s127.0.0.1:%u", i > 0 ? "," : "",
                           sluice_test_redis_port(s->sentinels[i]));
  }
  g_string_append_printf(url, "/%s/0", SLUICE_TEST_SENTINEL_MASTER);
  s->url = g_strdup(url->str);

  deadline = g_get_monotonic_time() + READY_TIMEOUT_S * G_USEC_PER_SEC;
  for (guint i = 0; i < SLUICE_TEST_SENTINELS; i++) {
    while (count_known(s->sentinels[i], "replicas") < 1 ||
           count_known(s->sentinels[i], "sentinels") <
               SLUICE_TEST_SENTINELS - 1) {
      if (g_get_monotonic_time() > deadline) {
        g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                    "sentinel %u did not learn of the replica and its peers "
                    "within %d s",
                    i, READY_TIMEOUT_S);
        return NULL;
      }
      g_usleep(POLL_US);
    }
  }
  return g_steal_pointer(&s);
}

void
sluice_test_sentinel_stop(SluiceTestSentinel *s)
{
  if (s == NULL)
    return;
  /* The sentinels first, so that none starts a failover while the data
   * servers go; a paused server must be resumed to hear SIGTERM. */
  for (guint i = 0; i < SLUICE_TEST_SENTINELS; i++)
    sluice_test_redis_stop(s->sentinels[i]);
  if (s->master != NULL)
    sluice_test_redis_kill(s->master, SIGCONT);
  if (s->replica != NULL)
    sluice_test_redis_kill(s->replica, SIGCONT);
  sluice_test_redis_stop(s->master);
  sluice_test_redis_stop(s->replica);
  g_free(s->url);
  g_free(s);
}

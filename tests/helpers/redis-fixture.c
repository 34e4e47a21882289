/* redis-fixture.c - see redis-fixture.h. */
#include "config.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/helpers/redis-fixture.h"

/* The reliable mode's consumer group (PROTOCOL.md). */
#define GROUP "sluice"

static SluiceTestRedis *shared;

void
sluice_test_redis_shared_setup(void)
{
  g_autoptr(GError) error = NULL;

  shared = sluice_test_redis_start(NULL, &error);
  if (shared == NULL) {
    fprintf(stderr, "cannot start redis-server: %s\n", error->message);
    exit(1);
  }
}

void
sluice_test_redis_shared_teardown(void)
{
  g_clear_pointer(&shared, sluice_test_redis_stop);
}

SluiceTestRedis *
sluice_test_redis_shared(void)
{
  ck_assert_msg(shared != NULL, "the shared redis-server is not running");
  return shared;
}

SluiceTestRedis *
sluice_test_redis_own(const SluiceTestRedisOptions *options)
{
  g_autoptr(GError) error = NULL;
  SluiceTestRedis *server = sluice_test_redis_start(options, &error);

  ck_assert_msg(server != NULL, "redis-server: %s",
                error != NULL ? error->message : "?");
  return server;
}

gchar *
sluice_test_namespace(void)
{
  return g_strdup_printf("t%d", (int)getpid());
}

SluiceBroker *
sluice_test_redis_broker_new(SluiceRedisMode mode, const gchar *url,
                             const gchar *ns, guint dead_letter_max,
                             SluiceClock *clock, GError **error)
{
  SluiceRedisOptions options;

  sluice_redis_options_init(&options);
  options.mode = mode;
  options.url = url;
  options.ns = ns;
  options.dead_letter_max = dead_letter_max;
  options.reconnect_max_backoff_ms = 200;
  return sluice_redis_broker_new(&options, clock, error);
}

SluiceBroker *
sluice_test_redis_broker(SluiceRedisMode mode, const gchar *url,
                         const gchar *ns, guint dead_letter_max)
{
  g_autoptr(GError) error = NULL;
  SluiceBroker *broker = sluice_test_redis_broker_new(
      mode, url, ns, dead_letter_max, NULL, &error);

  ck_assert_msg(broker != NULL, "broker: %s",
                error != NULL ? error->message : "?");
  return broker;
}

SluiceBroker *
sluice_test_redis_shared_broker(SluiceRedisMode mode)
{
  g_autofree gchar *ns = sluice_test_namespace();

  return sluice_test_redis_broker(
      mode, sluice_test_redis_url(sluice_test_redis_shared()), ns, 0);
}

guint16
sluice_test_closed_port(void)
{
  struct sockaddr_in addr = {0};
  socklen_t len = sizeof addr;
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  ck_assert_int_ge(fd, 0);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

gint64
sluice_test_redis_calls(SluiceTestRedis *server, const gchar *command)
{
  redisReply *reply = sluice_test_redis_command(server, "INFO commandstats");
  g_autofree gchar *needle = g_strdup_printf("cmdstat_%s:calls=", command);
  gint64 calls = 0;

  if (reply != NULL && reply->type == REDIS_REPLY_STRING) {
    const gchar *at = strstr(reply->str, needle);
    if (at != NULL)
      calls = g_ascii_strtoll(at + strlen(needle), NULL, 10);
  }
  if (reply != NULL)
    freeReplyObject(reply);
  return calls;
}

void
sluice_test_redis_wait_blocked(SluiceTestRedis *server, gint64 n)
{
  gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;

  while (sluice_test_redis_info_int(server, "clients", "blocked_clients") < n) {
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "no %" G_GINT64_FORMAT " clients blocked on the server", n);
    g_usleep(10 * 1000);
  }
}

static void
config_set(SluiceTestRedis *server, const gchar *name, const gchar *value)
{
  redisReply *r =
      sluice_test_redis_command(server, "CONFIG SET %s %s", name, value);

  ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS,
                "CONFIG SET %s %s failed", name, value);
  freeReplyObject(r);
}

void
sluice_test_redis_fill(SluiceTestRedis *server)
{
  freeReplyObject(sluice_test_redis_command(server, "SCRIPT FLUSH"));
  config_set(server, "maxmemory", "1");
}

void
sluice_test_redis_unfill(SluiceTestRedis *server)
{
  config_set(server, "maxmemory", "0");
}

gint64
sluice_test_redis_llen(SluiceTestRedis *server, const gchar *ns,
                       const gchar *queue)
{
  return sluice_test_redis_integer(server, "LLEN {%s}:q:%s", ns, queue);
}

gint64
sluice_test_redis_xlen(SluiceTestRedis *server, const gchar *ns,
                       const gchar *queue)
{
  return sluice_test_redis_integer(server, "XLEN {%s}:s:%s", ns, queue);
}

gint64
sluice_test_redis_pending(SluiceTestRedis *server, const gchar *ns,
                          const gchar *queue)
{
  redisReply *r =
      sluice_test_redis_command(server, "XPENDING {%s}:s:%s " GROUP, ns, queue);
  gint64 n = 0;

  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
      r->element[0]->type == REDIS_REPLY_INTEGER)
    n = r->element[0]->integer;
  if (r != NULL)
    freeReplyObject(r);
  return n;
}

gchar *
sluice_test_redis_owner(SluiceTestRedis *server, const gchar *ns,
                        const gchar *queue, const gchar *handle,
                        gint64 *out_count)
{
  redisReply *r =
      sluice_test_redis_command(server, "XPENDING {%s}:s:%s " GROUP " %s %s 1",
                                ns, queue, handle, handle);
  gchar *owner = NULL;

  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
    redisReply *e = r->element[0];
    owner = g_strndup(e->element[1]->str, e->element[1]->len);
    if (out_count != NULL)
      *out_count = e->element[3]->integer;
  }
  if (r != NULL)
    freeReplyObject(r);
  return owner;
}

gint64
sluice_test_redis_consumers(SluiceTestRedis *server, const gchar *ns,
                            const gchar *queue)
{
  redisReply *r = sluice_test_redis_command(
      server, "XINFO CONSUMERS {%s}:s:%s " GROUP, ns, queue);
  gint64 n = -1;

  if (r != NULL && r->type == REDIS_REPLY_ARRAY)
    n = (gint64)r->elements;
  if (r != NULL)
    freeReplyObject(r);
  return n;
}

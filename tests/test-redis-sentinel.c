/* test-redis-sentinel.c - Redis Sentinel (redis+sentinel:// URLs) and the
 * min_replicas_ack durability knob.
 *
 * url        what the URL parser accepts and refuses, and that no message
 *            shows a password (no server)
 * resolve    against a master, a replica and three sentinels
 *            (tests/helpers/redis-sentinel-fixture.c): the master is found
 *            and written to; a wrong name, unreachable sentinels and
 *            refused sentinel credentials each get their own error; after
 *            a failover the broker saw nothing of (SENTINEL FAILOVER) the
 *            next write reaches the new master, with one log line; a
 *            -READONLY reply makes it ask the sentinels again; a sentinel
 *            of an older config-epoch is not believed
 * durable    min_replicas_ack: an enqueue and a settle wait for the
 *            replica, and say so when it does not confirm (the replica
 *            paused with SIGSTOP), on a plain redis:// URL too
 * failover   producers and a reliable worker run while the master is
 *            paused (SIGSTOP) until the sentinels promote the replica, then
 *            resumed: with min_replicas_ack=1 no acknowledged task is lost;
 *            without, the figures are printed (key=value lines) and only
 *            recovery is asserted: new work after the failover completes
 *
 * No assertion depends on timing: every wait is on a condition, with a
 * deadline far beyond what it needs.
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <string.h>

#include <sluice/sluice.h>

#include "brokers/redis/redis-broker.h"
#include "tests/helpers/broker-calls.h"
#include "tests/helpers/log-capture.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/redis-sentinel-fixture.h"

/* ---- url ----------------------------------------------------------------- */

START_TEST(test_url_sentinel_forms)
{
  SluiceRedisUrl url;
  SluiceRedisUrlParams params;
  g_autoptr(GError) error = NULL;

  ck_assert(sluice_redis__parse_url(
      "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster", &url,
      &params, &error));
  ck_assert(url.is_sentinel);
  ck_assert_uint_eq(url.n_sentinels, 2);
  ck_assert_str_eq(url.sentinels[1], "127.0.0.1");
  ck_assert_int_eq(url.sentinel_ports[1], 26380);
  ck_assert_str_eq(url.master_name, "mymaster");
  ck_assert_int_eq(url.db, 0);
  ck_assert_ptr_null(url.password);
  ck_assert_ptr_null(url.sentinel_password);
  ck_assert_int_eq(params.min_replicas_ack, -1);
  ck_assert_str_eq(url.display,
                   "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/"
                   "mymaster/0");
  sluice_redis_url__clear(&url);

  /* Data credentials in the userinfo, the sentinels' in the query; a
   * sentinel without a port is on 26379. */
  ck_assert(sluice_redis__parse_url(
      "redis+sentinel://app:s3cr%2Ft@sent-1,[::1]:5000/my%20master/3"
      "?sentinel_user=watch&sentinel_password=p%40ss&min_replicas_ack=1"
      "&min_replicas_timeout_ms=250",
      &url, &params, &error));
  ck_assert_uint_eq(url.n_sentinels, 2);
  ck_assert_str_eq(url.sentinels[0], "sent-1");
  ck_assert_int_eq(url.sentinel_ports[0], 26379);
  ck_assert_str_eq(url.sentinels[1], "::1");
  ck_assert_int_eq(url.sentinel_ports[1], 5000);
  ck_assert_str_eq(url.master_name, "my master");
  ck_assert_int_eq(url.db, 3);
  ck_assert_str_eq(url.user, "app");
  ck_assert_str_eq(url.password, "s3cr/t");
  ck_assert_str_eq(url.sentinel_user, "watch");
  ck_assert_str_eq(url.sentinel_password, "p@ss");
  ck_assert_int_eq(params.min_replicas_ack, 1);
  ck_assert_int_eq(params.min_replicas_timeout_ms, 250);
  ck_assert_ptr_null(strstr(url.display, "s3cr"));
  ck_assert_ptr_null(strstr(url.display, "p@ss"));
  ck_assert_ptr_null(strstr(url.display, "p%40ss"));
  ck_assert_str_eq(url.display,
                   "redis+sentinel://app:***@sent-1:26379,[::1]:5000/"
                   "my master/3");
  sluice_redis_url__clear(&url);

  /* The durability knob on the other schemes. */
  ck_assert(sluice_redis__parse_url("redis://h:7000/2?min_replicas_ack=2", &url,
                                    &params, &error));
  ck_assert_int_eq(params.min_replicas_ack, 2);
  ck_assert_int_eq(url.db, 2);
  ck_assert(!url.is_sentinel);
  sluice_redis_url__clear(&url);
  ck_assert(sluice_redis__parse_url(
      "unix:///tmp/r.sock?db=4&min_replicas_ack=1", &url, &params, &error));
  ck_assert_int_eq(url.db, 4);
  ck_assert_int_eq(params.min_replicas_ack, 1);
  sluice_redis_url__clear(&url);
}
END_TEST

typedef struct {
  const gchar *text;
  const gchar *says; /* a part of the message */
} BadUrl;

static const BadUrl bad_urls[] = {
    {"redis+sentinel://127.0.0.1:26379", "master's name is missing"},
    {"redis+sentinel://127.0.0.1:26379/", "master's name is missing"},
    {"redis+sentinel:///mymaster", "the sentinels are missing"},
    {"redis+sentinel://h1:99999/m", "not a sentinel address"},
    {"redis+sentinel://h1:1,,h2/m", "not a sentinel address"},
    {"redis+sentinel://::1:26379/m", "IPv6 address in brackets"},
    {"redis+sentinel://h1 x/m", "not a sentinel address"},
    {"redis+sentinel://h1/m/x", "only a database number"},
    {"redis+sentinel://h1/m/1/2", "only a database number"},
    {"redis+sentinel://h1/m#top", "fragment"},
    {"redis+sentinel://h1/m?sentinel_user=u", "sentinel_user needs"},
    {"redis+sentinel://h1/m?bogus=1", "unknown query parameter “bogus”"},
    {"redis+sentinel://h1/m?min_replicas_ack=many", "min_replicas_ack must"},
    {"redis+sentinel://h1/m?min_replicas_timeout_ms=0",
     "min_replicas_timeout_ms must"},
    {"rediss+sentinel://h1/m", "TLS"},
    {"redis://h/0?db=1", "the database is the path"},
    {"redis://h/0?min_replicas_ack=-1", "min_replicas_ack must"},
    {"sentinel://h1/m", "redis+sentinel://"},
};

START_TEST(test_url_refusals)
{
  const BadUrl *bad = &bad_urls[_i];
  SluiceRedisUrl url;
  SluiceRedisUrlParams params;
  g_autoptr(GError) error = NULL;

  ck_assert_msg(!sluice_redis__parse_url(bad->text, &url, &params, &error),
                "%s", bad->text);
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  ck_assert_msg(strstr(error->message, bad->says) != NULL,
                "%s: “%s” does not say “%s”", bad->text, error->message,
                bad->says);
}
END_TEST

/* A password is never shown, wherever it sits and whatever is wrong. */
START_TEST(test_url_refusal_hides_passwords)
{
  static const gchar *const texts[] = {
      "redis+sentinel://:topsecret@h1:1/m?bogus=1",
      "redis+sentinel://h1:1/m?sentinel_password=topsecret&bogus=1",
      "redis+sentinel://h1:1/m?sentinel_password=topsecret&sentinel_user=u"
      "&min_replicas_ack=x",
      "redis+sentinel://h1:1?sentinel_password=topsecret",
  };

  for (gsize i = 0; i < G_N_ELEMENTS(texts); i++) {
    SluiceRedisUrl url;
    SluiceRedisUrlParams params;
    g_autoptr(GError) error = NULL;

    ck_assert(!sluice_redis__parse_url(texts[i], &url, &params, &error));
    ck_assert_msg(strstr(error->message, "topsecret") == NULL, "%s",
                  error->message);
  }
}
END_TEST

/* Every way to open a Redis broker from a URL takes the new scheme; a
 * broker is made without connecting. */
START_TEST(test_url_opens_a_broker)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) b = sluice_broker_new_for_url(
      "redis+sentinel://127.0.0.1:1,127.0.0.1:2/m/0", NULL, NULL, &error);

  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
}
END_TEST

/* ---- resolve ------------------------------------------------------------- */

static SluiceBroker *
sentinel_broker(const gchar *url, SluiceRedisMode mode, const gchar *ns,
                guint min_replicas_ack)
{
  SluiceRedisOptions options;
  g_autoptr(GError) error = NULL;
  SluiceBroker *b;

  sluice_redis_options_init(&options);
  options.url = url;
  options.mode = mode;
  options.ns = ns;
  /* Short, so a paused master is given up on quickly; the deadlines of
   * the test itself stay generous. */
  options.connect_timeout_ms = 1000;
  options.command_timeout_ms = 2000;
  options.reconnect_max_backoff_ms = 1000;
  options.min_replicas_ack = min_replicas_ack;
  options.min_replicas_timeout_ms = min_replicas_ack > 0 ? 2000 : 0;
  b = sluice_redis_broker_new(&options, NULL, &error);
  ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
  return b;
}

START_TEST(test_resolve_finds_the_master)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestSentinel) s = sluice_test_sentinel_start(&error);
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(SluiceBroker) wrong = NULL;
  g_autoptr(SluiceBroker) unreachable = NULL;
  g_autoptr(SluiceBroker) auth = NULL;
  g_autofree gchar *wrong_url = NULL;
  g_autofree gchar *dead_url = NULL;
  g_autofree gchar *auth_url = NULL;

  ck_assert_msg(s != NULL, "%s", error != NULL ? error->message : "");
  b = sentinel_broker(s->url, SLUICE_REDIS_RELIABLE, "resolve", 0);
  ck_assert_msg(sluice_redis_broker_ping(b, &error), "%s",
                error != NULL ? error->message : "");
  sluice_test_enqueue(b, "m1", "default", "hello", 0);
  /* Written on the master (and replicated), not on a replica. */
  ck_assert_int_eq(sluice_test_redis_xlen(s->master, "resolve", "default"), 1);
  ck_assert(sluice_test_sentinel_wait_synced(s->replica, 0, 60));

  /* A name no sentinel monitors: INVALID, naming it. */
  wrong_url =
      g_strdup_printf("redis+sentinel://127.0.0.1:%u,127.0.0.1:%u/nosuchmaster",
                      sluice_test_redis_port(s->sentinels[0]),
                      sluice_test_redis_port(s->sentinels[1]));
  wrong = sentinel_broker(wrong_url, SLUICE_REDIS_RELIABLE, "resolve", 0);
  ck_assert(!sluice_redis_broker_ping(wrong, &error));
  ck_assert_msg(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID),
      "%s", error->message);
  ck_assert_msg(strstr(error->message, "nosuchmaster") != NULL &&
                    strstr(error->message, "SENTINEL MASTERS") != NULL,
                "%s", error->message);
  g_clear_error(&error);

  /* No sentinel listening: UNAVAILABLE, saying why for each. */
  dead_url =
      g_strdup_printf("redis+sentinel://127.0.0.1:%u,127.0.0.1:%u/%s",
                      sluice_test_closed_port(), sluice_test_closed_port(),
                      SLUICE_TEST_SENTINEL_MASTER);
  unreachable = sentinel_broker(dead_url, SLUICE_REDIS_RELIABLE, "resolve", 0);
  ck_assert(!sluice_redis_broker_ping(unreachable, &error));
  ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_UNAVAILABLE),
                "%s", error->message);
  ck_assert_msg(strstr(error->message, "no sentinel") != NULL, "%s",
                error->message);
  g_clear_error(&error);

  /* Credentials the sentinels refuse (they want none): AUTH, naming the
   * query parameters, never the password. */
  auth_url = g_strdup_printf("%s?sentinel_password=wrongpw", s->url);
  auth = sentinel_broker(auth_url, SLUICE_REDIS_RELIABLE, "resolve", 0);
  ck_assert(!sluice_redis_broker_ping(auth, &error));
  ck_assert_msg(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH),
      "%s", error->message);
  ck_assert_msg(strstr(error->message, "sentinel_password") != NULL, "%s",
                error->message);
  ck_assert_msg(strstr(error->message, "wrongpw") == NULL, "%s",
                error->message);
}
END_TEST

/* LLEN of a queue on a connection of its own: the sentinels kill the
 * clients of the servers they reconfigure (CLIENT KILL TYPE normal), the
 * helper's kept connection with them. */
static gint64
llen_now(SluiceTestRedis *server, const gchar *ns, const gchar *queue)
{
  redisContext *c = sluice_test_redis_connect(server);
  redisReply *reply;
  gint64 n = -1;

  ck_assert(c != NULL);
  reply = redisCommand(c, "LLEN {%s}:q:%s", ns, queue);
  if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
    n = reply->integer;
  if (reply != NULL)
    freeReplyObject(reply);
  redisFree(c);
  return n;
}

/* A failover the broker did not see happen (SENTINEL FAILOVER: nothing
 * breaks, the master is demoted to a replica): the next write, with no
 * idempotency key, meets the old master, which refuses it (-READONLY), so
 * it is sent again to the new one; the broker logs the change once. */
START_TEST(test_write_after_a_quiet_failover_reaches_the_new_master)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestSentinel) s = sluice_test_sentinel_start(&error);
  g_autoptr(SluiceBroker) b = NULL;
  g_autofree gchar *line = NULL;
  guint16 old_port, new_port;
  redisReply *reply;

  ck_assert_msg(s != NULL, "%s", error != NULL ? error->message : "");
  old_port = sluice_test_redis_port(s->master);
  new_port = sluice_test_redis_port(s->replica);
  b = sentinel_broker(s->url, SLUICE_REDIS_FAST, "quiet", 0);
  sluice_test_enqueue(b, "q1", "default", "before", 0);
  ck_assert_int_eq(sluice_test_redis_llen(s->master, "quiet", "default"), 1);
  ck_assert(sluice_test_sentinel_wait_synced(s->replica, old_port, 60));

  sluice_test_log_capture_reset();
  reply = sluice_test_redis_command(s->sentinels[0], "SENTINEL FAILOVER %s",
                                    SLUICE_TEST_SENTINEL_MASTER);
  ck_assert_msg(reply != NULL && reply->type == REDIS_REPLY_STATUS, "%s",
                reply != NULL && reply->str != NULL ? reply->str : "no reply");
  freeReplyObject(reply);
  ck_assert(sluice_test_sentinel_wait_master(s, new_port, 120));
  ck_assert(sluice_test_sentinel_wait_synced(s->master, new_port, 120));

  sluice_test_enqueue(b, "q2", "default", "after", 0);
  ck_assert_int_eq(llen_now(s->replica, "quiet", "default"), 2);
  line = g_strdup_printf("master moved from 127.0.0.1:%u to 127.0.0.1:%u",
                         old_port, new_port);
  ck_assert_uint_eq(sluice_test_log_capture_count(line), 1);
}
END_TEST

/* A master demoted behind the sentinels' back (REPLICAOF by hand, the
 * broker's connection to it left open): the write it refuses with
 * -READONLY makes the broker ask the sentinels again rather than report
 * the refusal. The sentinels are stopped first, so the new question is
 * seen in the error it gets. */
START_TEST(test_readonly_reply_makes_the_broker_ask_again)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestSentinel) s = sluice_test_sentinel_start(&error);
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(GBytes) payload = sluice_test_text("after");
  SluiceSubmit item = {.id = "r2", .queue = "default", .payload = payload};
  g_autofree gchar *new_port = NULL;
  redisReply *reply;

  ck_assert_msg(s != NULL, "%s", error != NULL ? error->message : "");
  b = sentinel_broker(s->url, SLUICE_REDIS_FAST, "readonly", 0);
  sluice_test_enqueue(b, "r1", "default", "before", 0);
  for (guint i = 0; i < SLUICE_TEST_SENTINELS; i++)
    g_clear_pointer(&s->sentinels[i], sluice_test_redis_stop);

  new_port = g_strdup_printf("%u", sluice_test_redis_port(s->replica));
  reply = sluice_test_redis_command(s->replica, "REPLICAOF NO ONE");
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  reply =
      sluice_test_redis_command(s->master, "REPLICAOF 127.0.0.1 %s", new_port);
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);

  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_UNAVAILABLE),
                "%s", error->message);
  ck_assert_msg(strstr(error->message, "no sentinel") != NULL, "%s",
                error->message);
}
END_TEST

/* A sentinel that names a master of an older config-epoch than the
 * process has seen is not believed: here a stray sentinel that watches
 * another server under the same name (epoch 0), asked once the real ones
 * (epoch 1, after a failover) are gone and the master does not answer.
 * Believing it would send writes to a server that says "master". */
START_TEST(test_a_sentinel_behind_the_latest_failover_is_not_believed)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestSentinel) s = sluice_test_sentinel_start(&error);
  g_autoptr(SluiceTestRedis) other = NULL;
  g_autoptr(SluiceTestRedis) stray = NULL;
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(GBytes) payload = sluice_test_text("x");
  SluiceSubmit item = {.id = "e2", .queue = "default", .payload = payload};
  g_autofree gchar *config = NULL;
  g_autofree gchar *url = NULL;
  SluiceTestRedisOptions options = {0};
  guint16 new_port;
  redisReply *reply;

  ck_assert_msg(s != NULL, "%s", error != NULL ? error->message : "");
  new_port = sluice_test_redis_port(s->replica);
  reply = sluice_test_redis_command(s->sentinels[0], "SENTINEL FAILOVER %s",
                                    SLUICE_TEST_SENTINEL_MASTER);
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  ck_assert(sluice_test_sentinel_wait_master(s, new_port, 120));

  other = sluice_test_redis_start(NULL, &error);
  ck_assert_msg(other != NULL, "%s", error != NULL ? error->message : "");
  config = g_strdup_printf("sentinel monitor %s 127.0.0.1 %u 1\n",
                           SLUICE_TEST_SENTINEL_MASTER,
                           sluice_test_redis_port(other));
  options.sentinel_config = config;
  stray = sluice_test_redis_start(&options, &error);
  ck_assert_msg(stray != NULL, "%s", error != NULL ? error->message : "");
  url = g_strdup_printf("redis+sentinel://127.0.0.1:%u,127.0.0.1:%u/%s",
                        sluice_test_redis_port(s->sentinels[0]),
                        sluice_test_redis_port(stray),
                        SLUICE_TEST_SENTINEL_MASTER);
  b = sentinel_broker(url, SLUICE_REDIS_FAST, "epoch", 0);
  sluice_test_enqueue(b, "e1", "default", "x", 0);
  ck_assert_int_eq(llen_now(s->replica, "epoch", "default"), 1);

  for (guint i = 0; i < SLUICE_TEST_SENTINELS; i++)
    g_clear_pointer(&s->sentinels[i], sluice_test_redis_stop);
  sluice_test_redis_kill(s->replica, SIGSTOP);
  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_UNAVAILABLE),
                "%s", error->message);
  g_clear_error(&error);
  /* Asked again once the backoff is over (reconnect_max_backoff_ms is
   * 1000): still not believed. */
  g_usleep(1100 * 1000);
  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(strstr(error->message, "has not caught up") != NULL, "%s",
                error->message);
  ck_assert_int_eq(sluice_test_redis_integer(other, "DBSIZE"), 0);
  sluice_test_redis_kill(s->replica, SIGCONT);
}
END_TEST

/* ---- durable ------------------------------------------------------------- */

/* min_replicas_ack on a plain redis:// URL of a master with one replica:
 * fine while the replica follows; with the replica paused, enqueue and
 * settle say that the write is not known to be on a replica. */
START_TEST(test_min_replicas_ack_reports_a_missing_replica)
{
  static const gchar *const q[] = {"default", NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestSentinel) s = sluice_test_sentinel_start(&error);
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(SluiceBroker) two = NULL;
  g_autoptr(GBytes) payload = sluice_test_text("x");
  g_autoptr(GPtrArray) got = NULL;
  g_autofree gchar *url = NULL;
  g_autofree gchar *url_two = NULL;
  SluiceSubmit item = {.id = "d2", .queue = "default", .payload = payload};
  SluiceSettlement ack = {.action = SLUICE_SETTLE_ACK};

  ck_assert_msg(s != NULL, "%s", error != NULL ? error->message : "");
  /* Through the URL's parameter this time. */
  url = g_strdup_printf("%s?min_replicas_ack=1&min_replicas_timeout_ms=500",
                        sluice_test_redis_url(s->master));
  b = sentinel_broker(url, SLUICE_REDIS_RELIABLE, "durable", 0);
  sluice_test_enqueue(b, "d1", "default", "x", 0);
  got = sluice_test_fetch(b, "c1", q, 1, 0);
  ck_assert_uint_eq(got->len, 1);

  sluice_test_redis_kill(s->replica, SIGSTOP);
  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_UNAVAILABLE),
                "%s", error->message);
  ck_assert_msg(strstr(error->message, "enqueue was written on the Redis "
                                       "master") != NULL &&
                    strstr(error->message, "not known to be on a replica") !=
                        NULL &&
                    strstr(error->message, "min_replicas_ack") != NULL,
                "%s", error->message);
  g_clear_error(&error);
  /* The write itself happened: the message is there. */
  ck_assert_int_eq(sluice_test_redis_xlen(s->master, "durable", "default"), 2);

  ack.delivery = sluice_test_delivery_at(got, 0);
  ck_assert(!sluice_broker_settle(b, "c1", &ack, 1, &error));
  ck_assert_msg(strstr(error->message, "settle was written on the Redis "
                                       "master") != NULL,
                "%s", error->message);
  g_clear_error(&error);

  /* Back in step: the same settle again is fine (the contract's repeat). */
  sluice_test_redis_kill(s->replica, SIGCONT);
  ck_assert(sluice_test_sentinel_wait_synced(s->replica, 0, 60));
  ck_assert_msg(sluice_broker_settle(b, "c1", &ack, 1, &error), "%s",
                error != NULL ? error->message : "");

  /* More replicas than there are: never confirmed. */
  url_two = g_strdup_printf("%s?min_replicas_ack=2&min_replicas_timeout_ms=200",
                            sluice_test_redis_url(s->master));
  two = sentinel_broker(url_two, SLUICE_REDIS_RELIABLE, "durable", 0);
  item.id = "d3";
  ck_assert(!sluice_broker_enqueue(two, &item, 1, &error));
  ck_assert_msg(strstr(error->message, "only 1 of the 2 replicas") != NULL,
                "%s", error->message);
}
END_TEST

/* ---- failover ------------------------------------------------------------ */

typedef struct {
  GMutex lock;
  GHashTable *acked; /* id -> GUINT ack order (1-based) */
  GHashTable *runs;  /* id -> GUINT times the task ran */
  guint n_acked;
  guint enqueue_errors;
  gint stop; /* atomic */
  const gchar *url;
  guint min_replicas_ack;
} Run;

static gboolean
task_record(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  Run *run = data;
  const gchar *id = sluice_task_context_get_id(ctx);
  guint n;

  g_mutex_lock(&run->lock);
  n = GPOINTER_TO_UINT(g_hash_table_lookup(run->runs, id));
  g_hash_table_insert(run->runs, g_strdup(id), GUINT_TO_POINTER(n + 1));
  g_mutex_unlock(&run->lock);
  return TRUE;
}

/* Enqueues @id until it is acknowledged (the same id each time, so a
 * repeat after an unknown outcome is not written twice), or the run
 * stops. Returns: whether it was acknowledged. */
static gboolean
enqueue_until_acked(Run *run, SluiceClient *client, const gchar *id)
{
  SluiceEnqueueOptions opts;

  sluice_enqueue_options_init(&opts);
  opts.id = id;
  while (!g_atomic_int_get(&run->stop)) {
    g_autoptr(GError) error = NULL;
    g_autofree gchar *got =
        sluice_client_enqueue(client, "t.record", NULL, &opts, &error);

    if (got != NULL) {
      g_mutex_lock(&run->lock);
      g_hash_table_insert(run->acked, g_strdup(id),
                          GUINT_TO_POINTER(++run->n_acked));
      g_mutex_unlock(&run->lock);
      return TRUE;
    }
    g_mutex_lock(&run->lock);
    /* The first one says what goes wrong, when something does. */
    if (run->enqueue_errors++ == 0)
      g_print("first enqueue error: %s\n", error->message);
    g_mutex_unlock(&run->lock);
    g_usleep(50 * 1000); /* the broker's backoff decides the real pace */
  }
  return FALSE;
}

typedef struct {
  Run *run;
  guint index;
} Producer;

static gpointer
producer_main(gpointer data)
{
  Producer *p = data;
  g_autoptr(SluiceBroker) b = sentinel_broker(
      p->run->url, SLUICE_REDIS_RELIABLE, "failover", p->run->min_replicas_ack);
  g_autoptr(SluiceClient) client = sluice_client_new(b, NULL, NULL);

  for (guint i = 0; !g_atomic_int_get(&p->run->stop); i++) {
    g_autofree gchar *id = g_strdup_printf("p%u-%u", p->index, i);

    enqueue_until_acked(p->run, client, id);
    g_usleep(2 * 1000); /* a steady trickle, not a flood */
  }
  return NULL;
}

typedef struct {
  Run *run;
  guint want;
  const gchar *prefix; /* NULL: every acknowledged id */
} Done;

static guint
count_missing(Run *run, const gchar *prefix)
{
  GHashTableIter iter;
  gpointer id;
  guint missing = 0;

  g_mutex_lock(&run->lock);
  g_hash_table_iter_init(&iter, run->acked);
  while (g_hash_table_iter_next(&iter, &id, NULL))
    if ((prefix == NULL || g_str_has_prefix(id, prefix)) &&
        !g_hash_table_contains(run->runs, id))
      missing++;
  g_mutex_unlock(&run->lock);
  return missing;
}

static gboolean
all_ran(gpointer data)
{
  Done *d = data;

  return count_missing(d->run, d->prefix) == 0;
}

static gboolean
acked_at_least(gpointer data)
{
  Done *d = data;
  guint n;
  gboolean both;

  g_mutex_lock(&d->run->lock);
  n = d->run->n_acked;
  /* Each producer's broker has met the first master (so each logs the
   * failover): its first id is acknowledged. */
  both = g_hash_table_contains(d->run->acked, "p0-0") &&
         g_hash_table_contains(d->run->acked, "p1-0");
  g_mutex_unlock(&d->run->lock);
  return n >= d->want && both;
}

typedef struct {
  Run *run;
  SluiceTestRedis *master;
} Drain;

static gboolean
drained(gpointer data)
{
  Drain *d = data;

  return count_missing(d->run, NULL) == 0 ||
         sluice_test_redis_xlen(d->master, "failover", "default") == 0;
}

static void
failover_run(guint min_replicas_ack)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestSentinel) s = sluice_test_sentinel_start(&error);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceBroker) wb = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceBroker) pb = NULL;
  g_autoptr(SluiceClient) after = NULL;
  g_autofree gchar *url = NULL;
  SluiceWorkerOptions wopts;
  SluiceWorkerStats st;
  GThread *producers[2];
  Producer pargs[2];
  Run run = {0};
  Done done = {&run, 0, NULL};
  Drain drain;
  guint16 new_port;
  gint64 started_at, paused_at, promoted_at, stopped_at;
  guint lost = 0, duplicated = 0, completed = 0;
  GHashTableIter iter;
  gpointer key, value;

  ck_assert_msg(s != NULL, "%s", error != NULL ? error->message : "");
  new_port = sluice_test_redis_port(s->replica);
  url = min_replicas_ack > 0 ? g_strdup_printf("%s?min_replicas_ack=%u", s->url,
                                               min_replicas_ack)
                             : g_strdup(s->url);
  g_mutex_init(&run.lock);
  run.acked = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  run.runs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  run.url = url;
  run.min_replicas_ack = min_replicas_ack;

  ck_assert(sluice_registry_add(registry, "t.record", task_record, &run, NULL,
                                NULL, &error));
  wb =
      sentinel_broker(url, SLUICE_REDIS_RELIABLE, "failover", min_replicas_ack);
  sluice_worker_options_init(&wopts);
  wopts.concurrency = 4;
  wopts.visibility_timeout_ms = 5000; /* what a lost fetch reply costs */
  worker = sluice_worker_new(wb, registry, &wopts, &error);
  ck_assert_msg(worker != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(sluice_worker_start(worker, &error));
  started_at = g_get_monotonic_time();
  for (guint i = 0; i < 2; i++) {
    pargs[i] = (Producer){&run, i};
    producers[i] = g_thread_new("producer", producer_main, &pargs[i]);
  }

  /* Work flows before the failover... */
  done.want = 200;
  ck_assert(sluice_test_wait_for(acked_at_least, &done, 120000));

  /* ...the master stops answering until the sentinels replace it... */
  sluice_test_log_capture_reset();
  paused_at = g_get_monotonic_time();
  sluice_test_redis_kill(s->master, SIGSTOP);
  ck_assert_msg(sluice_test_sentinel_wait_master(s, new_port, 120),
                "the sentinels did not promote the replica");
  promoted_at = g_get_monotonic_time();
  /* ...and comes back, to be turned into a replica of the new master. */
  sluice_test_redis_kill(s->master, SIGCONT);
  ck_assert(sluice_test_sentinel_wait_synced(s->master, new_port, 120));

  /* The system recovers: producers get acknowledgements again. */
  g_mutex_lock(&run.lock);
  done.want = run.n_acked + 200;
  g_mutex_unlock(&run.lock);
  ck_assert_msg(sluice_test_wait_for(acked_at_least, &done, 180000),
                "no new enqueue was acknowledged after the failover");
  g_atomic_int_set(&run.stop, 1);
  for (guint i = 0; i < 2; i++)
    g_thread_join(producers[i]);
  stopped_at = g_get_monotonic_time();

  /* New work after the failover completes, in every mode. */
  pb =
      sentinel_broker(url, SLUICE_REDIS_RELIABLE, "failover", min_replicas_ack);
  after = sluice_client_new(pb, NULL, NULL);
  g_atomic_int_set(&run.stop, 0);
  for (guint i = 0; i < 50; i++) {
    g_autofree gchar *id = g_strdup_printf("after-%u", i);
    ck_assert(enqueue_until_acked(&run, after, id));
  }
  done.prefix = "after-";
  ck_assert_msg(sluice_test_wait_for(all_ran, &done, 180000),
                "%u tasks enqueued after the failover never ran",
                count_missing(&run, "after-"));

  /* Lost is what never ran once nothing is left to run: every task ran,
   * or the queue's stream on the new master is empty (it holds what is
   * undelivered or pending; a settled entry leaves it). Reclaims after
   * the lease, and a slow build, may make that take a while. */
  drain = (Drain){&run, s->replica};
  ck_assert_msg(sluice_test_wait_for(drained, &drain, 600000),
                "the queue never drained: %" G_GINT64_FORMAT " entries left",
                sluice_test_redis_xlen(s->replica, "failover", "default"));
  lost = count_missing(&run, NULL);
  sluice_worker_get_stats(worker, &st);
  sluice_worker_stop(worker);

  g_mutex_lock(&run.lock);
  g_hash_table_iter_init(&iter, run.runs);
  while (g_hash_table_iter_next(&iter, &key, &value)) {
    if (!g_hash_table_contains(run.acked, key))
      continue; /* ran, though its enqueue was never acknowledged */
    completed++;
    if (GPOINTER_TO_UINT(value) > 1)
      duplicated++;
  }
  g_print("sentinel_failover min_replicas_ack=%u\n"
          "enqueued=%u\ncompleted=%u\nlost=%u\nduplicated=%u\n"
          "enqueue_errors=%u\nran_unacknowledged=%u\n"
          "failover_ms=%" G_GINT64_FORMAT "\nfirst_200_ms=%" G_GINT64_FORMAT
          "\nproducing_ms=%" G_GINT64_FORMAT "\nreclaimed=%" G_GUINT64_FORMAT
          "\nstale_settles=%" G_GUINT64_FORMAT "\n",
          min_replicas_ack, run.n_acked, completed, lost, duplicated,
          run.enqueue_errors, g_hash_table_size(run.runs) - completed,
          (promoted_at - paused_at) / 1000, (paused_at - started_at) / 1000,
          (stopped_at - started_at) / 1000, st.reclaimed, st.stale_settles);
  g_mutex_unlock(&run.lock);
  if (min_replicas_ack > 0)
    ck_assert_msg(lost == 0, "%u acknowledged tasks were lost", lost);
  /* One line per failover for each broker that lived through it (the
   * worker's and the two producers'), naming both masters. */
  {
    g_autofree gchar *line =
        g_strdup_printf("master moved from 127.0.0.1:%u to 127.0.0.1:%u",
                        sluice_test_redis_port(s->master), new_port);
    ck_assert_uint_eq(sluice_test_log_capture_count("Redis Sentinel failover"),
                      3);
    ck_assert_uint_eq(sluice_test_log_capture_count(line), 3);
  }

  g_hash_table_unref(run.acked);
  g_hash_table_unref(run.runs);
  g_mutex_clear(&run.lock);
}

START_TEST(test_failover_with_min_replicas_ack_loses_nothing)
{
  failover_run(1);
}
END_TEST

START_TEST(test_failover_without_min_replicas_ack_recovers)
{
  failover_run(0);
}
END_TEST

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  Suite *s = suite_create("redis-sentinel");
  TCase *url = tcase_create("url");
  TCase *resolve = tcase_create("resolve");
  TCase *durable = tcase_create("durable");
  TCase *failover = tcase_create("failover");
  SRunner *runner;
  int failed;

  sluice_test_log_capture_install();
  tcase_add_test(url, test_url_sentinel_forms);
  tcase_add_loop_test(url, test_url_refusals, 0, G_N_ELEMENTS(bad_urls));
  tcase_add_test(url, test_url_refusal_hides_passwords);
  tcase_add_test(url, test_url_opens_a_broker);
  suite_add_tcase(s, url);

  tcase_set_timeout(resolve, 300);
  tcase_add_test(resolve, test_resolve_finds_the_master);
  tcase_add_test(resolve,
                 test_write_after_a_quiet_failover_reaches_the_new_master);
  tcase_add_test(resolve, test_readonly_reply_makes_the_broker_ask_again);
  tcase_add_test(resolve,
                 test_a_sentinel_behind_the_latest_failover_is_not_believed);
  suite_add_tcase(s, resolve);

  tcase_set_timeout(durable, 300);
  tcase_add_test(durable, test_min_replicas_ack_reports_a_missing_replica);
  suite_add_tcase(s, durable);

  tcase_set_timeout(failover, 1800);
  tcase_add_test(failover, test_failover_with_min_replicas_ack_loses_nothing);
  tcase_add_test(failover, test_failover_without_min_replicas_ack_recovers);
  suite_add_tcase(s, failover);

  runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

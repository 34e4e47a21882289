/* test-redis-net.c - the Redis network layer on its own
 * (brokers/redis/net/): what the broker's suites cannot see from above.
 *
 *   types  the connection types against sockets of the test's own: a port
 *          nobody listens on (one clear error at once), a server that never
 *          answers the handshake's SYN (one clear error at the deadline),
 *          IPv4 and IPv6 loopback (IPv6 is skipped, saying why, on a host
 *          without it), a unix socket; a reply larger than the
 *          connection's limit is refused, not buffered; the idle check sees
 *          a peer that hung up
 *   pool   against a redis-server: the owner's setup hook runs after the
 *          handshake on every new connection, and its failure refuses the
 *          connection with its error, without starting an outage; a reply
 *          over the pool's limit fails its call and the pool goes on
 *   url    a parameter neither the layer nor the broker knows is handed
 *          back by the layer and refused by the broker, by name
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "brokers/redis/net/conn-private.h"
#include "brokers/redis/redis-broker.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/redis-server.h"

/* ---- A server of the test's own ------------------------------------------ */

typedef struct {
  int fd;              /* listening */
  gint port;           /* TCP */
  gchar *path;         /* unix */
  gsize flood_bytes;   /* > 0: answer anything with one bulk string this long */
  const gchar *answer; /* (nullable): else answer anything with these bytes */
  GThread *thread;
} Fake;

/* Accepts one connection; answers its first command with +PONG, or with a
 * bulk string of @flood_bytes (as long as the client reads); then waits
 * for the client to hang up. */
static gpointer
fake_serve(gpointer data)
{
  Fake *fake = data;
  gchar buf[4096];
  int c = accept(fake->fd, NULL, NULL);
  ssize_t n;

  if (c < 0)
    return NULL;
  n = recv(c, buf, sizeof buf, 0);
  if (n > 0 && fake->answer != NULL) {
    (void)send(c, fake->answer, strlen(fake->answer), MSG_NOSIGNAL);
  } else if (n > 0 && fake->flood_bytes == 0) {
    (void)send(c, "+PONG\r\n", 7, MSG_NOSIGNAL);
  } else if (n > 0) {
    g_autofree gchar *head =
        g_strdup_printf("$%" G_GSIZE_FORMAT "\r\n", fake->flood_bytes);
    gsize sent = 0;

    memset(buf, 'x', sizeof buf);
    if (send(c, head, strlen(head), MSG_NOSIGNAL) > 0)
      while (sent < fake->flood_bytes) {
        n = send(c, buf, MIN(sizeof buf, fake->flood_bytes - sent),
                 MSG_NOSIGNAL);
        if (n <= 0)
          break; /* the client gave up: what the test wants */
        sent += (gsize)n;
      }
  }
  while (recv(c, buf, sizeof buf, 0) > 0)
    ;
  close(c);
  return NULL;
}

/* A listening socket on the loopback of @family, or NULL when the host
 * cannot have one (no IPv6), with *why saying so. */
static Fake *
fake_tcp(int family, gsize flood_bytes, gchar **why)
{
  Fake *fake = g_new0(Fake, 1);
  struct sockaddr_storage addr = {0};
  socklen_t len;
  int one = 1;

  fake->fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (family == AF_INET6) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_loopback;
    len = sizeof *a6;
  } else {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a4;
  }
  if (fake->fd >= 0)
    (void)setsockopt(fake->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fake->fd < 0 || bind(fake->fd, (struct sockaddr *)&addr, len) < 0 ||
      listen(fake->fd, 8) < 0 ||
      getsockname(fake->fd, (struct sockaddr *)&addr, &len) < 0) {
    *why = g_strdup_printf("no %s loopback here: %s",
                           family == AF_INET6 ? "IPv6" : "IPv4",
                           g_strerror(errno));
    if (fake->fd >= 0)
      close(fake->fd);
    g_free(fake);
    return NULL;
  }
  fake->port =
      ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                               : ((struct sockaddr_in *)&addr)->sin_port);
  fake->flood_bytes = flood_bytes;
  fake->thread = g_thread_new("fake-redis", fake_serve, fake);
  return fake;
}

static Fake *
fake_unix(void)
{
  Fake *fake = g_new0(Fake, 1);
  g_autofree gchar *dir = g_dir_make_tmp("sluice-net-XXXXXX", NULL);
  struct sockaddr_un addr = {0};

  ck_assert_ptr_nonnull(dir);
  fake->path = g_build_filename(dir, "redis.sock", NULL);
  addr.sun_family = AF_UNIX;
  g_strlcpy(addr.sun_path, fake->path, sizeof addr.sun_path);
  fake->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge(fake->fd, 0);
  ck_assert_int_eq(bind(fake->fd, (struct sockaddr *)&addr, sizeof addr), 0);
  ck_assert_int_eq(listen(fake->fd, 8), 0);
  fake->thread = g_thread_new("fake-redis", fake_serve, fake);
  return fake;
}

/* Call once the client hung up (its connection freed). */
static void
fake_free(Fake *fake)
{
  if (fake == NULL)
    return;
  shutdown(fake->fd, SHUT_RDWR); /* an accept() still waiting returns */
  g_thread_join(fake->thread);
  close(fake->fd);
  if (fake->path != NULL) {
    g_autofree gchar *dir = g_path_get_dirname(fake->path);
    g_unlink(fake->path);
    g_rmdir(dir);
  }
  g_free(fake->path);
  g_free(fake);
}

/* PING on @conn, answered +PONG. */
static void
assert_pong(SluiceRedisConn *conn)
{
  const char *argv[1] = {"PING"};
  size_t lens[1] = {4};
  redisReply *reply = NULL;
  g_autofree gchar *reason = NULL;

  sluice_redis_conn__append(conn, 1, argv, lens);
  ck_assert_msg(sluice_redis_conn__transact(conn, 1, &reply, 2000, &reason),
                "%s", reason);
  ck_assert_int_eq(reply->type, REDIS_REPLY_STATUS);
  ck_assert_str_eq(reply->str, "PONG");
  freeReplyObject(reply);
}

static SluiceRedisConn *
open_tcp(const gchar *host, gint port, gint64 timeout_ms, gchar **reason)
{
  SluiceRedisEndpoint endpoint = {host, port, NULL, NULL};

  return sluice_redis_conn__open(sluice_redis_conn_type__find("tcp"), &endpoint,
                                 timeout_ms, reason);
}

/* ---- types --------------------------------------------------------------- */

START_TEST(test_tcp_refused_is_one_clear_error_at_once)
{
  g_autofree gchar *reason = NULL;
  gint64 started = g_get_monotonic_time();
  SluiceRedisConn *conn =
      open_tcp("127.0.0.1", sluice_test_closed_port(), 2000, &reason);

  ck_assert_ptr_null(conn);
  ck_assert_msg(reason != NULL && strstr(reason, "refused") != NULL, "%s",
                reason);
  ck_assert_int_lt(g_get_monotonic_time() - started, 1000 * 1000);
}
END_TEST

/* A listening socket whose accept queue is full (backlog 0, never
 * accepted): Linux drops the SYNs of further connections, which then wait
 * for an answer that never comes, as with a blackholed address, but
 * without depending on the network around the test. */
START_TEST(test_tcp_connect_times_out_at_its_deadline)
{
  struct sockaddr_in addr = {0};
  socklen_t len = sizeof addr;
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_autoptr(GArray) fillers = g_array_new(FALSE, FALSE, sizeof(int));
  g_autofree gchar *reason = NULL;
  gboolean full = FALSE;
  gint64 started, took_ms;
  SluiceRedisConn *conn;

  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(bind(listener, (struct sockaddr *)&addr, sizeof addr), 0);
  ck_assert_int_eq(listen(listener, 0), 0);
  ck_assert_int_eq(getsockname(listener, (struct sockaddr *)&addr, &len), 0);
  for (guint i = 0; i < 64 && !full; i++) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct pollfd pfd = {c, POLLOUT, 0};

    if (connect(c, (struct sockaddr *)&addr, sizeof addr) < 0 &&
        errno == EINPROGRESS && poll(&pfd, 1, 200) == 0)
      full = TRUE;
    g_array_append_val(fillers, c);
  }
  if (!full) {
    g_print("test_tcp_connect_times_out_at_its_deadline: SKIP: the kernel "
            "took every connection (no full accept queue to wait on)\n");
  } else {
    started = g_get_monotonic_time();
    conn = open_tcp("127.0.0.1", ntohs(addr.sin_port), 300, &reason);
    took_ms = (g_get_monotonic_time() - started) / 1000;
    ck_assert_ptr_null(conn);
    ck_assert_msg(reason != NULL && strstr(reason, "timed out") != NULL &&
                      strstr(reason, "300 ms") != NULL,
                  "%s", reason);
    ck_assert_int_ge(took_ms, 280);
    ck_assert_int_lt(took_ms, 1300);
  }
  for (guint i = 0; i < fillers->len; i++)
    close(g_array_index(fillers, int, i));
  close(listener);
}
END_TEST

static void
check_loopback(int family, const gchar *host)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *reason = NULL;
  Fake *fake = fake_tcp(family, 0, &why);
  SluiceRedisConn *conn;

  if (fake == NULL) {
    ck_assert_int_eq(family, AF_INET6);
    g_print("test_tcp_loopback(%s): SKIP: %s\n", host, why);
    return;
  }
  conn = open_tcp(host, fake->port, 2000, &reason);
  ck_assert_msg(conn != NULL, "%s", reason);
  ck_assert_str_eq(conn->socket->type->name, "tcp");
  assert_pong(conn);
  sluice_redis_conn__free(conn);
  fake_free(fake);
}

START_TEST(test_tcp_ipv4_loopback)
{
  check_loopback(AF_INET, "127.0.0.1");
}
END_TEST

START_TEST(test_tcp_ipv6_loopback)
{
  check_loopback(AF_INET6, "::1");
}
END_TEST

START_TEST(test_unix_socket)
{
  Fake *fake = fake_unix();
  g_autofree gchar *reason = NULL;
  SluiceRedisEndpoint endpoint = {NULL, 0, fake->path, NULL};
  SluiceRedisEndpoint missing = {NULL, 0, "/nonexistent/sluice.sock", NULL};
  const SluiceRedisConnType *type = sluice_redis_conn_type__find("unix");
  SluiceRedisConn *conn =
      sluice_redis_conn__open(type, &endpoint, 2000, &reason);

  ck_assert_msg(conn != NULL, "%s", reason);
  assert_pong(conn);
  sluice_redis_conn__free(conn);
  fake_free(fake);
  ck_assert_ptr_null(sluice_redis_conn__open(type, &missing, 2000, &reason));
  ck_assert_msg(strstr(reason, "No such file") != NULL, "%s", reason);
}
END_TEST

/* A reply that does not end within the connection's limit fails the read
 * once the limit is passed: the client does not buffer the server's 8 MB
 * to find out. */
START_TEST(test_reply_larger_than_the_limit_is_refused)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *reason = NULL;
  Fake *fake = fake_tcp(AF_INET, 8 * 1024 * 1024, &why);
  const char *argv[2] = {"GET", "big"};
  size_t lens[2] = {3, 3};
  redisReply *reply = NULL;
  SluiceRedisConn *conn;

  ck_assert_msg(fake != NULL, "%s", why);
  conn = open_tcp("127.0.0.1", fake->port, 2000, &reason);
  ck_assert_msg(conn != NULL, "%s", reason);
  conn->max_reply_bytes = 1024 * 1024;
  sluice_redis_conn__append(conn, 2, argv, lens);
  ck_assert(!sluice_redis_conn__transact(conn, 1, &reply, 10000, &reason));
  ck_assert_ptr_null(reply);
  ck_assert(sluice_redis_conn__is_broken(conn));
  ck_assert_msg(strstr(reason, "grew past 1048576 bytes") != NULL, "%s",
                reason);
  /* What the reader holds is about the limit, not the server's 8 MB. */
  ck_assert_uint_lt(conn->reply_bytes, 2 * 1024 * 1024);
  sluice_redis_conn__free(conn);
  fake_free(fake);
}
END_TEST

/* hiredis 0.14 allocates an array's element vector when it reads the
 * header: a header of 100 million elements (800 MB) on a connection that
 * takes 1 MiB is refused before that, saying why. */
START_TEST(test_array_header_larger_than_the_limit_is_refused)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *reason = NULL;
  Fake *fake = fake_tcp(AF_INET, 0, &why);
  const char *argv[1] = {"LRANGE"};
  size_t lens[1] = {6};
  redisReply *reply = NULL;
  SluiceRedisConn *conn;

  ck_assert_msg(fake != NULL, "%s", why);
  /* Set before the first command reaches the fake (it answers that). */
  fake->answer = "*100000000\r\n:1\r\n";
  conn = open_tcp("127.0.0.1", fake->port, 2000, &reason);
  ck_assert_msg(conn != NULL, "%s", reason);
  conn->max_reply_bytes = 1024 * 1024;
  sluice_redis_conn__append(conn, 1, argv, lens);
  ck_assert(!sluice_redis_conn__transact(conn, 1, &reply, 10000, &reason));
  ck_assert_ptr_null(reply);
  ck_assert_msg(strstr(reason, "declared an array of 100000000 elements") !=
                        NULL &&
                    strstr(reason, "1048576 bytes") != NULL,
                "%s", reason);
  sluice_redis_conn__free(conn);
  fake_free(fake);
}
END_TEST

START_TEST(test_idle_check_sees_a_peer_that_hung_up)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *reason = NULL;
  Fake *fake = fake_tcp(AF_INET, 0, &why);
  SluiceRedisConn *conn;

  ck_assert_msg(fake != NULL, "%s", why);
  conn = open_tcp("127.0.0.1", fake->port, 2000, &reason);
  ck_assert_msg(conn != NULL, "%s", reason);
  ck_assert(sluice_redis_conn__alive(conn));
  /* The fake answers one command, then closes once the client stops
   * writing: the idle connection then has an EOF to read. */
  assert_pong(conn);
  ck_assert(sluice_redis_conn__alive(conn));
  shutdown(conn->socket->fd, SHUT_WR);
  for (guint i = 0; i < 200 && sluice_redis_conn__alive(conn); i++)
    g_usleep(10 * 1000);
  ck_assert(!sluice_redis_conn__alive(conn));
  sluice_redis_conn__free(conn);
  fake_free(fake);
}
END_TEST

/* ---- pool ---------------------------------------------------------------- */

typedef struct {
  gint calls;
  gboolean refuse;
  gchar *server_seen;
} Hook;

/* PING before anything else: on a server with requirepass it answers only
 * after the layer's AUTH, so a PONG proves the hook runs after the
 * handshake. */
static gboolean
hook_setup(SluiceRedisConn *conn, gpointer data, GError **error)
{
  Hook *hook = data;
  const char *argv[1] = {"PING"};
  size_t lens[1] = {4};
  redisReply *reply = NULL;
  gboolean ok;

  g_atomic_int_inc(&hook->calls);
  g_free(hook->server_seen);
  hook->server_seen = g_strdup(sluice_redis_conn__get_server(conn));
  sluice_redis_conn__append(conn, 1, argv, lens);
  if (!sluice_redis_conn__roundtrip(conn, 1, &reply, error))
    return FALSE;
  ok = sluice_redis_conn__check_reply(conn, reply, "PING", error);
  if (ok &&
      (reply->type != REDIS_REPLY_STATUS || strcmp(reply->str, "PONG") != 0)) {
    g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                        "no PONG");
    ok = FALSE;
  }
  freeReplyObject(reply);
  if (ok && hook->refuse) {
    g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                        "the hook refuses this server: use another one");
    ok = FALSE;
  }
  return ok;
}

static SluiceRedisPool *
pool_for(const gchar *text, gsize max_reply_bytes)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisUrl url;
  SluiceRedisPoolOptions options = {1000, 2000, 1000, max_reply_bytes};
  SluiceRedisPool *pool;

  ck_assert_msg(sluice_redis_url__parse(text, &url, &error), "%s",
                error->message);
  pool = sluice_redis_pool__new(&url, &options);
  sluice_redis_url__clear(&url);
  return pool;
}

START_TEST(test_setup_hook_runs_after_the_handshake_and_may_refuse)
{
  g_autoptr(GError) error = NULL;
  SluiceTestRedisOptions options = {.requirepass = "hookpw"};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_start(&options, &error);
  g_autofree gchar *url = NULL;
  Hook hook = {0};
  SluiceRedisPool *pool;
  SluiceRedisConn *conn, *again;

  ck_assert_msg(server != NULL, "%s", error != NULL ? error->message : "");
  url = g_strdup_printf("redis://:hookpw@127.0.0.1:%u/0",
                        sluice_test_redis_port(server));
  pool = pool_for(url, 0);
  sluice_redis_pool__set_setup(pool, hook_setup, &hook);

  /* Refused: the hook's error, as it set it, and no outage: the next
   * check-out tries again at once (and the hook runs again). */
  hook.refuse = TRUE;
  ck_assert_ptr_null(sluice_redis_pool__acquire_slot(pool, 0, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  ck_assert_str_eq(error->message,
                   "the hook refuses this server: use another one");
  g_clear_error(&error);
  ck_assert_ptr_null(sluice_redis_pool__acquire_slot(pool, 0, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  g_clear_error(&error);
  ck_assert_int_eq(g_atomic_int_get(&hook.calls), 2);

  /* Accepted: once per new connection, not per check-out. */
  hook.refuse = FALSE;
  conn = sluice_redis_pool__acquire_slot(pool, 0, &error);
  ck_assert_msg(conn != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(g_atomic_int_get(&hook.calls), 3);
  ck_assert_str_eq(hook.server_seen, sluice_redis_pool__get_display_url(pool));
  ck_assert_ptr_null(strstr(hook.server_seen, "hookpw"));
  sluice_redis_pool__release(pool, conn);
  again = sluice_redis_pool__acquire_slot(pool, 0, &error);
  ck_assert_ptr_eq(again, conn);
  ck_assert_int_eq(g_atomic_int_get(&hook.calls), 3);
  sluice_redis_pool__release(pool, again);
  sluice_redis_pool__free(pool);
  g_free(hook.server_seen);
}
END_TEST

START_TEST(test_reply_over_the_pools_limit_fails_the_call_only)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_start(NULL, &error);
  g_autofree gchar *big = g_malloc(200 * 1024 + 1);
  SluiceRedisPool *pool;
  SluiceRedisConn *conn;
  redisReply *reply = NULL;
  const char *get_big[2] = {"GET", "big"};
  const char *get_small[2] = {"GET", "small"};
  size_t lens[2] = {3, 0};

  ck_assert_msg(server != NULL, "%s", error != NULL ? error->message : "");
  memset(big, 'b', 200 * 1024);
  big[200 * 1024] = '\0';
  reply = sluice_test_redis_command(server, "SET big %s", big);
  ck_assert_msg(reply != NULL && reply->type == REDIS_REPLY_STATUS, "%s",
                reply != NULL && reply->str != NULL ? reply->str : "no reply");
  freeReplyObject(reply);
  reply = sluice_test_redis_command(server, "SET small s");
  ck_assert(reply != NULL && reply->type == REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  pool = pool_for(sluice_test_redis_url(server), 64 * 1024);

  conn = sluice_redis_pool__acquire_slot(pool, 0, &error);
  ck_assert_msg(conn != NULL, "%s", error != NULL ? error->message : "");
  lens[1] = 3;
  sluice_redis_conn__append(conn, 2, get_big, lens);
  ck_assert(!sluice_redis_conn__exchange(pool, conn, 1, &reply, 0, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNAVAILABLE));
  ck_assert_msg(strstr(error->message, "grew past 65536 bytes") != NULL, "%s",
                error->message);
  g_clear_error(&error);
  ck_assert(sluice_redis_conn__is_broken(conn));
  sluice_redis_pool__release(pool, conn);

  /* The pool goes on: a fresh connection serves the next call. */
  conn = sluice_redis_pool__acquire_slot(pool, 0, &error);
  ck_assert_msg(conn != NULL, "%s", error != NULL ? error->message : "");
  lens[1] = 5;
  sluice_redis_conn__append(conn, 2, get_small, lens);
  ck_assert(sluice_redis_conn__exchange(pool, conn, 1, &reply, 0, &error));
  ck_assert_str_eq(reply->str, "s");
  freeReplyObject(reply);
  sluice_redis_pool__release(pool, conn);
  sluice_redis_pool__free(pool);
}
END_TEST

/* ---- url ----------------------------------------------------------------- */

START_TEST(test_unknown_parameter_is_refused_by_the_broker_naming_it)
{
  static const struct {
    const gchar *url;
    const gchar *says;
  } cases[] = {
      {"redis://127.0.0.1:1/0?min_replicas_ack=1&partitons=3",
       "unknown query parameter “partitons”: the parameters are partitions, "
       "min_replicas_ack and min_replicas_timeout_ms (the database is the "
       "path, /N)"},
      {"unix:///tmp/r.sock?db=1&timeout=5",
       "unknown query parameter “timeout”: the parameters are db, partitions, "
       "min_replicas_ack and min_replicas_timeout_ms"},
      {"redis+sentinel://127.0.0.1:1/m?sentinel_pasword=x",
       "unknown query parameter “sentinel_pasword”: the parameters are "
       "sentinel_user, sentinel_password, partitions, min_replicas_ack and "
       "min_replicas_timeout_ms"},
  };
  g_autoptr(GError) error = NULL;
  SluiceRedisUrl url;

  /* The layer takes what it does not know and hands it back, in order. */
  ck_assert(sluice_redis_url__parse(cases[0].url, &url, &error));
  ck_assert_uint_eq(url.n_params, 2);
  ck_assert_str_eq(url.params[0].name, "min_replicas_ack");
  ck_assert_str_eq(url.params[1].name, "partitons");
  ck_assert_str_eq(url.params[1].value, "3");
  sluice_redis_url__clear(&url);

  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    SluiceRedisOptions options;
    SluiceBroker *broker;

    sluice_redis_options_init(&options);
    options.url = cases[i].url;
    broker = sluice_redis_broker_new(&options, NULL, &error);
    ck_assert_ptr_null(broker);
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_INVALID));
    ck_assert_msg(strstr(error->message, cases[i].says) != NULL, "%s",
                  error->message);
    g_clear_error(&error);
  }
}
END_TEST

static Suite *
net_suite(void)
{
  Suite *s = suite_create("redis-net");
  TCase *types = tcase_create("types");
  TCase *pool = tcase_create("pool");
  TCase *url = tcase_create("url");

  tcase_set_timeout(types, 60);
  tcase_add_test(types, test_tcp_refused_is_one_clear_error_at_once);
  tcase_add_test(types, test_tcp_connect_times_out_at_its_deadline);
  tcase_add_test(types, test_tcp_ipv4_loopback);
  tcase_add_test(types, test_tcp_ipv6_loopback);
  tcase_add_test(types, test_unix_socket);
  tcase_add_test(types, test_reply_larger_than_the_limit_is_refused);
  tcase_add_test(types, test_array_header_larger_than_the_limit_is_refused);
  tcase_add_test(types, test_idle_check_sees_a_peer_that_hung_up);
  suite_add_tcase(s, types);

  tcase_set_timeout(pool, 120);
  tcase_add_test(pool, test_setup_hook_runs_after_the_handshake_and_may_refuse);
  tcase_add_test(pool, test_reply_over_the_pools_limit_fails_the_call_only);
  suite_add_tcase(s, pool);

  tcase_add_test(url,
                 test_unknown_parameter_is_refused_by_the_broker_naming_it);
  suite_add_tcase(s, url);
  return s;
}

int
main(void)
{
  g_autofree gchar *server = sluice_test_redis_require();
  SRunner *runner = srunner_create(net_suite());
  int failed;

  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

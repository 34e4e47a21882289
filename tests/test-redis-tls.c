/* test-redis-tls.c - Redis over TLS (rediss://, brokers/redis/net/
 * conn-tls.c) against Debian's redis-server with its TLS port.
 *
 * main() makes the certificates once, with the openssl command, in a
 * directory of its own: a CA, a server certificate for 127.0.0.1 and
 * localhost, a client certificate, a server certificate that expired, one
 * not valid yet, one for another host, and a second CA with a client
 * certificate of its own (a client the server must not trust). Each test
 * starts the servers it needs (TLS only: --port 0 --tls-port P; the
 * helper reaches them by a unix socket), so nothing is shared but the
 * files.
 *
 *   e2e      both modes end to end (enqueue, a worker, the result), over
 *            TLS and over mutual TLS, with the settings given as URL
 *            parameters and as SluiceRedisOptions fields; a host name
 *            (localhost: SNI and the DNS check) as well as an address
 *   refuse   every refusal is one line that names its cause: unknown CA,
 *            expired, not yet valid, host-name mismatch, a server that
 *            requires a client certificate, a client certificate the
 *            server does not trust, a plain URL against a TLS port, a TLS
 *            URL against a plain port, a handshake that times out, no
 *            common protocol version; none quotes a key or a password
 *   files    settings that cannot be used are refused when the broker is
 *            made (SLUICE_BROKER_ERROR_INVALID), naming the file
 *   insecure tls_insecure=1 connects to a server of an unknown CA and
 *            warns once per broker
 *   faults   TLS connections killed mid-run (CLIENT KILL) cost nothing:
 *            every task of a reliable worker ends succeeded
 *   sentinel a master, its replica and three sentinels, all TLS only
 *            (tls-replication yes): the broker finds the master through the
 *            sentinels in TLS, and the new one after a failover
 *   url      the rediss schemes and their tls_* parameters
 *
 * Then the broker conformance suite runs once more, in reliable mode, on a
 * Redis Cluster of three TLS-only masters (tls-cluster yes), through a
 * rediss+cluster:// URL (redis-cluster-reliable-tls): TLS is a transport,
 * and nothing the contract promises may change over it, on any node the
 * slot map or a MOVED leads to.
 *
 * Skips (exit 77) only when redis-server or openssl is missing, or the
 * server was built without TLS, unless $CI is set.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include <sluice/sluice.h>

#include "brokers/redis/net/conn-private.h"
#include "brokers/redis/net/tls-private.h"
#include "brokers/redis/redis-broker.h"
#include "tests/conformance/conformance.h"
#include "tests/helpers/log-capture.h"
#include "tests/helpers/redis-cluster-fixture.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/redis-server.h"

#define PASSWORD "s3cret-Pa55word"

static gchar *certs; /* the directory of the certificates */

static gchar *
cert(const gchar *name)
{
  return g_build_filename(certs, name, NULL);
}

/* ---- Certificates ------------------------------------------------------- */

/* The shell script that makes them, in its working directory: openssl ca
 * signs every certificate, as it alone sets the start and end dates of
 * the expired and not-yet-valid ones. EC keys: fast to make. */
static const gchar make_certs[] =
    "set -e\n"
    "cat > ca.cnf <<'EOF'\n"
    "[ ca ]\n"
    "default_ca = test_ca\n"
    "[ test_ca ]\n"
    "database = index.txt\n"
    "new_certs_dir = .\n"
    "serial = serial\n"
    "default_md = sha256\n"
    "policy = anything\n"
    "unique_subject = no\n"
    "[ anything ]\n"
    "commonName = supplied\n"
    "EOF\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt "
    "ec_paramgen_curve:prime256v1 -out \"$1\" 2>/dev/null; }\n"
    "newca() {\n"
    "  key $1.key\n"
    "  openssl req -x509 -new -key $1.key -out $1.crt -days 30 -subj "
    "\"/CN=$2\" -addext basicConstraints=critical,CA:TRUE -addext "
    "keyUsage=critical,keyCertSign,cRLSign\n"
    "}\n"
    "# sign CA NAME CN EXT DATES...\n"
    "sign() {\n"
    "  ca=$1 name=$2 cn=$3 ext=$4; shift 4\n"
    "  [ -f $name.key ] || key $name.key\n"
    "  openssl req -new -key $name.key -out $name.csr -subj \"/CN=$cn\"\n"
    "  printf '%s\\n' \"$ext\" > $name.ext\n"
    "  : > index.txt; [ -f serial ] || echo 1000 > serial\n"
    "  openssl ca -batch -notext -config ca.cnf -cert $ca.crt -keyfile "
    "$ca.key -in $name.csr -out $name.crt -extfile $name.ext \"$@\" "
    "2>/dev/null\n"
    "}\n"
    "newca ca 'Sluice Test CA'\n"
    "newca rogue-ca 'Rogue CA'\n"
    "srv='subjectAltName=DNS:localhost,IP:127.0.0.1\n"
    "extendedKeyUsage=serverAuth,clientAuth'\n"
    "sign ca server localhost \"$srv\" -days 30\n"
    "cp server.key expired.key; cp server.key notyet.key; cp server.key "
    "other.key\n"
    "sign ca expired localhost \"$srv\" -startdate 20200101000000Z -enddate "
    "20200102000000Z\n"
    "sign ca notyet localhost \"$srv\" -startdate 20990101000000Z -enddate "
    "20991231000000Z\n"
    "sign ca other other.example 'subjectAltName=DNS:other.example\n"
    "extendedKeyUsage=serverAuth' -days 30\n"
    "sign ca client sluice-client 'extendedKeyUsage=clientAuth' -days 30\n"
    "sign rogue-ca rogue-client rogue 'extendedKeyUsage=clientAuth' -days "
    "30\n";

static void
make_certificates(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *script = NULL;
  g_autofree gchar *out = NULL, *err = NULL;
  gchar *argv[] = {(gchar *)"sh", NULL, NULL};
  gint status = 0;

  certs = g_dir_make_tmp("sluice-tls-XXXXXX", &error);
  g_assert_no_error(error);
  script = g_build_filename(certs, "make.sh", NULL);
  g_assert_true(g_file_set_contents(script, make_certs, -1, &error));
  argv[1] = script;
  if (!g_spawn_sync(certs, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                    &err, &status, &error) ||
      !g_spawn_check_wait_status(status, NULL)) {
    fprintf(stderr, "cannot make the test certificates: %s\n%s\n",
            error != NULL ? error->message : "", err != NULL ? err : "");
    exit(1);
  }
}

static void
remove_certificates(void)
{
  GDir *dir;
  const gchar *name;

  if (certs == NULL)
    return;
  dir = g_dir_open(certs, 0, NULL);
  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
    g_autofree gchar *path = g_build_filename(certs, name, NULL);
    g_unlink(path);
  }
  if (dir != NULL)
    g_dir_close(dir);
  g_rmdir(certs);
  g_clear_pointer(&certs, g_free);
}

/* ---- Servers ------------------------------------------------------------- */

/* A TLS-only server with certificate @name ("server", "expired"...),
 * verifying clients when @auth_clients says "yes"; @extra (nullable,
 * NULL-terminated) adds arguments. */
static SluiceTestRedis *
tls_server_full(const gchar *name, const gchar *auth_clients,
                const gchar *const *extra)
{
  g_autofree gchar *crt_name = g_strconcat(name, ".crt", NULL);
  g_autofree gchar *key_name = g_strconcat(name, ".key", NULL);
  g_autofree gchar *crt = cert(crt_name);
  g_autofree gchar *key = cert(key_name);
  g_autofree gchar *ca = cert("ca.crt");
  SluiceTestRedisOptions options = {0};

  options.tls_cert_file = crt;
  options.tls_key_file = key;
  options.tls_ca_cert_file = ca;
  options.tls_auth_clients = auth_clients;
  options.extra_args = extra;
  return sluice_test_redis_own(&options);
}

static SluiceTestRedis *
tls_server(const gchar *name, const gchar *auth_clients)
{
  return tls_server_full(name, auth_clients, NULL);
}

/* "rediss://127.0.0.1:<port>/0?" plus @query (printf format). */
static gchar *tls_url(SluiceTestRedis *server, const gchar *query, ...)
    G_GNUC_PRINTF(2, 3);

static gchar *
tls_url(SluiceTestRedis *server, const gchar *query, ...)
{
  va_list ap;
  g_autofree gchar *q = NULL;

  va_start(ap, query);
  q = g_strdup_vprintf(query, ap);
  va_end(ap);
  return g_strdup_printf("rediss://127.0.0.1:%u/0?%s",
                         sluice_test_redis_port(server), q);
}

static SluiceBroker *
broker_for(SluiceRedisMode mode, const gchar *url, gint64 connect_timeout_ms,
           GError **error)
{
  g_autofree gchar *ns = sluice_test_namespace();
  SluiceRedisOptions options;

  sluice_redis_options_init(&options);
  options.mode = mode;
  options.url = url;
  options.ns = ns;
  options.reconnect_max_backoff_ms = 200;
  options.connect_timeout_ms = connect_timeout_ms;
  return sluice_redis_broker_new(&options, NULL, error);
}

/* The message of a ping on @url that must fail; the test fails if it
 * does not, and if the message quotes a secret. */
static gchar *
refusal(const gchar *url, gint64 connect_timeout_ms)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker =
      broker_for(SLUICE_REDIS_RELIABLE, url, connect_timeout_ms, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_msg(!sluice_redis_broker_ping(broker, &error), "%s answered", url);
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNAVAILABLE));
  ck_assert_msg(strchr(error->message, '\n') == NULL, "%s", error->message);
  ck_assert_msg(strstr(error->message, PASSWORD) == NULL, "%s", error->message);
  ck_assert_msg(strstr(error->message, "PRIVATE KEY") == NULL, "%s",
                error->message);
  return g_strdup(error->message);
}

#define assert_says(text, needle)                                              \
  ck_assert_msg(strstr((text), (needle)) != NULL, "“%s” does not say “%s”",    \
                (text), (needle))

static void
assert_pings(const gchar *url)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker =
      broker_for(SLUICE_REDIS_RELIABLE, url, 0, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_msg(sluice_redis_broker_ping(broker, &error), "%s: %s", url,
                error->message);
}

/* ---- End to end ---------------------------------------------------------- */

static gint executions;
static gint kill_after; /* > 0: the execution that kills the connections */
static SluiceTestRedis *kill_on; /* (nullable) */
static gint killed_total;        /* connections those kills closed */

static gboolean
echo_task(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  GBytes *args = sluice_task_context_get_args_bytes(ctx);
  gint n = g_atomic_int_add(&executions, 1) + 1;

  if (kill_on != NULL && (n == kill_after || n == kill_after * 2)) {
    /* Every connection of this process but the helper's own (SKIPME). */
    gint64 killed =
        sluice_test_redis_integer(kill_on, "CLIENT KILL TYPE normal");
    /* One kill may find the connections the previous one closed not yet
     * made again (they are, lazily, on next use): the test asks that the
     * kills closed some, not each. */
    g_atomic_int_add(&killed_total, (gint)killed);
  }
  g_usleep(2000);
  sluice_task_context_set_result(ctx, args);
  return TRUE;
}

/* Enqueues @n tasks on @broker, runs a worker until each one's result is
 * in, and checks every result. */
static void
run_tasks(SluiceBroker *broker, guint n)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, &error);
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  SluiceWorkerOptions options;

  ck_assert_msg(client != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(sluice_registry_add(registry, "t.echo", echo_task, NULL, NULL, NULL,
                                &error));
  for (guint i = 0; i < n; i++) {
    g_autofree gchar *json = g_strdup_printf("[\"over TLS\", %u]", i);
    g_autoptr(GBytes) args = sluice_args_from_json(json, -1, &error);
    gchar *id = sluice_client_enqueue(client, "t.echo", args, NULL, &error);

    ck_assert_msg(id != NULL, "enqueue: %s", error->message);
    g_ptr_array_add(ids, id);
  }
  sluice_worker_options_init(&options);
  options.concurrency = 4;
  worker = sluice_worker_new(broker, registry, &options, &error);
  ck_assert_msg(worker != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_msg(sluice_worker_start(worker, &error), "%s", error->message);
  for (guint i = 0; i < n; i++) {
    g_autoptr(SluiceResult) r = NULL;
    g_autofree gchar *want = g_strdup_printf("[\"over TLS\",%u]", i);
    g_autofree gchar *got = NULL;

    /* A wait whose connection was killed says so (UNAVAILABLE), as it
     * must; the caller asks again. */
    for (guint tries = 0; r == NULL && tries < 50; tries++) {
      if (tries > 0)
        g_usleep(100 * 1000); /* the pool's backoff */
      g_clear_error(&error);
      r = sluice_client_get_result(client, ids->pdata[i], 30000, NULL, &error);
      if (r == NULL && !g_error_matches(error, SLUICE_BROKER_ERROR,
                                        SLUICE_BROKER_ERROR_UNAVAILABLE))
        break;
    }
    ck_assert_msg(r != NULL, "result %u: %s", i, error->message);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
    got = sluice_args_to_json(sluice_result_get_value(r), NULL);
    ck_assert_str_eq(got, want);
  }
  sluice_worker_stop(worker);
}

static void
end_to_end(SluiceRedisMode mode)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "no");
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker =
      broker_for(mode, sluice_test_redis_url(server), 0, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  run_tasks(broker, 20);
  /* What crossed was TLS: the server counts its TLS clients apart. */
  ck_assert_int_gt(
      sluice_test_redis_info_int(server, "stats", "total_connections_received"),
      0);
}

START_TEST(test_fast_end_to_end)
{
  end_to_end(SLUICE_REDIS_FAST);
}
END_TEST

START_TEST(test_reliable_end_to_end)
{
  end_to_end(SLUICE_REDIS_RELIABLE);
}
END_TEST

START_TEST(test_mutual_tls_by_url_parameters)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "yes");
  g_autofree gchar *crt = cert("client.crt");
  g_autofree gchar *key = cert("client.key");
  g_autofree gchar *ca = cert("ca.crt");
  g_autofree gchar *url =
      tls_url(server, "tls_ca_file=%s&tls_cert=%s&tls_key=%s", ca, crt, key);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker =
      broker_for(SLUICE_REDIS_FAST, url, 0, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  run_tasks(broker, 10);
}
END_TEST

START_TEST(test_mutual_tls_by_options_and_a_host_name)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "yes");
  g_autofree gchar *crt = cert("client.crt");
  g_autofree gchar *key = cert("client.key");
  g_autofree gchar *ca = cert("ca.crt");
  g_autofree gchar *url = g_strdup_printf("rediss://localhost:%u/0",
                                          sluice_test_redis_port(server));
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  SluiceRedisOptions options;

  sluice_redis_options_init(&options);
  options.url = url;
  options.ns = ns;
  options.tls_ca_file = ca;
  options.tls_cert = crt;
  options.tls_key = key;
  options.tls_min_version = SLUICE_REDIS_TLS_1_3;
  broker = sluice_redis_broker_new(&options, NULL, &error);
  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  run_tasks(broker, 10);
}
END_TEST

/* ---- Refusals ------------------------------------------------------------ */

START_TEST(test_unknown_ca)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "no");
  g_autofree gchar *rogue = cert("rogue-ca.crt");
  g_autofree gchar *url = tls_url(server, "tls_ca_file=%s", rogue);
  g_autofree gchar *system = tls_url(server, "tls_min_version=1.2");
  g_autofree gchar *said = refusal(url, 0);
  g_autofree gchar *said_system = refusal(system, 0);

  assert_says(said, "unknown CA");
  assert_says(said, "rogue-ca.crt");
  assert_says(said, "give the CA that signed it with tls_ca_file");
  assert_says(said_system, "unknown CA");
  assert_says(said_system, "the system's trust store");
}
END_TEST

START_TEST(test_expired_certificate)
{
  g_autoptr(SluiceTestRedis) server = tls_server("expired", "no");
  g_autofree gchar *said = refusal(sluice_test_redis_url(server), 0);

  assert_says(said, "the server's certificate expired on 2020-01-02");
  assert_says(said, "renew it");
}
END_TEST

START_TEST(test_not_yet_valid_certificate)
{
  g_autoptr(SluiceTestRedis) server = tls_server("notyet", "no");
  g_autofree gchar *said = refusal(sluice_test_redis_url(server), 0);

  assert_says(said, "is not yet valid (not before 2099-01-01");
}
END_TEST

START_TEST(test_host_name_mismatch)
{
  g_autoptr(SluiceTestRedis) server = tls_server("other", "no");
  g_autofree gchar *said = refusal(sluice_test_redis_url(server), 0);
  g_autofree gchar *named = g_strdup_printf("%s&tls_server_name=other.example",
                                            sluice_test_redis_url(server));

  assert_says(said, "host-name mismatch");
  assert_says(said, "not valid for “127.0.0.1” (it names DNS:other.example)");
  assert_says(said, "tls_server_name");
  /* The name the certificate holds, by tls_server_name: accepted. */
  assert_pings(named);
}
END_TEST

START_TEST(test_server_requires_a_client_certificate)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "yes");
  g_autofree gchar *said = refusal(sluice_test_redis_url(server), 0);
  g_autofree gchar *v12 =
      g_strdup_printf("%s&tls_min_version=1.2", sluice_test_redis_url(server));
  static const gchar *const tls12[] = {"--tls-protocols", "TLSv1.2", NULL};
  g_autoptr(SluiceTestRedis) old = tls_server_full("server", "yes", tls12);
  g_autofree gchar *said12 = refusal(sluice_test_redis_url(old), 0);

  /* TLS 1.3: the server's alert comes after the client's handshake ended,
   * with the first reply; TLS 1.2: during the handshake. */
  assert_says(said, "requires a client certificate");
  assert_says(said, "tls_cert and tls_key");
  assert_says(said12, "requires a client certificate");
  (void)v12;
}
END_TEST

START_TEST(test_client_certificate_of_another_ca)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "yes");
  g_autofree gchar *crt = cert("rogue-client.crt");
  g_autofree gchar *key = cert("rogue-client.key");
  g_autofree gchar *url = g_strdup_printf(
      "%s&tls_cert=%s&tls_key=%s", sluice_test_redis_url(server), crt, key);
  g_autofree gchar *said = refusal(url, 0);

  assert_says(said, "does not trust this client's certificate");
}
END_TEST

START_TEST(test_plain_url_against_a_tls_port)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "no");
  g_autofree gchar *url =
      g_strdup_printf("redis://127.0.0.1:%u/0", sluice_test_redis_port(server));
  gint64 started = g_get_monotonic_time();
  g_autofree gchar *said = refusal(url, 0);

  assert_says(said, "this port speaks TLS: use rediss://");
  /* Said at once: the TLS server closes on the first plain bytes. */
  ck_assert_int_lt(g_get_monotonic_time() - started, 3 * G_USEC_PER_SEC);
}
END_TEST

START_TEST(test_tls_url_against_a_plain_port)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autofree gchar *ca = cert("ca.crt");
  g_autofree gchar *url =
      g_strdup_printf("rediss://127.0.0.1:%u/0?tls_ca_file=%s",
                      sluice_test_redis_port(server), ca);
  g_autofree gchar *said = refusal(url, 800);

  assert_says(said, "this port speaks plain Redis, not TLS: use redis://");
}
END_TEST

/* Accepts connections and never answers. */
static gpointer
silent_serve(gpointer data)
{
  int fd = GPOINTER_TO_INT(data);
  int c;

  while ((c = accept(fd, NULL, NULL)) >= 0) {
    gchar buf[4096];
    while (recv(c, buf, sizeof buf, 0) > 0)
      ;
    close(c);
  }
  return NULL;
}

START_TEST(test_handshake_timeout)
{
  struct sockaddr_in addr = {0};
  socklen_t len = sizeof addr;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_autofree gchar *url = NULL;
  g_autofree gchar *said = NULL;
  gint64 started, took;

  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  ck_assert_int_eq(listen(fd, 8), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
  g_thread_unref(g_thread_new("silent", silent_serve, GINT_TO_POINTER(fd)));
  url = g_strdup_printf("rediss://127.0.0.1:%u/0", ntohs(addr.sin_port));
  started = g_get_monotonic_time();
  said = refusal(url, 700);
  took = g_get_monotonic_time() - started;

  assert_says(said, "TLS: handshake timeout: no answer to the TLS hello "
                    "within 700 ms");
  /* The deadline, and a short probe of the port. */
  ck_assert_int_ge(took, 650 * 1000);
  ck_assert_int_lt(took, 2500 * 1000);
}
END_TEST

START_TEST(test_no_protocol_version_in_common)
{
  static const gchar *const tls12[] = {"--tls-protocols", "TLSv1.2", NULL};
  g_autoptr(SluiceTestRedis) server = tls_server_full("server", "no", tls12);
  g_autofree gchar *url =
      g_strdup_printf("%s&tls_min_version=1.3", sluice_test_redis_url(server));
  g_autofree gchar *said = refusal(url, 0);

  assert_says(said, "protocol version");
  assert_says(said, "tls_min_version");
}
END_TEST

/* ---- Settings that cannot be used ---------------------------------------- */

START_TEST(test_unusable_settings_are_refused_when_the_broker_is_made)
{
  g_autofree gchar *ca = cert("ca.crt");
  g_autofree gchar *crt = cert("client.crt");
  g_autofree gchar *key = cert("client.key");
  g_autofree gchar *other_key = cert("server.key");
  g_autofree gchar *missing = cert("missing.pem");
  struct {
    gchar *url;
    const gchar *says;
  } cases[] = {
      {g_strdup_printf("rediss://h/0?tls_ca_file=%s", missing),
       "cannot use tls_ca_file"},
      {g_strdup_printf("rediss://h/0?tls_ca_file=%s", key),
       "holds no PEM certificate"},
      {g_strdup_printf("rediss://h/0?tls_ca_dir=%s", ca), "not a directory"},
      {g_strdup_printf("rediss://h/0?tls_cert=%s", crt),
       "tls_cert needs tls_key"},
      {g_strdup_printf("rediss://h/0?tls_cert=%s&tls_key=%s", crt, other_key),
       "is not the key of the certificate"},
      {g_strdup_printf("rediss://h/0?tls_cert=%s&tls_key=%s", crt, crt),
       "holds no PEM private key"},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    SluiceBroker *broker =
        broker_for(SLUICE_REDIS_FAST, cases[i].url, 0, &error);

    ck_assert_msg(broker == NULL, "%s was taken", cases[i].url);
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_INVALID));
    assert_says(error->message, cases[i].says);
    ck_assert_msg(strstr(error->message, "BEGIN") == NULL, "%s",
                  error->message);
    g_free(cases[i].url);
  }
}
END_TEST

START_TEST(test_options_and_url_must_agree)
{
  g_autofree gchar *ca = cert("ca.crt");
  g_autofree gchar *rogue = cert("rogue-ca.crt");
  g_autofree gchar *url = g_strdup_printf("rediss://h/0?tls_ca_file=%s", ca);
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;

  sluice_redis_options_init(&options);
  options.url = url;
  options.tls_ca_file = rogue;
  ck_assert(sluice_redis_broker_new(&options, NULL, &error) == NULL);
  assert_says(error->message, "SluiceRedisOptions.tls_ca_file differs from "
                              "the URL's tls_ca_file=: give it in one place");
  g_clear_error(&error);

  /* The same file in both places is one setting. */
  options.tls_ca_file = ca;
  {
    g_autoptr(SluiceBroker) broker =
        sluice_redis_broker_new(&options, NULL, &error);
    ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  }

  /* TLS settings for a plain URL would be ignored: refused. */
  options.url = "redis://h/0";
  ck_assert(sluice_redis_broker_new(&options, NULL, &error) == NULL);
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  assert_says(error->message, "write rediss://");
}
END_TEST

/* ---- tls_insecure --------------------------------------------------------- */

START_TEST(test_insecure_connects_and_warns_once_per_broker)
{
  g_autoptr(SluiceTestRedis) server = tls_server("other", "no");
  g_autofree gchar *url = g_strdup_printf(
      "rediss://127.0.0.1:%u/0?tls_insecure=1", sluice_test_redis_port(server));
  g_autoptr(GError) error = NULL;

  sluice_test_log_capture_reset();
  {
    g_autoptr(SluiceBroker) broker =
        broker_for(SLUICE_REDIS_FAST, url, 0, &error);

    ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
    run_tasks(broker, 5);
  }
  ck_assert_int_eq(sluice_test_log_capture_count("TLS WITHOUT VERIFICATION"),
                   1);
  {
    g_autoptr(SluiceBroker) broker =
        broker_for(SLUICE_REDIS_FAST, url, 0, &error);
    ck_assert(sluice_redis_broker_ping(broker, &error));
  }
  ck_assert_int_eq(sluice_test_log_capture_count("TLS WITHOUT VERIFICATION"),
                   2);
}
END_TEST

/* ---- Faults --------------------------------------------------------------- */

START_TEST(test_connections_killed_mid_run_lose_nothing)
{
  g_autoptr(SluiceTestRedis) server = tls_server("server", "no");
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = broker_for(
      SLUICE_REDIS_RELIABLE, sluice_test_redis_url(server), 0, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  kill_on = server;
  kill_after = 40;
  /* run_tasks() checks that every one of them ends succeeded, with its
   * own arguments as its result. */
  run_tasks(broker, 150);
  ck_assert_int_ge(g_atomic_int_get(&executions), 150);
  ck_assert_int_gt(g_atomic_int_get(&killed_total), 0);
  ck_assert_int_gt(
      sluice_test_redis_info_int(server, "stats", "total_connections_received"),
      4);
}
END_TEST

/* ---- Sentinel ------------------------------------------------------------ */

#define MASTER_NAME "tlsmaster"

/* INFO replication of @replica says its link is up, to @master_port. On a
 * connection of its own: a failover kills the clients of the servers it
 * reconfigures, and a write on the helper's killed unix socket would raise
 * SIGPIPE in the test. */
static gboolean
replica_synced(SluiceTestRedis *replica, guint16 master_port)
{
  redisContext *c = sluice_test_redis_connect(replica);
  redisReply *reply = c != NULL ? redisCommand(c, "INFO replication") : NULL;
  g_autofree gchar *port = g_strdup_printf("master_port:%u\r", master_port);
  gboolean ok = reply != NULL && reply->type == REDIS_REPLY_STRING &&
                strstr(reply->str, "master_link_status:up") != NULL &&
                strstr(reply->str, port) != NULL;

  if (reply != NULL)
    freeReplyObject(reply);
  if (c != NULL)
    redisFree(c);
  return ok;
}

static gsize
sentinel_knows(SluiceTestRedis *sentinel, const gchar *what)
{
  redisReply *reply =
      sluice_test_redis_command(sentinel, "SENTINEL %s %s", what, MASTER_NAME);
  gsize n =
      reply != NULL && reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;

  if (reply != NULL)
    freeReplyObject(reply);
  return n;
}

static guint16
sentinel_master_port(SluiceTestRedis *sentinel)
{
  redisReply *reply = sluice_test_redis_command(
      sentinel, "SENTINEL get-master-addr-by-name %s", MASTER_NAME);
  guint64 port = 0;

  if (reply != NULL && reply->type == REDIS_REPLY_ARRAY &&
      reply->elements == 2 && reply->element[1]->type == REDIS_REPLY_STRING)
    g_ascii_string_to_unsigned(reply->element[1]->str, 10, 1, 65535, &port,
                               NULL);
  if (reply != NULL)
    freeReplyObject(reply);
  return (guint16)port;
}

#define WAIT_FOR(cond, what)                                                   \
  do {                                                                         \
    gint64 end_ = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;                \
    while (!(cond)) {                                                          \
      ck_assert_msg(g_get_monotonic_time() < end_, "timed out: %s", what);     \
      g_usleep(50 * 1000);                                                     \
    }                                                                          \
  } while (0)

START_TEST(test_sentinel_over_tls_follows_a_failover)
{
  static const gchar *const tls_replication[] = {"--tls-replication", "yes",
                                                 NULL};
  g_autoptr(SluiceTestRedis) master =
      tls_server_full("server", "no", tls_replication);
  g_autofree gchar *master_port =
      g_strdup_printf("%u", sluice_test_redis_port(master));
  const gchar *const replica_args[] = {"--tls-replication", "yes",
                                       "--replicaof",       "127.0.0.1",
                                       master_port,         NULL};
  g_autoptr(SluiceTestRedis) replica =
      tls_server_full("server", "no", replica_args);
  g_autofree gchar *crt = cert("server.crt");
  g_autofree gchar *key = cert("server.key");
  g_autofree gchar *ca = cert("ca.crt");
  /* The sentinels reach the master, the replica and each other in TLS. */
  g_autofree gchar *config =
      g_strdup_printf("sentinel monitor " MASTER_NAME " 127.0.0.1 %s 2\n"
                      "sentinel down-after-milliseconds " MASTER_NAME " 1000\n"
                      "sentinel failover-timeout " MASTER_NAME " 5000\n"
                      "tls-replication yes\n",
                      master_port);
  SluiceTestRedis *sentinels[3] = {NULL, NULL, NULL};
  g_autoptr(GString) url = g_string_new("rediss+sentinel://");
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  guint16 new_port = sluice_test_redis_port(replica);

  WAIT_FOR(replica_synced(replica, sluice_test_redis_port(master)),
           "the replica's TLS link to the master");
  for (guint i = 0; i < G_N_ELEMENTS(sentinels); i++) {
    SluiceTestRedisOptions options = {0};

    options.sentinel_config = config;
    options.tls_cert_file = crt;
    options.tls_key_file = key;
    options.tls_ca_cert_file = ca;
    sentinels[i] = sluice_test_redis_own(&options);
    g_string_append_printf(url, "%s127.0.0.1:%u", i > 0 ? "," : "",
                           sluice_test_redis_port(sentinels[i]));
  }
  g_string_append_printf(url, "/" MASTER_NAME "/0?tls_ca_file=%s", ca);
  for (guint i = 0; i < G_N_ELEMENTS(sentinels); i++)
    WAIT_FOR(sentinel_knows(sentinels[i], "replicas") >= 1 &&
                 sentinel_knows(sentinels[i], "sentinels") >= 2,
             "a sentinel to learn of the replica and its peers");

  broker = broker_for(SLUICE_REDIS_RELIABLE, url->str, 0, &error);
  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  run_tasks(broker, 5);

  /* A failover: the replica, over TLS, becomes the master. */
  freeReplyObject(sluice_test_redis_command(
      sentinels[0], "SENTINEL FAILOVER %s", MASTER_NAME));
  for (guint i = 0; i < G_N_ELEMENTS(sentinels); i++)
    WAIT_FOR(sentinel_master_port(sentinels[i]) == new_port,
             "every sentinel to name the new master");
  /* The old master demoted: its connections refuse writes (-READONLY),
   * which sends the broker to the sentinels again. */
  WAIT_FOR(replica_synced(master, new_port),
           "the old master to replicate from the new one, in TLS");
  run_tasks(broker, 5);
  /* The helper's own connection to the new master was killed by the
   * failover (hiredis would raise SIGPIPE on it): the broker says where
   * it went. */
  {
    g_autofree gchar *now =
        sluice_redis_pool__get_master(SLUICE_REDIS_BROKER(broker)->pool);
    g_autofree gchar *want = g_strdup_printf("127.0.0.1:%u", new_port);

    ck_assert_str_eq(now, want);
  }
  for (guint i = 0; i < G_N_ELEMENTS(sentinels); i++)
    sluice_test_redis_stop(sentinels[i]);
}
END_TEST

/* ---- URLs ---------------------------------------------------------------- */

START_TEST(test_rediss_urls)
{
  static const struct {
    const gchar *text;
    const gchar *display;
  } good[] = {
      {"rediss://h/0?tls_ca_file=/etc/ca.pem", "rediss://h:6379/0"},
      {"REDISS://u:" PASSWORD "@h:6380/2?tls_min_version=1.3&tls_insecure=0",
       "rediss://u:***@h:6380/2"},
      {"rediss+cluster://a:7000,b:7001?tls_server_name=redis.example",
       "rediss+cluster://a:7000,b:7001/0"},
      {"rediss+sentinel://s1,s2:26380/mymaster/1?tls_cert=/c&tls_key=/k",
       "rediss+sentinel://s1:26379,s2:26380/mymaster/1"},
  };
  static const struct {
    const gchar *text;
    const gchar *says;
  } bad[] = {
      {"redis://h/0?tls_ca_file=/ca", "the tls_* parameters are for TLS"},
      {"rediss://h/0?tls_min_version=1.1", "tls_min_version is 1.2"},
      {"rediss://h/0?tls_insecure=maybe", "tls_insecure is 1"},
      {"rediss://h/0?tls_ca_file=/a&tls_ca_file=/b", "given twice"},
      {"rediss://h/0?tls_ca_file=", "has no value"},
      {"rediss://h/0?tls_server_name=a%20b", "tls_server_name must be"},
      {"rediss://h/0?tls_cafile=/x",
       "the parameters are tls_ca_file, tls_ca_dir, tls_cert"},
      {"rediss://u:" PASSWORD "@h/0?tls_bogus=1", "unknown query parameter"},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
    SluiceRedisUrl url;
    SluiceRedisUrlParams params;
    g_autoptr(GError) error = NULL;

    ck_assert_msg(sluice_redis__parse_url(good[i].text, &url, &params, &error),
                  "%s: %s", good[i].text, error->message);
    ck_assert_str_eq(url.display, good[i].display);
    ck_assert_str_eq(url.conn_type, "tls");
    ck_assert(url.tls != NULL);
    {
      SluiceRedisUrl copy = {0};
      sluice_redis_url__copy(&url, &copy);
      ck_assert(copy.tls == url.tls); /* one context for every copy */
      sluice_redis_url__clear(&copy);
    }
    sluice_redis_url__clear(&url);
  }
  /* A value's escapes are decoded once: %26 is no '&', %25 no escape. */
  for (gsize i = 0; i < 3; i++) {
    static const gchar *const forms[] = {
        "rediss://h/0", "rediss+cluster://a:7000", "rediss+sentinel://s/m"};
    g_autofree gchar *text =
        g_strconcat(forms[i], "?tls_ca_file=/a%20b%26c%25d%40e.pem", NULL);
    SluiceRedisUrl url;
    SluiceRedisUrlParams params;
    g_autoptr(GError) error = NULL;

    ck_assert_msg(sluice_redis__parse_url(text, &url, &params, &error),
                  "%s: %s", text, error->message);
    ck_assert_str_eq(sluice_redis_tls__get_config(url.tls)->ca_file,
                     "/a b&c%d@e.pem");
    sluice_redis_url__clear(&url);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    SluiceRedisUrl url;
    SluiceRedisUrlParams params;
    g_autoptr(GError) error = NULL;

    ck_assert_msg(!sluice_redis__parse_url(bad[i].text, &url, &params, &error),
                  "%s was taken", bad[i].text);
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_INVALID));
    assert_says(error->message, bad[i].says);
    ck_assert_msg(strstr(error->message, PASSWORD) == NULL, "%s",
                  error->message);
  }
}
END_TEST

START_TEST(test_broker_new_for_url_takes_rediss)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *ca = cert("ca.crt");
  g_autofree gchar *url = g_strdup_printf("rediss://h/0?tls_ca_file=%s", ca);
  g_autoptr(SluiceBroker) broker =
      sluice_broker_new_for_url(url, NULL, NULL, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
}
END_TEST

static Suite *
tls_suite(void)
{
  Suite *s = suite_create("redis-tls");
  TCase *e2e = tcase_create("e2e");
  TCase *refuse = tcase_create("refuse");
  TCase *files = tcase_create("files");
  TCase *faults = tcase_create("faults");
  TCase *sentinel = tcase_create("sentinel");
  TCase *url = tcase_create("url");

  tcase_set_timeout(e2e, 120);
  tcase_add_test(e2e, test_fast_end_to_end);
  tcase_add_test(e2e, test_reliable_end_to_end);
  tcase_add_test(e2e, test_mutual_tls_by_url_parameters);
  tcase_add_test(e2e, test_mutual_tls_by_options_and_a_host_name);
  tcase_add_test(e2e, test_insecure_connects_and_warns_once_per_broker);
  suite_add_tcase(s, e2e);

  tcase_set_timeout(refuse, 60);
  tcase_add_test(refuse, test_unknown_ca);
  tcase_add_test(refuse, test_expired_certificate);
  tcase_add_test(refuse, test_not_yet_valid_certificate);
  tcase_add_test(refuse, test_host_name_mismatch);
  tcase_add_test(refuse, test_server_requires_a_client_certificate);
  tcase_add_test(refuse, test_client_certificate_of_another_ca);
  tcase_add_test(refuse, test_plain_url_against_a_tls_port);
  tcase_add_test(refuse, test_tls_url_against_a_plain_port);
  tcase_add_test(refuse, test_handshake_timeout);
  tcase_add_test(refuse, test_no_protocol_version_in_common);
  suite_add_tcase(s, refuse);

  tcase_add_test(files,
                 test_unusable_settings_are_refused_when_the_broker_is_made);
  tcase_add_test(files, test_options_and_url_must_agree);
  suite_add_tcase(s, files);

  tcase_set_timeout(faults, 180);
  tcase_add_test(faults, test_connections_killed_mid_run_lose_nothing);
  suite_add_tcase(s, faults);

  tcase_set_timeout(sentinel, 240);
  tcase_add_test(sentinel, test_sentinel_over_tls_follows_a_failover);
  suite_add_tcase(s, sentinel);

  tcase_add_test(url, test_rediss_urls);
  tcase_add_test(url, test_broker_new_for_url_takes_rediss);
  suite_add_tcase(s, url);
  return s;
}

/* ---- The conformance suite over TLS -------------------------------------- */

static const gchar *conformance_url;

static SluiceBroker *
create_tls_broker(SluiceClock *clock, guint dead_letter_max, gpointer data,
                  GError **error)
{
  gint *serial = data;
  /* As tests/helpers/redis-conformance.c: pids come round again in a long
   * run, so the time too. */
  g_autofree gchar *ns =
      g_strdup_printf("c%d-%" G_GINT64_FORMAT "-%d", (int)getpid(),
                      g_get_real_time(), g_atomic_int_add(serial, 1));
  SluiceBroker *broker =
      sluice_test_redis_broker_new(SLUICE_REDIS_RELIABLE, conformance_url, ns,
                                   dead_letter_max, clock, error);

  /* No safety-net poll: "get_result wakes on completion" must be woken by
   * the notification, over TLS too. */
  if (broker != NULL)
    ((SluiceRedisBroker *)broker)->wait_poll_ms = G_MAXINT;
  return broker;
}

static int
run_conformance(void)
{
  g_autofree gchar *crt = cert("server.crt");
  g_autofree gchar *key = cert("server.key");
  g_autofree gchar *ca = cert("ca.crt");
  g_autoptr(GError) error = NULL;
  SluiceTestRedisOptions options = {0};
  g_autoptr(SluiceTestCluster) cluster = NULL;
  gint serial = 0;
  SluiceConformanceFactory factory = {
      .name = "redis-cluster-reliable-tls",
      .create = create_tls_broker,
      .data = &serial,
      .scale = 0.2,
  };
  SRunner *runner;
  int failed;

  options.tls_cert_file = crt;
  options.tls_key_file = key;
  options.tls_ca_cert_file = ca;
  cluster = sluice_test_cluster_start_tls(3, 0, &options, &error);
  if (cluster == NULL) {
    fprintf(stderr, "cannot start a TLS Redis Cluster: %s\n", error->message);
    return 1;
  }
  conformance_url = sluice_test_cluster_url(cluster);
  g_assert_true(g_str_has_prefix(conformance_url, "rediss+cluster://"));
  runner = srunner_create(sluice_conformance_suite(&factory));
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed;
}

/* Exits 77 (or 1 under $CI) when this redis-server or openssl cannot do
 * what the tests need. */
static void
require_tls(const gchar *server)
{
  g_autofree gchar *openssl = g_find_program_in_path("openssl");
  g_autofree gchar *out = NULL;
  const gchar *why = NULL;
  gchar *argv[] = {(gchar *)server, (gchar *)"--tls-port", (gchar *)"0",
                   (gchar *)"--test-memory", NULL};

  if (openssl == NULL)
    why = "the openssl command is missing (apt-get install openssl)";
  else {
    /* A server without TLS refuses the --tls-* options at once. */
    gchar *help[] = {(gchar *)server, (gchar *)"--version", NULL};
    if (!g_spawn_sync(NULL, help, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                      &out, NULL, NULL, NULL))
      why = "redis-server does not run";
  }
  (void)argv;
  if (why == NULL) {
    g_autofree gchar *ldd = NULL;
    gchar *cmd[] = {(gchar *)"ldd", (gchar *)server, NULL};

    if (g_spawn_sync(NULL, cmd, NULL,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                     NULL, &ldd, NULL, NULL, NULL) &&
        ldd != NULL && strstr(ldd, "libssl") == NULL)
      why = "this redis-server was built without TLS (BUILD_TLS)";
  }
  if (why == NULL)
    return;
  if (g_getenv("CI") != NULL) {
    fprintf(stderr, "%s, and CI is set: the TLS tests must run in CI\n", why);
    exit(1);
  }
  fprintf(stderr, "SKIP: %s\n", why);
  exit(77);
}

int
main(void)
{
  g_autofree gchar *server = sluice_test_redis_require();
  SRunner *runner;
  int failed;

  require_tls(server);
  sluice_test_log_capture_install();
  make_certificates();
  runner = srunner_create(tls_suite());
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  /* SLUICE_TLS_CONFORMANCE=0 leaves it out of a quick local run. */
  if (g_strcmp0(g_getenv("SLUICE_TLS_CONFORMANCE"), "0") != 0)
    failed += run_conformance();
  remove_certificates();
  return failed == 0 ? 0 : 1;
}

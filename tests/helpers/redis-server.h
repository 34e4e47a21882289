/* redis-server.h - throwaway redis-server processes for the test suites.
 *
 * Each SluiceTestRedis is one redis-server bound to 127.0.0.1 on a free
 * port, with its own temporary directory (AOF files, log, unix socket),
 * started with `--save '' --enable-debug-command local`. It is stopped by
 * its pid, never by name, and never on a fixed port, so suites can run in
 * parallel with each other and with a developer's own Redis.
 *
 * A suite calls sluice_test_redis_require() first in main(): without a
 * redis-server it exits 77 (automake's SKIP), or fails when the
 * environment variable CI is set, because CI must never skip these tests.
 */
#pragma once

#include <glib.h>
#include <hiredis/hiredis.h>

G_BEGIN_DECLS

/**
 * SluiceTestRedisOptions:
 * @appendonly: appendonly yes with appendfsync always, so what the server
 *   acknowledged survives a kill -9
 * @requirepass: (nullable): the default user's password
 * @acl_user: (nullable): an extra ACL user with every permission...
 * @acl_password: ...and this password
 * @unix_socket: also listen on <dir>/redis.sock
 * @extra_args: (nullable) (array zero-terminated=1): more command-line
 *   arguments ("--replicaof", "127.0.0.1", "6379")
 * @sentinel_config: (nullable): run a sentinel instead (redis-server
 *   <dir>/sentinel.conf --sentinel) with this text as its configuration
 *   (the sentinel rewrites the file as it learns); ready when it answers
 *   PING
 * @cluster_node_timeout_ms: > 0 for a Redis Cluster node (cluster-enabled,
 *   its nodes.conf in its directory, its bus on a free port of its own,
 *   this cluster-node-timeout); see redis-cluster-fixture.h
 * @tls_cert_file: (nullable): TLS only: `--port 0` and `--tls-port` on the
 *   free port, with this certificate, @tls_key_file and @tls_ca_cert_file
 *   (all three needed); the helper's own connections go through a unix
 *   socket (<dir>/redis.sock), as hiredis 0.14 has no TLS, and the URL is
 *   rediss://127.0.0.1:<port>/0?tls_ca_file=<@tls_ca_cert_file>
 * @tls_key_file: (nullable): its key
 * @tls_ca_cert_file: (nullable): the CA the server verifies clients (and
 *   replication peers) with
 * @tls_auth_clients: (nullable): "yes", "no" or "optional"; NULL = "no"
 */
typedef struct {
  gboolean appendonly;
  const gchar *requirepass;
  const gchar *acl_user;
  const gchar *acl_password;
  gboolean unix_socket;
  const gchar *const *extra_args;
  const gchar *sentinel_config;
  gint cluster_node_timeout_ms;
  const gchar *tls_cert_file;
  const gchar *tls_key_file;
  const gchar *tls_ca_cert_file;
  const gchar *tls_auth_clients;
} SluiceTestRedisOptions;

typedef struct _SluiceTestRedis SluiceTestRedis;

/**
 * sluice_test_redis_require:
 * Returns: (transfer full): the redis-server to run ($REDIS_SERVER, else
 * the one on PATH). Exits 77 when there is none, or 1 if $CI is set.
 */
gchar *sluice_test_redis_require(void);

/**
 * sluice_test_redis_start:
 * @options: (nullable): NULL = no persistence, no password
 *
 * Starts a server and waits until it answers PING with its data loaded.
 * Returns: (transfer full): the server, or NULL and @error.
 */
SluiceTestRedis *sluice_test_redis_start(const SluiceTestRedisOptions *options,
                                         GError **error);

/**
 * sluice_test_redis_kill:
 * Sends @signum to the server. For SIGKILL, SIGTERM and SIGINT it also
 * waits for the process to end (so the port is free for a restart).
 */
void sluice_test_redis_kill(SluiceTestRedis *server, int signum);

/**
 * sluice_test_redis_restart:
 * Stops the server if it runs (SIGTERM), then starts it again on the same
 * port with the same directory and options, and waits until it is ready.
 */
gboolean sluice_test_redis_restart(SluiceTestRedis *server, GError **error);

/**
 * sluice_test_redis_stop:
 * Stops the server by its pid (SIGTERM, then SIGKILL after 5 s), removes
 * its directory and frees @server. NULL-safe.
 */
void sluice_test_redis_stop(SluiceTestRedis *server);

/** sluice_test_redis_url: Returns: (transfer none): redis://[:password@]
 * 127.0.0.1:<port>/0 (with the requirepass password if any); for a TLS
 * server rediss://[:password@]127.0.0.1:<port>/0?tls_ca_file=<CA>. */
const gchar *sluice_test_redis_url(SluiceTestRedis *server);

/** sluice_test_redis_socket_url: Returns: (transfer none): unix://<dir>/
 * redis.sock, or NULL without @unix_socket. */
const gchar *sluice_test_redis_socket_url(SluiceTestRedis *server);

/** sluice_test_redis_port: Returns: the TCP port. */
guint16 sluice_test_redis_port(SluiceTestRedis *server);

/** sluice_test_redis_pid: Returns: the server's pid (0 when stopped). */
GPid sluice_test_redis_pid(SluiceTestRedis *server);

/**
 * sluice_test_redis_connect:
 * Returns: (transfer full): a new hiredis context to the server,
 * authenticated as the default user; NULL if it cannot connect. Free with
 * redisFree().
 */
redisContext *sluice_test_redis_connect(SluiceTestRedis *server);

/**
 * sluice_test_redis_command:
 * Runs one command (hiredis format) on a connection the helper keeps (and
 * re-makes after a restart). For the test's own thread only.
 * Returns: (transfer full) (nullable): the reply; NULL on I/O failure.
 */
redisReply *sluice_test_redis_command(SluiceTestRedis *server,
                                      const char *format, ...);

/**
 * sluice_test_redis_integer:
 * Runs a command that answers an integer and returns it, or G_MININT64.
 */
gint64 sluice_test_redis_integer(SluiceTestRedis *server, const char *format,
                                 ...);

/**
 * sluice_test_redis_acl_setuser:
 * @rules: what follows ACL SETUSER, words separated by blanks: a user name
 *   and its rules ("worker on >pw ~{ns}:* -@all +ping")
 *
 * Creates or changes an ACL user; restarts of the server replay it.
 * Returns: FALSE and @error when the server refuses the rules.
 */
gboolean sluice_test_redis_acl_setuser(SluiceTestRedis *server,
                                       const gchar *rules, GError **error);

/**
 * sluice_test_redis_acl_log:
 * Returns: (transfer full): what ACL LOG says was refused since the last
 * call, one "reason object" pair per refusal ("command xadd"), sorted and
 * without repeats; empty when nothing was. Resets the log.
 */
GPtrArray *sluice_test_redis_acl_log(SluiceTestRedis *server);

/**
 * sluice_test_redis_info_int:
 * Returns: the integer field @field of INFO @section, or -1.
 */
gint64 sluice_test_redis_info_int(SluiceTestRedis *server, const gchar *section,
                                  const gchar *field);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceTestRedis, sluice_test_redis_stop)

G_END_DECLS

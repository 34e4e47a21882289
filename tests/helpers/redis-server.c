/* redis-server.c - throwaway redis-server processes for tests (see
 * redis-server.h).
 *
 * How a server is found, started and stopped:
 *  - the binary is $REDIS_SERVER, else `redis-server` on PATH;
 *  - the port is found by binding 127.0.0.1:0 and reading it back; another
 *    process may take it before Redis binds it, so a start that fails with
 *    "Address already in use" is retried on a new port;
 *  - the directory comes from g_dir_make_tmp() and holds the AOF files,
 *    the log and the unix socket; it is removed by sluice_test_redis_stop();
 *  - on Linux the server gets PR_SET_PDEATHSIG, so a test process killed
 *    by a Check timeout does not leave servers behind;
 *  - signals go to the pid we started, never to a process found by name;
 *  - a test that fails exits its (forked) process without running its
 *    cleanup, so an atexit() handler stops the servers that process
 *    started and removes their directories. Servers inherited from a
 *    parent process are left to the parent.
 *
 * To add a server option, add a field to SluiceTestRedisOptions and its
 * command-line flags to build_argv(). Restricted ACL users are added after
 * the start (sluice_test_redis_acl_setuser) and replayed by a restart.
 */
#include "config.h"

#include "tests/helpers/redis-server.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <glib/gstdio.h>

#define START_ATTEMPTS 5
#define READY_TIMEOUT_US (15 * G_USEC_PER_SEC)
#define STOP_TIMEOUT_US (5 * G_USEC_PER_SEC)

struct _SluiceTestRedis {
  pid_t owner; /* the process that started it */
  gchar *binary;
  gchar *dir;
  guint16 port;
  GPid pid;
  gboolean appendonly;
  gchar *requirepass;
  gchar *acl_user;
  gchar *acl_password;
  gboolean unix_socket;
  gchar **extra_args;
  gchar *sentinel_config;
  gint cluster_node_timeout_ms;
  gchar *tls_cert_file; /* non-NULL: TLS only, admin over the unix socket */
  gchar *tls_key_file;
  gchar *tls_ca_cert_file;
  gchar *tls_auth_clients;
  guint16 cluster_port; /* the cluster bus, when a cluster node */
  gchar *url;
  gchar *socket_url;
  redisContext *ctx;    /* for sluice_test_redis_command() */
  GPtrArray *acl_users; /* rules given to sluice_test_redis_acl_setuser() */
};

/* Servers alive in this process, for the atexit() handler. Test code: a
 * process-wide list is the point. */
static GPtrArray *live_servers;
static GMutex live_lock;

static void
stop_leftovers(void)
{
  GPtrArray *mine = g_ptr_array_new();

  g_mutex_lock(&live_lock);
  for (guint i = 0; live_servers != NULL && i < live_servers->len; i++) {
    SluiceTestRedis *r = g_ptr_array_index(live_servers, i);
    if (r->owner == getpid())
      g_ptr_array_add(mine, r);
  }
  g_mutex_unlock(&live_lock);
  for (guint i = 0; i < mine->len; i++)
    sluice_test_redis_stop(g_ptr_array_index(mine, i));
  g_ptr_array_unref(mine);
}

static void
track(SluiceTestRedis *r)
{
  g_mutex_lock(&live_lock);
  if (live_servers == NULL) {
    live_servers = g_ptr_array_new();
    atexit(stop_leftovers);
  }
  g_ptr_array_add(live_servers, r);
  g_mutex_unlock(&live_lock);
}

static void
untrack(SluiceTestRedis *r)
{
  g_mutex_lock(&live_lock);
  if (live_servers != NULL)
    g_ptr_array_remove_fast(live_servers, r);
  g_mutex_unlock(&live_lock);
}

gchar *
sluice_test_redis_require(void)
{
  const gchar *env = g_getenv("REDIS_SERVER");
  gchar *path = NULL;

  if (env != NULL && env[0] != '\0')
    path = g_find_program_in_path(env);
  if (path == NULL)
    path = g_find_program_in_path("redis-server");
  if (path != NULL)
    return path;
  if (g_getenv("CI") != NULL) {
    fprintf(stderr, "redis-server not found ($REDIS_SERVER or PATH) and CI "
                    "is set: the Redis tests must run in CI; install "
                    "redis-server\n");
    exit(1);
  }
  fprintf(stderr, "SKIP: redis-server not found ($REDIS_SERVER or PATH); "
                  "install redis-server to run the Redis tests\n");
  exit(77);
}

static guint16
free_port(void)
{
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  guint16 port = 0;
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  if (fd < 0)
    return 0;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
      getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

static void
child_setup(gpointer data)
{
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

static GPtrArray *
build_argv(SluiceTestRedis *r)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);

#define ARG(s) g_ptr_array_add(argv, g_strdup(s))
  ARG(r->binary);
  if (r->sentinel_config != NULL) {
    g_ptr_array_add(argv, g_build_filename(r->dir, "sentinel.conf", NULL));
    ARG("--sentinel");
  }
  if (r->tls_cert_file != NULL) {
    ARG("--port");
    ARG("0");
    ARG("--tls-port");
    g_ptr_array_add(argv, g_strdup_printf("%u", r->port));
    ARG("--tls-cert-file");
    ARG(r->tls_cert_file);
    ARG("--tls-key-file");
    ARG(r->tls_key_file);
    ARG("--tls-ca-cert-file");
    ARG(r->tls_ca_cert_file);
    ARG("--tls-auth-clients");
    ARG(r->tls_auth_clients != NULL ? r->tls_auth_clients : "no");
    /* hiredis 0.14 has no TLS: the helper's own way in. */
    ARG("--unixsocket");
    g_ptr_array_add(argv, g_build_filename(r->dir, "redis.sock", NULL));
    ARG("--unixsocketperm");
    ARG("700");
  } else {
    ARG("--port");
    g_ptr_array_add(argv, g_strdup_printf("%u", r->port));
  }
  ARG("--bind");
  ARG("127.0.0.1");
  ARG("--dir");
  ARG(r->dir);
  ARG("--logfile");
  g_ptr_array_add(argv, g_build_filename(r->dir, "redis.log", NULL));
  ARG("--daemonize");
  ARG("no");
  if (r->sentinel_config != NULL)
    goto end; /* the data options below mean nothing to a sentinel */
  ARG("--save");
  ARG("");
  ARG("--enable-debug-command");
  ARG("local");
  ARG("--appendonly");
  ARG(r->appendonly ? "yes" : "no");
  if (r->appendonly) {
    ARG("--appendfsync");
    ARG("always");
  }
  if (r->requirepass != NULL) {
    ARG("--requirepass");
    ARG(r->requirepass);
  }
  if (r->acl_user != NULL) {
    ARG("--user");
    ARG(r->acl_user);
    ARG("on");
    g_ptr_array_add(argv, g_strconcat(">", r->acl_password, NULL));
    ARG("~*");
    ARG("&*");
    ARG("+@all");
  }
  if (r->unix_socket && r->tls_cert_file == NULL) {
    ARG("--unixsocket");
    g_ptr_array_add(argv, g_build_filename(r->dir, "redis.sock", NULL));
    ARG("--unixsocketperm");
    ARG("700");
  }
  if (r->cluster_node_timeout_ms > 0) {
    ARG("--cluster-enabled");
    ARG("yes");
    ARG("--cluster-config-file");
    g_ptr_array_add(argv, g_build_filename(r->dir, "nodes.conf", NULL));
    ARG("--cluster-port");
    g_ptr_array_add(argv, g_strdup_printf("%u", r->cluster_port));
    ARG("--cluster-node-timeout");
    g_ptr_array_add(argv, g_strdup_printf("%d", r->cluster_node_timeout_ms));
  }
  for (guint i = 0; r->extra_args != NULL && r->extra_args[i] != NULL; i++)
    ARG(r->extra_args[i]);
end:
#undef ARG
  g_ptr_array_add(argv, NULL);
  return argv;
}

static gchar *
log_tail(SluiceTestRedis *r)
{
  g_autofree gchar *path = g_build_filename(r->dir, "redis.log", NULL);
  gchar *text = NULL;
  gsize len = 0;

  if (!g_file_get_contents(path, &text, &len, NULL))
    return g_strdup("(no log)");
  if (len > 2000) {
    gchar *tail = g_strdup(text + len - 2000);
    g_free(text);
    return tail;
  }
  return text;
}

static redisContext *
connect_admin(SluiceTestRedis *r)
{
  struct timeval tv = {2, 0};
  redisContext *c;
  redisReply *reply;

  if (r->tls_cert_file != NULL) {
    g_autofree gchar *path = g_build_filename(r->dir, "redis.sock", NULL);
    c = redisConnectUnixWithTimeout(path, tv);
  } else {
    c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
  }

  if (c == NULL || c->err) {
    if (c != NULL)
      redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  if (r->requirepass != NULL) {
    reply = redisCommand(c, "AUTH %s", r->requirepass);
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
      if (reply != NULL)
        freeReplyObject(reply);
      redisFree(c);
      return NULL;
    }
    freeReplyObject(reply);
  }
  return c;
}

/* Ready: answers PING and has loaded its data. */
static gboolean
is_ready(SluiceTestRedis *r)
{
  redisContext *c = connect_admin(r);
  redisReply *reply;
  gboolean ready;

  if (c == NULL)
    return FALSE;
  if (r->sentinel_config != NULL) {
    reply = redisCommand(c, "PING");
    ready = reply != NULL && reply->type == REDIS_REPLY_STATUS &&
            strcmp(reply->str, "PONG") == 0;
  } else {
    reply = redisCommand(c, "INFO persistence");
    ready = reply != NULL && reply->type == REDIS_REPLY_STRING &&
            strstr(reply->str, "loading:0") != NULL;
  }
  if (reply != NULL)
    freeReplyObject(reply);
  redisFree(c);
  return ready;
}

typedef enum { SPAWN_OK, SPAWN_PORT_TAKEN, SPAWN_FAILED } SpawnResult;

static SpawnResult
spawn_and_wait(SluiceTestRedis *r, GError **error)
{
  g_autoptr(GPtrArray) argv = build_argv(r);
  g_autofree gchar *log = g_build_filename(r->dir, "redis.log", NULL);
  gint64 deadline = g_get_monotonic_time() + READY_TIMEOUT_US;

  /* A fresh log, so that an old "Address already in use" is not read as
   * this attempt's. */
  g_unlink(log);
  if (r->sentinel_config != NULL) {
    g_autofree gchar *conf = g_build_filename(r->dir, "sentinel.conf", NULL);
    if (!g_file_test(conf, G_FILE_TEST_EXISTS) &&
        !g_file_set_contents(conf, r->sentinel_config, -1, error))
      return SPAWN_FAILED;
  }

  if (!g_spawn_async(r->dir, (gchar **)argv->pdata, NULL,
                     G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL |
                         G_SPAWN_STDERR_TO_DEV_NULL,
                     child_setup, NULL, &r->pid, error))
    return SPAWN_FAILED;

  while (g_get_monotonic_time() < deadline) {
    int status;

    if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
      g_autofree gchar *tail = log_tail(r);
      g_spawn_close_pid(r->pid);
      r->pid = 0;
      if (strstr(tail, "Address already in use") != NULL)
        return SPAWN_PORT_TAKEN;
      g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                  "redis-server exited at start; its log ends with:\n%s", tail);
      return SPAWN_FAILED;
    }
    if (is_ready(r))
      return SPAWN_OK;
    g_usleep(20 * 1000);
  }
  g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
              "redis-server on port %u was not ready within %d s", r->port,
              (int)(READY_TIMEOUT_US / G_USEC_PER_SEC));
  sluice_test_redis_kill(r, SIGKILL);
  return SPAWN_FAILED;
}

static gboolean
apply_acl(SluiceTestRedis *r, const gchar *rules, GError **error)
{
  g_auto(GStrv) words = g_strsplit_set(rules, " \t\n", -1);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  redisContext *c = connect_admin(r);
  redisReply *reply;
  gboolean ok;

  if (c == NULL) {
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                "cannot connect to redis-server on port %u", r->port);
    return FALSE;
  }
  g_ptr_array_add(argv, (gpointer) "ACL");
  g_ptr_array_add(argv, (gpointer) "SETUSER");
  for (guint i = 0; words[i] != NULL; i++)
    if (words[i][0] != '\0')
      g_ptr_array_add(argv, words[i]);
  reply = redisCommandArgv(c, (int)argv->len, (const char **)argv->pdata, NULL);
  ok = reply != NULL && reply->type == REDIS_REPLY_STATUS;
  if (!ok)
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                "ACL SETUSER %s: %s", rules,
                reply != NULL && reply->str != NULL ? reply->str : "no reply");
  if (reply != NULL)
    freeReplyObject(reply);
  redisFree(c);
  return ok;
}

gboolean
sluice_test_redis_acl_setuser(SluiceTestRedis *r, const gchar *rules,
                              GError **error)
{
  if (!apply_acl(r, rules, error))
    return FALSE;
  if (r->acl_users == NULL)
    r->acl_users = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(r->acl_users, g_strdup(rules));
  return TRUE;
}

GPtrArray *
sluice_test_redis_acl_log(SluiceTestRedis *r)
{
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  redisReply *reply = sluice_test_redis_command(r, "ACL LOG 1000");

  for (size_t i = 0;
       reply != NULL && reply->type == REDIS_REPLY_ARRAY && i < reply->elements;
       i++) {
    redisReply *entry = reply->element[i];
    const gchar *reason = NULL, *object = NULL;
    gchar *pair;

    for (size_t k = 0;
         entry->type == REDIS_REPLY_ARRAY && k + 1 < entry->elements; k += 2) {
      redisReply *key = entry->element[k], *value = entry->element[k + 1];
      if (key->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING)
        continue;
      if (strcmp(key->str, "reason") == 0)
        reason = value->str;
      else if (strcmp(key->str, "object") == 0)
        object = value->str;
    }
    pair = g_strdup_printf("%s %s", reason != NULL ? reason : "?",
                           object != NULL ? object : "?");
    if (!g_ptr_array_find_with_equal_func(out, pair, g_str_equal, NULL))
      g_ptr_array_add(out, pair);
    else
      g_free(pair);
  }
  if (reply != NULL)
    freeReplyObject(reply);
  g_ptr_array_sort(out, (GCompareFunc)g_strcmp0);
  freeReplyObject(sluice_test_redis_command(r, "ACL LOG RESET"));
  return out;
}

static void
make_urls(SluiceTestRedis *r)
{
  g_autofree gchar *auth = NULL;
  g_autofree gchar *query = NULL;

  g_free(r->url);
  if (r->requirepass != NULL) {
    g_autofree gchar *pw = g_uri_escape_string(r->requirepass, NULL, FALSE);
    auth = g_strdup_printf(":%s@", pw);
  }
  if (r->tls_cert_file != NULL) {
    g_autofree gchar *ca = g_uri_escape_string(r->tls_ca_cert_file, "/", FALSE);
    query = g_strdup_printf("?tls_ca_file=%s", ca);
  }
  r->url = g_strdup_printf(
      "%s://%s127.0.0.1:%u/0%s", r->tls_cert_file != NULL ? "rediss" : "redis",
      auth != NULL ? auth : "", r->port, query != NULL ? query : "");
  g_free(r->socket_url);
  r->socket_url =
      r->unix_socket ? g_strdup_printf("unix://%s/redis.sock", r->dir) : NULL;
}

SluiceTestRedis *
sluice_test_redis_start(const SluiceTestRedisOptions *options, GError **error)
{
  SluiceTestRedis *r = g_new0(SluiceTestRedis, 1);

  r->owner = getpid();
  r->binary = sluice_test_redis_require();
  if (options != NULL) {
    r->appendonly = options->appendonly;
    r->requirepass = g_strdup(options->requirepass);
    r->acl_user = g_strdup(options->acl_user);
    r->acl_password = g_strdup(options->acl_password);
    r->unix_socket = options->unix_socket;
    r->extra_args = g_strdupv((gchar **)options->extra_args);
    r->sentinel_config = g_strdup(options->sentinel_config);
    r->cluster_node_timeout_ms = options->cluster_node_timeout_ms;
    r->tls_cert_file = g_strdup(options->tls_cert_file);
    r->tls_key_file = g_strdup(options->tls_key_file);
    r->tls_ca_cert_file = g_strdup(options->tls_ca_cert_file);
    r->tls_auth_clients = g_strdup(options->tls_auth_clients);
  }
  r->dir = g_dir_make_tmp("sluice-redis-XXXXXX", error);
  if (r->dir == NULL) {
    sluice_test_redis_stop(r);
    return NULL;
  }
  for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    SpawnResult res;

    r->port = free_port();
    if (r->port == 0)
      continue;
    if (r->cluster_node_timeout_ms > 0) {
      r->cluster_port = free_port();
      if (r->cluster_port == 0 || r->cluster_port == r->port)
        continue;
    }
    res = spawn_and_wait(r, error);
    if (res == SPAWN_OK) {
      make_urls(r);
      track(r);
      return r;
    }
    if (res == SPAWN_FAILED)
      break;
  }
  if (error != NULL && *error == NULL)
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                "could not find a free port for redis-server in %d attempts",
                START_ATTEMPTS);
  sluice_test_redis_stop(r);
  return NULL;
}

static void
drop_ctx(SluiceTestRedis *r)
{
  if (r->ctx != NULL)
    redisFree(r->ctx);
  r->ctx = NULL;
}

/* Waits for the server to exit, up to @timeout_us; TRUE if it did. */
static gboolean
reap(SluiceTestRedis *r, gint64 timeout_us)
{
  gint64 deadline = g_get_monotonic_time() + timeout_us;
  int status;

  while (r->pid != 0) {
    pid_t got = waitpid(r->pid, &status, timeout_us < 0 ? 0 : WNOHANG);
    if (got == r->pid || (got < 0 && errno == ECHILD)) {
      g_spawn_close_pid(r->pid);
      r->pid = 0;
      break;
    }
    if (timeout_us >= 0 && g_get_monotonic_time() >= deadline)
      return FALSE;
    g_usleep(10 * 1000);
  }
  return TRUE;
}

void
sluice_test_redis_kill(SluiceTestRedis *r, int signum)
{
  g_return_if_fail(r != NULL);
  if (r->pid == 0)
    return;
  drop_ctx(r);
  kill(r->pid, signum);
  if (signum == SIGKILL || signum == SIGTERM || signum == SIGINT)
    reap(r, -1);
}

gboolean
sluice_test_redis_restart(SluiceTestRedis *r, GError **error)
{
  g_return_val_if_fail(r != NULL, FALSE);
  sluice_test_redis_kill(r, SIGTERM);
  /* The same port: a client holding the URL must find the server again. */
  for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    SpawnResult res;

    g_clear_error(error);
    res = spawn_and_wait(r, error);
    if (res == SPAWN_OK) {
      for (guint i = 0; r->acl_users != NULL && i < r->acl_users->len; i++)
        if (!apply_acl(r, r->acl_users->pdata[i], error))
          return FALSE;
      return TRUE;
    }
    if (res == SPAWN_FAILED)
      return FALSE;
    g_usleep(200 * 1000); /* the port is still held; try again */
  }
  return FALSE;
}

static void
remove_tree(const gchar *path)
{
  GDir *dir = g_dir_open(path, 0, NULL);
  const gchar *name;

  if (dir != NULL) {
    while ((name = g_dir_read_name(dir)) != NULL) {
      g_autofree gchar *child = g_build_filename(path, name, NULL);
      if (g_file_test(child, G_FILE_TEST_IS_DIR) &&
          !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
        remove_tree(child);
      else
        g_unlink(child);
    }
    g_dir_close(dir);
  }
  g_rmdir(path);
}

void
sluice_test_redis_stop(SluiceTestRedis *r)
{
  if (r == NULL)
    return;
  untrack(r);
  drop_ctx(r);
  if (r->pid != 0) {
    kill(r->pid, SIGTERM);
    if (!reap(r, STOP_TIMEOUT_US)) {
      kill(r->pid, SIGKILL);
      reap(r, -1);
    }
  }
  if (r->dir != NULL)
    remove_tree(r->dir);
  g_free(r->binary);
  g_free(r->dir);
  g_free(r->requirepass);
  g_free(r->acl_user);
  g_free(r->acl_password);
  g_strfreev(r->extra_args);
  g_free(r->sentinel_config);
  g_free(r->tls_cert_file);
  g_free(r->tls_key_file);
  g_free(r->tls_ca_cert_file);
  g_free(r->tls_auth_clients);
  g_free(r->url);
  g_free(r->socket_url);
  if (r->acl_users != NULL)
    g_ptr_array_unref(r->acl_users);
  g_free(r);
}

const gchar *
sluice_test_redis_url(SluiceTestRedis *r)
{
  return r->url;
}

const gchar *
sluice_test_redis_socket_url(SluiceTestRedis *r)
{
  return r->socket_url;
}

guint16
sluice_test_redis_port(SluiceTestRedis *r)
{
  return r->port;
}

GPid
sluice_test_redis_pid(SluiceTestRedis *r)
{
  return r->pid;
}

redisContext *
sluice_test_redis_connect(SluiceTestRedis *r)
{
  return connect_admin(r);
}

static redisReply *
command_v(SluiceTestRedis *r, const char *format, va_list ap)
{
  redisReply *reply;

  if (r->ctx != NULL && r->ctx->err)
    drop_ctx(r);
  if (r->ctx == NULL)
    r->ctx = connect_admin(r);
  if (r->ctx == NULL)
    return NULL;
  reply = redisvCommand(r->ctx, format, ap);
  if (reply == NULL)
    drop_ctx(r);
  return reply;
}

redisReply *
sluice_test_redis_command(SluiceTestRedis *r, const char *format, ...)
{
  va_list ap;
  redisReply *reply;

  va_start(ap, format);
  reply = command_v(r, format, ap);
  va_end(ap);
  return reply;
}

gint64
sluice_test_redis_integer(SluiceTestRedis *r, const char *format, ...)
{
  va_list ap;
  redisReply *reply;
  gint64 value = G_MININT64;

  va_start(ap, format);
  reply = command_v(r, format, ap);
  va_end(ap);
  if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
    value = reply->integer;
  if (reply != NULL)
    freeReplyObject(reply);
  return value;
}

gint64
sluice_test_redis_info_int(SluiceTestRedis *r, const gchar *section,
                           const gchar *field)
{
  redisReply *reply = sluice_test_redis_command(r, "INFO %s", section);
  g_autofree gchar *needle = g_strconcat("\n", field, ":", NULL);
  gint64 value = -1;

  if (reply != NULL && reply->type == REDIS_REPLY_STRING) {
    const gchar *at = strstr(reply->str, needle);
    if (at != NULL)
      value = g_ascii_strtoll(at + strlen(needle), NULL, 10);
  }
  if (reply != NULL)
    freeReplyObject(reply);
  return value;
}

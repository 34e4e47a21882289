/* redis-cluster-fixture.c - a throwaway Redis Cluster (see
 * redis-cluster-fixture.h).
 *
 * Every node is a SluiceTestRedis, so ports, directories, stopping by pid
 * and the atexit() clean-up are redis-server.c's. Replicas are told which
 * master to follow by redis-cli (or by CLUSTER REPLICATE below three
 * masters); the start waits, with generous deadlines, for the cluster to
 * agree (cluster_state:ok everywhere) and for every replica's link to be
 * up, so a failover test starts from replicas that hold everything.
 */
#include "config.h"

#include "tests/helpers/redis-cluster-fixture.h"

#include <string.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 60000

struct _SluiceTestCluster {
  GPtrArray *nodes; /* SluiceTestRedis*, owned */
  guint masters;
  gchar *url;
  const SluiceTestRedisOptions *tls; /* borrowed during the start only */
};

static void
node_stop(gpointer data)
{
  sluice_test_redis_stop(data);
}

static gboolean
alive(SluiceTestRedis *node)
{
  return sluice_test_redis_pid(node) != 0;
}

/* The reply of @node to @format as a string (status or bulk), or NULL. */
static gchar *command_text(SluiceTestRedis *node, const gchar *format, ...)
    G_GNUC_PRINTF(2, 3);

static gchar *
command_text(SluiceTestRedis *node, const gchar *format, ...)
{
  redisContext *ctx = sluice_test_redis_connect(node);
  redisReply *reply;
  gchar *text = NULL;
  va_list ap;

  if (ctx == NULL)
    return NULL;
  va_start(ap, format);
  reply = redisvCommand(ctx, format, ap);
  va_end(ap);
  if (reply != NULL &&
      (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS ||
       reply->type == REDIS_REPLY_ERROR))
    text = g_strndup(reply->str, reply->len);
  if (reply != NULL)
    freeReplyObject(reply);
  redisFree(ctx);
  return text;
}

static gchar *
node_id(SluiceTestRedis *node)
{
  return command_text(node, "CLUSTER MYID");
}

static gboolean
node_ok(SluiceTestRedis *node)
{
  g_autofree gchar *info = command_text(node, "CLUSTER INFO");

  return info != NULL && strstr(info, "cluster_state:ok") != NULL &&
         strstr(info, "cluster_slots_ok:16384") != NULL &&
         strstr(info, "cluster_slots_fail:0") != NULL &&
         strstr(info, "cluster_slots_pfail:0") != NULL;
}

/* A replica whose link to its master is up; a master is in sync. */
static gboolean
node_synced(SluiceTestRedis *node)
{
  g_autofree gchar *info = command_text(node, "INFO replication");

  return info != NULL && (strstr(info, "role:master") != NULL ||
                          strstr(info, "master_link_status:up") != NULL);
}

gboolean
sluice_test_cluster_wait_ok(SluiceTestCluster *c, gint64 timeout_ms,
                            GError **error)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  for (;;) {
    gboolean ok = TRUE;

    for (guint i = 0; i < c->nodes->len && ok; i++) {
      SluiceTestRedis *node = g_ptr_array_index(c->nodes, i);
      ok = !alive(node) || (node_ok(node) && node_synced(node));
    }
    if (ok)
      return TRUE;
    if (g_get_monotonic_time() > deadline) {
      g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                  "the Redis Cluster did not become ok within %" G_GINT64_FORMAT
                  " ms",
                  timeout_ms);
      return FALSE;
    }
    g_usleep(100 * 1000);
  }
}

static gboolean
check_ok_reply(SluiceTestRedis *node, gchar *text, const gchar *what,
               GError **error)
{
  g_autofree gchar *owned = text;

  if (owned != NULL && strcmp(owned, "OK") == 0)
    return TRUE;
  g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
              "%s on 127.0.0.1:%u: %s", what, sluice_test_redis_port(node),
              owned != NULL ? owned : "no reply");
  return FALSE;
}

/* redis-cli refuses fewer than three masters: the same by hand. */
static gboolean
join_by_hand(SluiceTestCluster *c, guint replicas, GError **error)
{
  SluiceTestRedis *first = g_ptr_array_index(c->nodes, 0);
  guint per = 16384 / c->masters;

  for (guint m = 0; m < c->masters; m++) {
    SluiceTestRedis *node = g_ptr_array_index(c->nodes, m);
    guint lo = m * per, hi = m + 1 == c->masters ? 16383 : (m + 1) * per - 1;

    if (!check_ok_reply(
            node, command_text(node, "CLUSTER ADDSLOTSRANGE %u %u", lo, hi),
            "CLUSTER ADDSLOTSRANGE", error))
      return FALSE;
  }
  for (guint i = 1; i < c->nodes->len; i++)
    if (!check_ok_reply(first,
                        command_text(first, "CLUSTER MEET 127.0.0.1 %u",
                                     sluice_test_redis_port(
                                         g_ptr_array_index(c->nodes, i))),
                        "CLUSTER MEET", error))
      return FALSE;
  for (guint m = 0; m < c->masters; m++) {
    SluiceTestRedis *master = g_ptr_array_index(c->nodes, m);
    g_autofree gchar *id = node_id(master);

    for (guint r = 0; r < replicas; r++) {
      SluiceTestRedis *replica =
          g_ptr_array_index(c->nodes, c->masters + m * replicas + r);
      gint64 deadline = g_get_monotonic_time() + READY_TIMEOUT_MS * 1000;
      gchar *said = NULL;

      /* The replica must have heard of its master through MEET first. */
      for (;;) {
        said = command_text(replica, "CLUSTER REPLICATE %s", id);
        if ((said != NULL && strcmp(said, "OK") == 0) ||
            g_get_monotonic_time() > deadline)
          break;
        g_free(said);
        g_usleep(100 * 1000);
      }
      if (!check_ok_reply(replica, said, "CLUSTER REPLICATE", error))
        return FALSE;
    }
  }
  return TRUE;
}

static gboolean
create_with_cli(SluiceTestCluster *c, guint replicas, GError **error)
{
  g_autofree gchar *cli = NULL;
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_autofree gchar *out = NULL, *err = NULL;
  gint status = 0;

  cli = g_strdup(g_getenv("REDIS_CLI"));
  if (cli == NULL)
    cli = g_find_program_in_path("redis-cli");
  if (cli == NULL) {
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                "redis-cli is not installed (it comes with redis-server, "
                "package redis-tools)");
    return FALSE;
  }
  g_ptr_array_add(argv, g_strdup(cli));
  if (c->tls != NULL) {
    /* The nodes speak TLS only: redis-cli with the nodes' own pair. */
    g_ptr_array_add(argv, g_strdup("--tls"));
    g_ptr_array_add(argv, g_strdup("--cacert"));
    g_ptr_array_add(argv, g_strdup(c->tls->tls_ca_cert_file));
    g_ptr_array_add(argv, g_strdup("--cert"));
    g_ptr_array_add(argv, g_strdup(c->tls->tls_cert_file));
    g_ptr_array_add(argv, g_strdup("--key"));
    g_ptr_array_add(argv, g_strdup(c->tls->tls_key_file));
  }
  g_ptr_array_add(argv, g_strdup("--cluster"));
  g_ptr_array_add(argv, g_strdup("create"));
  for (guint i = 0; i < c->nodes->len; i++)
    g_ptr_array_add(argv, g_strdup_printf("127.0.0.1:%u",
                                          sluice_test_redis_port(
                                              g_ptr_array_index(c->nodes, i))));
  g_ptr_array_add(argv, g_strdup("--cluster-replicas"));
  g_ptr_array_add(argv, g_strdup_printf("%u", replicas));
  g_ptr_array_add(argv, g_strdup("--cluster-yes"));
  g_ptr_array_add(argv, NULL);
  if (!g_spawn_sync(NULL, (gchar **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL,
                    NULL, &out, &err, &status, error))
    return FALSE;
  if (!g_spawn_check_wait_status(status, NULL)) {
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                "redis-cli --cluster create failed: %s%s", out, err);
    return FALSE;
  }
  return TRUE;
}

SluiceTestCluster *
sluice_test_cluster_start(guint masters, guint replicas, GError **error)
{
  return sluice_test_cluster_start_tls(masters, replicas, NULL, error);
}

SluiceTestCluster *
sluice_test_cluster_start_tls(guint masters, guint replicas,
                              const SluiceTestRedisOptions *tls, GError **error)
{
  static const gchar *const tls_args[] = {"--tls-cluster", "yes",
                                          "--tls-replication", "yes", NULL};
  g_autoptr(SluiceTestCluster) c = g_new0(SluiceTestCluster, 1);
  SluiceTestRedisOptions options = {0};
  GString *url =
      g_string_new(tls != NULL ? "rediss+cluster://" : "redis+cluster://");

  g_return_val_if_fail(masters >= 1, NULL);
  c->nodes = g_ptr_array_new_with_free_func(node_stop);
  c->masters = masters;
  c->tls = tls;
  if (tls != NULL) {
    options.tls_cert_file = tls->tls_cert_file;
    options.tls_key_file = tls->tls_key_file;
    options.tls_ca_cert_file = tls->tls_ca_cert_file;
    options.tls_auth_clients = tls->tls_auth_clients;
    options.extra_args = tls_args;
  }
  options.cluster_node_timeout_ms = SLUICE_TEST_CLUSTER_NODE_TIMEOUT_MS;
  for (guint i = 0; i < masters * (1 + replicas); i++) {
    SluiceTestRedis *node = sluice_test_redis_start(&options, error);

    if (node == NULL) {
      g_string_free(url, TRUE);
      return NULL;
    }
    g_ptr_array_add(c->nodes, node);
    g_string_append_printf(url, "%s127.0.0.1:%u", i == 0 ? "" : ",",
                           sluice_test_redis_port(node));
  }
  if (tls != NULL) {
    g_autofree gchar *ca =
        g_uri_escape_string(tls->tls_ca_cert_file, "/", FALSE);
    g_string_append_printf(url, "?tls_ca_file=%s", ca);
  }
  c->url = g_string_free(url, FALSE);
  if (masters >= 3 ? !create_with_cli(c, replicas, error)
                   : !join_by_hand(c, replicas, error))
    return NULL;
  if (!sluice_test_cluster_wait_ok(c, READY_TIMEOUT_MS, error))
    return NULL;
  c->tls = NULL;
  return g_steal_pointer(&c);
}

void
sluice_test_cluster_stop(SluiceTestCluster *c)
{
  if (c == NULL)
    return;
  if (c->nodes != NULL)
    g_ptr_array_unref(c->nodes);
  g_free(c->url);
  g_free(c);
}

const gchar *
sluice_test_cluster_url(SluiceTestCluster *c)
{
  return c->url;
}

guint
sluice_test_cluster_n_nodes(SluiceTestCluster *c)
{
  return c->nodes->len;
}

SluiceTestRedis *
sluice_test_cluster_node(SluiceTestCluster *c, guint i)
{
  return g_ptr_array_index(c->nodes, i);
}

guint
sluice_test_cluster_keyslot(SluiceTestCluster *c, const gchar *key)
{
  for (guint i = 0; i < c->nodes->len; i++) {
    SluiceTestRedis *node = g_ptr_array_index(c->nodes, i);
    gint64 slot;

    if (!alive(node))
      continue;
    slot = sluice_test_redis_integer(node, "CLUSTER KEYSLOT %s", key);
    if (slot >= 0)
      return (guint)slot;
  }
  return G_MAXUINT;
}

/* Whether @node's own line of CLUSTER NODES says it is a master serving
 * @slot ("0-5460", "5461", ranges separated by blanks). */
static gboolean
serves(SluiceTestRedis *node, guint slot)
{
  g_autofree gchar *nodes = command_text(node, "CLUSTER NODES");
  g_auto(GStrv) lines = NULL;

  if (nodes == NULL)
    return FALSE;
  lines = g_strsplit(nodes, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) fields = NULL;

    if (strstr(lines[i], "myself") == NULL)
      continue;
    fields = g_strsplit(lines[i], " ", -1);
    if (g_strv_length(fields) < 8 || strstr(fields[2], "master") == NULL)
      return FALSE;
    for (guint f = 8; fields[f] != NULL; f++) {
      guint64 lo, hi;
      gchar *dash;

      if (fields[f][0] == '[')
        continue; /* a migration in progress, not a served range */
      lo = g_ascii_strtoull(fields[f], &dash, 10);
      hi = *dash == '-' ? g_ascii_strtoull(dash + 1, NULL, 10) : lo;
      if (slot >= lo && slot <= hi)
        return TRUE;
    }
    return FALSE;
  }
  return FALSE;
}

SluiceTestRedis *
sluice_test_cluster_owner(SluiceTestCluster *c, guint slot)
{
  for (guint i = 0; i < c->nodes->len; i++) {
    SluiceTestRedis *node = g_ptr_array_index(c->nodes, i);

    if (alive(node) && serves(node, slot))
      return node;
  }
  return NULL;
}

SluiceTestRedis *
sluice_test_cluster_other_master(SluiceTestCluster *c, SluiceTestRedis * not )
{
  for (guint i = 0; i < c->nodes->len; i++) {
    SluiceTestRedis *node = g_ptr_array_index(c->nodes, i);
    g_autofree gchar *info = NULL;

    if (node == not || !alive(node))
      continue;
    info = command_text(node, "INFO replication");
    if (info != NULL && strstr(info, "role:master") != NULL)
      return node;
  }
  return NULL;
}

gint64
sluice_test_cluster_dbsize(SluiceTestRedis *node)
{
  return sluice_test_redis_integer(node, "DBSIZE");
}

gboolean
sluice_test_cluster_migrate_begin(SluiceTestCluster *c, guint slot,
                                  SluiceTestRedis *from, SluiceTestRedis *to,
                                  GError **error)
{
  g_autofree gchar *from_id = node_id(from);
  g_autofree gchar *to_id = node_id(to);

  return check_ok_reply(
             to,
             command_text(to, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id),
             "CLUSTER SETSLOT IMPORTING", error) &&
         check_ok_reply(
             from,
             command_text(from, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id),
             "CLUSTER SETSLOT MIGRATING", error);
}

gint
sluice_test_cluster_migrate_keys(SluiceTestCluster *c, guint slot,
                                 SluiceTestRedis *from, SluiceTestRedis *to,
                                 guint max, GError **error)
{
  redisContext *ctx = sluice_test_redis_connect(from);
  redisReply *keys, *reply;
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GArray) lens = g_array_new(FALSE, FALSE, sizeof(size_t));
  gint moved;

  if (ctx == NULL) {
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, "cannot connect");
    return -1;
  }
  keys = redisCommand(ctx, "CLUSTER GETKEYSINSLOT %u %u", slot, max);
  if (keys == NULL || keys->type != REDIS_REPLY_ARRAY) {
    g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                "CLUSTER GETKEYSINSLOT failed");
    if (keys != NULL)
      freeReplyObject(keys);
    redisFree(ctx);
    return -1;
  }
  moved = (gint)keys->elements;
  if (moved > 0) {
    const gchar *head[] = {"MIGRATE", "127.0.0.1", NULL,  "",
                           "0",       "10000",     "KEYS"};
    g_autofree gchar *port = g_strdup_printf("%u", sluice_test_redis_port(to));

    head[2] = port;
    for (guint i = 0; i < G_N_ELEMENTS(head); i++) {
      size_t len = strlen(head[i]);
      g_ptr_array_add(argv, g_strdup(head[i]));
      g_array_append_val(lens, len);
    }
    for (gsize i = 0; i < keys->elements; i++) {
      size_t len = keys->element[i]->len;
      g_ptr_array_add(argv, g_memdup2(keys->element[i]->str, len + 1));
      g_array_append_val(lens, len);
    }
    reply = redisCommandArgv(ctx, (int)argv->len, (const char **)argv->pdata,
                             (const size_t *)lens->data);
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
      g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                  "MIGRATE failed: %s",
                  reply != NULL ? reply->str : ctx->errstr);
      moved = -1;
    }
    if (reply != NULL)
      freeReplyObject(reply);
  }
  freeReplyObject(keys);
  redisFree(ctx);
  return moved;
}

gboolean
sluice_test_cluster_migrate_end(SluiceTestCluster *c, guint slot,
                                SluiceTestRedis *to, GError **error)
{
  g_autofree gchar *to_id = node_id(to);

  /* The target first: it then serves the slot whatever the others say. */
  if (!check_ok_reply(
          to, command_text(to, "CLUSTER SETSLOT %u NODE %s", slot, to_id),
          "CLUSTER SETSLOT NODE", error))
    return FALSE;
  for (guint i = 0; i < c->nodes->len; i++) {
    SluiceTestRedis *node = g_ptr_array_index(c->nodes, i);
    g_autofree gchar *info = NULL;

    if (node == to || !alive(node))
      continue;
    info = command_text(node, "INFO replication");
    if (info == NULL || strstr(info, "role:master") == NULL)
      continue;
    if (!check_ok_reply(
            node, command_text(node, "CLUSTER SETSLOT %u NODE %s", slot, to_id),
            "CLUSTER SETSLOT NODE", error))
      return FALSE;
  }
  return TRUE;
}

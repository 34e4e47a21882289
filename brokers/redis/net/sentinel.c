/* redis-sentinel.c - asking Redis Sentinel where the master is (see
 * redis-sentinel.h).
 *
 * Why each sentinel gets a connection of its own that is closed at once:
 * the pool asks only when it must make a connection and does not know the
 * master (the first connection, and after a connection broke or a server
 * turned out not to be the master), which is rare, and a kept sentinel
 * connection would need the outage handling of data connections for no
 * gain. Sentinels are asked in the URL's order; a sentinel that is down
 * or does not know the name costs one timeout at most, and the next is
 * asked. The bytes go through redis-conn.c's exchange (send with
 * MSG_NOSIGNAL, poll() deadlines) like every other Redis I/O.
 *
 * A sentinel's answer is not trusted blindly. Sentinels learn of a
 * failover one after the other (the leader first, the others from its
 * hello messages), so for a moment some name the new master and some the
 * old one, and the old one, resumed, still says "master" to ROLE until
 * it is demoted. Each answer therefore comes with the master's
 * config-epoch, which a failover raises together with the address: the
 * pool passes the highest epoch it has seen, and an answer of a lower
 * one is passed over, so a process that learnt of a failover never goes
 * back to the old master because a lagging sentinel was asked. The pool
 * still checks with ROLE that the server named is a master.
 */
#include "config.h"

#include <string.h>

#include <sluice/sys/broker.h>

#include "brokers/redis/net/conn-private.h"
#include "brokers/redis/net/node-private.h"
#include "brokers/redis/net/sentinel-private.h"

/* Why the sentinels did not name a master, worst first: an AUTH problem
 * needs the user to act, an unknown name too, the rest may pass. */
typedef enum {
  MISS_UNREACHABLE,
  MISS_UNKNOWN_NAME,
  MISS_AUTH,
} Miss;

/* The config-epoch field of a SENTINEL MASTER reply (a flat list of
 * field, value), or -1. */
static gint64
config_epoch(const redisReply *reply)
{
  guint64 epoch;

  if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
    return -1;
  for (size_t i = 0; i + 1 < reply->elements; i += 2) {
    const redisReply *k = reply->element[i], *v = reply->element[i + 1];

    if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
        strcmp(k->str, "config-epoch") == 0 &&
        g_ascii_string_to_unsigned(v->str, 10, 0, G_MAXINT64, &epoch, NULL))
      return (gint64)epoch;
  }
  return -1;
}

static gchar *
sentinel_addr(const SluiceRedisUrl *url, guint i)
{
  const gchar *h = url->sentinels[i];

  return strchr(h, ':') != NULL
             ? g_strdup_printf("[%s]:%d", h, url->sentinel_ports[i])
             : g_strdup_printf("%s:%d", h, url->sentinel_ports[i]);
}

/* Asks sentinel @i. Returns TRUE with the address, or FALSE with *miss
 * and a reason appended to @why. */
static gboolean
ask_one(const SluiceRedisUrl *url, guint i, gint64 timeout_ms, gint64 min_epoch,
        gchar **out_host, gint *out_port, gint64 *out_epoch, Miss *miss,
        GString *why)
{
  g_autofree gchar *addr = sentinel_addr(url, i);
  g_autofree gchar *reason = NULL;
  redisReply *replies[3] = {NULL, NULL, NULL};
  SluiceRedisConn *conn;
  guint n = 0, auth_at = G_MAXUINT, ask_at, epoch_at;
  const redisReply *answer;
  gint64 epoch;
  gboolean ok = FALSE;
  guint64 port;

  *miss = MISS_UNREACHABLE;
  {
    SluiceRedisEndpoint endpoint = {url->sentinels[i], url->sentinel_ports[i],
                                    NULL, NULL};

    conn = sluice_redis_conn__open(sluice_redis_conn_type__find(url->conn_type),
                                   &endpoint, timeout_ms, &reason);
  }
  if (conn == NULL) {
    g_string_append_printf(why, "; %s: %s", addr, reason);
    return FALSE;
  }
  if (url->sentinel_password != NULL) {
    const char *argv[3];
    size_t lens[3];
    int argc = 0;

    argv[argc] = "AUTH";
    lens[argc++] = 4;
    if (url->sentinel_user != NULL) {
      argv[argc] = url->sentinel_user;
      lens[argc++] = strlen(url->sentinel_user);
    }
    argv[argc] = url->sentinel_password;
    lens[argc++] = strlen(url->sentinel_password);
    sluice_redis_conn__append(conn, argc, argv, lens);
    auth_at = n++;
  }
  {
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name",
                           url->master_name};
    size_t lens[3] = {8, 23, strlen(url->master_name)};
    sluice_redis_conn__append(conn, 3, argv, lens);
    ask_at = n++;
  }
  {
    const char *argv[3] = {"SENTINEL", "MASTER", url->master_name};
    size_t lens[3] = {8, 6, strlen(url->master_name)};
    sluice_redis_conn__append(conn, 3, argv, lens);
    epoch_at = n++;
  }
  if (!sluice_redis_conn__transact(conn, n, replies, timeout_ms, &reason)) {
    g_string_append_printf(why, "; %s: %s", addr, reason);
    goto out;
  }
  if (auth_at != G_MAXUINT && replies[auth_at]->type == REDIS_REPLY_ERROR) {
    g_autofree gchar *said =
        sluice_broker_escape_text(replies[auth_at]->str, -1, 200);
    *miss = MISS_AUTH;
    g_string_append_printf(why,
                           "; %s refused sentinel_user/sentinel_password "
                           "(%s)",
                           addr, said);
    goto out;
  }
  answer = replies[ask_at];
  if (answer->type == REDIS_REPLY_ERROR) {
    g_autofree gchar *said = sluice_broker_escape_text(answer->str, -1, 200);
    if (g_str_has_prefix(answer->str, "NOAUTH") ||
        g_str_has_prefix(answer->str, "NOPERM"))
      *miss = MISS_AUTH;
    g_string_append_printf(why, "; %s: %s", addr, said);
    goto out;
  }
  if (answer->type == REDIS_REPLY_NIL) {
    *miss = MISS_UNKNOWN_NAME;
    g_string_append_printf(why, "; %s monitors no master of that name", addr);
    goto out;
  }
  if (answer->type != REDIS_REPLY_ARRAY || answer->elements != 2 ||
      answer->element[0]->type != REDIS_REPLY_STRING ||
      answer->element[1]->type != REDIS_REPLY_STRING ||
      answer->element[0]->len == 0 ||
      !g_ascii_string_to_unsigned(answer->element[1]->str, 10, 1, 65535, &port,
                                  NULL)) {
    g_string_append_printf(why,
                           "; %s gave an answer that is not an address "
                           "(is it a sentinel?)",
                           addr);
    goto out;
  }
  epoch = config_epoch(replies[epoch_at]);
  if (epoch >= 0 && epoch < min_epoch) {
    g_string_append_printf(why,
                           "; %s has not caught up with the latest failover "
                           "(config epoch %" G_GINT64_FORMAT
                           ", this process saw %" G_GINT64_FORMAT ")",
                           addr, epoch, min_epoch);
    goto out;
  }
  *out_host = g_strndup(answer->element[0]->str, answer->element[0]->len);
  *out_port = (gint)port;
  *out_epoch = epoch;
  ok = TRUE;
out:
  sluice_redis_replies__free(replies, n);
  sluice_redis_conn__free(conn);
  return ok;
}

gboolean
sluice_redis_sentinel__resolve(const SluiceRedisUrl *url, gint64 timeout_ms,
                               gint64 min_epoch, gchar **out_host,
                               gint *out_port, gint64 *out_epoch,
                               GError **error)
{
  g_autoptr(GString) why = g_string_new(NULL);
  Miss worst = MISS_UNREACHABLE;
  gboolean any_unknown = FALSE;

  g_return_val_if_fail(url != NULL && url->is_sentinel, FALSE);
  for (guint i = 0; i < url->n_sentinels; i++) {
    Miss miss;

    if (ask_one(url, i, timeout_ms, min_epoch, out_host, out_port, out_epoch,
                &miss, why))
      return TRUE;
    if (miss == MISS_UNKNOWN_NAME)
      any_unknown = TRUE;
    if (miss > worst)
      worst = miss;
  }
  /* The first "; " of the list is dropped. */
  if (worst == MISS_AUTH)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH,
                "the sentinels of %s refused to name the master (%s): give "
                "the sentinels' own credentials as the query parameters "
                "sentinel_password=... (and sentinel_user=... for an ACL "
                "user); the URL's user:password@ is the master's",
                url->display, why->str + 2);
  else if (any_unknown && worst == MISS_UNKNOWN_NAME)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "no sentinel of %s monitors a master named “%s” (%s): check "
                "the name in the URL against SENTINEL MASTERS",
                url->display, url->master_name, why->str + 2);
  else
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "no sentinel of %s named the master “%s” (%s); check that the "
                "sentinels run there and that the URL is right",
                url->display, url->master_name, why->str + 2);
  return FALSE;
}

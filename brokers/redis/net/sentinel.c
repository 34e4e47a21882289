/* sentinel.c - the Sentinel router: a redis+sentinel:// pool, whose
 * master is found by asking Redis Sentinel (see sentinel-private.h).
 *
 * The router owns the master's node (node.c: its connections, outage and
 * blocked fetches) and is that node's dialer: where the node would
 * connect to an address of its URL, it connects to the master this
 * router knows, or else to the one the sentinels name.
 *
 * FINDING THE MASTER. The sentinels are asked only when a connection must
 * be made and the master is not known: at first, after a connection
 * broke, after a server turned out not to be the master, or after a reply
 * said it no longer is one (-READONLY: demoted to a replica; -LOADING;
 * -MASTERDOWN). Each sentinel gets a bare connection of its own that is
 * closed at once (rare, and a kept sentinel connection would need the
 * outage handling of data connections for no gain), in the URL's order;
 * a sentinel that is down or does not know the name costs one timeout at
 * most, and the next is asked.
 *
 * NOT BELIEVING A SENTINEL BLINDLY. Sentinels learn of a failover one
 * after the other (the leader first, the others from its hello messages),
 * so for a moment some name the new master and some the old one, and the
 * old one, resumed, still says "master" to ROLE until it is demoted. Each
 * answer therefore comes with the master's config-epoch, which a failover
 * raises together with the address: an answer of a lower epoch than the
 * highest this router saw is passed over, so a process that learnt of a
 * failover never goes back to the old master because a lagging sentinel
 * was asked. And every new connection asks ROLE in its handshake: a
 * server that is not a master is a failed attempt (the sentinels are asked
 * again after the usual backoff), so a sentinel that lags behind a
 * failover costs a retry, never a write to a replica.
 *
 * FAILOVER. When the sentinels name a different master the router logs
 * one line, with both addresses, and retires the node's connections
 * (sluice_redis_node__retire()): idle connections to the old master are
 * dropped instead of reused, so writes stop reaching a demoted master as
 * soon as any thread of the process learnt of the failover; and a
 * connection that was being made to the old master meanwhile (a paused
 * master that resumes still says "master" until the sentinels demote it)
 * is refused rather than learnt, so the router never moves back. A reply
 * -READONLY, -LOADING or -MASTERDOWN marks its connection broken and
 * failed over (sluice_redis_conn__failed_over()): nothing of its exchange
 * was written, so the owner may replay the step, and the next connection
 * asks the sentinels again.
 *
 * Threads: the master's address is under the router's lock, which may be
 * held while a node's lock is taken (never the other way round); no lock
 * is held across a round trip.
 *
 * To extend: the sentinels are reached with the URL's connection type, as
 * the master is, so a TLS URL (rediss+sentinel://) talks TLS to both
 * without a change here; what the router asks a sentinel is ask_one().
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/net/errors-private.h"
#include "brokers/redis/net/log-private.h"
#include "brokers/redis/net/sentinel-private.h"
#include "serializers/text.h"

typedef struct {
  SluiceRedisUrl url;
  const SluiceRedisNetSettings *settings;
  SluiceRedisNode *master; /* the master's connections */

  GMutex lock; /* guards everything below */
  /* The master in use (host NULL while unknown: ask the sentinels), the
   * last one a connection was made to (for the failover line), and the
   * highest config-epoch learnt (-1: none). */
  gchar *master_host;
  gint master_port;
  gchar *last_master;
  gint64 master_epoch;
} SluiceRedisSentinel;

/* ---- Asking the sentinels ------------------------------------------------ */

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
  SluiceRedisEndpoint endpoint = {url->sentinels[i], url->sentinel_ports[i],
                                  NULL, url->tls};
  redisReply *replies[3] = {NULL, NULL, NULL};
  SluiceRedisConn *conn;
  guint n = 0, auth_at = G_MAXUINT, ask_at, epoch_at;
  const redisReply *answer;
  gint64 epoch;
  gboolean ok = FALSE;
  guint64 port;

  *miss = MISS_UNREACHABLE;
  /* The sentinels are reached as the master is: TLS for a rediss+sentinel://
   * URL, with the same settings. */
  conn = sluice_redis_conn__open(sluice_redis_conn_type__find(url->conn_type),
                                 &endpoint, timeout_ms, &reason);
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
    sluice_redis_conn__diagnose(conn, &endpoint, timeout_ms, &reason);
    g_string_append_printf(why, "; %s: %s", addr, reason);
    goto out;
  }
  if (auth_at != G_MAXUINT && replies[auth_at]->type == REDIS_REPLY_ERROR) {
    g_autofree gchar *said =
        sluice_text__escape(replies[auth_at]->str, -1, 200);
    *miss = MISS_AUTH;
    g_string_append_printf(why,
                           "; %s refused sentinel_user/sentinel_password "
                           "(%s)",
                           addr, said);
    goto out;
  }
  answer = replies[ask_at];
  if (answer->type == REDIS_REPLY_ERROR) {
    g_autofree gchar *said = sluice_text__escape(answer->str, -1, 200);
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

/* Asks the sentinels of @url in their order for the master's address and
 * config-epoch; the first answer of epoch @min_epoch or later wins.
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_UNAVAILABLE (no sentinel
 * answered; the message lists why, per sentinel), _AUTH (the sentinels
 * refused or want the sentinel credentials: the message names the query
 * parameters) or _INVALID (every sentinel that answered monitors no
 * master of that name). */
static gboolean
resolve(const SluiceRedisUrl *url, gint64 timeout_ms, gint64 min_epoch,
        gchar **out_host, gint *out_port, gint64 *out_epoch, GError **error)
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

/* ---- The master's connections -------------------------------------------- */

/* Called with the lock held: the next connection asks the sentinels. */
static void
forget_master_locked(SluiceRedisSentinel *s)
{
  g_clear_pointer(&s->master_host, g_free);
}

static void
dialer_lost(gpointer data)
{
  SluiceRedisSentinel *s = data;

  g_mutex_lock(&s->lock);
  forget_master_locked(s);
  g_mutex_unlock(&s->lock);
}

static gboolean
dialer_ready(gpointer data)
{
  SluiceRedisSentinel *s = data;
  gboolean known;

  g_mutex_lock(&s->lock);
  known = s->master_host != NULL;
  g_mutex_unlock(&s->lock);
  return known;
}

/* A connection to @host:@port was made and ROLE says master: the router
 * connects there from now on. When that is another server than the last
 * one, this is a failover: one line, and a new generation of the node, so
 * that idle connections to the old master are not reused. But when the
 * router moved to another master while this connection was being made
 * (@seen, the node's generation when its address was chosen, is old), it
 * is an old master that has not been demoted yet (a paused one, resumed):
 * refused, so that no write goes there; as is an address of an older
 * config-epoch (@epoch, -1 when unknown) than the router has learnt.
 * Returns FALSE when refused, else TRUE and @conn of the current
 * generation. */
static gboolean
learn_master(SluiceRedisSentinel *s, SluiceRedisConn *conn, const gchar *host,
             gint port, guint seen, gint64 epoch)
{
  g_autofree gchar *addr = g_strdup_printf("%s:%d", host, port);
  g_autofree gchar *old = NULL;
  guint generation;

  g_mutex_lock(&s->lock);
  generation = sluice_redis_node__get_generation(s->master);
  if ((seen != generation || (epoch >= 0 && epoch < s->master_epoch)) &&
      s->last_master != NULL && strcmp(s->last_master, addr) != 0) {
    g_mutex_unlock(&s->lock);
    return FALSE;
  }
  s->master_epoch = MAX(s->master_epoch, epoch);
  if (s->last_master != NULL && strcmp(s->last_master, addr) != 0) {
    old = g_steal_pointer(&s->last_master);
    generation = sluice_redis_node__retire(s->master);
  }
  g_free(s->last_master);
  s->last_master = g_strdup(addr);
  g_free(s->master_host);
  s->master_host = g_strdup(host);
  s->master_port = port;
  conn->generation = generation;
  g_mutex_unlock(&s->lock);
  if (old != NULL)
    sluice_redis_net__log(G_LOG_LEVEL_MESSAGE,
                          "Redis Sentinel failover of master “%s” (%s): the "
                          "master moved from %s to %s; reconnected",
                          s->url.master_name, s->url.display, old, addr);
  return TRUE;
}

/* The ROLE a new connection asked in its handshake. Returns FALSE with
 * *reason when the server is not a master (a failed attempt: the
 * sentinels are asked again after the backoff), or with @error when ROLE
 * itself was refused. */
static gboolean
check_role(SluiceRedisSentinel *s, const redisReply *role, gchar **reason,
           GError **error)
{
  if (role != NULL && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
      role->element[0]->type == REDIS_REPLY_STRING &&
      strcmp(role->element[0]->str, "master") != 0) {
    *reason = g_strdup_printf(
        "the server the sentinels named is a %s, not the master (a "
        "failover under way?)",
        strcmp(role->element[0]->str, "slave") == 0 ? "replica"
                                                    : role->element[0]->str);
    return FALSE;
  }
  return sluice_redis_error__check(s->url.display, s->settings->grant_ns, role,
                                   "ROLE", NULL, error);
}

/* The node's dialer: a connection to the master the router knows, or else
 * the one the sentinels name; when the known one fails (gone, or not the
 * master any more: a failover the router has not seen), the sentinels are
 * asked at once, once. */
static SluiceRedisConn *
dialer_open(gpointer data, SluiceRedisNode *node, gint64 timeout_ms,
            gchar **outage, GError **error)
{
  SluiceRedisSentinel *s = data;
  g_autofree gchar *reason = NULL;
  g_autofree gchar *where = NULL;
  SluiceRedisConn *conn = NULL;

  for (guint attempt = 0; conn == NULL && attempt < 3; attempt++) {
    g_autofree gchar *host = NULL;
    redisReply *role = NULL;
    gint port = 0;
    guint seen;
    gint64 epoch;
    gboolean asked = FALSE;
    GError *local = NULL;

    g_mutex_lock(&s->lock);
    host = g_strdup(s->master_host);
    port = s->master_port;
    seen = sluice_redis_node__get_generation(node);
    epoch = s->master_epoch;
    g_mutex_unlock(&s->lock);
    if (host == NULL) {
      asked = TRUE;
      if (!resolve(&s->url, timeout_ms, epoch, &host, &port, &epoch, &local)) {
        /* A sentinel that answered no is not an outage. */
        if (g_error_matches(local, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNAVAILABLE))
          *outage = g_strdup(local->message);
        g_propagate_error(error, local);
        return NULL;
      }
    }
    g_clear_pointer(&reason, g_free);
    g_free(where);
    where = g_strdup_printf(" (master %s:%d)", host, port);
    conn = sluice_redis_node__dial(node, host, port, timeout_ms, "ROLE", &role,
                                   &reason, error);
    if (conn != NULL && (!check_role(s, role, &reason, error) ||
                         !sluice_redis_node__setup(node, conn, &reason, error)))
      g_clear_pointer(&conn, sluice_redis_conn__free);
    if (role != NULL)
      freeReplyObject(role);
    if (conn != NULL) {
      if (!learn_master(s, conn, host, port, seen, epoch)) {
        g_clear_pointer(&conn, sluice_redis_conn__free);
        reason = g_strdup_printf("%s:%d answered as a master after the "
                                 "pool had moved to another one",
                                 host, port);
      }
    } else if (reason == NULL || asked) {
      break; /* an answer (AUTH...), or the sentinels' latest word */
    } else {
      dialer_lost(s);
    }
  }
  if (conn != NULL || reason == NULL)
    return conn; /* made, or the server answered no: not an outage */
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
              "cannot connect to Redis at %s%s: %s; check that redis-server "
              "is running there and that the URL is right",
              s->url.display, where != NULL ? where : "", reason);
  *outage = g_steal_pointer(&reason);
  return NULL;
}

static const SluiceRedisNodeDialer dialer = {
    .open = dialer_open,
    .lost = dialer_lost,
    .ready = dialer_ready,
};

/* ---- The router ---------------------------------------------------------- */

static SluiceRedisConn *
router_acquire(gpointer data, guint slot, GError **error)
{
  return sluice_redis_node__acquire(((SluiceRedisSentinel *)data)->master,
                                    error);
}

static void
router_release(gpointer data, SluiceRedisConn *conn)
{
  sluice_redis_node__release(((SluiceRedisSentinel *)data)->master, conn);
}

/* A reply that says the server stopped being a writable master: it was
 * demoted to a replica (READONLY), is loading (LOADING), or is a replica
 * cut off from its master (MASTERDOWN). None of them runs a write, so the
 * exchange wrote nothing. */
static gboolean
says_not_master(const redisReply *reply)
{
  return reply != NULL && reply->type == REDIS_REPLY_ERROR &&
         (sluice_redis_reply__is_error_code(reply, "READONLY") ||
          sluice_redis_reply__is_error_code(reply, "LOADING") ||
          sluice_redis_reply__is_error_code(reply, "MASTERDOWN"));
}

static gboolean
router_exchange(gpointer data, SluiceRedisConn *conn, guint n_replies,
                redisReply **replies, gint64 block_ms, GError **error)
{
  SluiceRedisSentinel *s = data;

  if (!sluice_redis_node__exchange(s->master, conn, n_replies, replies,
                                   block_ms, error))
    return FALSE;
  for (guint i = 0; i < n_replies; i++) {
    if (says_not_master(replies[i])) {
      conn->broken = TRUE;
      conn->failover = TRUE;
      g_mutex_lock(&s->lock);
      /* Only the first connection to notice makes the router ask again. */
      if (sluice_redis_node__retire_if(s->master, conn->generation))
        forget_master_locked(s);
      g_mutex_unlock(&s->lock);
      break;
    }
  }
  return TRUE;
}

static void
router_wakeup(gpointer data)
{
  sluice_redis_node__wakeup(((SluiceRedisSentinel *)data)->master);
}

static gchar *
router_get_master(gpointer data)
{
  SluiceRedisSentinel *s = data;
  gchar *addr;

  g_mutex_lock(&s->lock);
  addr = g_strdup(s->last_master);
  g_mutex_unlock(&s->lock);
  return addr;
}

static void
router_close(gpointer data)
{
  sluice_redis_node__close(((SluiceRedisSentinel *)data)->master);
}

static void
router_free(gpointer data)
{
  SluiceRedisSentinel *s = data;

  sluice_redis_node__free(s->master);
  g_mutex_clear(&s->lock);
  g_free(s->master_host);
  g_free(s->last_master);
  sluice_redis_url__clear(&s->url);
  g_free(s);
}

const SluiceRedisRouter sluice_redis_sentinel__router = {
    .acquire = router_acquire,
    .release = router_release,
    .exchange = router_exchange,
    .wakeup = router_wakeup,
    .get_master = router_get_master,
    .close = router_close,
    .free = router_free,
};

gpointer
sluice_redis_sentinel__new(const SluiceRedisUrl *url,
                           const SluiceRedisNetSettings *settings)
{
  SluiceRedisSentinel *s = g_new0(SluiceRedisSentinel, 1);

  g_return_val_if_fail(url->is_sentinel, NULL);
  sluice_redis_url__copy(url, &s->url);
  s->settings = settings;
  s->master_epoch = -1;
  g_mutex_init(&s->lock);
  /* The node's URL is the sentinel URL: the master's credentials and
   * database, and the name messages show; its address is the dialer's. */
  s->master = sluice_redis_node__new(url, settings);
  sluice_redis_node__set_dialer(s->master, &dialer, s);
  return s;
}

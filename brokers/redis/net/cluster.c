/* cluster.c - the Cluster router: a redis+cluster:// pool, each command
 * routed to the node that serves its slot (see cluster-private.h).
 *
 * The router keeps one node (node.c) per server, so one connection per
 * node per thread, as with one server; reads the slot map with CLUSTER
 * SHARDS (CLUSTER SLOTS before Redis 7.0); and follows the cluster's
 * redirections: MOVED (the slot has a new owner: the map is read again
 * and the command sent there), ASK (the slot is migrating and the key is
 * already on the target: ASKING and the command, once, there), TRYAGAIN
 * and CLUSTERDOWN (sent again after a capped backoff, within the command
 * timeout). The owner's setup hook runs on every new connection of every
 * node (node.c), so what it checks holds on the whole cluster.
 *
 * NODES. A node is a host:port with a SluiceRedisNode of its own (its
 * connections, its outage state and backoff, its blocked fetches for
 * CLIENT UNBLOCK). Nodes are created when a URL or a slot map names them
 * and live as long as the broker: a node that left the cluster just keeps
 * no connection.
 *
 * THE MAP. 16384 slots -> node, read from the first node that answers
 * CLUSTER SHARDS (a shard's master whose health is "online"), or CLUSTER
 * SLOTS when the server refuses SHARDS (older than 7.0, or an ACL). It is read again, by one
 * thread at a time and at most every REFRESH_MIN_US, when a MOVED or a
 * CLUSTERDOWN says it is out of date or a connection to a node failed (the
 * node may have died and its replica taken over). A MOVED also corrects
 * its slot at once, so the command that met it does not wait for the map.
 *
 * ROUTING. A connection is checked out for one slot: every command of one
 * exchange concerns the keys of one partition, which share one hash tag.
 * The connection records where each appended command ends in its output
 * buffer, and the exchange keeps a copy of what it sent; a command whose
 * reply is a redirection is sent again alone (the others were carried out
 * and are not repeated):
 *   MOVED slot host:port  -> to that node, and the map is read again;
 *   ASK slot host:port    -> ASKING then the command, once, on that node;
 *   TRYAGAIN, CLUSTERDOWN -> again after WAIT_INITIAL_MS doubling up to
 *                            WAIT_MAX_MS (and the backoff cap), within the
 *                            command timeout; then the error reply is
 *                            the caller's (UNAVAILABLE: retry later).
 *
 * WHY A SCRIPT IS NOT SENT AFTER AN ASK. A script names only the
 * partition's prefix in KEYS (redis-keys.c) and builds its other keys
 * itself. During a migration the keys of the slot move in batches, so on
 * the target a script would find some of the namespace's keys and miss
 * others, and a key it wrote there would make the migration of the same
 * key fail. The prefix itself is never a key, so the source answers every
 * script with ASK from the moment the slot is MIGRATING: scripts then wait
 * (counted in ask_waits) until the migration ends and the slot's owner
 * answers MOVED. Plain commands on one key (GET of a record, XREADGROUP,
 * ZADD) follow the ASK: Redis gives them the migration's semantics.
 *
 * Threads: the map and the node table are under one mutex, never held
 * across a round trip. A connection is used by one thread; moving it to
 * another node swaps what ties it to its server for a connection of that
 * node (sluice_redis_conn__swap_link()).
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/net/cluster-private.h"
#include "brokers/redis/net/errors-private.h"
#include "brokers/redis/net/url-private.h"

#define REFRESH_MIN_US (100 * 1000)
#define WAIT_INITIAL_MS 10
#define WAIT_MAX_MS 1000
/* Redirections followed for one exchange before its error replies are
 * given to the caller: a slot never moves that often in one call. */
#define MAX_ROUNDS 32

typedef struct {
  gchar *host;
  gint port;
  SluiceRedisNode *conns;
} Node;

typedef struct {
  SluiceRedisUrl url;
  const SluiceRedisNetSettings *settings;

  GMutex lock;         /* guards everything below */
  GPtrArray *nodes;    /* Node*, owned; kept until the cluster is freed */
  GHashTable *by_addr; /* "host:port" (owned) -> Node* */
  Node **owner;        /* SLUICE_REDIS_SLOTS entries; NULL = not served */
  gboolean have_map;
  gboolean stale;
  gboolean refreshing;
  GCond refreshed;        /* signalled when a refresh ends */
  gint64 next_refresh_us; /* monotonic */
  gboolean closed;
  SluiceRedisClusterStats stats;
} SluiceRedisCluster;

/* ---- Nodes and the map --------------------------------------------------- */

static void
node_free(gpointer data)
{
  Node *node = data;

  sluice_redis_node__free(node->conns);
  g_free(node->host);
  g_free(node);
}

/* Called with the lock held: makes no connection. */
static Node *
node_get_locked(SluiceRedisCluster *c, const gchar *host, gint port)
{
  g_autofree gchar *addr = g_strdup_printf("%s:%d", host, port);
  SluiceRedisUrl url;
  Node *node;

  node = g_hash_table_lookup(c->by_addr, addr);
  if (node != NULL)
    return node;
  node = g_new0(Node, 1);
  node->host = g_strdup(host);
  node->port = port;
  sluice_redis_url__for_node(&c->url, host, port, &url);
  node->conns = sluice_redis_node__new(&url, c->settings);
  sluice_redis_url__clear(&url);
  if (c->closed)
    sluice_redis_node__close(node->conns);
  g_ptr_array_add(c->nodes, node);
  g_hash_table_insert(c->by_addr, g_steal_pointer(&addr), node);
  return node;
}

static Node *
node_get(SluiceRedisCluster *c, const gchar *host, gint port)
{
  Node *node;

  g_mutex_lock(&c->lock);
  node = node_get_locked(c, host, port);
  g_mutex_unlock(&c->lock);
  return node;
}

static void
mark_stale(SluiceRedisCluster *c)
{
  g_mutex_lock(&c->lock);
  c->stale = TRUE;
  g_mutex_unlock(&c->lock);
}

static Node *
owner_of(SluiceRedisCluster *c, guint slot)
{
  Node *node;

  g_mutex_lock(&c->lock);
  node = c->owner[slot % SLUICE_REDIS_SLOTS];
  g_mutex_unlock(&c->lock);
  return node;
}

static gboolean
reply_is_str(const redisReply *r, const gchar *text)
{
  return r != NULL &&
         (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
         r->len == strlen(text) && memcmp(r->str, text, r->len) == 0;
}

/* The value of @name in a flat key/value array (RESP2 maps), or NULL. */
static const redisReply *
map_get(const redisReply *map, const gchar *name)
{
  if (map == NULL || map->type != REDIS_REPLY_ARRAY)
    return NULL;
  for (gsize i = 0; i + 1 < map->elements; i += 2)
    if (reply_is_str(map->element[i], name))
      return map->element[i + 1];
  return NULL;
}

static void
assign(SluiceRedisCluster *c, Node **map, const redisReply *start,
       const redisReply *end, const gchar *host, gint port, guint *n_assigned)
{
  Node *node;

  if (start == NULL || end == NULL || start->type != REDIS_REPLY_INTEGER ||
      end->type != REDIS_REPLY_INTEGER || start->integer < 0 ||
      end->integer >= SLUICE_REDIS_SLOTS || start->integer > end->integer ||
      port <= 0)
    return;
  node = node_get(c, host, port);
  for (gint64 s = start->integer; s <= end->integer; s++)
    map[s] = node;
  *n_assigned += (guint)(end->integer - start->integer + 1);
}

/* An empty or "?" address means "where you asked" (a node that does not
 * know its own address yet). */
static const gchar *
address_or(const redisReply *ip, const Node *asked)
{
  if (ip == NULL || ip->type != REDIS_REPLY_STRING || ip->len == 0 ||
      strcmp(ip->str, "?") == 0)
    return asked->host;
  return ip->str;
}

static guint
parse_shards(SluiceRedisCluster *c, const Node *asked, const redisReply *reply,
             Node **map)
{
  guint n = 0;

  for (gsize i = 0; i < reply->elements; i++) {
    const redisReply *shard = reply->element[i];
    const redisReply *slots = map_get(shard, "slots");
    const redisReply *nodes = map_get(shard, "nodes");
    const redisReply *master = NULL;

    if (slots == NULL || nodes == NULL || slots->type != REDIS_REPLY_ARRAY ||
        nodes->type != REDIS_REPLY_ARRAY)
      continue;
    for (gsize k = 0; k < nodes->elements && master == NULL; k++)
      if (reply_is_str(map_get(nodes->element[k], "role"), "master") &&
          reply_is_str(map_get(nodes->element[k], "health"), "online"))
        master = nodes->element[k];
    if (master == NULL)
      continue; /* failed and not replaced yet: its slots are not served */
    {
      /* A node lists its plain port as "port" and its TLS port as
       * "tls-port" (a TLS-only node has no "port"): a rediss+cluster://
       * pool takes the TLS one. CLUSTER SLOTS, below, gives the port of
       * the kind the asking connection is. */
      const redisReply *port =
          map_get(master, c->url.tls != NULL ? "tls-port" : "port");
      const gchar *host = address_or(map_get(master, "ip"), asked);

      if (port == NULL || port->type != REDIS_REPLY_INTEGER)
        continue;
      for (gsize k = 0; k + 1 < slots->elements; k += 2)
        assign(c, map, slots->element[k], slots->element[k + 1], host,
               (gint)port->integer, &n);
    }
  }
  return n;
}

static guint
parse_slots(SluiceRedisCluster *c, const Node *asked, const redisReply *reply,
            Node **map)
{
  guint n = 0;

  for (gsize i = 0; i < reply->elements; i++) {
    const redisReply *range = reply->element[i];
    const redisReply *master;

    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3)
      continue;
    master = range->element[2];
    if (master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        master->element[1]->type != REDIS_REPLY_INTEGER)
      continue;
    assign(c, map, range->element[0], range->element[1],
           address_or(master->element[0], asked),
           (gint)master->element[1]->integer, &n);
  }
  return n;
}

/* One CLUSTER SHARDS (or SLOTS) on @conn of @asked into @map. */
static gboolean
read_map(SluiceRedisCluster *c, Node *asked, SluiceRedisConn *conn, Node **map,
         GError **error)
{
  const char *shards[2] = {"CLUSTER", "SHARDS"};
  const char *slots[2] = {"CLUSTER", "SLOTS"};
  size_t shards_lens[2] = {7, 6};
  size_t slots_lens[2] = {7, 5};
  redisReply *reply = NULL;
  guint n = 0;
  gboolean use_slots = FALSE;

  sluice_redis_conn__append(conn, 2, shards, shards_lens);
  if (!sluice_redis_node__exchange(asked->conns, conn, 1, &reply, 0, error))
    return FALSE;
  if (reply->type == REDIS_REPLY_ERROR) {
    /* Redis before 7.0 ("unknown subcommand 'SHARDS'"), or a user whose
     * ACL grants CLUSTER SLOTS alone: the older form says the same. */
    g_clear_pointer(&reply, freeReplyObject);
    sluice_redis_conn__append(conn, 2, slots, slots_lens);
    if (!sluice_redis_node__exchange(asked->conns, conn, 1, &reply, 0, error))
      return FALSE;
    use_slots = TRUE;
  }
  if (!sluice_redis_error__check(
          sluice_redis_node__get_url(asked->conns)->display,
          c->settings->grant_ns, reply, "reading the slot map", NULL, error)) {
    freeReplyObject(reply);
    return FALSE;
  }
  if (reply->type == REDIS_REPLY_ARRAY)
    n = use_slots ? parse_slots(c, asked, reply, map)
                  : parse_shards(c, asked, reply, map);
  freeReplyObject(reply);
  if (n == 0) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "the Redis Cluster node %s:%d serves no slot it knows of: "
                "is the cluster created (redis-cli --cluster create) and "
                "are its masters up?",
                asked->host, asked->port);
    return FALSE;
  }
  return TRUE;
}

/* Reads the map from the first node that answers. Another thread already
 * reading it makes this one return at once with the map as it is, or,
 * when there is no map yet, wait for that thread's read (the first
 * commands of a broker's threads come at once, and a thread refused for
 * a map its neighbour is about to have would report an outage). */
static gboolean
refresh(SluiceRedisCluster *c, GError **error)
{
  g_autoptr(GPtrArray) candidates = NULL;
  g_autofree Node **map = NULL;
  g_autoptr(GError) last = NULL;
  gboolean ok = FALSE;

  g_mutex_lock(&c->lock);
  if (c->refreshing) {
    while (c->refreshing && !c->have_map)
      g_cond_wait(&c->refreshed, &c->lock);
    ok = c->have_map;
    g_mutex_unlock(&c->lock);
    if (!ok)
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                  "the slot map of the Redis Cluster at %s could not be "
                  "read (another thread tried); retry shortly",
                  c->url.display);
    return ok;
  }
  c->refreshing = TRUE;
  /* The nodes of the last map first, then those of the URL (which are
   * nodes too): nodes are never freed while the cluster lives. */
  candidates = g_ptr_array_new();
  for (guint i = 0; i < c->nodes->len; i++)
    g_ptr_array_add(candidates, g_ptr_array_index(c->nodes, i));
  g_mutex_unlock(&c->lock);

  map = g_new0(Node *, SLUICE_REDIS_SLOTS);
  for (guint i = 0; i < candidates->len && !ok; i++) {
    Node *node = g_ptr_array_index(candidates, i);
    SluiceRedisConn *conn;

    g_clear_error(&last);
    conn = sluice_redis_node__acquire(node->conns, &last);
    if (conn == NULL)
      continue;
    ok = read_map(c, node, conn, map, &last);
    sluice_redis_node__release(node->conns, conn);
  }

  g_mutex_lock(&c->lock);
  if (ok) {
    memcpy(c->owner, map, sizeof(Node *) * SLUICE_REDIS_SLOTS);
    c->have_map = TRUE;
    c->stale = FALSE;
    c->stats.refreshes++;
  }
  c->refreshing = FALSE;
  g_cond_broadcast(&c->refreshed);
  c->next_refresh_us = g_get_monotonic_time() + REFRESH_MIN_US;
  g_mutex_unlock(&c->lock);
  if (!ok)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "cannot read the slot map of the Redis Cluster at %s from "
                "any of its nodes (%s); check that the cluster is up and that "
                "the URL names its nodes",
                c->url.display, last != NULL ? last->message : "no node");
  return ok;
}

/* ---- Checking connections out and in ------------------------------------- */

static SluiceRedisConn *
acquire_routed(SluiceRedisCluster *c, guint slot, GError **error)
{
  SluiceRedisConn *conn;
  gboolean need_map, have_map;
  Node *node;

  g_mutex_lock(&c->lock);
  if (c->closed) {
    g_mutex_unlock(&c->lock);
    g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_CLOSED,
                        "the Redis broker was closed");
    return NULL;
  }
  have_map = c->have_map;
  need_map =
      !have_map || (c->stale && g_get_monotonic_time() >= c->next_refresh_us);
  g_mutex_unlock(&c->lock);
  if (need_map) {
    GError *local = NULL;

    if (!refresh(c, &local) && !have_map) {
      g_propagate_error(error, local);
      return NULL;
    }
    g_clear_error(&local);
  }

  node = owner_of(c, slot);
  if (node == NULL) {
    mark_stale(c);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "no node of the Redis Cluster at %s serves slot %u, the "
                "namespace's, now (a failover may be under way); retry "
                "shortly",
                c->url.display, slot);
    return NULL;
  }
  conn = sluice_redis_node__acquire(node->conns, error);
  if (conn == NULL) {
    mark_stale(c); /* the node may have died and its replica taken over */
    return NULL;
  }
  conn->slot = slot;
  if (conn->cmd_ends == NULL)
    conn->cmd_ends = g_array_new(FALSE, FALSE, sizeof(gsize));
  g_array_set_size(conn->cmd_ends, 0);
  return conn;
}

static SluiceRedisConn *
router_acquire(gpointer data, guint slot, GError **error)
{
  return acquire_routed(data, slot, error);
}

static void
router_release(gpointer data, SluiceRedisConn *conn)
{
  SluiceRedisCluster *c = data;

  if (conn->broken)
    mark_stale(c);
  sluice_redis_node__release(conn->node, conn);
}

/* Points @conn at @node: its link goes back to its node and it takes one
 * of @node's. Keeps @conn's slot and command offsets. */
static gboolean
move_conn(SluiceRedisCluster *c, SluiceRedisConn *conn, Node *node,
          GError **error)
{
  SluiceRedisConn *other;

  if (conn->node == node->conns)
    return TRUE;
  other = sluice_redis_node__acquire(node->conns, error);
  if (other == NULL) {
    mark_stale(c);
    return FALSE;
  }
  sluice_redis_conn__swap_link(conn, other);
  sdsclear(other->obuf);
  sluice_redis_node__release(other->node, other);
  return TRUE;
}

/* ---- Redirections -------------------------------------------------------- */

typedef enum {
  REDIRECT_NONE,
  REDIRECT_MOVED,
  REDIRECT_ASK,
  REDIRECT_WAIT,
} Redirect;

/* "MOVED 3999 127.0.0.1:6381" -> the node (an empty host is @current's). */
static Node *
redirect_target(SluiceRedisCluster *c, const redisReply *reply,
                const Node *current)
{
  g_autofree gchar *text = g_strndup(reply->str, reply->len);
  const gchar *addr = strrchr(text, ' ');
  const gchar *colon;
  g_autofree gchar *host = NULL;
  guint64 port;

  if (addr == NULL)
    return NULL;
  addr++;
  colon = strrchr(addr, ':');
  if (colon == NULL ||
      !g_ascii_string_to_unsigned(colon + 1, 10, 1, 65535, &port, NULL))
    return NULL;
  host = g_strndup(addr, (gsize)(colon - addr));
  if (host[0] == '\0' && current != NULL) {
    g_free(host);
    host = g_strdup(current->host);
  }
  return node_get(c, host, (gint)port);
}

/* Whether the command at @bytes (RESP, as hiredis formats it) runs a
 * script. */
static gboolean
command_is_script(const gchar *bytes, gsize len)
{
  const gchar *name = memchr(bytes, '$', len);
  const gchar *eol;
  guint64 n;

  if (name == NULL)
    return FALSE;
  eol = memchr(name, '\r', len - (gsize)(name - bytes));
  if (eol == NULL)
    return FALSE;
  {
    g_autofree gchar *digits = g_strndup(name + 1, (gsize)(eol - name - 1));
    if (!g_ascii_string_to_unsigned(digits, 10, 1, 64, &n, NULL))
      return FALSE;
  }
  name = eol + 2;
  if ((gsize)(name - bytes) + n > len)
    return FALSE;
  return (n == 4 && g_ascii_strncasecmp(name, "EVAL", 4) == 0) ||
         (n == 7 && g_ascii_strncasecmp(name, "EVALSHA", 7) == 0) ||
         (n == 7 && g_ascii_strncasecmp(name, "EVAL_RO", 7) == 0) ||
         (n == 10 && g_ascii_strncasecmp(name, "EVALSHA_RO", 10) == 0) ||
         (n == 5 && g_ascii_strncasecmp(name, "FCALL", 5) == 0);
}

static Node *
node_of(SluiceRedisCluster *c, SluiceRedisNode *conns)
{
  Node *found = NULL;

  g_mutex_lock(&c->lock);
  for (guint i = 0; i < c->nodes->len && found == NULL; i++) {
    Node *node = g_ptr_array_index(c->nodes, i);
    if (node->conns == conns)
      found = node;
  }
  g_mutex_unlock(&c->lock);
  return found;
}

/* What to do about @reply to the command at @bytes, counted. */
static Redirect
classify(SluiceRedisCluster *c, const redisReply *reply, const gchar *bytes,
         gsize len, const Node *current, Node **out_target)
{
  Redirect what = REDIRECT_NONE;

  *out_target = NULL;
  if (reply == NULL || reply->type != REDIS_REPLY_ERROR)
    return REDIRECT_NONE;
  if (sluice_redis_reply__is_error_code(reply, "MOVED")) {
    Node *target = redirect_target(c, reply, current);
    gchar *end = NULL;
    guint64 slot = g_ascii_strtoull(reply->str + 6, &end, 10);

    if (target == NULL)
      return REDIRECT_NONE;
    g_mutex_lock(&c->lock);
    if (end != reply->str + 6 && slot < SLUICE_REDIS_SLOTS)
      c->owner[slot] = target;
    c->stale = TRUE;
    c->stats.moved++;
    g_mutex_unlock(&c->lock);
    *out_target = target;
    return REDIRECT_MOVED;
  }
  if (sluice_redis_reply__is_error_code(reply, "ASK")) {
    Node *target = redirect_target(c, reply, current);

    if (target == NULL)
      return REDIRECT_NONE;
    what = command_is_script(bytes, len) ? REDIRECT_WAIT : REDIRECT_ASK;
    g_mutex_lock(&c->lock);
    if (what == REDIRECT_ASK)
      c->stats.ask++;
    else
      c->stats.ask_waits++;
    g_mutex_unlock(&c->lock);
    *out_target = what == REDIRECT_ASK ? target : NULL;
    return what;
  }
  if (sluice_redis_reply__is_error_code(reply, "TRYAGAIN")) {
    g_mutex_lock(&c->lock);
    c->stats.tryagain++;
    g_mutex_unlock(&c->lock);
    return REDIRECT_WAIT;
  }
  if (sluice_redis_reply__is_error_code(reply, "CLUSTERDOWN")) {
    g_mutex_lock(&c->lock);
    c->stats.clusterdown++;
    c->stale = TRUE;
    g_mutex_unlock(&c->lock);
    return REDIRECT_WAIT;
  }
  return REDIRECT_NONE;
}

static gboolean
router_exchange(gpointer data, SluiceRedisConn *conn, guint n_replies,
                redisReply **replies, gint64 block_ms, GError **error)
{
  SluiceRedisCluster *c = data;
  g_autoptr(GString) sent = NULL;
  g_autoptr(GArray) ends = NULL;
  g_autofree Redirect *what = NULL;
  g_autofree Node **target = NULL;
  gint64 deadline_us =
      g_get_monotonic_time() +
      c->settings->command_timeout_ms * G_TIME_SPAN_MILLISECOND;
  gint64 wait_ms = WAIT_INITIAL_MS;
  Node *owner;

  sent = g_string_new_len(conn->obuf, (gssize)sdslen(conn->obuf));
  ends = g_array_copy(conn->cmd_ends);
  g_array_set_size(conn->cmd_ends, 0);

  /* The slot may have moved since this connection was checked out (a MOVED
   * met by another thread, a new map): start on its owner. */
  owner = owner_of(c, conn->slot);
  if (owner != NULL && owner->conns != conn->node) {
    sdsclear(conn->obuf);
    if (!move_conn(c, conn, owner, error)) {
      conn->broken = TRUE;
      for (guint i = 0; i < n_replies; i++)
        replies[i] = NULL;
      return FALSE;
    }
    conn->obuf = sdscatlen(conn->obuf, sent->str, sent->len);
  }
  if (!sluice_redis_node__exchange(conn->node, conn, n_replies, replies,
                                   block_ms, error)) {
    mark_stale(c);
    return FALSE;
  }
  /* Replies that are not one per appended command (a SUBSCRIBE to several
   * channels) cannot be matched to their commands: taken as they are. */
  if (ends->len != n_replies)
    return TRUE;

  what = g_new0(Redirect, n_replies);
  target = g_new0(Node *, n_replies);
  for (guint round = 0; round < MAX_ROUNDS; round++) {
    Node *current = node_of(c, conn->node);
    Node *batch_target = NULL;
    gboolean any = FALSE, any_wait = FALSE;
    guint n_send = 0, k = 0;
    redisReply **got;

    for (guint i = 0; i < n_replies; i++) {
      gsize start = i == 0 ? 0 : g_array_index(ends, gsize, i - 1);
      gsize end = g_array_index(ends, gsize, i);

      what[i] = classify(c, replies[i], sent->str + start, end - start, current,
                         &target[i]);
      any = any || what[i] != REDIRECT_NONE;
      any_wait = any_wait || what[i] == REDIRECT_WAIT;
    }
    if (!any)
      return TRUE;
    if (g_get_monotonic_time() >= deadline_us)
      return TRUE; /* the error replies are the caller's: UNAVAILABLE */
    if (any_wait) {
      gint64 left_ms = (deadline_us - g_get_monotonic_time()) / 1000;

      g_usleep((gulong)MAX(MIN(wait_ms, left_ms), 1) * 1000);
      wait_ms = MIN(wait_ms * 2, MIN(WAIT_MAX_MS, c->settings->max_backoff_ms));
      g_mutex_lock(&c->lock);
      if (c->stale && g_get_monotonic_time() >= c->next_refresh_us) {
        g_mutex_unlock(&c->lock);
        refresh(c, NULL);
      } else {
        g_mutex_unlock(&c->lock);
      }
      for (guint i = 0; i < n_replies; i++)
        if (what[i] == REDIRECT_WAIT)
          target[i] = owner_of(c, conn->slot);
    }
    /* One node per round: the first redirected command's, with every
     * other command redirected to the same node. */
    for (guint i = 0; i < n_replies && batch_target == NULL; i++)
      if (what[i] != REDIRECT_NONE)
        batch_target = target[i];
    if (batch_target == NULL)
      continue; /* the slot is served by nobody now: wait again */
    if (!move_conn(c, conn, batch_target, error))
      goto failed;
    for (guint i = 0; i < n_replies; i++) {
      gsize start = i == 0 ? 0 : g_array_index(ends, gsize, i - 1);
      gsize end = g_array_index(ends, gsize, i);

      if (what[i] == REDIRECT_NONE || target[i] != batch_target)
        continue;
      if (what[i] == REDIRECT_ASK) {
        conn->obuf = sdscatlen(conn->obuf, "*1\r\n$6\r\nASKING\r\n",
                               strlen("*1\r\n$6\r\nASKING\r\n"));
        n_send++;
      }
      conn->obuf = sdscatlen(conn->obuf, sent->str + start, end - start);
      n_send++;
    }
    got = g_new0(redisReply *, n_send);
    if (!sluice_redis_node__exchange(conn->node, conn, n_send, got, block_ms,
                                     error)) {
      g_free(got);
      goto failed;
    }
    for (guint i = 0; i < n_replies; i++) {
      if (what[i] == REDIRECT_NONE || target[i] != batch_target)
        continue;
      if (what[i] == REDIRECT_ASK)
        freeReplyObject(got[k++]); /* ASKING's +OK */
      freeReplyObject(replies[i]);
      replies[i] = got[k++];
    }
    g_free(got);
  }
  return TRUE;

failed:
  mark_stale(c);
  conn->broken = TRUE;
  sluice_redis_replies__free(replies, n_replies);
  return FALSE;
}

static void
router_wakeup(gpointer data)
{
  SluiceRedisCluster *c = data;
  g_autoptr(GPtrArray) nodes = g_ptr_array_new();

  g_mutex_lock(&c->lock);
  for (guint i = 0; i < c->nodes->len; i++)
    g_ptr_array_add(nodes, g_ptr_array_index(c->nodes, i));
  g_mutex_unlock(&c->lock);
  for (guint i = 0; i < nodes->len; i++)
    sluice_redis_node__wakeup(((Node *)g_ptr_array_index(nodes, i))->conns);
}

/* As the direct path does: the first node of the URL (a WAIT's message
 * names it; the node a command went to is the connection's). */
static gchar *
router_get_master(gpointer data)
{
  SluiceRedisCluster *c = data;

  return g_strdup_printf("%s:%d", c->url.host, c->url.port);
}

static void
router_close(gpointer data)
{
  SluiceRedisCluster *c = data;

  g_mutex_lock(&c->lock);
  c->closed = TRUE;
  for (guint i = 0; i < c->nodes->len; i++)
    sluice_redis_node__close(((Node *)g_ptr_array_index(c->nodes, i))->conns);
  g_mutex_unlock(&c->lock);
}

static void
router_free(gpointer data)
{
  SluiceRedisCluster *c = data;

  g_ptr_array_unref(c->nodes);
  g_hash_table_unref(c->by_addr);
  g_free(c->owner);
  g_mutex_clear(&c->lock);
  g_cond_clear(&c->refreshed);
  sluice_redis_url__clear(&c->url);
  g_free(c);
}

const SluiceRedisRouter sluice_redis_cluster__router = {
    .acquire = router_acquire,
    .release = router_release,
    .exchange = router_exchange,
    .wakeup = router_wakeup,
    .get_master = router_get_master,
    .close = router_close,
    .free = router_free,
};

gpointer
sluice_redis_cluster__new(const SluiceRedisUrl *url,
                          const SluiceRedisNetSettings *settings)
{
  SluiceRedisCluster *c = g_new0(SluiceRedisCluster, 1);

  g_return_val_if_fail(url->is_cluster, NULL);
  sluice_redis_url__copy(url, &c->url);
  c->settings = settings;
  g_mutex_init(&c->lock);
  g_cond_init(&c->refreshed);
  c->nodes = g_ptr_array_new_with_free_func(node_free);
  c->by_addr = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  c->owner = g_new0(Node *, SLUICE_REDIS_SLOTS);
  for (guint i = 0; i < url->n_seeds; i++)
    node_get_locked(c, url->seed_hosts[i], url->seed_ports[i]);
  return c;
}

void
sluice_redis_cluster__get_stats(gpointer data, SluiceRedisClusterStats *out)
{
  SluiceRedisCluster *cluster = data;

  g_mutex_lock(&cluster->lock);
  *out = cluster->stats;
  g_mutex_unlock(&cluster->lock);
}

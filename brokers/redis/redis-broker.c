/* redis-broker.c - the Redis broker's shared layer: how every step reaches
 * Redis (see redis-broker.h for the API).
 *
 * One Redis broker serves both modes; only the queue transport differs
 * (redis-transport.h): lists (transport-fast.c) or streams
 * (transport-reliable.c). The files of brokers/redis/:
 *
 *   redis.c              the modes: the public API (sluice-redis.h), the
 *                        URL's broker parameters, the mode -> transport
 *                        table, the class and lifecycle
 *   redis-<topic>.c      the slots, one file per topic of the contract
 *                        as in every in-tree broker: queue (enqueue,
 *                        fetch, settle, leases, wakeup), schedule,
 *                        records (and lookup), revocations, dead-letters,
 *                        stats (and announce), steering, periodic, joins,
 *                        events (and progress), flow, unique
 *   redis-broker.c       this file: the setup of every new connection (the
 *                        namespace's mode, the eviction policy), retries,
 *                        reply shapes
 *   redis-argv.c         argument vectors
 *   redis-scripts.c      the shared Lua scripts; redis-keys.c key names
 *   redis-partitioned.c  a namespace split in partitions; redis-layout.c
 *                        the record of how it is split
 *   transport-*.c        the transports
 *   net/                 the Redis client underneath, under one header
 *                        (net/redis-net.h): URLs, connection types,
 *                        connections, the pool and its Sentinel and
 *                        Cluster routers, replies, error replies, hash
 *                        slots; it knows nothing of the broker, and the
 *                        files here include only net/redis-net.h of it
 *
 * How each slot reaches Redis (round trips in brackets):
 *
 *   enqueue           one script call for the whole batch [1]: idempotency
 *                     claim (SET NX PX semantics), push or schedule, record,
 *                     known-queues set, per item atomic
 *   fetch             the transport [1]
 *   settle            one script call for the whole batch [1]; items that
 *                     need no write (an ACK without record when the
 *                     transport's ack is a no-op) are not sent, so a batch
 *                     of only those costs nothing [0]
 *   heartbeat/leave   one script [1]
 *   promote_due       one script [1], earliest first, returns the next due
 *   cancel_scheduled  one script [1]
 *   get/put_record    GET [1] / one script (SET PX + PUBLISH) [1]
 *   wait_record       SUBSCRIBE on a connection of its own, then GET on
 *                     another, re-read after every notification or 5 s
 *   revoke            ZADD GT [1]
 *   list_revocations  ZREMRANGEBYSCORE + ZRANGEBYSCORE, pipelined [1]
 *   claim_periodic    one script (CAS + submit) [1]; last_periodic GET [1]
 *   dlq_*             XRANGE [1] or one script [1]
 *   stats             one read-only script [1]
 *   purge             one script [1]
 *   remove_queued     one script for the batch [1]: the transport's
 *                     t_remove (LREM from the consuming end; XDEL of an
 *                     entry after the group's last delivered id) and the
 *                     record, per item atomic
 *   replace_payloads  one script for the batch [1], per item atomic: the
 *                     transport's t_replace for a queued message (LPOS +
 *                     LSET in place; XADD of a copy + XDEL of a ready
 *                     entry, which moves it to the end of its queue),
 *                     HSET of a scheduled one's payload, XADD + XDEL of
 *                     a dead letter (its entry id changes)
 *   wakeup            CLIENT UNBLOCK from another connection [1]
 *
 * Times: due times and revocation expiries are compared with the now_ms the
 * core passes; heartbeats use the broker's SluiceClock. TTLs are Redis PX
 * expiries, so the class does not declare SLUICE_BROKER_CAP_CLOCK_TTL. A
 * record or claim TTL <= 0 is taken as 24 h: no per-task key lives forever.
 *
 * Records: the stored value is one flag byte ('F' final, 'P' not) and the
 * record bytes, so wait_record knows a final record without decoding it
 * (brokers never decode envelopes or records).
 *
 * Retries inside the broker, all in sluice_redis_broker__run(): an
 * operation that is harmless to repeat (reads, records, promotion,
 * revocations, an enqueue whose every item has an idempotency claim) is
 * sent once more on a fresh connection when its connection breaks
 * mid-call; anything else reports UNAVAILABLE and leaves the decision to
 * the caller, as the contract says. An error reply is an answer, never
 * retried here, with one exception: on a sentinel URL a reply that says
 * the server is no longer a writable master (net/sentinel.c marks the
 * connection failed over) proves that nothing was written, so any step is sent once more, on a connection to
 * the master the sentinels name now (the pool's capped backoff applies
 * when they do not name one yet).
 *
 * Durability (min_replicas_ack > 0): enqueue and settle go through
 * sluice_redis_broker__run_durable(), which sends WAIT on the connection
 * that made the write, before it goes back to the pool (WAIT counts the
 * replicas that have that connection's writes). Too few acknowledgements
 * is UNAVAILABLE: the write is on the master, not known to be on the
 * replicas, and the caller treats it as "may or may not have been
 * written", which the contract already makes safe to repeat.
 *
 * To add a slot: implement it as sluice_redis__<slot>() in the file of its
 * topic (above) on top of sluice_redis_broker__eval() or __command(),
 * declare it in redis-broker.h, give it a script in redis-scripts.c if it
 * touches more than one key, and set it in redis_class_init() or in its
 * family's table (redis.c).
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"

/* ---- Setting up a connection -------------------------------------------
 *
 * The network layer makes a connection (connect, AUTH, SELECT, CLIENT ID,
 * and ROLE for a sentinel's master) and then calls this hook, on every new
 * connection, on every node of a cluster, before the connection serves
 * anything; a failure refuses the connection with the hook's error. What
 * it checks is the broker's: the namespace's mode, and the server's
 * eviction policy.
 */

/* Warns once per server when Redis may evict Sluice's keys: with allkeys-*
 * any key may go (queued messages lost silently); with volatile-* the keys
 * with a TTL (records, idempotency claims) may vanish early. A user
 * without permission for CONFIG GET is told, once, that the check could
 * not be made: a least-privilege user must not silence the warning. */
static void
check_eviction_policy(SluiceRedisBroker *self, const gchar *server,
                      const redisReply *reply)
{
  const gchar *policy;
  gboolean first;

  g_mutex_lock(&self->policy_lock);
  first = g_hash_table_add(self->policy_checked, g_strdup(server));
  g_mutex_unlock(&self->policy_lock);
  if (!first)
    return;
  if (reply->type == REDIS_REPLY_ERROR) {
    g_autofree gchar *said = sluice_broker_escape_text(reply->str, -1, 200);

    sluice_broker_log(
        NULL, G_LOG_LEVEL_MESSAGE,
        "could not check maxmemory-policy of Redis at %s: CONFIG GET is not "
        "permitted for this user (%s); make sure it is noeviction, or a full "
        "Redis deletes queued messages without a trace (grant +config|get "
        "to have it checked)",
        server, said);
    return;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[1]->type != REDIS_REPLY_STRING)
    return;
  policy = reply->element[1]->str;
  if (g_str_has_prefix(policy, "allkeys-"))
    sluice_broker_log(NULL, G_LOG_LEVEL_WARNING,
                      "Redis at %s has maxmemory-policy %s: when it is full "
                      "it deletes any key, queued messages included, without "
                      "a trace; set maxmemory-policy noeviction",
                      server, policy);
  else if (g_str_has_prefix(policy, "volatile-"))
    sluice_broker_log(NULL, G_LOG_LEVEL_WARNING,
                      "Redis at %s has maxmemory-policy %s: when it is full "
                      "it deletes result records and idempotency claims "
                      "before their time; set maxmemory-policy noeviction",
                      server, policy);
}

/* Whether the eviction policy of @server is still to be looked at. */
static gboolean
policy_unchecked(SluiceRedisBroker *self, const gchar *server)
{
  gboolean unchecked;

  if (g_atomic_int_get(&self->quiet))
    return FALSE;
  g_mutex_lock(&self->policy_lock);
  unchecked = !g_hash_table_contains(self->policy_checked, server);
  g_mutex_unlock(&self->policy_lock);
  return unchecked;
}

/* Appends the command @argv (NULL-terminated strings) to @conn. */
static void
append(SluiceRedisConn *conn, const char *const *argv)
{
  size_t lens[8];
  int argc = 0;

  for (; argv[argc] != NULL; argc++)
    lens[argc] = strlen(argv[argc]);
  g_assert(argc <= (int)G_N_ELEMENTS(lens));
  sluice_redis_conn__append(conn, argc, (const char **)argv, lens);
}

/* The namespace's meta fields this check reads, in this order. */
enum { META_MODE, META_LAYOUT, META_SCRIPTS, META_N };
static const gchar *const meta_fields[META_N] = {"mode", "layout", "scripts"};

static void
append_meta_reads(SluiceRedisBroker *self, SluiceRedisConn *conn)
{
  for (guint i = 0; i < META_N; i++) {
    const char *get[] = {"HGET", self->meta_key, meta_fields[i], NULL};
    append(conn, get);
  }
}

/* Records what a namespace is missing, then reads the fields again into
 * @meta (replacing them): @writes (NULL-terminated commands) may be
 * refused to a read-only user, so only what is read back decides. */
static gboolean
record_meta(SluiceRedisBroker *self, SluiceRedisConn *conn,
            const char *const *const *writes, redisReply **meta, GError **error)
{
  redisReply *replies[8] = {NULL};
  guint n = 0;

  for (; writes[n] != NULL; n++)
    append(conn, writes[n]);
  g_assert(n + META_N <= G_N_ELEMENTS(replies));
  append_meta_reads(self, conn);
  if (!sluice_redis_conn__roundtrip(conn, n + META_N, replies, error))
    return FALSE;
  sluice_redis_replies__free(replies, n);
  sluice_redis_replies__free(meta, META_N);
  for (guint i = 0; i < META_N; i++)
    meta[i] = replies[n + i];
  for (guint i = 0; i < META_N; i++)
    if (!sluice_redis_conn__check_reply(conn, meta[i],
                                        "reading the namespace's meta", error))
      return FALSE;
  return TRUE;
}

static gboolean
is_nil(const redisReply *r)
{
  return r->type == REDIS_REPLY_NIL;
}

static gboolean
check_mode(SluiceRedisBroker *self, const gchar *server, const redisReply *mode,
           GError **error)
{
  g_autofree gchar *theirs = NULL;

  if (mode->type != REDIS_REPLY_STRING ||
      (mode->len == strlen(self->meta_mode) &&
       memcmp(mode->str, self->meta_mode, mode->len) == 0))
    return TRUE;
  theirs = g_strndup(mode->str, mode->len);
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "the namespace “%s” on Redis at %s is used in %s mode (as %s "
              "records), but this client is set up for %s mode: producers, "
              "workers and commands of one namespace must use the same "
              "mode; set this client's mode to %s (%s), or use another "
              "namespace",
              self->keys.ns, server, theirs, self->meta_key, self->meta_mode,
              theirs,
              self->mode_setting != NULL ? self->mode_setting
                                         : "SluiceRedisOptions.mode");
  return FALSE;
}

/* The layout the namespace records: newer than this client's is refused.
 * (No older one exists yet: version 1 is the first. The first migration
 * is run here, with the namespace's version compared again inside its
 * script, so that concurrent clients apply it once.) */
G_STATIC_ASSERT(SLUICE_REDIS_LAYOUT_VERSION == 1);

static gboolean
check_layout(SluiceRedisBroker *self, const gchar *server,
             const redisReply *layout, GError **error)
{
  g_autofree gchar *text = NULL;
  guint64 version = 0;

  /* Unrecorded on a namespace made before versions were, which a
   * read-only user could not mark: version 1. */
  if (layout->type != REDIS_REPLY_STRING)
    return TRUE;
  text = g_strndup(layout->str, layout->len);
  if (!g_ascii_string_to_unsigned(text, 10, 1, G_MAXUINT32, &version, NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "%s on Redis at %s records layout “%s”, which is not a "
                "layout version: it was written by hand, or not by Sluice",
                self->meta_key, server, text);
    return FALSE;
  }
  if (version <= SLUICE_REDIS_LAYOUT_VERSION)
    return TRUE;
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "the namespace “%s” on Redis at %s has layout version "
              "%" G_GUINT64_FORMAT
              ", newer than this program's (%d): upgrade this program "
              "(Sluice %s) to the Sluice that migrated it, or a later one",
              self->keys.ns, server, version, SLUICE_REDIS_LAYOUT_VERSION,
              PACKAGE_VERSION);
  return FALSE;
}

/* The script set the namespace records against this client's: a set of
 * the same version with other bytes is refused (a stale or edited copy
 * would run other steps on the same keys), a newer client records its
 * own, an older one runs its set, which the layout still serves, and is
 * told once. */
static gboolean
check_scripts(SluiceRedisBroker *self, SluiceRedisConn *conn,
              const gchar *server, const redisReply *scripts, GError **error)
{
  const SluiceRedisScriptSet *mine = sluice_redis_scripts__set();
  g_autofree gchar *text = NULL;
  g_auto(GStrv) parts = NULL;
  guint64 version = 0;

  if (scripts->type != REDIS_REPLY_STRING)
    return TRUE; /* a read-only user on a namespace that records none */
  text = g_strndup(scripts->str, scripts->len);
  parts = g_strsplit(text, ":", 2);
  if (g_strv_length(parts) != 2 ||
      !g_ascii_string_to_unsigned(parts[0], 10, 1, G_MAXUINT32, &version,
                                  NULL) ||
      strlen(parts[1]) != 40) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "%s on Redis at %s records scripts “%s”, which is not a "
                "script set (VERSION:SHA1): delete the field (HDEL %s "
                "scripts) and the next client records its own",
                self->meta_key, server, text, self->meta_key);
    return FALSE;
  }
  if (version == mine->version && strcmp(parts[1], mine->sha1) != 0) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "the namespace “%s” on Redis at %s runs script set %u with "
                "SHA-1 %s, but this client's set %u has SHA-1 %s: one of "
                "them runs scripts that differ from its release's; install "
                "every client from released Sluice packages (the Python and "
                "Node producers ship copies of the scripts)",
                self->keys.ns, server, mine->version, parts[1], mine->version,
                mine->sha1);
    return FALSE;
  }
  if (version < mine->version) {
    const char *set[] = {"HSET", self->meta_key, "scripts", mine->recorded,
                         NULL};
    redisReply *reply = NULL;

    append(conn, set);
    if (!sluice_redis_conn__roundtrip(conn, 1, &reply, error))
      return FALSE;
    freeReplyObject(reply); /* a read-only user's refusal changes nothing */
  } else if (version > mine->version &&
             g_atomic_int_compare_and_exchange(&self->scripts_told, 0, 1)) {
    sluice_broker_log(&self->parent, G_LOG_LEVEL_WARNING,
                      "the namespace “%s” on Redis at %s has clients of a "
                      "newer script set (%" G_GUINT64_FORMAT
                      ") than this one's (%u): upgrade this program (Sluice "
                      "%s) when you can",
                      self->keys.ns, server, version, mine->version,
                      PACKAGE_VERSION);
  }
  return TRUE;
}

/* What the namespace is, read from {ns}:meta (HGET mode, layout and
 * scripts; and, once per server, CONFIG GET maxmemory-policy) in one round
 * trip on every new connection; what it lacks is recorded in a second.
 *
 * A new namespace (no mode) gets this client's layout version, script set
 * and mode, in that order with HSETNX (a peer may be first; what won is
 * read back): a client that reads a mode therefore reads the layout
 * written before it, and a mode without a layout is a namespace made
 * before layouts were recorded, which is version 1 and is marked so.
 *
 * On Redis Cluster only the node that serves the meta key can answer; the
 * others reply MOVED or ASK and skip the check. Every command of this
 * broker goes to its keys' slot, which is the meta key's slot (one hash
 * tag, redis-keys.c), so the first connection the broker asks for is made
 * to the node that serves the meta key, and the namespace is checked
 * there before its first command runs. */
gboolean
sluice_redis_broker__setup(SluiceRedisConn *conn, gpointer data, GError **error)
{
  SluiceRedisBroker *self = data;
  const gchar *server = sluice_redis_conn__get_server(conn);
  redisReply *replies[1 + META_N] = {NULL};
  redisReply **meta = replies + 1;
  guint n = 0;
  gboolean ok = FALSE;

  if (policy_unchecked(self, server)) {
    const char *get[] = {"CONFIG", "GET", "maxmemory-policy", NULL};
    append(conn, get);
    n++;
  }
  /* A broker that only looks at the layout (sluice_redis_get_layout())
   * must not change it. */
  if (self->inspect) {
    if (n > 0 && sluice_redis_conn__roundtrip(conn, n, replies, error))
      check_eviction_policy(self, server, replies[0]);
    ok = n == 0 || replies[0] != NULL;
    goto out;
  }
  append_meta_reads(self, conn);
  if (!sluice_redis_conn__roundtrip(conn, n + META_N, replies + (1 - n), error))
    return FALSE;
  if (n > 0)
    check_eviction_policy(self, server, replies[0]);
  if (sluice_redis_reply__is_error_code(meta[META_MODE], "MOVED") ||
      sluice_redis_reply__is_error_code(meta[META_MODE], "ASK")) {
    /* A cluster node that does not serve the meta key: the node that does
     * checks the namespace. */
    ok = TRUE;
    goto out;
  }
  for (guint i = 0; i < META_N; i++)
    if (!sluice_redis_conn__check_reply(conn, meta[i],
                                        "reading the namespace's meta", error))
      goto out;
  if (is_nil(meta[META_MODE])) {
    g_autofree gchar *layout =
        g_strdup_printf("%d", SLUICE_REDIS_LAYOUT_VERSION);
    const char *set_layout[] = {"HSETNX", self->meta_key, "layout", layout,
                                NULL};
    const char *set_scripts[] = {"HSETNX", self->meta_key, "scripts",
                                 sluice_redis_scripts__set()->recorded, NULL};
    const char *set_mode[] = {"HSETNX", self->meta_key, "mode", self->meta_mode,
                              NULL};
    const char *const *writes[] = {set_layout, set_scripts, set_mode, NULL};

    if (!record_meta(self, conn, writes, meta, error))
      goto out;
  } else if (!check_mode(self, server, meta[META_MODE], error) ||
             !check_layout(self, server, meta[META_LAYOUT], error)) {
    /* Refused before anything is written. */
    goto out;
  } else if (is_nil(meta[META_LAYOUT]) || is_nil(meta[META_SCRIPTS])) {
    const char *set_layout[] = {"HSETNX", self->meta_key, "layout", "1", NULL};
    const char *set_scripts[] = {"HSETNX", self->meta_key, "scripts",
                                 sluice_redis_scripts__set()->recorded, NULL};
    const char *const *writes[] = {set_layout, set_scripts, NULL};

    if (!record_meta(self, conn, writes, meta, error))
      goto out;
  }
  ok = check_mode(self, server, meta[META_MODE], error) &&
       check_layout(self, server, meta[META_LAYOUT], error) &&
       check_scripts(self, conn, server, meta[META_SCRIPTS], error);
out:
  sluice_redis_replies__free(replies, 1 + META_N);
  return ok;
}

/* ---- Running steps ------------------------------------------------------- */

gint64
sluice_redis_broker__now_ms(SluiceRedisBroker *self)
{
  return sluice_clock_now_ms(sluice_broker_get_clock(&self->parent));
}

gboolean
sluice_redis_broker__idle(SluiceRedisBroker *self, gint64 block_ms,
                          GError **error)
{
  gchar timeout[32];
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  if (block_ms <= 0)
    return TRUE;
  g_snprintf(timeout, sizeof timeout, "%" G_GINT64_FORMAT ".%03d",
             block_ms / 1000, (int)(block_ms % 1000));
  sluice_redis_argv__init(&a, 3, 64);
  sluice_redis_argv__add_str(&a, "BLPOP");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_IDLE, NULL);
  sluice_redis_argv__add_str(&a, timeout);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "fetch", FALSE, &a, block_ms, &reply,
                                    error);
  if (reply != NULL)
    freeReplyObject(reply);
  sluice_redis_argv__clear(&a);
  return ok;
}

/* Whether a failed attempt may be made once more on a fresh connection:
 * only when the step is harmless to repeat, and only when the connection
 * broke mid-call (the outcome is unknown; an error reply is an answer). */
static gboolean
may_retry(gboolean idempotent, guint attempt, gboolean conn_broke,
          gboolean failover, const GError *local)
{
  return attempt == 0 && (idempotent || failover) && conn_broke &&
         g_error_matches(local, SLUICE_BROKER_ERROR,
                         SLUICE_BROKER_ERROR_UNAVAILABLE);
}

/* WAIT for the replicas on @conn, after a write on it succeeded. */
static gboolean
wait_replicas(SluiceRedisBroker *self, SluiceRedisConn *conn, const gchar *what,
              GError **error)
{
  gchar n[16], timeout[24];
  const char *argv[3] = {"WAIT", n, timeout};
  size_t lens[3];
  redisReply *reply = NULL;
  g_autofree gchar *master = NULL;
  gint64 acked = -1;

  g_snprintf(n, sizeof n, "%u", self->min_replicas_ack);
  g_snprintf(timeout, sizeof timeout, "%" G_GINT64_FORMAT,
             self->min_replicas_timeout_ms);
  lens[0] = 4;
  lens[1] = strlen(n);
  lens[2] = strlen(timeout);
  sluice_redis_conn__append(conn, 3, argv, lens);
  if (!sluice_redis_conn__exchange(self->pool, conn, 1, &reply,
                                   self->min_replicas_timeout_ms, error))
    return FALSE;
  if (!sluice_redis_reply__check(self->pool, reply, what, error)) {
    freeReplyObject(reply);
    return FALSE;
  }
  if (!sluice_redis_reply__to_int(reply, &acked)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "WAIT", error);
  }
  freeReplyObject(reply);
  if (acked >= (gint64)self->min_replicas_ack)
    return TRUE;
  master = sluice_redis_pool__get_master(self->pool);
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
              "%s was written on the Redis master %s (%s) but only "
              "%" G_GINT64_FORMAT " of the %u replicas that min_replicas_ack "
              "asks for confirmed it within %" G_GINT64_FORMAT " ms: it is "
              "not known to be on a replica, so a failover now could lose "
              "it; check the replicas (INFO replication on the master), or "
              "lower min_replicas_ack or raise min_replicas_timeout_ms. It "
              "may be repeated safely (an enqueue with the same task id is "
              "not written twice)",
              what, master != NULL ? master : "?",
              sluice_redis_pool__get_display_url(self->pool), acked,
              self->min_replicas_ack, self->min_replicas_timeout_ms);
  return FALSE;
}

static gboolean
run_on_pool(SluiceRedisBroker *self, gboolean idempotent, const gchar *durable,
            SluiceRedisOp op, gpointer data, GError **error)
{
  if (self->gate.check != NULL && !self->gate.check(self->gate.data, error))
    return FALSE;
  for (guint attempt = 0;; attempt++) {
    GError *local = NULL;
    SluiceRedisConn *conn;
    gboolean ok, broke, failover;

    conn = sluice_redis_pool__acquire_slot(self->pool, self->keys.slot, error);
    if (conn == NULL)
      return FALSE;
    ok = op(self, conn, data, &local);
    if (ok && durable != NULL && self->min_replicas_ack > 0) {
      /* Not retried: the write is done, only its copy is unknown. */
      ok = wait_replicas(self, conn, durable, error);
      sluice_redis_pool__release(self->pool, conn);
      return ok;
    }
    broke = sluice_redis_conn__is_broken(conn);
    failover = sluice_redis_conn__failed_over(conn);
    sluice_redis_pool__release(self->pool, conn);
    if (ok)
      return TRUE;
    if (!may_retry(idempotent, attempt, broke, failover, local)) {
      g_propagate_error(error, local);
      return FALSE;
    }
    g_error_free(local);
  }
}

gboolean
sluice_redis_broker__run(SluiceRedisBroker *self, gboolean idempotent,
                         SluiceRedisOp op, gpointer data, GError **error)
{
  return run_on_pool(self, idempotent, NULL, op, data, error);
}

gboolean
sluice_redis_broker__run_durable(SluiceRedisBroker *self, gboolean idempotent,
                                 const gchar *what, SluiceRedisOp op,
                                 gpointer data, GError **error)
{
  return run_on_pool(self, idempotent, what, op, data, error);
}

typedef struct {
  const SluiceRedisScript *script;
  SluiceRedisArgv *args;
  redisReply **out_reply;
} EvalCall;

static gboolean
eval_on(SluiceRedisBroker *self, SluiceRedisConn *conn, gpointer data,
        GError **error)
{
  EvalCall *call = data;

  return sluice_redis_script__eval(self->pool, conn, call->script, &self->keys,
                                   (int)call->args->len, call->args->argv,
                                   call->args->lens, call->out_reply, error);
}

gboolean
sluice_redis_broker__eval_script(SluiceRedisBroker *self,
                                 const SluiceRedisScript *script,
                                 gboolean idempotent, SluiceRedisArgv *args,
                                 redisReply **out_reply, GError **error)
{
  EvalCall call = {script, args, out_reply};

  return sluice_redis_broker__run(self, idempotent, eval_on, &call, error);
}

gboolean
sluice_redis_broker__eval_durable(SluiceRedisBroker *self,
                                  SluiceRedisScriptId id, gboolean idempotent,
                                  const gchar *what, SluiceRedisArgv *args,
                                  redisReply **out_reply, GError **error)
{
  EvalCall call = {&self->scripts[id], args, out_reply};

  *out_reply = NULL;
  if (sluice_redis_broker__run_durable(self, idempotent, what, eval_on, &call,
                                       error))
    return TRUE;
  /* The script's reply, when only the WAIT after it failed. */
  g_clear_pointer(out_reply, freeReplyObject);
  return FALSE;
}

gboolean
sluice_redis_broker__eval(SluiceRedisBroker *self, SluiceRedisScriptId id,
                          gboolean idempotent, SluiceRedisArgv *args,
                          redisReply **out_reply, GError **error)
{
  return sluice_redis_broker__eval_script(self, &self->scripts[id], idempotent,
                                          args, out_reply, error);
}

typedef struct {
  SluiceRedisArgv *args;
  gint64 block_ms;
  redisReply **out_reply;
} CommandCall;

static gboolean
exchange_on(SluiceRedisBroker *self, SluiceRedisConn *conn, gpointer data,
            GError **error)
{
  CommandCall *call = data;

  sluice_redis_conn__append(conn, (int)call->args->len, call->args->argv,
                            call->args->lens);
  return sluice_redis_conn__exchange(self->pool, conn, 1, call->out_reply,
                                     call->block_ms, error);
}

gboolean
sluice_redis_broker__exchange(SluiceRedisBroker *self, gboolean idempotent,
                              SluiceRedisArgv *args, gint64 block_ms,
                              redisReply **out_reply, GError **error)
{
  CommandCall call = {args, block_ms, out_reply};

  *out_reply = NULL;
  return sluice_redis_broker__run(self, idempotent, exchange_on, &call, error);
}

gboolean
sluice_redis_broker__command(SluiceRedisBroker *self, const gchar *what,
                             gboolean idempotent, SluiceRedisArgv *args,
                             gint64 block_ms, redisReply **out_reply,
                             GError **error)
{
  /* An error reply is an answer, not a lost connection: never retried. */
  if (!sluice_redis_broker__exchange(self, idempotent, args, block_ms,
                                     out_reply, error))
    return FALSE;
  if (!sluice_redis_reply__check(self->pool, *out_reply, what, error)) {
    g_clear_pointer(out_reply, freeReplyObject);
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_redis_broker__eval_void(SluiceRedisBroker *self, SluiceRedisScriptId id,
                               gboolean idempotent, SluiceRedisArgv *a,
                               GError **error)
{
  redisReply *reply = NULL;
  gboolean ok =
      sluice_redis_broker__eval(self, id, idempotent, a, &reply, error);

  sluice_redis_argv__clear(a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

gboolean
sluice_redis_broker__ping(SluiceRedisBroker *self, const gchar *what,
                          GError **error)
{
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 1, 0);
  sluice_redis_argv__add_str(&a, "PING");
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, what, TRUE, &a, 0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

/* ---- Replies ------------------------------------------------------------- */

gboolean
sluice_redis_broker__unexpected(SluiceRedisBroker *self, const gchar *what,
                                GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
              "%s: Redis at %s sent a reply of an unexpected shape; is it "
              "Redis 7.0 or newer, and are the namespace's keys only written "
              "by Sluice?",
              what, sluice_redis_pool__get_display_url(self->pool));
  return FALSE;
}

gboolean
sluice_redis_broker__eval_integer(SluiceRedisBroker *self,
                                  SluiceRedisScriptId id, const gchar *what,
                                  SluiceRedisArgv *a, gint64 *out,
                                  GError **error)
{
  redisReply *reply = NULL;
  gboolean ok = sluice_redis_broker__eval(self, id, FALSE, a, &reply, error);

  sluice_redis_argv__clear(a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_INTEGER) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, what, error);
  }
  *out = reply->integer;
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis_broker__eval_pair(SluiceRedisBroker *self, SluiceRedisScriptId id,
                               const gchar *what, SluiceRedisArgv *a,
                               gint64 *out_first, gint64 *out_second,
                               GError **error)
{
  redisReply *reply = NULL;
  gboolean ok = sluice_redis_broker__eval(self, id, FALSE, a, &reply, error);

  sluice_redis_argv__clear(a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      !sluice_redis_reply__to_int(reply->element[0], out_first) ||
      !sluice_redis_reply__to_int(reply->element[1], out_second)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, what, error);
  }
  freeReplyObject(reply);
  return TRUE;
}

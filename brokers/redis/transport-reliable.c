/* transport-reliable.c - the "redis-reliable" broker: one Redis stream and
 * one consumer group per queue.
 *
 * DELIVERY GUARANTEE: at least once. A fetched message stays in the
 * group's pending entries list (PEL) under the consumer that read it until
 * a settle acknowledges it, in the same script that writes its record, its
 * retry or its dead letter. A consumer that dies leaves its entries
 * pending; a peer reclaims them once the dead consumer's liveness key has
 * expired (or an entry sat idle past the lease) and runs them again.
 *
 * A task runs twice when its worker died (crash, kill -9, power loss) after
 * it started the task and before its settle reached Redis; when its worker
 * stalled (a pause, a partition, a swapped-out process) longer than the
 * lease, so that a peer reclaimed it while it still ran; when a fetch's
 * reply was lost on the network (the entries wait in the PEL for the lease,
 * then run); when a stop outlasts shutdown_timeout (the cancelled task is
 * given back and runs again elsewhere); and when Redis lost its consumer
 * group (restarted without persistence): every entry still in the stream is
 * delivered again. A late settle of the stalled worker is refused (fencing),
 * so the task is never retried or buried twice, but its side effects happen
 * twice and the last record written wins. A task is lost only with Redis's
 * data: what Redis had acknowledged and not yet written to disk when it died
 * (appendfsync everysec loses up to a second, always loses nothing, RDB-only
 * loses everything since the last save), an entry deleted or trimmed by hand
 * while pending (reclaim logs it), a dead letter dropped by the
 * dead_letter_max cap, or a Redis that evicts keys (maxmemory-policy other
 * than noeviction; the pool warns about it).
 *
 * What it omits: Redis 7.0 has no XNACK, so a delivery cannot be made
 * "undelivered" again in place: RELEASE requeues a copy (below). There is
 * no per-message lease: liveness is per consumer.
 *
 * Everything that is not the queue itself (records, schedule, revocations,
 * periodic claims, dead letters, stats, reconnection) is the shared Redis
 * layer (redis-broker.c). Decisions of this transport, and why:
 *
 *   stream   {ns}:s:<queue>, one field "p" holding the payload bytes. A
 *            plain enqueue batch (no claims, records or due times) is
 *            pipelined XADDs without a script; others use the shared
 *            enqueue script (t_push_many: one XADD per message).
 *   group    "sluice", one per stream, created at id 0 with MKSTREAM (so
 *            messages added before any worker existed are delivered), by
 *            an allow-oom script (a full Redis still drains) that
 *            tolerates BUSYGROUP. Groups known to exist are cached per
 *            broker. NOGROUP (Redis restarted without persistence, the
 *            stream deleted by hand) re-creates the group once and
 *            carries on; a second NOGROUP in the same fetch is reported
 *            UNAVAILABLE, so the worker backs off instead of spinning.
 *            Because acknowledged entries are deleted, a re-created group
 *            at 0 redelivers exactly what was never acknowledged.
 *   fetch    a script reads the queues in priority order without
 *            blocking, skipping those in {ns}:paused (read in the same
 *            step, so once a pause is stored no fetch takes from the
 *            queue), asking each for what is still missing (strict
 *            priority, never more than asked, one round trip); only when
 *            all were empty does one XREADGROUP BLOCK wait on those not
 *            paused (none: a BLPOP of a key nobody writes, so it neither
 *            spins nor takes). A blocked XREADGROUP is served from one
 *            stream (at most COUNT entries), but one that finds data at
 *            once answers up to COUNT per stream: what exceeds max is
 *            handed back at once by a script that re-adds a copy and
 *            acknowledges and deletes the original (it was never given to
 *            the worker; it moves to the end of its stream), and so is
 *            what it read of a queue paused while it waited (checked by
 *            the same script, one round trip more after every wait that
 *            ended with data). `wakeup` interrupts the blocking read
 *            (CLIENT UNBLOCK).
 *   settle   the shared settle script; t_check fences: the entry must be
 *            pending for this consumer (XPENDING key group <range>
 *            consumer, read in batches; XACK alone does not fence: a late
 *            XACK removes a peer's pending entry, docs/redis.md fact 1). Acks
 *            are deferred to t_flush at the end of the script: one XACK
 *            per queue, then XTRIM MINID (XDEL above a still-pending
 *            entry) removes exactly the acknowledged entries (proof at
 *            the fragment, transport-reliable-lua.c), so a stream holds
 *            only undelivered and pending entries and XLEN and the PEL
 *            return to 0 after a run. A refused (stale) settle is counted
 *            in {ns}:stale.
 *   release  a requeue in the settle script: a copy at the end of the
 *            stream (a blocked XREADGROUP of any peer wakes at once),
 *            carrying in field "d" how many deliveries came before (a
 *            release is not a delivery toward max_deliveries), then the
 *            original acknowledged and deleted. The cost: a released
 *            message goes to the end of its queue.
 *   heartbeat SET {ns}:alive:<consumer> PX lease (GET tells whether it had
 *            expired), and a self-claim XCLAIM key group <me> 0 ids JUSTID
 *            of every held entry still pending for this consumer: resets
 *            its idle time without bumping its delivery count, so a long
 *            task of a live worker is never reclaimed. Ownership is
 *            checked first, so a renewal never takes back what a peer
 *            reclaimed. If the liveness key had expired while deliveries
 *            were held, the heartbeat renews and then fails, so the worker
 *            logs "lease lost; message may be executed again".
 *   reclaim  one script per call: for each queue in priority order, the
 *            entries of consumers whose liveness key is gone (any idle
 *            time) and entries idle past idle_ms (any owner), claimed with
 *            XCLAIM, which bumps the delivery count reported to the core
 *            (the payload, and so `attempt`, is untouched). Entries
 *            deleted from the stream while pending are dropped from the
 *            PEL by XCLAIM and reported (logged), never looped on. A dead
 *            consumer is deleted from the group in the same script, only
 *            when its PEL is empty and it has been idle past idle_ms.
 *            Liveness is judged by the server (key expiry, PEL idle
 *            time), never by worker clocks. A reclaimer must hold a lease
 *            itself: one whose own liveness key lapsed is back from a
 *            stall (its own, or Redis's, which lets every key lapse at
 *            once) and takes nothing until it has renewed. When a PING
 *            takes longer than idle_ms / 4 (Redis itself is stalling, and
 *            live consumers' liveness keys and entries may look expired
 *            until their next renewal) the reclaimer skips one round. The
 *            worker adds its own rule: after a gap in its renewals it
 *            takes nothing over for half a lease, so live peers renew
 *            first (R17).
 *   leave    deletes the liveness key and removes the consumer from every
 *            group where it holds nothing.
 *   stats    depth = XLEN - pending per queue; in_flight = the pending
 *            counts summed; stale settles from {ns}:stale.
 *   list     XRANGE COUNT after the group's last delivered id (what lies
 *            after it was never delivered; released copies are there too):
 *            the cursor is an entry id, so paging is stable while workers
 *            read, and a cursor they passed meanwhile resumes at the first
 *            entry still ready.
 *   replace  an entry cannot change in place: a ready one (after the
 *            group's last delivered id, as for remove) whose "p" is still
 *            the listed bytes is added again with its other fields ("d")
 *            and deleted, so it moves to the end of its queue
 *            (docs/redis.md, "Rewriting waiting messages").
 *   persistence  the first fetch reads appendonly and appendfsync and
 *            warns when they can lose acknowledged work (R15).
 *
 * Payloads are handed to the core without a copy: each delivery's GBytes
 * takes over the buffer hiredis allocated for the reply element.
 *
 * To extend: a stream operation that a shared script needs belongs in the
 * Lua fragment (transport-reliable-lua.c; see redis-transport.h for its
 * contract); one that only this transport needs is a script of its own
 * there (a member of SluiceRedisReliableScripts) or a C function here.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/transport-reliable-lua.h"
#include "brokers/redis/redis-lua.h"
#include "brokers/redis/transport-reliable.h"

/* The most entries one reclaim takes (keeps Lua's argument lists short). */
#define RECLAIM_MAX 1000

/* ---- Transport state ----------------------------------------------------- */

typedef struct {
  SluiceRedisReliableScripts scripts; /* read-only after init */

  GMutex lock; /* guards what follows */
  /* Queue names (owned) whose group this broker created or found. */
  GHashTable *groups;
  gboolean persistence_checked;
  gboolean skip_priority_read; /* test hook */
} ReliableData;

static ReliableData *
data_of(SluiceRedisBroker *self)
{
  return self->transport_data;
}

static gboolean
reliable_init(SluiceRedisBroker *self, GError **error)
{
  ReliableData *d = g_new0(ReliableData, 1);

  sluice_redis__reliable_scripts_init(&d->scripts);
  g_mutex_init(&d->lock);
  d->groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  self->transport_data = d;
  return TRUE;
}

static void
reliable_finalize(SluiceRedisBroker *self)
{
  ReliableData *d = data_of(self);

  if (d == NULL)
    return;
  sluice_redis__reliable_scripts_clear(&d->scripts);
  g_hash_table_unref(d->groups);
  g_mutex_clear(&d->lock);
  g_free(d);
  self->transport_data = NULL;
}

/* ---- Entries ----------------------------------------------------------- */

/* The payload of a stream entry's field list ([field, value, ...], or nil
 * for an entry deleted meanwhile): the value of "p", stolen without a
 * copy; empty when missing, which the core buries as malformed. */
static GBytes *
entry_payload(redisReply *fields)
{
  if (fields != NULL && fields->type == REDIS_REPLY_ARRAY) {
    for (size_t j = 0; j + 1 < fields->elements; j += 2) {
      redisReply *f = fields->element[j];
      if (sluice_redis_reply__is_string(f) && f->len == 1 && f->str[0] == 'p' &&
          fields->element[j + 1]->type == REDIS_REPLY_STRING)
        return sluice_redis_reply__steal_bytes(fields->element[j + 1], 0);
    }
  }
  return g_bytes_new(NULL, 0);
}

/* The deliveries before this one that a released entry carries (field
 * "d", see t_release); 0 when absent. */
static guint
entry_prior(const redisReply *fields)
{
  if (fields != NULL && fields->type == REDIS_REPLY_ARRAY) {
    for (size_t j = 0; j + 1 < fields->elements; j += 2) {
      const redisReply *f = fields->element[j];
      gint64 d;
      if (sluice_redis_reply__is_string(f) && f->len == 1 && f->str[0] == 'd' &&
          sluice_redis_reply__to_int(fields->element[j + 1], &d) && d > 0)
        return (guint)MIN(d, G_MAXUINT - 1);
    }
  }
  return 0;
}

static void
add_delivery(GPtrArray *out, const gchar *queue, redisReply *id,
             GBytes *payload, guint delivery_count)
{
  g_autofree gchar *handle = g_strndup(id->str, id->len);

  g_ptr_array_add(out,
                  sluice_delivery_new(queue, payload, handle, delivery_count));
  g_bytes_unref(payload);
}

/* ---- Consumer groups ----------------------------------------------------- */

/* Makes sure every queue of @queues has its group. With @lost, the groups
 * were found missing (NOGROUP): they are created again, and a warning names
 * each queue whose group this broker had seen before. */
static gboolean
ensure_groups(SluiceRedisBroker *self, const gchar *const *queues, guint n,
              gboolean lost, GError **error)
{
  ReliableData *d = data_of(self);
  g_autoptr(GPtrArray) missing = g_ptr_array_new();
  g_autoptr(GArray) known = g_array_new(FALSE, FALSE, sizeof(gboolean));
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  g_mutex_lock(&d->lock);
  for (guint i = 0; i < n; i++) {
    gboolean seen = g_hash_table_contains(d->groups, queues[i]);
    if (seen && !lost)
      continue;
    g_hash_table_remove(d->groups, queues[i]);
    g_ptr_array_add(missing, (gpointer)queues[i]);
    g_array_append_val(known, seen);
  }
  g_mutex_unlock(&d->lock);
  if (missing->len == 0)
    return TRUE;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + missing->len, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  for (guint i = 0; i < missing->len; i++)
    sluice_redis_argv__add_str(&a, missing->pdata[i]);
  sluice_redis_argv__finish(&a);
  /* Creating a group that exists is a no-op: safe to repeat. */
  ok = sluice_redis_broker__eval_script(self, &d->scripts.ensure, TRUE, &a,
                                        &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!sluice_redis_reply__is_string(reply) || reply->len != missing->len) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "ensure_groups", error);
  }
  for (guint i = 0; i < missing->len; i++) {
    if (reply->str[i] == '1' && g_array_index(known, gboolean, i))
      sluice_broker_log(
          &self->parent, G_LOG_LEVEL_WARNING,
          "the consumer group of queue “%s” was missing on Redis at %s "
          "(restarted without persistence, or its stream deleted): "
          "re-created it; every message still in the stream is delivered "
          "again",
          (const gchar *)missing->pdata[i],
          sluice_redis_pool__get_display_url(self->pool));
  }
  freeReplyObject(reply);

  g_mutex_lock(&d->lock);
  for (guint i = 0; i < missing->len; i++)
    g_hash_table_add(d->groups, g_strdup(missing->pdata[i]));
  g_mutex_unlock(&d->lock);
  return TRUE;
}

/* ---- Persistence --------------------------------------------------------- */

/* At-least-once holds only for what Redis keeps: says once, at the first
 * fetch, when its persistence settings can lose acknowledged work (REDIS-
 * NOTES R15). A server that refuses CONFIG (ACL, renamed command) is not
 * an error: it is only not checked. */
static void
check_persistence(SluiceRedisBroker *self)
{
  ReliableData *d = data_of(self);
  const gchar *url = sluice_redis_pool__get_display_url(self->pool);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *aof = NULL;
  g_autofree gchar *fsync = NULL;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean first;

  g_mutex_lock(&d->lock);
  first = !d->persistence_checked;
  d->persistence_checked = TRUE;
  g_mutex_unlock(&d->lock);
  if (!first || g_atomic_int_get(&self->quiet))
    return;

  sluice_redis_argv__init(&a, 4, 0);
  sluice_redis_argv__add_str(&a, "CONFIG");
  sluice_redis_argv__add_str(&a, "GET");
  sluice_redis_argv__add_str(&a, "appendonly");
  sluice_redis_argv__add_str(&a, "appendfsync");
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__command(self, "CONFIG GET", TRUE, &a, 0, &reply,
                                    &error)) {
    /* A least-privilege user must not silence the warning below. */
    if (g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH))
      sluice_broker_log(&self->parent, G_LOG_LEVEL_MESSAGE,
                        "could not check the persistence of Redis at %s: "
                        "CONFIG GET is not permitted for this user; make "
                        "sure it runs with appendonly yes (and appendfsync "
                        "always), or acknowledged work can be lost (grant "
                        "+config|get to have it checked)",
                        url);
    else
      sluice_broker_log(&self->parent, G_LOG_LEVEL_INFO,
                        "could not read the persistence settings of Redis "
                        "at %s (%s); make sure it runs with appendonly yes",
                        url, error->message);
    sluice_redis_argv__clear(&a);
    return;
  }
  sluice_redis_argv__clear(&a);
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
      redisReply *k = reply->element[i];
      redisReply *v = reply->element[i + 1];
      if (!sluice_redis_reply__is_string(k) ||
          !sluice_redis_reply__is_string(v))
        continue;
      if (k->len == 10 && memcmp(k->str, "appendonly", 10) == 0)
        aof = g_strndup(v->str, v->len);
      else if (k->len == 11 && memcmp(k->str, "appendfsync", 11) == 0)
        fsync = g_strndup(v->str, v->len);
    }
  }
  freeReplyObject(reply);
  if (g_strcmp0(aof, "no") == 0)
    sluice_broker_log(
        &self->parent, G_LOG_LEVEL_WARNING,
        "Redis at %s runs with appendonly no: if it dies, every message, "
        "retry and result written since its last snapshot is lost, "
        "acknowledged or not; for reliable mode set appendonly yes (and "
        "appendfsync always to lose nothing on a power failure)",
        url);
  else if (g_strcmp0(aof, "yes") == 0 && fsync != NULL &&
           g_strcmp0(fsync, "always") != 0)
    sluice_broker_log(
        &self->parent, G_LOG_LEVEL_MESSAGE,
        "Redis at %s runs with appendfsync %s: a power failure loses "
        "what it acknowledged in about the last second; appendfsync always "
        "loses nothing",
        url, fsync);
}

/* ---- fetch --------------------------------------------------------------- */

/* Hands back deliveries a read took that fetch does not hand out: read
 * beyond what it was asked for, or, with @only_paused, those of a queue
 * that was paused while the read waited (they are then taken out of @from,
 * and the others kept there). On failure they stay with the fetch
 * (surplus: pending for @consumer, reclaimed once idle past the lease,
 * delayed, never lost; paused: kept, as if read before the pause). */
static void
hand_back(SluiceRedisBroker *self, const gchar *consumer, GPtrArray *from,
          guint first, gboolean only_paused)
{
  ReliableData *d = data_of(self);
  g_autoptr(GError) error = NULL;
  guint n = from->len - first;
  SluiceRedisArgv a;
  redisReply *reply = NULL;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2 + 4 * n, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_str(&a, only_paused ? "1" : "0");
  for (guint i = first; i < from->len; i++) {
    SluiceDelivery *del = from->pdata[i];
    sluice_redis_argv__add_str(&a, del->queue);
    sluice_redis_argv__add_str(&a, del->handle);
    sluice_redis_argv__add_bytes(&a, del->payload);
    sluice_redis_argv__add_int(&a, del->delivery_count);
  }
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__eval_script(self, &d->scripts.requeue, TRUE, &a,
                                        &reply, &error)) {
    if (only_paused)
      sluice_broker_log(&self->parent, G_LOG_LEVEL_WARNING,
                        "fetch: could not check whether the queues were "
                        "paused while the fetch waited: %s; what it took "
                        "runs",
                        error->message);
    else
      sluice_broker_log(&self->parent, G_LOG_LEVEL_WARNING,
                        "fetch: could not hand back %u messages read beyond "
                        "what was asked for: %s; they are redelivered once "
                        "idle for the lease",
                        n, error->message);
  } else if (only_paused && reply->type == REDIS_REPLY_ARRAY &&
             reply->elements == n) {
    guint kept = first;

    for (guint i = 0; i < n; i++) {
      gint64 back = 0;
      SluiceDelivery *del = from->pdata[first + i];

      sluice_redis_reply__to_int(reply->element[i], &back);
      if (back == 1)
        sluice_delivery_free(del);
      else
        from->pdata[kept++] = del;
    }
    /* The caller's free function (if any) must not see the freed ones
     * (it may be given NULL: delivery frees are NULL-safe). */
    for (guint i = kept; i < from->len; i++)
      from->pdata[i] = NULL;
    g_ptr_array_set_size(from, kept);
  }
  if (reply != NULL)
    freeReplyObject(reply);
  sluice_redis_argv__clear(&a);
}

/* One XREADGROUP over @queues, blocking up to @block_ms (0 = not at all).
 * Sets @nogroup instead of failing when a group is missing. Keeps at most
 * @max deliveries, in priority order, and hands the rest back. */
static gboolean
read_group(SluiceRedisBroker *self, const gchar *consumer,
           const gchar *const *queues, guint n, guint max, gint64 block_ms,
           GPtrArray *out, gboolean *nogroup, GError **error)
{
  g_autoptr(GPtrArray) by_queue = NULL;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  guint first_key;
  gboolean ok;

  sluice_redis_argv__init(&a, 10 + 2 * n, n * 32);
  sluice_redis_argv__add_str(&a, "XREADGROUP");
  sluice_redis_argv__add_str(&a, "GROUP");
  sluice_redis_argv__add_str(&a, SLUICE_REDIS_RELIABLE_GROUP);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, max);
  if (block_ms > 0) {
    sluice_redis_argv__add_str(&a, "BLOCK");
    sluice_redis_argv__add_int(&a, block_ms);
  }
  sluice_redis_argv__add_str(&a, "STREAMS");
  first_key = a.len;
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_STREAM,
                               queues[i]);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, ">");
  sluice_redis_argv__finish(&a);

  /* Not repeated on a lost connection: a lost reply's entries are pending
   * for us and are reclaimed once idle past the lease; repeating a
   * blocking read would double its wait. An exchange (not a command)
   * because NOGROUP must be told apart. */
  ok = sluice_redis_broker__exchange(self, FALSE, &a, block_ms, &reply, error);
  if (!ok)
    goto out;
  if (sluice_redis_reply__is_error_code(reply, "NOGROUP")) {
    *nogroup = TRUE;
    goto out;
  }
  if (!sluice_redis_reply__check(self->pool, reply, "fetch", error)) {
    ok = FALSE;
    goto out;
  }
  if (reply->type == REDIS_REPLY_NIL)
    goto out; /* timed out, woken up, or nothing new */
  if (reply->type != REDIS_REPLY_ARRAY)
    goto unexpected;

  /* One answer per stream that had entries, each up to COUNT. */
  by_queue = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
  for (guint i = 0; i < n; i++)
    g_ptr_array_add(by_queue, g_ptr_array_new_with_free_func(
                                  (GDestroyNotify)sluice_delivery_free));
  for (size_t s = 0; s < reply->elements; s++) {
    redisReply *stream = reply->element[s];
    redisReply *entries;
    guint qi = n;

    if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2 ||
        !sluice_redis_reply__is_string(stream->element[0]) ||
        stream->element[1]->type != REDIS_REPLY_ARRAY)
      goto unexpected;
    for (guint i = 0; i < n && qi == n; i++)
      if (a.lens[first_key + i] == stream->element[0]->len &&
          memcmp(a.argv[first_key + i], stream->element[0]->str,
                 stream->element[0]->len) == 0)
        qi = i;
    if (qi == n)
      goto unexpected;
    entries = stream->element[1];
    for (size_t k = 0; k < entries->elements; k++) {
      redisReply *e = entries->element[k];
      if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
          !sluice_redis_reply__is_string(e->element[0]))
        goto unexpected;
      add_delivery(by_queue->pdata[qi], queues[qi], e->element[0],
                   entry_payload(e->element[1]),
                   1 + entry_prior(e->element[1]));
    }
  }
  {
    g_autoptr(GPtrArray) surplus =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
    guint kept = 0;

    /* Queues in priority order, each in stream order. */
    for (guint i = 0; i < n; i++) {
      gsize len = 0;
      gpointer *items = g_ptr_array_steal(by_queue->pdata[i], &len);

      for (gsize k = 0; k < len; k++, kept++)
        g_ptr_array_add(kept < max ? out : surplus, items[k]);
      g_free(items);
    }
    if (surplus->len > 0)
      hand_back(self, consumer, surplus, 0, FALSE);
  }
  goto out;

unexpected:
  ok = sluice_redis_broker__unexpected(self, "fetch", error);
out:
  if (reply != NULL)
    freeReplyObject(reply);
  sluice_redis_argv__clear(&a);
  return ok;
}

/* The non-blocking read in priority order (several queues). */
static gboolean
read_in_order(SluiceRedisBroker *self, const gchar *consumer,
              const gchar *const *queues, guint n, guint max, GPtrArray *out,
              gboolean *nogroup, gboolean *out_paused, GError **error)
{
  ReliableData *d = data_of(self);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *entries, *missing, *paused;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2 + n, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, max);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  /* Not idempotent: a lost reply's entries wait in our PEL (see above). */
  ok = sluice_redis_broker__eval_script(self, &d->scripts.fetch, FALSE, &a,
                                        &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      reply->element[1]->type != REDIS_REPLY_ARRAY ||
      reply->element[2]->type != REDIS_REPLY_ARRAY ||
      reply->element[0]->elements % 4 != 0)
    goto unexpected;
  entries = reply->element[0];
  missing = reply->element[1];
  paused = reply->element[2];
  for (size_t i = 0; i < paused->elements; i++) {
    gint64 qi;
    if (!sluice_redis_reply__to_int(paused->element[i], &qi) || qi < 1 ||
        qi > n)
      goto unexpected;
    out_paused[qi - 1] = TRUE;
  }
  for (size_t i = 0; i < entries->elements; i += 4) {
    gint64 qi, prior;
    if (!sluice_redis_reply__to_int(entries->element[i], &qi) || qi < 1 ||
        qi > n || !sluice_redis_reply__is_string(entries->element[i + 1]) ||
        entries->element[i + 2]->type != REDIS_REPLY_STRING ||
        !sluice_redis_reply__to_int(entries->element[i + 3], &prior))
      goto unexpected;
    add_delivery(out, queues[qi - 1], entries->element[i + 1],
                 sluice_redis_reply__steal_bytes(entries->element[i + 2], 0),
                 1 + (guint)CLAMP(prior, 0, G_MAXUINT - 1));
  }
  if (missing->elements > 0)
    *nogroup = TRUE;
  freeReplyObject(reply);
  return TRUE;

unexpected:
  freeReplyObject(reply);
  return sluice_redis_broker__unexpected(self, "fetch", error);
}

static gboolean
reliable_fetch(SluiceRedisBroker *self, const gchar *consumer,
               const gchar *const *queues, guint max, gint64 block_ms,
               GPtrArray *out, GError **error)
{
  ReliableData *d = data_of(self);
  guint n = g_strv_length((gchar **)queues);
  g_autofree gboolean *paused = g_new0(gboolean, MAX(n, 1));
  guint before = out->len;
  gboolean skip;

  if (max == 0 || n == 0)
    return TRUE;
  g_mutex_lock(&d->lock);
  skip = d->skip_priority_read;
  g_mutex_unlock(&d->lock);
  if (!ensure_groups(self, queues, n, FALSE, error))
    return FALSE;
  check_persistence(self);

  for (guint round = 0; round < 2; round++) {
    g_autoptr(GPtrArray) open = g_ptr_array_new();
    gboolean nogroup = FALSE;
    gboolean ok;

    memset(paused, 0, MAX(n, 1) * sizeof *paused);
    ok = skip || read_in_order(self, consumer, queues, n, max, out, &nogroup,
                               paused, error);
    if (ok && out->len == before && !nogroup && block_ms > 0) {
      /* Nothing ready: wait on the queues that are not paused (a paused
       * one's new entries would be read, handed back, read again...). */
      for (guint i = 0; i < n; i++)
        if (!paused[i])
          g_ptr_array_add(open, (gpointer)queues[i]);
      if (open->len == 0)
        return sluice_redis_broker__idle(self, block_ms, error);
      ok = read_group(self, consumer, (const gchar *const *)open->pdata,
                      open->len, max, block_ms, out, &nogroup, error);
      /* A pause stored while it waited: what it read goes back. */
      if (ok && out->len > before)
        hand_back(self, consumer, out, before, TRUE);
    }
    if (!ok)
      return FALSE;
    if (!nogroup)
      return TRUE;
    if (!ensure_groups(self, queues, n, TRUE, error))
      return FALSE;
    if (out->len > before)
      return TRUE;
  }
  /* The group vanished again right after it was made: something deletes
   * the streams. Fail, so the worker backs off rather than spins. */
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
              "fetch: the consumer groups of the queues disappeared again "
              "right after they were re-created on Redis at %s; is something "
              "deleting the namespace's streams ({%s}:s:*)?",
              sluice_redis_pool__get_display_url(self->pool), self->keys.ns);
  return FALSE;
}

/* ---- reclaim ------------------------------------------------------------- */

/* How long a PING takes now (us), or -1 with @error. */
static gint64
ping_us(SluiceRedisBroker *self, GError **error)
{
  gint64 start = g_get_monotonic_time();

  if (!sluice_redis_broker__ping(self, "reclaim", error))
    return -1;
  return g_get_monotonic_time() - start;
}

static gboolean
reliable_reclaim(SluiceRedisBroker *self, const gchar *consumer,
                 const gchar *const *queues, guint max, gint64 idle_ms,
                 GPtrArray *out, GError **error)
{
  ReliableData *d = data_of(self);
  guint n = g_strv_length((gchar **)queues);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *claimed, *deleted;
  gint64 rtt_us;
  gboolean ok;

  if (max == 0 || n == 0)
    return TRUE;
  max = MIN(max, RECLAIM_MAX);
  idle_ms = MAX(idle_ms, 1);

  rtt_us = ping_us(self, error);
  if (rtt_us < 0)
    return FALSE;
  if (rtt_us > idle_ms * 1000 / 4) {
    /* Redis itself stalled: every liveness key looks expired to it now. */
    sluice_broker_log(&self->parent, G_LOG_LEVEL_MESSAGE,
                      "reclaim: Redis took %" G_GINT64_FORMAT
                      " ms to answer a PING; skipping one round so that "
                      "live workers renew their leases first",
                      rtt_us / 1000);
    return TRUE;
  }

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3 + n, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, max);
  sluice_redis_argv__add_int(&a, idle_ms);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  /* Not repeated: a lost reply leaves the entries claimed by us and idle;
   * they are reclaimed again after the lease (one delivery more). */
  ok = sluice_redis_broker__eval_script(self, &d->scripts.reclaim, FALSE, &a,
                                        &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 4) {
    sluice_broker_log(&self->parent, G_LOG_LEVEL_INFO,
                      "reclaim: consumer %s holds no lease (it lapsed in "
                      "a stall, or it never heartbeated); taking nothing "
                      "over until it is renewed",
                      consumer);
    freeReplyObject(reply);
    return TRUE;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      reply->element[1]->type != REDIS_REPLY_ARRAY ||
      reply->element[0]->elements % 4 != 0 ||
      reply->element[1]->elements % 2 != 0)
    goto unexpected;
  claimed = reply->element[0];
  deleted = reply->element[1];
  for (size_t i = 0; i < claimed->elements; i += 4) {
    gint64 qi, count;
    if (!sluice_redis_reply__to_int(claimed->element[i], &qi) || qi < 1 ||
        qi > n || !sluice_redis_reply__is_string(claimed->element[i + 1]) ||
        !sluice_redis_reply__to_int(claimed->element[i + 2], &count) ||
        claimed->element[i + 3]->type != REDIS_REPLY_STRING)
      goto unexpected;
    add_delivery(out, queues[qi - 1], claimed->element[i + 1],
                 sluice_redis_reply__steal_bytes(claimed->element[i + 3], 0),
                 (guint)CLAMP(count, 1, G_MAXUINT));
  }
  for (size_t i = 0; i < deleted->elements; i += 2) {
    gint64 qi, count;
    if (!sluice_redis_reply__to_int(deleted->element[i], &qi) || qi < 1 ||
        qi > n || !sluice_redis_reply__to_int(deleted->element[i + 1], &count))
      goto unexpected;
    sluice_broker_log(&self->parent, G_LOG_LEVEL_WARNING,
                      "reclaim: %" G_GINT64_FORMAT
                      " pending messages of queue “%s” had been deleted "
                      "from its stream before they were acknowledged "
                      "(trimmed or deleted by hand?); they are lost, and "
                      "were dropped from the pending list",
                      count, queues[qi - 1]);
  }
  freeReplyObject(reply);
  return TRUE;

unexpected:
  freeReplyObject(reply);
  return sluice_redis_broker__unexpected(self, "reclaim", error);
}

static gboolean
reliable_count_reclaimable(SluiceRedisBroker *self, const gchar *consumer,
                           const gchar *const *queues, guint max,
                           gint64 idle_ms, guint *out_n, GError **error)
{
  ReliableData *d = data_of(self);
  guint n = g_strv_length((gchar **)queues);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  *out_n = 0;
  if (max == 0 || n == 0)
    return TRUE;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3 + n, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, MIN(max, RECLAIM_MAX));
  sluice_redis_argv__add_int(&a, MAX(idle_ms, 1));
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval_script(self, &d->scripts.count_reclaimable,
                                        TRUE, &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_INTEGER || reply->integer < 0) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "count_reclaimable", error);
  }
  *out_n = (guint)MIN(reply->integer, (long long)max);
  freeReplyObject(reply);
  return TRUE;
}

/* ---- push_native --------------------------------------------------------- */

/* A plain enqueue batch (no claims, records or due times) as one XADD per
 * message, pipelined by the shared layer: what t_push_many does, without
 * Lua, whose per-argument cost is most of an enqueue's Redis CPU. XADD is
 * refused by a full Redis like the enqueue script is. */
static guint
reliable_push_native(SluiceRedisBroker *self, SluiceRedisConn *conn,
                     const gchar *queue, GBytes *const *payloads, guint n)
{
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_STREAM, queue);
  gsize key_len = strlen(key);

  for (guint i = 0; i < n; i++) {
    gsize len = 0;
    gconstpointer data = g_bytes_get_data(payloads[i], &len);
    const char *argv[5] = {"XADD", key, "*", "p", data != NULL ? data : ""};
    size_t lens[5] = {4, key_len, 1, 1, len};

    sluice_redis_conn__append(conn, 5, argv, lens);
  }
  return n;
}

/* ---- The transport ------------------------------------------------------- */

static const SluiceRedisTransport reliable_transport = {
    .name = "redis-reliable",
    .caps = SLUICE_BROKER_CAP_SHARED | SLUICE_BROKER_CAP_DURABLE |
            SLUICE_BROKER_CAP_LEASES | SLUICE_BROKER_CAP_FENCING |
            SLUICE_BROKER_CAP_IN_FLIGHT | SLUICE_BROKER_CAP_ORDERED,
    .lua = sluice_redis_lua__transport_reliable,
    .ack_is_noop = FALSE,
    .init = reliable_init,
    .finalize = reliable_finalize,
    .fetch = reliable_fetch,
    .reclaim = reliable_reclaim,
    .count_reclaimable = reliable_count_reclaimable,
    .push_native = reliable_push_native,
};

const SluiceRedisTransport *
sluice_redis__reliable_transport(void)
{
  return &reliable_transport;
}

void
sluice_redis__reliable_test_skip_priority_read(SluiceBroker *broker,
                                               gboolean skip)
{
  SluiceRedisBroker *self = (SluiceRedisBroker *)broker;
  ReliableData *d;

  g_return_if_fail(broker != NULL);
  g_return_if_fail(self->transport == &reliable_transport);
  d = data_of(self);
  g_mutex_lock(&d->lock);
  d->skip_priority_read = skip;
  g_mutex_unlock(&d->lock);
}

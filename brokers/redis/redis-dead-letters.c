/* redis-dead-letters.c - the Redis broker's slots for what operators read and
 * do: dead letters, stats, purge, pausing, worker announcements, task
 * lookup and the connection check.
 *
 * Dead letters are entries of one capped stream ({ns}:dlq), so their ids
 * are stream ids and listing is XRANGE; every change to them is a script
 * that keeps the per-reason counts exact. Stats is one read-only script.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"

/* ---- dead letters -------------------------------------------------------- */

/* A stream entry id as Redis prints it: digits, or digits-digits. */
static gboolean
valid_entry_id(const gchar *id)
{
  const gchar *p = id;
  gboolean dash = FALSE;

  if (id == NULL || !g_ascii_isdigit(*p) || strlen(id) > 41)
    return FALSE;
  for (; *p != '\0'; p++) {
    if (*p == '-' && !dash && g_ascii_isdigit(p[1]))
      dash = TRUE;
    else if (!g_ascii_isdigit(*p))
      return FALSE;
  }
  return TRUE;
}

/* One XRANGE element ([id, [field, value, ...]]) to a SluiceDeadLetter. */
SluiceDeadLetter *
sluice_redis_broker__dead_letter_from_reply(redisReply *entry)
{
  SluiceDeadLetter *dl;
  redisReply *fields;

  if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
      !sluice_redis_reply__is_string(entry->element[0]) ||
      entry->element[1]->type != REDIS_REPLY_ARRAY)
    return NULL;
  dl = sluice_dead_letter_new();
  dl->entry_id = sluice_redis_reply__dup(entry->element[0]);
  fields = entry->element[1];
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    redisReply *f = fields->element[i];
    redisReply *v = fields->element[i + 1];
    gint64 n;

    if (!sluice_redis_reply__is_string(f) || !sluice_redis_reply__is_string(v))
      continue;
#define FIELD_IS(name)                                                         \
  (f->len == strlen(name) && memcmp(f->str, name, f->len) == 0)
    if (FIELD_IS("payload")) {
      if (dl->payload != NULL)
        g_bytes_unref(dl->payload);
      dl->payload = sluice_redis_reply__steal_bytes(v, 0);
    } else if (FIELD_IS("task_id")) {
      g_free(dl->task_id);
      dl->task_id = sluice_redis_reply__dup(v);
    } else if (FIELD_IS("task")) {
      g_free(dl->task);
      dl->task = sluice_redis_reply__dup(v);
    } else if (FIELD_IS("reason")) {
      g_free(dl->reason);
      dl->reason = sluice_redis_reply__dup(v);
    } else if (FIELD_IS("detail")) {
      g_free(dl->detail);
      dl->detail = sluice_redis_reply__dup(v);
    } else if (FIELD_IS("source")) {
      g_free(dl->source);
      dl->source = sluice_redis_reply__dup(v);
    } else if (FIELD_IS("deliveries") && sluice_redis_reply__to_int(v, &n)) {
      dl->deliveries = (guint)CLAMP(n, 0, G_MAXUINT);
    } else if (FIELD_IS("at") && sluice_redis_reply__to_int(v, &n)) {
      dl->at = n;
    }
#undef FIELD_IS
  }
  if (dl->payload == NULL)
    dl->payload = g_bytes_new(NULL, 0);
  return dl;
}

static gboolean
dlq_range(SluiceRedisBroker *self, const gchar *what, const gchar *start,
          const gchar *end, guint count, GPtrArray *out, GError **error)
{
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_DLQ, NULL);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 6, 16);
  sluice_redis_argv__add_str(&a, "XRANGE");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__add_str(&a, start);
  sluice_redis_argv__add_str(&a, end);
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, count);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, what, TRUE, &a, 0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, what, error);
  }
  for (size_t i = 0; i < reply->elements; i++) {
    SluiceDeadLetter *dl =
        sluice_redis_broker__dead_letter_from_reply(reply->element[i]);
    if (dl != NULL)
      g_ptr_array_add(out, dl);
  }
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
                       GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gchar *start = NULL;

  if (after != NULL && !valid_entry_id(after)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a dead-letter entry id (they look like "
                "1700000000000-0): pass an entry_id from a previous listing, "
                "or NULL to start from the oldest",
                after);
    return FALSE;
  }
  /* "(" makes the start exclusive (Redis 6.2+). */
  start = after != NULL ? g_strconcat("(", after, NULL) : g_strdup("-");
  return dlq_range(self, "dlq_list", start, "+", limit, out, error);
}

gboolean
sluice_redis__dlq_get(SluiceBroker *broker, const gchar *entry_id,
                      SluiceDeadLetter **out_entry, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autoptr(GPtrArray) found =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);

  if (valid_entry_id(entry_id) &&
      !dlq_range(self, "dlq_get", entry_id, entry_id, 1, found, error))
    return FALSE;
  if (found->len == 0) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_NOT_FOUND,
                "no dead letter “%s” in namespace “%s”: it was replayed, "
                "deleted or dropped by the dead_letter_max cap",
                entry_id, self->keys.ns);
    return FALSE;
  }
  *out_entry = g_ptr_array_steal_index(found, 0);
  return TRUE;
}

gboolean
sluice_redis__dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                         SluiceSubmit *item, gboolean *out_found,
                         GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 found, existed;

  *out_found = FALSE;
  if (!valid_entry_id(entry_id))
    return TRUE;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 8, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, entry_id);
  sluice_redis_argv__add_submit(&a, item);
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__eval_pair(self, SLUICE_REDIS_SCRIPT_DLQ_REPLAY,
                                      "dlq_replay", &a, &found, &existed,
                                      error))
    return FALSE;
  *out_found = found == 1;
  item->existed = existed == 1;
  return TRUE;
}

gboolean
sluice_redis__dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                         gboolean *out_found, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 n;

  *out_found = FALSE;
  if (!valid_entry_id(entry_id))
    return TRUE;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, entry_id);
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__eval_integer(self, SLUICE_REDIS_SCRIPT_DLQ_DELETE,
                                         "dlq_delete", &a, &n, error))
    return FALSE;
  *out_found = n == 1;
  return TRUE;
}

/* The dead-letter trim of a namespace of partitions (redis-partitioned.c)
 * reads each partition's oldest entry and drops the namespace's oldest. A
 * drop is one step in its partition (DROP_LUA), counted by reason as the
 * partition's own cap counts. */
static const gchar DROP_LUA[] =
    "#!lua flags=allow-oom\n"
    "-- ARGV: entry_id. Drops it as the cap does: 1 if it was there.\n"
    "local e = redis.call('XRANGE', K_DLQ, ARGV[1], ARGV[1])\n"
    "if #e == 0 then return 0 end\n"
    "redis.call('HINCRBY', K_DLQ_DROPPED, dlq_remove(e[1]), 1)\n"
    "return 1\n";

gboolean
sluice_redis__dlq_oldest(SluiceBroker *broker, gint64 *out_count,
                         gchar **out_entry_id, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_DLQ, NULL);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  *out_count = 0;
  *out_entry_id = NULL;
  sluice_redis_argv__init(&a, 2, 0);
  sluice_redis_argv__add_str(&a, "XLEN");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "trimming the dead letters", TRUE, &a,
                                    0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  sluice_redis_reply__to_int(reply, out_count);
  freeReplyObject(reply);
  if (*out_count == 0)
    return TRUE;
  sluice_redis_argv__init(&a, 6, 0);
  sluice_redis_argv__add_str(&a, "XRANGE");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__add_str(&a, "-");
  sluice_redis_argv__add_str(&a, "+");
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_str(&a, "1");
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "trimming the dead letters", TRUE, &a,
                                    0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
      reply->element[0]->type == REDIS_REPLY_ARRAY &&
      reply->element[0]->elements >= 1 &&
      sluice_redis_reply__is_string(reply->element[0]->element[0]))
    *out_entry_id = sluice_redis_reply__dup(reply->element[0]->element[0]);
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__dlq_drop(SluiceBroker *broker, const gchar *entry_id,
                       gboolean *out_dropped, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisScript drop;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  *out_dropped = FALSE;
  /* Made per call: a trim is rare (a settle that buried past the cap), and
   * the script's text, hence its SHA, is the same every time, so the
   * server runs it by EVALSHA after the first. */
  sluice_redis_script__init(&drop, "dlq_drop", self->transport->lua, DROP_LUA);
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, entry_id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval_script(self, &drop, TRUE, &a, &reply, error);
  sluice_redis_argv__clear(&a);
  sluice_redis_script__clear(&drop);
  if (!ok)
    return FALSE;
  *out_dropped = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
  freeReplyObject(reply);
  return TRUE;
}

/* ---- admin --------------------------------------------------------------- */

gboolean
sluice_redis__stats(SluiceBroker *broker, const gchar *const *queues,
                    SluiceBrokerStats *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *depths, *reasons, *workers, *dropped;
  gint64 scheduled, dead, in_flight, stale;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 8, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  if (queues == NULL)
    sluice_redis_argv__add_str(&a, "*");
  else
    for (guint i = 0; queues[i] != NULL; i++)
      sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_STATS, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 8 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      !sluice_redis_reply__to_int(reply->element[1], &scheduled) ||
      !sluice_redis_reply__to_int(reply->element[2], &dead) ||
      reply->element[3]->type != REDIS_REPLY_ARRAY ||
      reply->element[4]->type != REDIS_REPLY_ARRAY ||
      reply->element[4]->elements % 3 != 0 ||
      !sluice_redis_reply__to_int(reply->element[5], &in_flight) ||
      !sluice_redis_reply__to_int(reply->element[6], &stale) ||
      reply->element[7]->type != REDIS_REPLY_ARRAY) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "stats", error);
  }
  depths = reply->element[0];
  reasons = reply->element[3];
  workers = reply->element[4];
  dropped = reply->element[7];
  for (size_t i = 0; i + 1 < depths->elements; i += 2) {
    g_autofree gchar *name = sluice_redis_reply__dup(depths->element[i]);
    gint64 n = 0;
    sluice_redis_reply__to_int(depths->element[i + 1], &n);
    sluice_broker_stats_add_queue(out, name, n);
  }
  for (size_t i = 0; i + 1 < reasons->elements; i += 2) {
    g_autofree gchar *reason = sluice_redis_reply__dup(reasons->element[i]);
    gint64 n = 0;
    if (sluice_redis_reply__to_int(reasons->element[i + 1], &n) && n > 0)
      sluice_broker_stats_add_dead_letters(out, reason, n);
  }
  for (size_t i = 0; i + 2 < workers->elements; i += 3) {
    g_autofree gchar *worker = sluice_redis_reply__dup(workers->element[i]);
    redisReply *info = workers->element[i + 2];
    g_autoptr(GBytes) bytes = NULL;
    gint64 seen = 0;

    sluice_redis_reply__to_int(workers->element[i + 1], &seen);
    if (info->type == REDIS_REPLY_STRING)
      bytes = sluice_redis_reply__steal_bytes(info, 0);
    sluice_broker_stats_add_worker_info(out, worker, seen, bytes != NULL,
                                        bytes);
  }
  for (size_t i = 0; i + 1 < dropped->elements; i += 2) {
    g_autofree gchar *reason = sluice_redis_reply__dup(dropped->element[i]);
    gint64 n = 0;
    if (sluice_redis_reply__to_int(dropped->element[i + 1], &n) && n > 0)
      sluice_broker_stats_add_dropped(out, reason, n);
  }
  out->scheduled = scheduled;
  out->dead_letters = dead;
  out->in_flight = in_flight;
  /* The namespace's counter (every process's fenced settles), or this
   * broker's own if that is higher (the key was deleted by hand). */
  out->stale_settles = MAX(stale, g_atomic_int_get(&self->stale_settles));
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__purge(SluiceBroker *broker, const gchar *queue,
                    guint64 *out_removed, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 n;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, queue);
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__eval_integer(self, SLUICE_REDIS_SCRIPT_PURGE,
                                         "purge", &a, &n, error))
    return FALSE;
  *out_removed = (guint64)MAX(n, 0);
  return TRUE;
}

/* Paused queues are one set: SADD and SREM are harmless to repeat, and
 * the workers read it with SMEMBERS about once a second. */
gboolean
sluice_redis__set_paused(SluiceBroker *broker, const gchar *queue,
                         gboolean paused, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_PAUSED, NULL);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 3, 0);
  sluice_redis_argv__add_str(&a, paused ? "SADD" : "SREM");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__add_str(&a, queue);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, paused ? "pause" : "resume", TRUE, &a,
                                    0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

gboolean
sluice_redis__list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_PAUSED, NULL);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 2, 0);
  sluice_redis_argv__add_str(&a, "SMEMBERS");
  sluice_redis_argv__add_str(&a, key);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "list_paused", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "list_paused", error);
  }
  for (size_t i = 0; i < reply->elements; i++)
    if (sluice_redis_reply__is_string(reply->element[i]))
      g_ptr_array_add(out, sluice_redis_reply__dup(reply->element[i]));
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__announce(SluiceBroker *broker, const gchar *consumer,
                       GBytes *info, gint64 ttl_ms, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 4, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, sluice_redis_broker__now_ms(self));
  sluice_redis_argv__add_int(&a, MAX(ttl_ms, 1));
  sluice_redis_argv__add_bytes(&a, info);
  sluice_redis_argv__finish(&a);
  return sluice_redis_broker__eval_void(self, SLUICE_REDIS_SCRIPT_ANNOUNCE,
                                        TRUE, &a, error);
}

gboolean
sluice_redis__lookup_task(SluiceBroker *broker, const gchar *id,
                          SluiceTaskLocation *out, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 place = 0;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_LOOKUP, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
      !sluice_redis_reply__to_int(reply->element[0], &place))
    goto unexpected;
  if (place == 1) {
    if (reply->elements != 4 ||
        !sluice_redis_reply__to_int(reply->element[1], &out->due_at) ||
        !sluice_redis_reply__is_string(reply->element[2]) ||
        reply->element[3]->type != REDIS_REPLY_STRING)
      goto unexpected;
    out->place = SLUICE_TASK_PLACE_SCHEDULED;
    out->queue = sluice_redis_reply__dup(reply->element[2]);
    out->payload = sluice_redis_reply__steal_bytes(reply->element[3], 0);
  } else if (place == 2) {
    if (reply->elements != 2 ||
        (out->dead_letter = sluice_redis_broker__dead_letter_from_reply(
             reply->element[1])) == NULL)
      goto unexpected;
    out->place = SLUICE_TASK_PLACE_DEAD;
  }
  freeReplyObject(reply);
  return TRUE;

unexpected:
  freeReplyObject(reply);
  return sluice_redis_broker__unexpected(self, "lookup_task", error);
}

/* A PING on a connection of the pool: making the connection checks the
 * credentials and the namespace's mode (see the pool's handshake). */
gboolean
sluice_redis__check(SluiceBroker *broker, GError **error)
{
  return sluice_redis_broker__ping(SLUICE_REDIS_BROKER(broker), "PING", error);
}

/* redis-dead-letters.c - the Redis broker's dead-letter slots: list,
 * read, replay and delete, and the two a namespace of partitions uses to
 * trim its parts (dlq_oldest, dlq_drop).
 *
 * Dead letters are entries of one capped stream ({ns}:dlq), so their ids
 * are stream ids and listing is XRANGE; every change to them is a script
 * that keeps the per-reason counts exact.
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

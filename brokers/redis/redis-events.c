/* redis-events.c - the Redis broker's events and progress slots: events
 * are a stream, appended by a script that trims it and read with XREAD,
 * which blocks; progress is a string per task with a PX expiry, plain SET
 * and GET (no script needed: the key is in the namespace's hash tag).
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"

/* ---- progress ------------------------------------------------------------ */

gboolean
sluice_redis__put_progress(SluiceBroker *broker, const gchar *id,
                           GBytes *progress, gint64 ttl_ms, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 5, 64);
  sluice_redis_argv__add_str(&a, "SET");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_PROGRESS, id);
  sluice_redis_argv__add_bytes(&a, progress);
  sluice_redis_argv__add_str(&a, "PX");
  sluice_redis_argv__add_int(&a, ttl_ms);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "put_progress", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

gboolean
sluice_redis__get_progress(SluiceBroker *broker, const gchar *id,
                           GBytes **out_progress, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 2, 64);
  sluice_redis_argv__add_str(&a, "GET");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_PROGRESS, id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "get_progress", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type == REDIS_REPLY_STRING)
    *out_progress = sluice_redis_reply__steal_bytes(reply, 0);
  else if (reply->type != REDIS_REPLY_NIL) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "get_progress", error);
  }
  freeReplyObject(reply);
  return TRUE;
}

/* ---- events -------------------------------------------------------------- */

gboolean
sluice_redis__append_events(SluiceBroker *broker, GBytes *const *events,
                            guint n, guint max_len, gint64 max_age_ms,
                            gint64 now_ms G_GNUC_UNUSED, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2 + n, n * 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, max_len);
  /* The age is Redis's to measure: its clock stamped the entries. */
  sluice_redis_argv__add_int(&a, max_age_ms);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_bytes(&a, events[i]);
  sluice_redis_argv__finish(&a);
  /* Not repeated on a lost connection: a repeat would append twice. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_EVENTS_APPEND, FALSE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (ok)
    freeReplyObject(reply);
  return ok;
}

/* A stream id, "MS-SEQ" (or "MS", which Redis reads as MS-0). */
static gboolean
is_stream_id(const gchar *s)
{
  const gchar *dash = strchr(s, '-');
  gsize ms_len = dash != NULL ? (gsize)(dash - s) : strlen(s);

  if (ms_len == 0 || ms_len > 20 || strspn(s, "0123456789") != ms_len)
    return FALSE;
  if (dash == NULL)
    return TRUE;
  return dash[1] != '\0' && strlen(dash + 1) <= 20 &&
         strspn(dash + 1, "0123456789") == strlen(dash + 1);
}

/* Whether stream id @a (is_stream_id()) comes after @b. */
static gboolean
stream_id_after(const gchar *a, const gchar *b)
{
  const gchar *da = strchr(a, '-'), *db = strchr(b, '-');
  guint64 ma = g_ascii_strtoull(a, NULL, 10),
          mb = g_ascii_strtoull(b, NULL, 10);
  guint64 sa = da != NULL ? g_ascii_strtoull(da + 1, NULL, 10) : 0;
  guint64 sb = db != NULL ? g_ascii_strtoull(db + 1, NULL, 10) : 0;

  return ma > mb || (ma == mb && sa > sb);
}

/* FALSE with INVALID when @cursor is ahead of the newest event kept: it
 * was never handed out. (An empty stream cannot tell: its events may all
 * have been trimmed.) Asked only after a read found nothing, so a reader
 * that keeps up pays for it only while idle. */
static gboolean
check_cursor_known(SluiceRedisBroker *self, const gchar *cursor, GError **error)
{
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 6, 64);
  sluice_redis_argv__add_str(&a, "XREVRANGE");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_EVENTS, NULL);
  sluice_redis_argv__add_str(&a, "+");
  sluice_redis_argv__add_str(&a, "-");
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, 1);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "read_events", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
      reply->element[0]->type == REDIS_REPLY_ARRAY &&
      reply->element[0]->elements == 2 &&
      reply->element[0]->element[0]->type == REDIS_REPLY_STRING &&
      stream_id_after(cursor, reply->element[0]->element[0]->str)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "events cursor %s is unknown: no event has reached it (the "
                "newest is %s); pass one a read returned",
                cursor, reply->element[0]->element[0]->str);
    ok = FALSE;
  }
  freeReplyObject(reply);
  return ok;
}

gboolean
sluice_redis__read_events(SluiceBroker *broker, const gchar *cursor,
                          guint limit, gint64 block_ms, GPtrArray *out,
                          gchar **out_cursor, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  const gchar *last = cursor != NULL ? cursor : "0-0";
  gboolean ok;

  if (!is_stream_id(last)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not an events cursor of this broker (a stream id, "
                "MS-SEQ): pass one a read returned, or none to start from "
                "the oldest",
                cursor);
    return FALSE;
  }
  sluice_redis_argv__init(&a, 8, 64);
  sluice_redis_argv__add_str(&a, "XREAD");
  if (block_ms > 0) {
    sluice_redis_argv__add_str(&a, "BLOCK");
    sluice_redis_argv__add_int(&a, block_ms);
  }
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, limit);
  sluice_redis_argv__add_str(&a, "STREAMS");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_EVENTS, NULL);
  sluice_redis_argv__add_str(&a, last);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "read_events", TRUE, &a, block_ms,
                                    &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  /* nil (nothing new) or [[key, [[id, [field, value, ...]], ...]]] */
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
      reply->element[0]->type == REDIS_REPLY_ARRAY &&
      reply->element[0]->elements == 2 &&
      reply->element[0]->element[1]->type == REDIS_REPLY_ARRAY) {
    redisReply *entries = reply->element[0]->element[1];
    for (gsize i = 0; i < entries->elements; i++) {
      redisReply *e = entries->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
          e->element[0]->type != REDIS_REPLY_STRING ||
          e->element[1]->type != REDIS_REPLY_ARRAY ||
          e->element[1]->elements != 2 ||
          e->element[1]->element[1]->type != REDIS_REPLY_STRING)
        continue;
      {
        g_autoptr(GBytes) event =
            sluice_redis_reply__steal_bytes(e->element[1]->element[1], 0);
        g_ptr_array_add(out, sluice_event_entry_new(e->element[0]->str, event));
        last = e->element[0]->str;
      }
    }
    *out_cursor = g_strdup(last);
  } else if (reply->type == REDIS_REPLY_NIL ||
             (reply->type == REDIS_REPLY_ARRAY && reply->elements == 0)) {
    freeReplyObject(reply);
    if (cursor != NULL && !check_cursor_known(self, cursor, error))
      return FALSE;
    *out_cursor = g_strdup(last);
    return TRUE;
  } else {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "read_events", error);
  }
  freeReplyObject(reply);
  return TRUE;
}

/* redis-joins.c - the version-4 slots of the Redis brokers: events (a
 * stream, appended by a script that trims it, read with XREAD, which
 * blocks), progress (a
 * string per task, PX, plain SET and GET: no script needed, the key is in
 * the namespace's hash tag), and joins, one Lua
 * script each (lua/join_open.lua, join_arrive.lua, join_read.lua), on one
 * hash per join in the namespace's hash tag. Both transports share them:
 * a release pushes through the transport's t_push.
 *
 * Repeats: join_open is safe to repeat (a second call finds the first
 * join and writes nothing), and so is join_arrive (a member stored once is
 * never counted again), so both are repeated once on a fresh connection
 * when one breaks mid-call.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"

gboolean
sluice_redis__join_open(SluiceBroker *broker, const SluiceJoinSpec *joins,
                        guint n_joins, SluiceSubmit *items, guint n_items,
                        gboolean *out_existed, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  guint n_args = 1;
  gint64 existed = 0;
  gboolean ok;

  for (guint i = 0; i < n_joins; i++)
    n_args += 5 + 2 * joins[i].n_release;
  n_args += 8 * n_items;
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + n_args,
                          n_items * 48 + n_joins * 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_joins);
  for (guint i = 0; i < n_joins; i++) {
    const SluiceJoinSpec *j = &joins[i];

    sluice_redis_argv__add_str(&a, j->id);
    sluice_redis_argv__add_int(&a, j->total);
    sluice_redis_argv__add_int(&a, MAX(j->ttl_ms, 1));
    if (j->meta != NULL)
      sluice_redis_argv__add_bytes(&a, j->meta);
    else
      sluice_redis_argv__add(&a, "", 0);
    sluice_redis_argv__add_int(&a, j->n_release);
    for (guint k = 0; k < j->n_release; k++) {
      sluice_redis_argv__add_str(&a, j->release[k].queue);
      sluice_redis_argv__add_bytes(&a, j->release[k].payload);
    }
  }
  for (guint i = 0; i < n_items; i++) {
    const SluiceSubmit *item = &items[i];

    if (item->due_at <= 0 && item->record == NULL) {
      sluice_redis_argv__add(&a, "r", 1);
      sluice_redis_argv__add_str(&a, item->queue);
      sluice_redis_argv__add_bytes(&a, item->payload);
    } else {
      sluice_redis_argv__add(&a, "s", 1);
      sluice_redis_argv__add_submit(&a, item);
    }
  }
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_JOIN_OPEN, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!sluice_redis_reply__to_int(reply, &existed)) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_open", error);
  }
  freeReplyObject(reply);
  *out_existed = existed == 1;
  return TRUE;
}

gboolean
sluice_redis__join_arrive(SluiceBroker *broker, SluiceJoinArrival *items,
                          guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 4 * n_items,
                          n_items * 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_int(&a, n_items);
  for (guint i = 0; i < n_items; i++) {
    sluice_redis_argv__add_str(&a, items[i].join_id);
    sluice_redis_argv__add_int(&a, items[i].member);
    sluice_redis_argv__add_bytes(&a, items[i].outcome);
    sluice_redis_argv__add_int(&a, items[i].step);
  }
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_JOIN_ARRIVE, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!sluice_redis_reply__is_string(reply) || reply->len != n_items) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_arrive", error);
  }
  for (guint i = 0; i < n_items; i++) {
    items[i].counted = reply->str[i] != '0';
    items[i].released = reply->str[i] == '2';
  }
  freeReplyObject(reply);
  return TRUE;
}

/* HGETALL of the join's outcomes, after its header was read: an arrival in
 * between may add one the header did not count, which no reader minds. */
static gboolean
read_outcomes(SluiceRedisBroker *self, const gchar *join_id, gint64 total,
              SluiceJoinState *out, GError **error)
{
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  g_autofree gchar *suffix = g_strconcat(join_id, ":o", NULL);
  gboolean ok;

  sluice_redis_argv__init(&a, 2, 64);
  sluice_redis_argv__add_str(&a, "HGETALL");
  sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_JOIN, suffix);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__command(self, "join_read", TRUE, &a, 0, &reply,
                                    error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 0) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_read", error);
  }
  out->outcomes =
      g_ptr_array_new_full((guint)total, (GDestroyNotify)g_bytes_unref);
  g_ptr_array_set_size(out->outcomes, (gint)total);
  for (gsize i = 0; i + 1 < reply->elements; i += 2) {
    gint64 member = -1;
    if (sluice_redis_reply__to_int(reply->element[i], &member) && member >= 0 &&
        member < total && reply->element[i + 1]->type == REDIS_REPLY_STRING &&
        g_ptr_array_index(out->outcomes, member) == NULL)
      g_ptr_array_index(out->outcomes, member) =
          sluice_redis_reply__steal_bytes(reply->element[i + 1], 0);
  }
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__join_read(SluiceBroker *broker, const gchar *join_id,
                        gboolean with_outcomes, SluiceJoinState *out,
                        gboolean *out_found, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gint64 total = 0, arrived = 0, status = 0;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1, 64);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, join_id);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_JOIN_READ, TRUE, &a,
                                 &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY ||
      (reply->elements != 0 &&
       (reply->elements != 4 ||
        !sluice_redis_reply__to_int(reply->element[0], &total) ||
        !sluice_redis_reply__to_int(reply->element[1], &arrived) ||
        !sluice_redis_reply__to_int(reply->element[2], &status) || total < 0 ||
        total > G_MAXUINT32 || status < 0 || status > 2))) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "join_read", error);
  }
  *out_found = reply->elements > 0;
  if (*out_found) {
    out->total = (guint)total;
    out->arrived = (guint)arrived;
    out->status = (SluiceJoinStatus)status;
    if (reply->element[3]->len > 0)
      out->meta = sluice_redis_reply__steal_bytes(reply->element[3], 0);
  }
  freeReplyObject(reply);
  if (*out_found && with_outcomes)
    return read_outcomes(self, join_id, total, out, error);
  return TRUE;
}

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

gboolean
sluice_redis__join_grow(SluiceBroker *broker, const gchar *join_id,
                        guint expected_total, guint by, SluiceSubmit *items,
                        guint n_items, guint *out_total, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 total = 0;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3 + 7 * n_items,
                          n_items * 48);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, join_id);
  sluice_redis_argv__add_int(&a, expected_total);
  sluice_redis_argv__add_int(&a, by);
  for (guint i = 0; i < n_items; i++)
    sluice_redis_argv__add_submit(&a, &items[i]);
  sluice_redis_argv__finish(&a);
  /* Not repeated on a lost connection: the repeat would find the total
   * grown and report a conflict for what in fact succeeded. */
  if (!sluice_redis_broker__eval_integer(self, SLUICE_REDIS_SCRIPT_JOIN_GROW,
                                         "join_grow", &a, &total, error))
    return FALSE;
  *out_total = (guint)CLAMP(total, 0, G_MAXUINT32);
  return TRUE;
}

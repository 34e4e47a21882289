/* redis-steering.c - the Redis broker's steering slots, what operators do
 * to a namespace: list and remove queued messages, list the schedule and
 * move an entry on it, pause and resume queues, purge a queue, rewrite the
 * bytes of waiting messages (queued, scheduled, dead). A listing
 * looks without moving anything; every change is one script, so it is
 * atomic against the workers fetching from the same queues.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"

/* ---- look ---------------------------------------------------------------- */

/* One read-only script: the transport's t_peek, one range read of the
 * queue (LRANGE or XRANGE with a count), never a scan. */
gboolean
sluice_redis__list_queued(SluiceBroker *broker, const gchar *queue,
                          const gchar *cursor, guint limit, GPtrArray *out,
                          gchar **out_cursor, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3, 16);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, queue);
  sluice_redis_argv__add_str(&a, cursor != NULL ? cursor : "");
  sluice_redis_argv__add_int(&a, limit);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_LIST_QUEUED, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "list_queued", error);
  }
  if (reply->element[0]->type == REDIS_REPLY_NIL) {
    freeReplyObject(reply);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a cursor of a listing of queue “%s” in this "
                "mode: pass the cursor a previous page returned, or none to "
                "start at the next message to be fetched",
                cursor, queue);
    return FALSE;
  }
  if (!sluice_redis_reply__is_string(reply->element[0])) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "list_queued", error);
  }
  /* Payload and handle pairs; '' is no handle (a list's element). */
  if (reply->elements % 2 != 1) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "list_queued", error);
  }
  for (size_t i = 1; i + 1 < reply->elements; i += 2) {
    g_autoptr(GBytes) payload = NULL;
    g_autofree gchar *handle = NULL;
    SluiceListedMessage *m;

    if (reply->element[i]->type != REDIS_REPLY_STRING ||
        !sluice_redis_reply__is_string(reply->element[i + 1]))
      continue;
    payload = sluice_redis_reply__steal_bytes(reply->element[i], 0);
    if (reply->element[i + 1]->len > 0)
      handle = sluice_redis_reply__dup(reply->element[i + 1]);
    m = sluice_listed_message_new(NULL, queue, payload, 0);
    sluice_listed_message_set_handle(m, handle);
    g_ptr_array_add(out, m);
  }
  *out_cursor = reply->element[0]->len > 0
                    ? sluice_redis_reply__dup(reply->element[0])
                    : NULL;
  freeReplyObject(reply);
  return TRUE;
}

/* One script for the batch: each item is the transport's t_remove and,
 * if it took the message, the record, in the script's one atomic step. */
gboolean
sluice_redis__remove_queued(SluiceBroker *broker, SluiceRemoval *items,
                            guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 6 * n_items,
                          64 * n_items);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  for (guint i = 0; i < n_items; i++) {
    const SluiceRemoval *r = &items[i];

    sluice_redis_argv__add_str(&a, r->queue);
    sluice_redis_argv__add_str(&a, r->handle != NULL ? r->handle : "");
    sluice_redis_argv__add_bytes(&a, r->payload);
    sluice_redis_argv__add_str(&a, r->id != NULL ? r->id : "");
    sluice_redis_argv__add_record(&a, r->id != NULL ? r->record : NULL, TRUE);
    sluice_redis_argv__add_record_ttl(&a, r->record_ttl_ms);
  }
  sluice_redis_argv__finish(&a);
  /* Safe to repeat: a message taken out is not ready any more. */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_REMOVE_QUEUED, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n_items) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "remove_queued", error);
  }
  for (guint i = 0; i < n_items; i++) {
    gint64 v = 0;
    items[i].removed =
        sluice_redis_reply__to_int(reply->element[i], &v) && v == 1;
  }
  freeReplyObject(reply);
  return TRUE;
}

/* One script for the batch (lua/replace_payloads.lua), each item atomic
 * on its own: a queued message through the transport's t_replace, a
 * scheduled one's payload in the schedule's hash, a dead letter added again
 * with its other fields as they were. The payloads are compared and
 * written as bytes, never read. */
gboolean
sluice_redis__replace_payloads(SluiceBroker *broker, SluiceReplacement *items,
                               guint n_items, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 5 * n_items,
                          64 * n_items);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  for (guint i = 0; i < n_items; i++) {
    const SluiceReplacement *r = &items[i];
    const gchar *place = r->place == SLUICE_WAITING_QUEUED      ? "q"
                         : r->place == SLUICE_WAITING_SCHEDULED ? "s"
                         : r->place == SLUICE_WAITING_DEAD      ? "d"
                                                                : "";

    sluice_redis_argv__add_str(&a, place);
    sluice_redis_argv__add_str(&a, r->queue != NULL ? r->queue : "");
    sluice_redis_argv__add_str(&a, r->handle != NULL ? r->handle : "");
    sluice_redis_argv__add_bytes(&a, r->payload);
    sluice_redis_argv__add_bytes(&a, r->replacement);
  }
  sluice_redis_argv__finish(&a);
  /* Safe to repeat: after a replacement the message no longer holds
   * @payload, so the second call changes nothing (and reports it not
   * replaced, as the contract allows for a call whose reply was lost). */
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_REPLACE_PAYLOADS,
                                 TRUE, &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n_items) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "replace_payloads", error);
  }
  for (guint i = 0; i < n_items; i++) {
    gint64 v = 0;
    items[i].replaced =
        sluice_redis_reply__to_int(reply->element[i], &v) && v == 1;
  }
  freeReplyObject(reply);
  return TRUE;
}

/* A schedule cursor is "<due>:<id>" of the last entry listed: ids may hold
 * colons, due times never do. */
gboolean
sluice_redis__list_scheduled(SluiceBroker *broker, const gchar *cursor,
                             guint limit, GPtrArray *out, gchar **out_cursor,
                             GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  g_autofree gchar *due = NULL;
  const gchar *id = "";
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  if (cursor != NULL) {
    const gchar *colon = strchr(cursor, ':');
    gint64 n;

    due = colon != NULL ? g_strndup(cursor, colon - cursor) : NULL;
    if (due == NULL || colon[1] == '\0' ||
        !g_ascii_string_to_signed(due, 10, 0, G_MAXINT64, &n, NULL)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "“%s” is not a cursor of a schedule listing: pass the "
                  "cursor a previous page returned, or none to start at the "
                  "earliest",
                  cursor);
      return FALSE;
    }
    id = colon + 1;
  }
  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3, 16);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__add_str(&a, due != NULL ? due : "0");
  sluice_redis_argv__add_int(&a, limit);
  sluice_redis_argv__finish(&a);
  ok = sluice_redis_broker__eval(self, SLUICE_REDIS_SCRIPT_LIST_SCHEDULED, TRUE,
                                 &a, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
      (reply->elements - 2) % 4 != 0 ||
      !sluice_redis_reply__is_string(reply->element[0]) ||
      !sluice_redis_reply__is_string(reply->element[1])) {
    freeReplyObject(reply);
    return sluice_redis_broker__unexpected(self, "list_scheduled", error);
  }
  for (size_t i = 2; i + 3 < reply->elements; i += 4) {
    g_autofree gchar *entry = NULL;
    g_autofree gchar *queue = NULL;
    g_autoptr(GBytes) payload = NULL;
    gint64 at = 0;

    if (!sluice_redis_reply__is_string(reply->element[i]) ||
        !sluice_redis_reply__to_int(reply->element[i + 1], &at) ||
        reply->element[i + 3]->type != REDIS_REPLY_STRING)
      continue;
    entry = sluice_redis_reply__dup(reply->element[i]);
    queue = sluice_redis_reply__dup(reply->element[i + 2]);
    payload = sluice_redis_reply__steal_bytes(reply->element[i + 3], 0);
    g_ptr_array_add(out, sluice_listed_message_new(entry, queue, payload, at));
  }
  if (reply->element[0]->len > 0) {
    g_autofree gchar *last = sluice_redis_reply__dup(reply->element[0]);
    gint64 at = 0;

    sluice_redis_reply__to_int(reply->element[1], &at);
    *out_cursor = g_strdup_printf("%" G_GINT64_FORMAT ":%s", at, last);
  }
  freeReplyObject(reply);
  return TRUE;
}

gboolean
sluice_redis__reschedule(SluiceBroker *broker, const gchar *id, gint64 due_at,
                         gboolean *out_found, GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  SluiceRedisArgv a;
  gint64 n;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2, 32);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, id);
  sluice_redis_argv__add_int(&a, due_at);
  sluice_redis_argv__finish(&a);
  /* Not repeated: a lost reply may have moved it already, and the second
   * call would then report it missing. */
  if (!sluice_redis_broker__eval_integer(self, SLUICE_REDIS_SCRIPT_RESCHEDULE,
                                         "reschedule", &a, &n, error))
    return FALSE;
  *out_found = n == 1;
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

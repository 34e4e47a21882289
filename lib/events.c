/* events.c - the lifecycle events of tasks (sluice-events.h): their bytes,
 * the producer's "enqueued" events, and reading the stream (for
 * sluice_client_read_events(), client-steer.c).
 *
 * Workers write theirs through the settler, in the batches of their
 * settlements (settler.c), so a task's events keep their order.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

static const gchar *const kind_names[] = {
    "enqueued", "started",       "progress",  "retried", "succeeded",
    "failed",   "dead_lettered", "cancelled", "unknown",
};
G_STATIC_ASSERT(G_N_ELEMENTS(kind_names) == SLUICE_EVENT_UNKNOWN + 1);

const gchar *
sluice_event_kind_to_string(SluiceEventKind kind)
{
  if ((guint)kind > SLUICE_EVENT_UNKNOWN)
    kind = SLUICE_EVENT_UNKNOWN;
  return kind_names[kind];
}

static void
pack_str(msgpack_packer *pk, const gchar *s)
{
  gsize len = strlen(s);

  msgpack_pack_str(pk, len);
  msgpack_pack_str_body(pk, s, len);
}

GBytes *
sluice_events__encode(SluiceEventKind kind, const SluiceEnvelope *env,
                      gint64 at, const gchar *detail, gdouble progress,
                      const gchar *worker)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  GBytes *bytes;
  guint n =
      6 + (detail != NULL) + (kind == SLUICE_EVENT_PROGRESS) + (worker != NULL);

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, n);
  pack_str(&pk, "k");
  pack_str(&pk, sluice_event_kind_to_string(kind));
  pack_str(&pk, "id");
  pack_str(&pk, env->id);
  pack_str(&pk, "task");
  pack_str(&pk, env->task);
  pack_str(&pk, "queue");
  pack_str(&pk, env->queue);
  pack_str(&pk, "attempt");
  msgpack_pack_uint32(&pk, env->attempt);
  pack_str(&pk, "at");
  msgpack_pack_int64(&pk, at);
  if (detail != NULL) {
    /* Cut at a character: a dead letter's detail may be long. */
    const gchar *end = detail + MIN(strlen(detail), 512);
    g_utf8_validate(detail, (gssize)(end - detail), &end);
    pack_str(&pk, "detail");
    msgpack_pack_str(&pk, (gsize)(end - detail));
    msgpack_pack_str_body(&pk, detail, (gsize)(end - detail));
  }
  if (kind == SLUICE_EVENT_PROGRESS) {
    pack_str(&pk, "progress");
    msgpack_pack_double(&pk, progress);
  }
  if (worker != NULL) {
    pack_str(&pk, "worker");
    pack_str(&pk, worker);
  }
  bytes = g_bytes_new(buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
  return bytes;
}

void
sluice_events__enqueued(SluiceBroker *broker, SluiceEnvelope *const *envs,
                        guint n, gint64 now)
{
  g_autoptr(GPtrArray) events =
      g_ptr_array_new_full(n, (GDestroyNotify)g_bytes_unref);
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < n; i++)
    g_ptr_array_add(events, sluice_events__encode(SLUICE_EVENT_ENQUEUED,
                                                  envs[i], now, NULL, 0, NULL));
  if (!sluice_broker_append_events(broker, (GBytes *const *)events->pdata, n,
                                   SLUICE_EVENTS_MAX_LEN,
                                   SLUICE_EVENTS_MAX_AGE_MS, now, &error))
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "could not write %u “enqueued” events: %s", n,
                        error->message);
}

/* ---- Reading ------------------------------------------------------------- */

void
sluice_event_free(SluiceEvent *event)
{
  if (event == NULL)
    return;
  g_free(event->cursor);
  g_free(event->task_id);
  g_free(event->task);
  g_free(event->queue);
  g_free(event->detail);
  g_free(event->worker);
  g_free(event);
}

static gboolean
key_is(const msgpack_object *k, const gchar *name)
{
  gsize len = strlen(name);
  return k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
         memcmp(k->via.str.ptr, name, len) == 0;
}

/* A string field, if it is valid text. */
static gchar *
text_of(const msgpack_object *v)
{
  if (v->type != MSGPACK_OBJECT_STR ||
      !g_utf8_validate_len(v->via.str.ptr, v->via.str.size, NULL))
    return NULL;
  return g_strndup(v->via.str.ptr, v->via.str.size);
}

static SluiceEvent *
decode(const SluiceEventEntry *entry)
{
  SluiceEvent *e = g_new0(SluiceEvent, 1);
  msgpack_zone zone;
  msgpack_object o;
  gsize len, off = 0;
  const gchar *data = g_bytes_get_data(entry->event, &len);

  e->cursor = g_strdup(entry->cursor);
  e->kind = SLUICE_EVENT_UNKNOWN;
  msgpack_zone_init(&zone, 512);
  if (msgpack_unpack(data, len, &off, &zone, &o) == MSGPACK_UNPACK_SUCCESS &&
      o.type == MSGPACK_OBJECT_MAP) {
    for (guint32 i = 0; i < o.via.map.size; i++) {
      const msgpack_object *k = &o.via.map.ptr[i].key;
      const msgpack_object *v = &o.via.map.ptr[i].val;

      if (key_is(k, "k")) {
        for (guint j = 0; j < SLUICE_EVENT_UNKNOWN; j++)
          if (key_is(v, kind_names[j]))
            e->kind = (SluiceEventKind)j;
      } else if (key_is(k, "id") && e->task_id == NULL) {
        e->task_id = text_of(v);
      } else if (key_is(k, "task") && e->task == NULL) {
        e->task = text_of(v);
      } else if (key_is(k, "queue") && e->queue == NULL) {
        e->queue = text_of(v);
      } else if (key_is(k, "detail") && e->detail == NULL) {
        e->detail = text_of(v);
      } else if (key_is(k, "worker") && e->worker == NULL) {
        e->worker = text_of(v);
      } else if (key_is(k, "attempt") &&
                 v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        e->attempt = (guint)MIN(v->via.u64, G_MAXUINT32);
      } else if (key_is(k, "at") &&
                 v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        e->at = (gint64)MIN(v->via.u64, (guint64)G_MAXINT64);
      } else if (key_is(k, "progress") && (v->type == MSGPACK_OBJECT_FLOAT64 ||
                                           v->type == MSGPACK_OBJECT_FLOAT32)) {
        e->progress = CLAMP(v->via.f64, 0.0, 1.0);
      }
    }
  }
  msgpack_zone_destroy(&zone);
  if (e->task_id == NULL)
    e->task_id = g_strdup("");
  return e;
}

GPtrArray *
sluice_events__read(SluiceBroker *broker, const gchar *cursor, guint limit,
                    gint64 block_ms, gchar **out_cursor, GError **error)
{
  g_autoptr(GPtrArray) entries = NULL;
  GPtrArray *out;

  *out_cursor = NULL;
  entries =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_event_entry_free);
  if (!sluice_broker_read_events(broker, cursor, MAX(limit, 1), block_ms,
                                 entries, out_cursor, error))
    return NULL;
  out = g_ptr_array_new_full(entries->len, (GDestroyNotify)sluice_event_free);
  for (guint i = 0; i < entries->len; i++)
    g_ptr_array_add(out, decode(g_ptr_array_index(entries, i)));
  return out;
}

/* info.c - what a worker announces about itself, as bytes.
 *
 * A worker tells the broker, every couple of seconds, who it is (host, pid),
 * what it serves (queues, task names) and how it is doing (slots, tasks
 * running and which, counts since it started); `stats`, `sluice enqueue` (is
 * anyone serving this task name?), `sluice ls --state running` and operators
 * read it back. The broker stores the bytes untouched (the `announce` slot),
 * so the encoding is the core's alone: a msgpack map with short string keys,
 * version `v` 1. A reader ignores keys it does not know, so fields can be
 * added.
 *
 * The bytes come back from a shared store, so decoding is defensive: a
 * bounded reader, every field optional, anything malformed ignored (an
 * unreadable announcement only makes a worker show without details).
 */
#include "config.h"

#include <string.h>

#include <msgpack.h>

#include "lib/sluice-private.h"
#include "serializers/mp-reader.h"

#define INFO_VERSION 1
/* Limits on what a decoded announcement may hold, whatever it claims. */
#define MAX_LIST 4096
#define MAX_STRING 1024

static void
pack_str(msgpack_packer *pk, const gchar *s)
{
  gsize len = s != NULL ? strlen(s) : 0;

  msgpack_pack_str(pk, len);
  msgpack_pack_str_body(pk, s != NULL ? s : "", len);
}

static void
pack_key(msgpack_packer *pk, const gchar *key)
{
  pack_str(pk, key);
}

static void
pack_strv(msgpack_packer *pk, const gchar *const *v)
{
  guint n = v != NULL ? g_strv_length((gchar **)v) : 0;

  msgpack_pack_array(pk, n);
  for (guint i = 0; i < n; i++)
    pack_str(pk, v[i]);
}

GBytes *
sluice_worker_info__encode(const SluiceWorkerInfo *w)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 15);
  pack_key(&pk, "v");
  msgpack_pack_uint32(&pk, INFO_VERSION);
  pack_key(&pk, "host");
  pack_str(&pk, w->host);
  pack_key(&pk, "pid");
  msgpack_pack_int32(&pk, w->pid);
  pack_key(&pk, "queues");
  pack_strv(&pk, (const gchar *const *)w->queues);
  pack_key(&pk, "tasks");
  pack_strv(&pk, (const gchar *const *)w->tasks);
  pack_key(&pk, "concurrency");
  msgpack_pack_uint32(&pk, w->concurrency);
  pack_key(&pk, "running");
  msgpack_pack_uint32(&pk, w->running);
  pack_key(&pk, "started_at");
  msgpack_pack_int64(&pk, w->started_at_ms);
  pack_key(&pk, "succeeded");
  msgpack_pack_uint64(&pk, w->succeeded);
  pack_key(&pk, "failed");
  msgpack_pack_uint64(&pk, w->failed);
  pack_key(&pk, "retried");
  msgpack_pack_uint64(&pk, w->retried);
  pack_key(&pk, "dead_lettered");
  msgpack_pack_uint64(&pk, w->dead_lettered);
  pack_key(&pk, "limits");
  pack_strv(&pk, (const gchar *const *)w->limits);
  pack_key(&pk, "events");
  if (w->events)
    msgpack_pack_true(&pk);
  else
    msgpack_pack_false(&pk);
  /* [[id, task, queue, started_at], ...], bounded: an announcement is
   * rewritten every few seconds. */
  pack_key(&pk, "running_tasks");
  {
    guint n = w->running_tasks != NULL
                  ? MIN(w->running_tasks->len, SLUICE_ANNOUNCED_RUNNING_MAX)
                  : 0;
    msgpack_pack_array(&pk, n);
    for (guint i = 0; i < n; i++) {
      const SluiceRunningTask *t = w->running_tasks->pdata[i];
      msgpack_pack_array(&pk, 4);
      pack_str(&pk, t->id);
      pack_str(&pk, t->task);
      pack_str(&pk, t->queue);
      msgpack_pack_int64(&pk, t->started_at_ms);
    }
  }
  return g_bytes_new_take(buf.data, buf.size);
}

static gboolean
key_is(const SluiceMpValue *k, const gchar *name)
{
  return k->type == SLUICE_MP_STR && k->raw.len == strlen(name) &&
         memcmp(k->raw.data, name, k->raw.len) == 0;
}

/* A string value, validated and bounded, or NULL. */
static gchar *
take_str(const SluiceMpValue *v)
{
  if (v->type != SLUICE_MP_STR || v->raw.len > MAX_STRING ||
      !g_utf8_validate(v->raw.data, v->raw.len, NULL))
    return NULL;
  return g_strndup(v->raw.data, v->raw.len);
}

static gboolean
take_uint(const SluiceMpValue *v, guint64 *out)
{
  if (v->type != SLUICE_MP_UINT)
    return FALSE;
  *out = v->u;
  return TRUE;
}

/* Reads the elements of the array whose header is @v (strings; anything
 * else ends the decoding). Returns FALSE if the reader cannot continue. */
static gboolean
take_strv(SluiceMpReader *r, const SluiceMpValue *v, gchar ***out)
{
  g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func(g_free);

  for (guint32 i = 0; i < v->count; i++) {
    SluiceMpValue e;
    gchar *s;

    if (!sluice_mp_reader__next(r, &e, NULL))
      return FALSE;
    if (e.type == SLUICE_MP_ARRAY || e.type == SLUICE_MP_MAP)
      return FALSE;
    s = take_str(&e);
    if (s != NULL && list->len < MAX_LIST)
      g_ptr_array_add(list, s);
    else
      g_free(s);
  }
  g_ptr_array_add(list, NULL);
  g_strfreev(*out);
  *out = (gchar **)g_ptr_array_free(g_steal_pointer(&list), FALSE);
  return TRUE;
}

SluiceRunningTask *
sluice_running_task__new(const gchar *id, const gchar *task, const gchar *queue,
                         gint64 started_at_ms)
{
  SluiceRunningTask *t = g_new0(SluiceRunningTask, 1);

  t->id = g_strdup(id);
  t->task = g_strdup(task);
  t->queue = g_strdup(queue);
  t->started_at_ms = started_at_ms;
  return t;
}

void
sluice_running_task__free(gpointer data)
{
  SluiceRunningTask *t = data;

  g_free(t->id);
  g_free(t->task);
  g_free(t->queue);
  g_free(t);
}

/* Reads the running tasks of the array whose header is @v: each an array
 * [id, task, queue, started_at]; one of another shape is skipped. Returns
 * FALSE if the reader cannot continue. */
static gboolean
take_running(SluiceMpReader *r, const SluiceMpValue *v, GPtrArray **out)
{
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func(sluice_running_task__free);

  for (guint32 i = 0; i < v->count; i++) {
    SluiceMpValue e, f[4];
    g_autofree gchar *id = NULL, *task = NULL, *queue = NULL;
    guint64 started = 0;

    if (!sluice_mp_reader__next(r, &e, NULL))
      return FALSE;
    if (e.type != SLUICE_MP_ARRAY || e.count != 4) {
      r->pos = e.offset;
      if (!sluice_mp_reader__skip(r, 2, 8, NULL))
        return FALSE;
      continue;
    }
    for (guint k = 0; k < 4; k++) {
      if (!sluice_mp_reader__next(r, &f[k], NULL))
        return FALSE;
      if (f[k].type == SLUICE_MP_ARRAY || f[k].type == SLUICE_MP_MAP)
        return FALSE;
    }
    id = take_str(&f[0]);
    task = take_str(&f[1]);
    queue = take_str(&f[2]);
    if (id == NULL || !take_uint(&f[3], &started) || started > G_MAXINT64 ||
        list->len >= SLUICE_ANNOUNCED_RUNNING_MAX)
      continue;
    g_ptr_array_add(list,
                    sluice_running_task__new(id, task, queue, (gint64)started));
  }
  if (*out != NULL)
    g_ptr_array_unref(*out);
  *out = g_steal_pointer(&list);
  return TRUE;
}

void
sluice_worker_info__decode(SluiceWorkerInfo *w)
{
  SluiceMpReader r;
  SluiceMpValue top;
  gsize len = 0;
  gconstpointer data;

  if (w->info == NULL)
    return;
  data = g_bytes_get_data(w->info, &len);
  sluice_mp_reader_init(&r, data, len);
  if (!sluice_mp_reader__next(&r, &top, NULL) || top.type != SLUICE_MP_MAP)
    return;
  for (guint32 i = 0; i < top.count; i++) {
    SluiceMpValue k, v;
    guint64 u = 0;

    if (!sluice_mp_reader__next(&r, &k, NULL))
      return;
    if (k.type == SLUICE_MP_ARRAY || k.type == SLUICE_MP_MAP)
      return;
    if (!sluice_mp_reader__next(&r, &v, NULL))
      return;
    if (v.type == SLUICE_MP_ARRAY &&
        (key_is(&k, "queues") || key_is(&k, "tasks") || key_is(&k, "limits"))) {
      if (!take_strv(&r, &v,
                     key_is(&k, "queues")  ? &w->queues
                     : key_is(&k, "tasks") ? &w->tasks
                                           : &w->limits))
        return;
      continue;
    }
    if (v.type == SLUICE_MP_ARRAY && key_is(&k, "running_tasks")) {
      if (!take_running(&r, &v, &w->running_tasks))
        return;
      continue;
    }
    if (v.type == SLUICE_MP_ARRAY || v.type == SLUICE_MP_MAP) {
      /* A container we do not read: step over its elements. */
      r.pos = v.offset;
      if (!sluice_mp_reader__skip(&r, 2, 8, NULL))
        return;
      continue;
    }
    if (key_is(&k, "host")) {
      g_free(w->host);
      w->host = take_str(&v);
    } else if (key_is(&k, "pid")) {
      if (take_uint(&v, &u) && u <= G_MAXINT)
        w->pid = (gint)u;
    } else if (key_is(&k, "concurrency")) {
      if (take_uint(&v, &u) && u <= G_MAXUINT)
        w->concurrency = (guint)u;
    } else if (key_is(&k, "running")) {
      if (take_uint(&v, &u) && u <= G_MAXUINT)
        w->running = (guint)u;
    } else if (key_is(&k, "started_at")) {
      if (take_uint(&v, &u) && u <= G_MAXINT64)
        w->started_at_ms = (gint64)u;
    } else if (key_is(&k, "succeeded")) {
      take_uint(&v, &w->succeeded);
    } else if (key_is(&k, "failed")) {
      take_uint(&v, &w->failed);
    } else if (key_is(&k, "retried")) {
      take_uint(&v, &w->retried);
    } else if (key_is(&k, "dead_lettered")) {
      take_uint(&v, &w->dead_lettered);
    } else if (key_is(&k, "events")) {
      w->events = v.type == SLUICE_MP_BOOL && v.b;
    }
  }
}

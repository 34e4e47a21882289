/* progress.c - progress reports (sluice-progress.h): what a task says of
 * itself while it runs, from the task's thread to the broker, throttled
 * per job, and read back by clients.
 *
 * The stored bytes are the core's: a msgpack map {"fraction": float64,
 * "message": str (absent when none), "at": ms}.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/worker/worker-private.h"

void
sluice_task_context_progress(SluiceTaskContext *ctx, gdouble fraction,
                             const gchar *message)
{
  g_return_if_fail(ctx != NULL);
  if (ctx->progress_of != NULL)
    ctx->progress_of(ctx->job, fraction, message);
}

static GBytes *
encode(gdouble fraction, const gchar *message, gint64 at)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  g_autofree gchar *cut = NULL;
  GBytes *bytes;

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, message != NULL ? 3 : 2);
  msgpack_pack_str(&pk, 8);
  msgpack_pack_str_body(&pk, "fraction", 8);
  msgpack_pack_double(&pk, fraction);
  if (message != NULL) {
    gsize len = strlen(message);
    const gchar *end = message + MIN(len, SLUICE_PROGRESS_MESSAGE_MAX);

    /* Cut at a character, never inside one; invalid UTF-8 is dropped
     * there too, so a reader always gets text. */
    g_utf8_validate(message, (gssize)(end - message), &end);
    cut = g_strndup(message, (gsize)(end - message));
    msgpack_pack_str(&pk, 7);
    msgpack_pack_str_body(&pk, "message", 7);
    msgpack_pack_str(&pk, strlen(cut));
    msgpack_pack_str_body(&pk, cut, strlen(cut));
  }
  msgpack_pack_str(&pk, 2);
  msgpack_pack_str_body(&pk, "at", 2);
  msgpack_pack_int64(&pk, at);
  bytes = g_bytes_new(buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
  return bytes;
}

void
sluice_job__progress(gpointer data, gdouble fraction, const gchar *message)
{
  Job *job = data;
  SluiceWorker *worker = job->worker;
  gint64 now_us = g_get_monotonic_time();
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  gboolean due;

  if (isnan(fraction))
    fraction = 0;
  fraction = CLAMP(fraction, 0.0, 1.0);
  g_mutex_lock(&worker->lock);
  due = job->progress_us == 0 || fraction >= 1.0 ||
        now_us - job->progress_us >= SLUICE_PROGRESS_INTERVAL_MS * 1000;
  if (due)
    job->progress_us = now_us;
  g_mutex_unlock(&worker->lock);
  if (!due)
    return;
  sluice_outcome__event(job, SLUICE_EVENT_PROGRESS, message, fraction);
  bytes = encode(fraction, message, sluice_clock_now_ms(worker->clock));
  if (!sluice_broker_put_progress(worker->broker, job->env->id, bytes,
                                  job->result_ttl_ms, &error) &&
      sluice_worker__first_in_a_while(worker, "progress"))
    sluice_log__envelope(G_LOG_LEVEL_WARNING, job->env, job->env->queue,
                         "could not store the task's progress (said once a "
                         "minute): %s",
                         error->message);
}

void
sluice_progress_free(SluiceProgress *progress)
{
  if (progress == NULL)
    return;
  g_free(progress->message);
  g_free(progress);
}

SluiceProgress *
sluice_client_get_progress(SluiceClient *client, const gchar *id,
                           GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  SluiceProgress *out;
  msgpack_zone zone;
  msgpack_object o;
  gsize len, off = 0;
  const gchar *data;

  g_return_val_if_fail(client != NULL && id != NULL, NULL);
  if (!sluice_client__check_name(SLUICE_NAME_ID, id, error) ||
      !sluice_broker_get_progress(sluice_client_get_broker(client), id, &bytes,
                                  error))
    return NULL;
  if (bytes == NULL) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
                "task %s has reported no progress (or its report expired)", id);
    return NULL;
  }
  data = g_bytes_get_data(bytes, &len);
  msgpack_zone_init(&zone, 256);
  out = g_new0(SluiceProgress, 1);
  if (msgpack_unpack(data, len, &off, &zone, &o) == MSGPACK_UNPACK_SUCCESS &&
      o.type == MSGPACK_OBJECT_MAP) {
    for (guint32 i = 0; i < o.via.map.size; i++) {
      const msgpack_object *k = &o.via.map.ptr[i].key;
      const msgpack_object *v = &o.via.map.ptr[i].val;
      if (k->type != MSGPACK_OBJECT_STR)
        continue;
      if (k->via.str.size == 8 && memcmp(k->via.str.ptr, "fraction", 8) == 0 &&
          (v->type == MSGPACK_OBJECT_FLOAT64 ||
           v->type == MSGPACK_OBJECT_FLOAT32))
        out->fraction = CLAMP(v->via.f64, 0.0, 1.0);
      else if (k->via.str.size == 7 &&
               memcmp(k->via.str.ptr, "message", 7) == 0 &&
               v->type == MSGPACK_OBJECT_STR &&
               g_utf8_validate_len(v->via.str.ptr, v->via.str.size, NULL))
        out->message = g_strndup(v->via.str.ptr, v->via.str.size);
      else if (k->via.str.size == 2 && memcmp(k->via.str.ptr, "at", 2) == 0 &&
               v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        out->updated_at = (gint64)MIN(v->via.u64, (guint64)G_MAXINT64);
    }
  }
  msgpack_zone_destroy(&zone);
  return out;
}

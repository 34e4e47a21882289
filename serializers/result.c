/* result.c - task states and the result record.
 *
 * A SluiceResult is what get_result() hands to users and what workers write
 * when a task ends: an immutable-by-convention, reference-counted record
 * (g_atomic_rc_box: readers on several threads may share one). Its stored
 * form is one msgpack map (PROTOCOL.md, "The result record"):
 *
 *   v, id, state, task, queue, attempt, value, error, dlq_reason, worker,
 *   enqueued_at, started_at, finished_at
 *
 * in that order, empty fields omitted. `value` is the task's msgpack value
 * embedded as is (not wrapped in a bin), and on decode it stays a zero-copy
 * slice of the stored bytes, like an envelope's args. Decoding follows the
 * envelope's rules (the same bounded reader, the same error domain) with one
 * deliberate difference: an unknown state name is not an error but
 * SLUICE_STATE_UNKNOWN, so an older reader can still show the rest of a
 * record written by a newer worker.
 *
 * Records have no size limit of their own (a result may legitimately be
 * large); nesting is limited to SLUICE_DEFAULT_MAX_DEPTH, the record map
 * being depth 1.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/text.h"
#include "serializers/codec-private.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

struct _SluiceResult {
  gchar *id;
  SluiceTaskState state;
  gchar *task;
  gchar *queue;
  guint attempt;
  GBytes *value;
  gchar *error;
  gchar *dlq_reason;
  gchar *worker;
  gint64 enqueued_at;
  gint64 started_at;
  gint64 finished_at;
  /* "ALGORITHM:KEY-ID" while @value is sealed (PROTOCOL.md). */
  gchar *seal;
  /* Not stored: set by inspect for a task it found on the schedule. */
  gint64 due_at;
};

#define RESULT_VERSION 1
/* Version 1 plus `seal`: a reader of version 1 refuses such a record
 * rather than take the sealed value for the task's result. */
#define RESULT_VERSION_SEALED 2

/* Indexed by SluiceTaskState. */
static const gchar *const state_names[] = {
    "unknown",   "queued", "scheduled",     "running",   "retrying",
    "succeeded", "failed", "dead_lettered", "cancelled",
};

/* ---- States -------------------------------------------------------------- */

const gchar *
sluice_task_state_to_string(SluiceTaskState state)
{
  if ((guint)state >= G_N_ELEMENTS(state_names))
    return state_names[SLUICE_STATE_UNKNOWN];
  return state_names[state];
}

static SluiceTaskState
state_lookup(const gchar *name, gsize len)
{
  for (guint i = 1; i < G_N_ELEMENTS(state_names); i++) {
    if (strlen(state_names[i]) == len && memcmp(state_names[i], name, len) == 0)
      return (SluiceTaskState)i;
  }
  return SLUICE_STATE_UNKNOWN;
}

SluiceTaskState
sluice_task_state_from_string(const gchar *name)
{
  if (name == NULL)
    return SLUICE_STATE_UNKNOWN;
  return state_lookup(name, strlen(name));
}

gboolean
sluice_task_state_is_final(SluiceTaskState state)
{
  return state == SLUICE_STATE_SUCCEEDED || state == SLUICE_STATE_FAILED ||
         state == SLUICE_STATE_DEAD_LETTERED || state == SLUICE_STATE_CANCELLED;
}

/* ---- The record ---------------------------------------------------------- */

static SluiceResult *
result_alloc(void)
{
  return g_atomic_rc_box_new0(SluiceResult);
}

SluiceResult *
sluice_result_new(const gchar *id, SluiceTaskState state)
{
  SluiceResult *result;

  g_return_val_if_fail(id != NULL && *id != '\0', NULL);
  g_return_val_if_fail(g_utf8_validate(id, -1, NULL), NULL);

  result = result_alloc();
  result->id = g_strdup(id);
  result->state = state;
  return result;
}

SluiceResult *
sluice_result_ref(SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return g_atomic_rc_box_acquire(result);
}

static void
result_clear(gpointer data)
{
  SluiceResult *result = data;

  g_free(result->id);
  g_free(result->task);
  g_free(result->queue);
  if (result->value != NULL)
    g_bytes_unref(result->value);
  g_free(result->error);
  g_free(result->dlq_reason);
  g_free(result->worker);
  g_free(result->seal);
}

void
sluice_result_unref(SluiceResult *result)
{
  g_return_if_fail(result != NULL);
  g_atomic_rc_box_release_full(result, result_clear);
}

const gchar *
sluice_result_get_id(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->id;
}

SluiceTaskState
sluice_result_get_state(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, SLUICE_STATE_UNKNOWN);
  return result->state;
}

const gchar *
sluice_result_get_task(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->task;
}

const gchar *
sluice_result_get_queue(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->queue;
}

guint
sluice_result_get_attempt(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, 0);
  return result->attempt;
}

GBytes *
sluice_result_get_value(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->value;
}

const gchar *
sluice_result_get_seal(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->seal;
}

void
sluice_result__set_seal(SluiceResult *result, const gchar *seal)
{
  g_return_if_fail(result != NULL);
  g_free(result->seal);
  result->seal = g_strdup(seal);
}

const gchar *
sluice_result_get_error(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->error;
}

const gchar *
sluice_result_get_dead_letter_reason(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->dlq_reason;
}

const gchar *
sluice_result_get_worker(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, NULL);
  return result->worker;
}

gint64
sluice_result_get_enqueued_at(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, 0);
  return result->enqueued_at;
}

gint64
sluice_result_get_started_at(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, 0);
  return result->started_at;
}

gint64
sluice_result_get_due_at(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, 0);
  return result->due_at;
}

void
sluice_result_set_due_at(SluiceResult *result, gint64 due_at)
{
  g_return_if_fail(result != NULL);
  result->due_at = due_at;
}

gint64
sluice_result_get_finished_at(const SluiceResult *result)
{
  g_return_val_if_fail(result != NULL, 0);
  return result->finished_at;
}

/* Stores a copy of @s in @field, repaired to UTF-8 (an error text may come
 * from anywhere, and the record's strings are UTF-8 on the wire); NULL and
 * "" clear it, as empty fields are not written. */
static void
set_text(gchar **field, const gchar *s)
{
  g_free(*field);
  *field = s != NULL && *s != '\0' ? g_utf8_make_valid(s, -1) : NULL;
}

void
sluice_result_set_task(SluiceResult *result, const gchar *task,
                       const gchar *queue)
{
  g_return_if_fail(result != NULL);
  set_text(&result->task, task);
  set_text(&result->queue, queue);
}

void
sluice_result_set_attempt(SluiceResult *result, guint attempt)
{
  g_return_if_fail(result != NULL);
  result->attempt = attempt;
}

void
sluice_result_set_value(SluiceResult *result, GBytes *value)
{
  GError *error = NULL;

  g_return_if_fail(result != NULL);

  /* The value is embedded in the record as is, so anything but one msgpack
   * value would corrupt the record; this has no GError to report it, so it
   * is treated as the programming error it is. */
  if (value != NULL) {
    gsize len;
    gconstpointer data = g_bytes_get_data(value, &len);

    /* Within the record map (depth 1), as sluice_result_decode() will
     * require. */
    if (!sluice_mp__check_one_value("result value", data, len,
                                    SLUICE_DEFAULT_MAX_DEPTH - 1, &error)) {
      g_critical("sluice_result_set_value: not exactly one msgpack value, "
                 "ignored: %s",
                 error->message);
      g_error_free(error);
      return;
    }
    g_bytes_ref(value);
  }
  if (result->value != NULL)
    g_bytes_unref(result->value);
  result->value = value;
}

void
sluice_result_set_error(SluiceResult *result, const gchar *error)
{
  g_return_if_fail(result != NULL);
  set_text(&result->error, error);
}

void
sluice_result_set_dead_letter_reason(SluiceResult *result, const gchar *reason)
{
  g_return_if_fail(result != NULL);
  set_text(&result->dlq_reason, reason);
}

void
sluice_result_set_worker(SluiceResult *result, const gchar *worker)
{
  g_return_if_fail(result != NULL);
  set_text(&result->worker, worker);
}

void
sluice_result_set_times(SluiceResult *result, gint64 enqueued_at,
                        gint64 started_at, gint64 finished_at)
{
  g_return_if_fail(result != NULL);
  /* Negative times cannot be stored; they mean "not reached" like 0. */
  result->enqueued_at = MAX(enqueued_at, 0);
  result->started_at = MAX(started_at, 0);
  result->finished_at = MAX(finished_at, 0);
}

/* ---- Encoding ------------------------------------------------------------ */

typedef enum {
  KEY_V,
  KEY_ID,
  KEY_STATE,
  KEY_TASK,
  KEY_QUEUE,
  KEY_ATTEMPT,
  KEY_VALUE,
  KEY_ERROR,
  KEY_DLQ_REASON,
  KEY_WORKER,
  KEY_ENQUEUED_AT,
  KEY_STARTED_AT,
  KEY_FINISHED_AT,
  KEY_SEAL,
  N_KEYS
} ResultKey;

static const gchar *const key_names[N_KEYS] = {
    "v",           "id",         "state",       "task",       "queue",
    "attempt",     "value",      "error",       "dlq_reason", "worker",
    "enqueued_at", "started_at", "finished_at", "seal",
};

#define REQUIRED (1u << KEY_V | 1u << KEY_ID | 1u << KEY_STATE)

static void
put_str(msgpack_packer *pk, int *rc, const gchar *s)
{
  gsize len = strlen(s);

  *rc |= msgpack_pack_str(pk, len);
  *rc |= msgpack_pack_str_body(pk, s, len);
}

GBytes *
sluice_result_encode(const SluiceResult *result)
{
  const gchar *texts[N_KEYS] = {NULL};
  gint64 times[N_KEYS] = {0};
  msgpack_sbuffer sbuf;
  msgpack_packer pk;
  gsize bound = 1, value_len = 0;
  gconstpointer value = NULL;
  guint n = 0;
  int rc = 0;

  g_return_val_if_fail(result != NULL, NULL);

  texts[KEY_ID] = result->id;
  texts[KEY_STATE] = sluice_task_state_to_string(result->state);
  texts[KEY_TASK] = result->task;
  texts[KEY_QUEUE] = result->queue;
  texts[KEY_ERROR] = result->error;
  texts[KEY_DLQ_REASON] = result->dlq_reason;
  texts[KEY_WORKER] = result->worker;
  texts[KEY_SEAL] = result->seal;
  times[KEY_ENQUEUED_AT] = result->enqueued_at;
  times[KEY_STARTED_AT] = result->started_at;
  times[KEY_FINISHED_AT] = result->finished_at;
  if (result->value != NULL)
    value = g_bytes_get_data(result->value, &value_len);

  /* An upper bound of the size, so the sbuffer never reallocates. */
  for (guint k = 0; k < N_KEYS; k++) {
    gboolean present = texts[k] != NULL || times[k] > 0 || k == KEY_V ||
                       (k == KEY_ATTEMPT && result->attempt > 0) ||
                       (k == KEY_VALUE && value_len > 0);
    if (!present)
      continue;
    n++;
    bound += 1 + strlen(key_names[k]) + 9;
    if (texts[k] != NULL)
      bound += 5 + strlen(texts[k]);
  }
  bound += value_len;

  msgpack_sbuffer_init(&sbuf);
  sbuf.data = malloc(bound);
  if (sbuf.data == NULL)
    g_error("sluice: out of memory (%" G_GSIZE_FORMAT " bytes)", bound);
  sbuf.alloc = bound;
  msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);

  rc |= msgpack_pack_map(&pk, n);
  for (guint k = 0; k < N_KEYS; k++) {
    if (k == KEY_V) {
      put_str(&pk, &rc, key_names[k]);
      rc |= msgpack_pack_unsigned_int(
          &pk, result->seal != NULL ? RESULT_VERSION_SEALED : RESULT_VERSION);
    } else if (k == KEY_ATTEMPT) {
      if (result->attempt > 0) {
        put_str(&pk, &rc, key_names[k]);
        rc |= msgpack_pack_uint32(&pk, result->attempt);
      }
    } else if (k == KEY_VALUE) {
      if (value_len > 0) {
        put_str(&pk, &rc, key_names[k]);
        /* Checked to be one msgpack value by sluice_result_set_value(). */
        rc |= msgpack_sbuffer_write(&sbuf, value, value_len);
      }
    } else if (texts[k] != NULL) {
      put_str(&pk, &rc, key_names[k]);
      put_str(&pk, &rc, texts[k]);
    } else if (times[k] > 0) {
      put_str(&pk, &rc, key_names[k]);
      rc |= msgpack_pack_int64(&pk, times[k]);
    }
  }
  if (rc != 0)
    g_error("sluice: out of memory while encoding a result record");
  return g_bytes_new_with_free_func(sbuf.data, sbuf.size, free, sbuf.data);
}

/* ---- Decoding ------------------------------------------------------------ */

static ResultKey
key_lookup(const gchar *name, gsize len)
{
  for (guint k = 0; k < N_KEYS; k++) {
    if (strlen(key_names[k]) == len && memcmp(key_names[k], name, len) == 0)
      return (ResultKey)k;
  }
  return N_KEYS;
}

static gboolean
wrong_type(const gchar *field, const gchar *expected, const SluiceMpValue *v,
           GError **error)
{
  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
              "%s: expected %s, found %s (byte offset %" G_GSIZE_FORMAT ")",
              field, expected, sluice_mp__type_name(v->type), v->offset);
  return FALSE;
}

static gboolean
get_text(const gchar *field, const SluiceMpValue *v, gchar **out,
         GError **error)
{
  if (v->type != SLUICE_MP_STR)
    return wrong_type(field, "a string", v, error);
  if (!sluice_codec__check_text(field, v->raw.data, v->raw.len, error))
    return FALSE;
  g_free(*out);
  *out = g_strndup(v->raw.data, v->raw.len);
  return TRUE;
}

static gboolean
get_int(const gchar *field, const SluiceMpValue *v, guint64 max, guint64 *out,
        GError **error)
{
  if (v->type == SLUICE_MP_INT) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "%s: must be >= 0, found %" G_GINT64_FORMAT, field, v->i);
    return FALSE;
  }
  if (v->type != SLUICE_MP_UINT)
    return wrong_type(field, "an integer", v, error);
  if (v->u > max) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "%s: %" G_GUINT64_FORMAT " is above the limit of "
                "%" G_GUINT64_FORMAT,
                field, v->u, max);
    return FALSE;
  }
  *out = v->u;
  return TRUE;
}

static gboolean
read_field(SluiceResult *result, ResultKey key, SluiceMpReader *r,
           GBytes *bytes, GError **error)
{
  const gchar *field = key_names[key];
  SluiceMpValue v;
  guint64 u;

  if (key == KEY_VALUE) {
    gsize start = r->pos;

    /* The record map is depth 1, so the value's containers start at 2. */
    if (!sluice_mp_reader__skip(r, 2, SLUICE_DEFAULT_MAX_DEPTH, error))
      return FALSE;
    result->value = g_bytes_new_from_bytes(bytes, start, r->pos - start);
    return TRUE;
  }

  if (!sluice_mp_reader__next(r, &v, error))
    return FALSE;
  switch (key) {
  case KEY_V:
    if (v.type != SLUICE_MP_UINT && v.type != SLUICE_MP_INT)
      return wrong_type(field, "an integer (the format version)", &v, error);
    if (v.type != SLUICE_MP_UINT || v.u < RESULT_VERSION ||
        v.u > RESULT_VERSION_SEALED) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_VERSION,
                  "v: result record version %" G_GINT64_FORMAT
                  " is not supported (this build reads versions %d to %d)",
                  v.type == SLUICE_MP_INT ? v.i : (gint64)MIN(v.u, G_MAXINT64),
                  RESULT_VERSION, RESULT_VERSION_SEALED);
      return FALSE;
    }
    return TRUE;
  case KEY_SEAL:
    return get_text(field, &v, &result->seal, error);
  case KEY_ID:
    if (!get_text(field, &v, &result->id, error))
      return FALSE;
    if (*result->id == '\0' || v.raw.len > SLUICE_MAX_ID_BYTES) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "id: must be 1 to %d bytes long, found %u",
                  SLUICE_MAX_ID_BYTES, v.raw.len);
      return FALSE;
    }
    return TRUE;
  case KEY_STATE:
    if (v.type != SLUICE_MP_STR)
      return wrong_type(field, "a string (a state name)", &v, error);
    /* Unknown names, from a newer writer, read as UNKNOWN. */
    result->state = state_lookup(v.raw.data, v.raw.len);
    return TRUE;
  case KEY_TASK:
    return get_text(field, &v, &result->task, error);
  case KEY_QUEUE:
    return get_text(field, &v, &result->queue, error);
  case KEY_ERROR:
    return get_text(field, &v, &result->error, error);
  case KEY_DLQ_REASON:
    return get_text(field, &v, &result->dlq_reason, error);
  case KEY_WORKER:
    return get_text(field, &v, &result->worker, error);
  case KEY_ATTEMPT:
    if (!get_int(field, &v, G_MAXUINT32, &u, error))
      return FALSE;
    result->attempt = (guint)u;
    return TRUE;
  case KEY_ENQUEUED_AT:
  case KEY_STARTED_AT:
  case KEY_FINISHED_AT:
    if (!get_int(field, &v, G_MAXINT64, &u, error))
      return FALSE;
    if (key == KEY_ENQUEUED_AT)
      result->enqueued_at = (gint64)u;
    else if (key == KEY_STARTED_AT)
      result->started_at = (gint64)u;
    else
      result->finished_at = (gint64)u;
    return TRUE;
  default:
    break;
  }
  g_return_val_if_reached(FALSE);
}

SluiceResult *
sluice_result_decode(GBytes *bytes, GError **error)
{
  SluiceResult *result;
  SluiceMpReader r;
  SluiceMpValue map, k;
  gconstpointer data;
  gsize len;
  guint32 seen = 0;

  g_return_val_if_fail(bytes != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  data = g_bytes_get_data(bytes, &len);
  sluice_mp_reader_init(&r, data, len);
  if (!sluice_mp_reader__next(&r, &map, error))
    return NULL;
  if (map.type != SLUICE_MP_MAP) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
                "byte offset 0: a result record is a msgpack map, found "
                "a(n) %s",
                sluice_mp__type_name(map.type));
    return NULL;
  }

  result = result_alloc();
  for (guint32 i = 0; i < map.count; i++) {
    ResultKey key;

    if (!sluice_mp_reader__next(&r, &k, error))
      goto fail;
    if (k.type != SLUICE_MP_STR) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
                  "byte offset %" G_GSIZE_FORMAT
                  ": record keys are strings, found a(n) %s",
                  k.offset, sluice_mp__type_name(k.type));
      goto fail;
    }
    key = key_lookup(k.raw.data, k.raw.len);
    if (key == N_KEYS) {
      if (!sluice_mp_reader__skip(&r, 2, SLUICE_DEFAULT_MAX_DEPTH, error))
        goto fail;
      continue;
    }
    if (seen & (1u << key)) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "%s: duplicate key (byte offset %" G_GSIZE_FORMAT ")",
                  key_names[key], k.offset);
      goto fail;
    }
    seen |= 1u << key;
    if (!read_field(result, key, &r, bytes, error)) {
      if (error != NULL && *error != NULL &&
          g_str_has_prefix((*error)->message, "byte offset"))
        g_prefix_error(error, "%s: ", key_names[key]);
      goto fail;
    }
  }
  if (r.pos != r.len) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRAILING,
                "byte offset %" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT
                " bytes follow the record",
                r.pos, r.len - r.pos);
    goto fail;
  }
  if ((seen & REQUIRED) != REQUIRED) {
    for (guint key = 0; key < N_KEYS; key++) {
      if ((REQUIRED & (1u << key)) && !(seen & (1u << key))) {
        g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_MISSING_FIELD,
                    "%s: required key is missing", key_names[key]);
        goto fail;
      }
    }
  }
  return result;

fail:
  sluice_result_unref(result);
  return NULL;
}

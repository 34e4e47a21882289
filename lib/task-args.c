/* task-args.c - reading a task's arguments by key, and setting its result
 * without packing msgpack by hand (sluice-task.h).
 *
 * A missing or mistyped argument can never succeed on a retry, so the
 * getters fail with SLUICE_TASK_ERROR_FATAL: a task that propagates the
 * error is dead-lettered `non_retryable` at once, with a message that names
 * the argument, what was expected and what came.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

static const gchar *
type_name(const msgpack_object *o)
{
  switch (o->type) {
  case MSGPACK_OBJECT_NIL:
    return "null";
  case MSGPACK_OBJECT_BOOLEAN:
    return "a boolean";
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    return "an integer";
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    return "a number";
  case MSGPACK_OBJECT_STR:
    return "a string";
  case MSGPACK_OBJECT_BIN:
    return "bytes";
  case MSGPACK_OBJECT_ARRAY:
    return "an array";
  case MSGPACK_OBJECT_MAP:
    return "a map";
  case MSGPACK_OBJECT_EXT:
  default:
    return "an extension value";
  }
}

/* The value of @key in the arguments, or NULL with @error set. */
static const msgpack_object *
lookup(SluiceTaskContext *ctx, const gchar *key, const gchar *wanted,
       GError **error)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);
  gsize key_len = strlen(key);

  if (args->type != MSGPACK_OBJECT_MAP) {
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                "task “%s” wants its arguments as a map with “%s” (%s), but "
                "they are %s",
                sluice_task_context_get_name(ctx), key, wanted,
                type_name(args));
    return NULL;
  }
  for (guint32 i = 0; i < args->via.map.size; i++) {
    const msgpack_object_kv *kv = &args->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == key_len &&
        memcmp(kv->key.via.str.ptr, key, key_len) == 0)
      return &kv->val;
  }
  g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
              "task “%s”: the argument “%s” (%s) is missing",
              sluice_task_context_get_name(ctx), key, wanted);
  return NULL;
}

static gboolean
wrong_type(SluiceTaskContext *ctx, const gchar *key, const gchar *wanted,
           const msgpack_object *got, GError **error)
{
  g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
              "task “%s”: the argument “%s” must be %s, not %s",
              sluice_task_context_get_name(ctx), key, wanted, type_name(got));
  return FALSE;
}

gboolean
sluice_task_context_has_arg(SluiceTaskContext *ctx, const gchar *key)
{
  const msgpack_object *args;

  g_return_val_if_fail(ctx != NULL, FALSE);
  g_return_val_if_fail(key != NULL, FALSE);
  args = sluice_task_context_get_args(ctx);
  if (args->type != MSGPACK_OBJECT_MAP)
    return FALSE;
  for (guint32 i = 0; i < args->via.map.size; i++) {
    const msgpack_object *k = &args->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
        memcmp(k->via.str.ptr, key, k->via.str.size) == 0)
      return TRUE;
  }
  return FALSE;
}

gchar *
sluice_task_context_dup_string_arg(SluiceTaskContext *ctx, const gchar *key,
                                   GError **error)
{
  const msgpack_object *v;

  g_return_val_if_fail(ctx != NULL, NULL);
  g_return_val_if_fail(key != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if ((v = lookup(ctx, key, "a string", error)) == NULL)
    return NULL;
  if (v->type != MSGPACK_OBJECT_STR) {
    wrong_type(ctx, key, "a string", v, error);
    return NULL;
  }
  /* The envelope decoder validated UTF-8; a NUL inside would cut the
   * string short without a word, so it is refused. */
  if (memchr(v->via.str.ptr, '\0', v->via.str.size) != NULL) {
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                "task “%s”: the argument “%s” holds a NUL character",
                sluice_task_context_get_name(ctx), key);
    return NULL;
  }
  return g_strndup(v->via.str.ptr, v->via.str.size);
}

gboolean
sluice_task_context_get_int_arg(SluiceTaskContext *ctx, const gchar *key,
                                gint64 *out, GError **error)
{
  const msgpack_object *v;

  g_return_val_if_fail(ctx != NULL, FALSE);
  g_return_val_if_fail(key != NULL && out != NULL, FALSE);
  if ((v = lookup(ctx, key, "an integer", error)) == NULL)
    return FALSE;
  if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    *out = v->via.i64;
    return TRUE;
  }
  if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (v->via.u64 > (guint64)G_MAXINT64) {
      g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                  "task “%s”: the argument “%s” is above the largest 64-bit "
                  "signed integer",
                  sluice_task_context_get_name(ctx), key);
      return FALSE;
    }
    *out = (gint64)v->via.u64;
    return TRUE;
  }
  return wrong_type(ctx, key, "an integer", v, error);
}

gboolean
sluice_task_context_get_double_arg(SluiceTaskContext *ctx, const gchar *key,
                                   gdouble *out, GError **error)
{
  const msgpack_object *v;

  g_return_val_if_fail(ctx != NULL, FALSE);
  g_return_val_if_fail(key != NULL && out != NULL, FALSE);
  if ((v = lookup(ctx, key, "a number", error)) == NULL)
    return FALSE;
  switch (v->type) {
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    *out = v->via.f64;
    return TRUE;
  /* JSON producers write 3 for 3.0: a whole number is a number too. */
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    *out = (gdouble)v->via.u64;
    return TRUE;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    *out = (gdouble)v->via.i64;
    return TRUE;
  default:
    return wrong_type(ctx, key, "a number", v, error);
  }
}

gboolean
sluice_task_context_get_bool_arg(SluiceTaskContext *ctx, const gchar *key,
                                 gboolean *out, GError **error)
{
  const msgpack_object *v;

  g_return_val_if_fail(ctx != NULL, FALSE);
  g_return_val_if_fail(key != NULL && out != NULL, FALSE);
  if ((v = lookup(ctx, key, "a boolean", error)) == NULL)
    return FALSE;
  if (v->type != MSGPACK_OBJECT_BOOLEAN)
    return wrong_type(ctx, key, "a boolean", v, error);
  *out = v->via.boolean ? TRUE : FALSE;
  return TRUE;
}

GBytes *
sluice_task_context_dup_bytes_arg(SluiceTaskContext *ctx, const gchar *key,
                                  GError **error)
{
  const msgpack_object *v;

  g_return_val_if_fail(ctx != NULL, NULL);
  g_return_val_if_fail(key != NULL, NULL);
  if ((v = lookup(ctx, key, "bytes or a string", error)) == NULL)
    return NULL;
  if (v->type == MSGPACK_OBJECT_BIN)
    return g_bytes_new(v->via.bin.ptr, v->via.bin.size);
  if (v->type == MSGPACK_OBJECT_STR)
    return g_bytes_new(v->via.str.ptr, v->via.str.size);
  wrong_type(ctx, key, "bytes or a string", v, error);
  return NULL;
}

/* ---- Results ------------------------------------------------------------- */

gboolean
sluice_task_context_set_result_json(SluiceTaskContext *ctx, const gchar *json,
                                    GError **error)
{
  g_autoptr(GBytes) value = NULL;
  g_autoptr(GError) local = NULL;

  g_return_val_if_fail(ctx != NULL, FALSE);
  g_return_val_if_fail(json != NULL, FALSE);
  value = sluice_args_from_json(json, -1, &local);
  if (value == NULL) {
    /* The task's own bug: retrying would write the same JSON again. */
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                "task “%s” set a result that is not valid JSON: %s",
                sluice_task_context_get_name(ctx), local->message);
    return FALSE;
  }
  sluice_task_context_set_result(ctx, value);
  return TRUE;
}

static void
pack_str(msgpack_packer *pk, const gchar *s)
{
  gsize n = strlen(s);

  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

gboolean
sluice_task_context_set_result_fields(SluiceTaskContext *ctx, GError **error,
                                      const gchar *first_key, ...)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  g_autoptr(GPtrArray) keys = g_ptr_array_new();
  g_autoptr(GArray) kinds = g_array_new(FALSE, FALSE, sizeof(gint));
  g_autoptr(GBytes) value = NULL;
  va_list ap;

  g_return_val_if_fail(ctx != NULL, FALSE);

  /* First pass: count and check the kinds, so a bad call packs nothing. */
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  va_start(ap, first_key);
  for (const gchar *key = first_key; key != NULL;
       key = va_arg(ap, const gchar *)) {
    gint kind = va_arg(ap, gint);
    g_ptr_array_add(keys, (gpointer)key);
    g_array_append_val(kinds, kind);
    switch (kind) {
    case SLUICE_FIELD_INT:
      (void)va_arg(ap, gint64);
      break;
    case SLUICE_FIELD_DOUBLE:
      (void)va_arg(ap, gdouble);
      break;
    case SLUICE_FIELD_BOOL:
      (void)va_arg(ap, gboolean);
      break;
    case SLUICE_FIELD_STRING: {
      const gchar *v = va_arg(ap, const gchar *);
      if (v != NULL && !g_utf8_validate(v, -1, NULL)) {
        va_end(ap);
        msgpack_sbuffer_destroy(&buf);
        g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                    "task “%s”: result field “%s” is not valid UTF-8",
                    sluice_task_context_get_name(ctx), key);
        return FALSE;
      }
      break;
    }
    case SLUICE_FIELD_NULL:
      break;
    default:
      va_end(ap);
      msgpack_sbuffer_destroy(&buf);
      g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                  "task “%s”: result field “%s” has an unknown kind %d (use "
                  "SLUICE_FIELD_INT, _DOUBLE, _BOOL, _STRING or _NULL)",
                  sluice_task_context_get_name(ctx), key, kind);
      return FALSE;
    }
  }
  va_end(ap);

  msgpack_pack_map(&pk, keys->len);
  va_start(ap, first_key);
  for (guint i = 0; i < keys->len; i++) {
    const gchar *key = i == 0 ? first_key : va_arg(ap, const gchar *);
    gint kind = va_arg(ap, gint);

    pack_str(&pk, key);
    switch (kind) {
    case SLUICE_FIELD_INT:
      msgpack_pack_int64(&pk, va_arg(ap, gint64));
      break;
    case SLUICE_FIELD_DOUBLE:
      msgpack_pack_double(&pk, va_arg(ap, gdouble));
      break;
    case SLUICE_FIELD_BOOL:
      if (va_arg(ap, gboolean))
        msgpack_pack_true(&pk);
      else
        msgpack_pack_false(&pk);
      break;
    case SLUICE_FIELD_STRING: {
      const gchar *s = va_arg(ap, const gchar *);
      if (s == NULL)
        msgpack_pack_nil(&pk);
      else
        pack_str(&pk, s);
      break;
    }
    case SLUICE_FIELD_NULL:
    default:
      msgpack_pack_nil(&pk);
      break;
    }
  }
  va_end(ap);
  value = g_bytes_new(buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
  sluice_task_context_set_result(ctx, value);
  return TRUE;
}

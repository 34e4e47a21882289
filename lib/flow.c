/* flow.c - rate and concurrency limits as the core sees them: checking a
 * limit when it is set, and naming the bucket (or set of slots) a message
 * is counted in.
 *
 * The broker keeps each bucket's state and decides nothing: it is given
 * the bucket's name and the two figures of the generic cell rate
 * algorithm (the interval between admissions and the tolerance that makes
 * a burst), computed here once per message.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

void
sluice_rate_limit_init(SluiceRateLimit *limit)
{
  g_return_if_fail(limit != NULL);
  memset(limit, 0, sizeof *limit);
}

static gchar *key_problem(SluiceLimitKey key, const gchar *key_name,
                          const gchar *field);

gchar *
sluice_rate_limit__problem(const SluiceRateLimit *limit, const gchar *field)
{
  if (limit->count <= 0)
    return g_strdup_printf("%s.count: must be at least 1 (runs per period), "
                           "found %" G_GINT64_FORMAT,
                           field, limit->count);
  if (limit->period_ms <= 0)
    return g_strdup_printf("%s.period_ms: must be at least 1, found "
                           "%" G_GINT64_FORMAT,
                           field, limit->period_ms);
  /* Below a microsecond between admissions the algorithm's arithmetic
   * would round the interval to zero: no limit at all. */
  if (limit->period_ms * 1000 / limit->count < 1)
    return g_strdup_printf("%s.count: %" G_GINT64_FORMAT
                           " per %" G_GINT64_FORMAT
                           " ms is more than one per microsecond; lower "
                           "the count or lengthen the period",
                           field, limit->count, limit->period_ms);
  if (limit->burst < 0)
    return g_strdup_printf("%s.burst: cannot be negative (0 means 1), found "
                           "%" G_GINT64_FORMAT,
                           field, limit->burst);
  if (limit->burst > 1000000)
    return g_strdup_printf("%s.burst: at most 1000000, found "
                           "%" G_GINT64_FORMAT,
                           field, limit->burst);
  return key_problem(limit->key, limit->key_name, field);
}

static const gchar *
key_text(SluiceLimitKey key)
{
  switch (key) {
  case SLUICE_LIMIT_KEY_TASK:
    return ", per task";
  case SLUICE_LIMIT_KEY_HEADER:
    return ", per header ";
  case SLUICE_LIMIT_KEY_ARG:
    return ", per argument ";
  case SLUICE_LIMIT_KEY_NONE:
  default:
    return "";
  }
}

gchar *
sluice_rate_limit__describe(const SluiceRateLimit *limit, const gchar *scope,
                            const gchar *name)
{
  return g_strdup_printf(
      "rate %s %s: %" G_GINT64_FORMAT " per %" G_GINT64_FORMAT
      " ms, burst %" G_GINT64_FORMAT "%s%s",
      scope, name, limit->count, limit->period_ms, MAX(limit->burst, 1),
      key_text(limit->key), limit->key_name != NULL ? limit->key_name : "");
}

gchar *
sluice_concurrency_limit__describe(const SluiceConcurrencyLimit *limit,
                                   const gchar *scope, const gchar *name)
{
  return g_strdup_printf("concurrency %s %s: %u at once%s%s", scope, name,
                         limit->max, key_text(limit->key),
                         limit->key_name != NULL ? limit->key_name : "");
}

static gchar *
key_problem(SluiceLimitKey key, const gchar *key_name, const gchar *field)
{
  switch (key) {
  case SLUICE_LIMIT_KEY_NONE:
  case SLUICE_LIMIT_KEY_TASK:
    if (key_name != NULL)
      return g_strdup_printf("%s.key_name: only a header or argument key "
                             "has a name; leave it NULL",
                             field);
    return NULL;
  case SLUICE_LIMIT_KEY_HEADER:
  case SLUICE_LIMIT_KEY_ARG:
    if (key_name == NULL || key_name[0] == '\0')
      return g_strdup_printf(
          "%s.key_name: a %s key needs the name of the %s", field,
          key == SLUICE_LIMIT_KEY_HEADER ? "header" : "argument",
          key == SLUICE_LIMIT_KEY_HEADER ? "header" : "argument");
    return NULL;
  default:
    return g_strdup_printf("%s.key: unknown key source %d (use "
                           "SLUICE_LIMIT_KEY_NONE, _TASK, _HEADER or _ARG)",
                           field, (gint)key);
  }
}

gboolean
sluice_rate_limit_validate(const SluiceRateLimit *limit, GError **error)
{
  g_autofree gchar *problem = NULL;

  g_return_val_if_fail(limit != NULL, FALSE);
  problem = sluice_rate_limit__problem(limit, "rate_limit");
  if (problem == NULL)
    return TRUE;
  g_set_error_literal(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID,
                      problem);
  return FALSE;
}

SluiceRateLimit *
sluice_rate_limit__copy(const SluiceRateLimit *limit)
{
  SluiceRateLimit *copy = g_new(SluiceRateLimit, 1);

  *copy = *limit;
  copy->key_name = g_strdup(limit->key_name);
  return copy;
}

void
sluice_rate_limit__free(SluiceRateLimit *limit)
{
  if (limit == NULL)
    return;
  g_free((gchar *)limit->key_name);
  g_free(limit);
}

gint64
sluice_rate_limit__interval_us(const SluiceRateLimit *limit)
{
  return limit->period_ms * 1000 / limit->count;
}

gint64
sluice_rate_limit__tolerance_us(const SluiceRateLimit *limit)
{
  return sluice_rate_limit__interval_us(limit) * (MAX(limit->burst, 1) - 1);
}

/* The value of argument @name in @args (a msgpack map) as text, or NULL
 * when the arguments are no map, lack it, or hold something else there. */
static gchar *
arg_value(GBytes *args, const gchar *name)
{
  msgpack_unpacked u;
  gsize len = 0;
  const gchar *data = args != NULL ? g_bytes_get_data(args, &len) : NULL;
  gsize name_len = strlen(name);
  gchar *found = NULL;

  if (data == NULL || len == 0)
    return NULL;
  msgpack_unpacked_init(&u);
  if (msgpack_unpack_next(&u, data, len, NULL) == MSGPACK_UNPACK_SUCCESS &&
      u.data.type == MSGPACK_OBJECT_MAP) {
    for (guint32 i = 0; i < u.data.via.map.size && found == NULL; i++) {
      const msgpack_object *k = &u.data.via.map.ptr[i].key;
      const msgpack_object *v = &u.data.via.map.ptr[i].val;

      if (k->type != MSGPACK_OBJECT_STR || k->via.str.size != name_len ||
          memcmp(k->via.str.ptr, name, name_len) != 0)
        continue;
      if (v->type == MSGPACK_OBJECT_STR)
        found = g_strndup(v->via.str.ptr, v->via.str.size);
      else if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        found = g_strdup_printf("%" G_GUINT64_FORMAT, v->via.u64);
      else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        found = g_strdup_printf("%" G_GINT64_FORMAT, v->via.i64);
      else if (v->type == MSGPACK_OBJECT_BOOLEAN)
        found = g_strdup(v->via.boolean ? "true" : "false");
      break;
    }
  }
  msgpack_unpacked_destroy(&u);
  return found;
}

gchar *
sluice_flow__bucket(SluiceLimitKey key, const gchar *key_name,
                    const gchar *scope, const gchar *name,
                    const SluiceEnvelope *env)
{
  g_autofree gchar *owned = NULL;
  const gchar *value = NULL;

  switch (key) {
  case SLUICE_LIMIT_KEY_TASK:
    value = env->task;
    break;
  case SLUICE_LIMIT_KEY_HEADER:
    value = env->headers != NULL ? g_hash_table_lookup(env->headers, key_name)
                                 : NULL;
    break;
  case SLUICE_LIMIT_KEY_ARG:
    value = owned = arg_value(env->args, key_name);
    break;
  default:
    return g_strconcat(scope, ":", name, NULL);
  }
  /* The name's length goes first, so that no two (name, value) pairs
   * share a bucket whatever bytes they hold. Messages without the key
   * share the bucket of the empty value. */
  return g_strdup_printf("%s:%" G_GSIZE_FORMAT ":%s:%s", scope, strlen(name),
                         name, value != NULL ? value : "");
}

gchar *
sluice_concurrency_limit__problem(const SluiceConcurrencyLimit *limit,
                                  const gchar *field)
{
  if (limit->max < 1)
    return g_strdup_printf("%s.max: must be at least 1 (running at once), "
                           "found 0",
                           field);
  return key_problem(limit->key, limit->key_name, field);
}

SluiceConcurrencyLimit *
sluice_concurrency_limit__copy(const SluiceConcurrencyLimit *limit)
{
  SluiceConcurrencyLimit *copy = g_new(SluiceConcurrencyLimit, 1);

  *copy = *limit;
  copy->key_name = g_strdup(limit->key_name);
  return copy;
}

void
sluice_concurrency_limit__free(SluiceConcurrencyLimit *limit)
{
  if (limit == NULL)
    return;
  g_free((gchar *)limit->key_name);
  g_free(limit);
}

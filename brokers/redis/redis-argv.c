/* redis-argv.c - the argument vectors of Redis commands (see redis-argv.h).
 *
 * A vector grows by doubling; numbers, records and keys are formatted into
 * one scratch GString, and their arguments hold offsets into it until
 * sluice_redis_argv__finish() (the scratch may move while it grows).
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-argv.h"

void
sluice_redis_argv__init(SluiceRedisArgv *a, guint cap, gsize scratch_hint)
{
  a->cap = MAX(cap, 8);
  a->len = 0;
  a->argv = g_new(const char *, a->cap);
  a->lens = g_new(size_t, a->cap);
  a->scratch_at = g_new(gssize, a->cap);
  a->scratch = g_string_sized_new(MAX(scratch_hint, 64));
}

void
sluice_redis_argv__clear(SluiceRedisArgv *a)
{
  g_clear_pointer(&a->argv, g_free);
  g_clear_pointer(&a->lens, g_free);
  g_clear_pointer(&a->scratch_at, g_free);
  if (a->scratch != NULL)
    g_string_free(a->scratch, TRUE);
  a->scratch = NULL;
  a->len = a->cap = 0;
}

static guint
argv_slot(SluiceRedisArgv *a)
{
  if (a->len == a->cap) {
    a->cap *= 2;
    a->argv = g_renew(const char *, a->argv, a->cap);
    a->lens = g_renew(size_t, a->lens, a->cap);
    a->scratch_at = g_renew(gssize, a->scratch_at, a->cap);
  }
  return a->len++;
}

void
sluice_redis_argv__add(SluiceRedisArgv *a, const void *data, gsize len)
{
  guint i = argv_slot(a);

  a->argv[i] = data != NULL ? data : "";
  a->lens[i] = data != NULL ? len : 0;
  a->scratch_at[i] = -1;
}

void
sluice_redis_argv__add_str(SluiceRedisArgv *a, const gchar *s)
{
  sluice_redis_argv__add(a, s, s != NULL ? strlen(s) : 0);
}

void
sluice_redis_argv__add_bytes(SluiceRedisArgv *a, GBytes *bytes)
{
  gsize len = 0;
  gconstpointer data = bytes != NULL ? g_bytes_get_data(bytes, &len) : NULL;

  sluice_redis_argv__add(a, data, len);
}

void
sluice_redis_argv__reserve(SluiceRedisArgv *a, guint n)
{
  for (guint k = 0; k < n; k++)
    sluice_redis_argv__add(a, NULL, 0);
}

void
sluice_redis_argv__add_int(SluiceRedisArgv *a, gint64 value)
{
  guint i = argv_slot(a);
  gsize at = a->scratch->len;

  g_string_append_printf(a->scratch, "%" G_GINT64_FORMAT, value);
  a->scratch_at[i] = (gssize)at;
  a->lens[i] = a->scratch->len - at;
}

void
sluice_redis_argv__add_record(SluiceRedisArgv *a, GBytes *record,
                              gboolean final)
{
  guint i;
  gsize at, len = 0;
  gconstpointer data;

  if (record == NULL) {
    sluice_redis_argv__add(a, NULL, 0);
    return;
  }
  i = argv_slot(a);
  at = a->scratch->len;
  data = g_bytes_get_data(record, &len);
  g_string_append_c(a->scratch, final ? SLUICE_REDIS_RECORD_FINAL
                                      : SLUICE_REDIS_RECORD_PENDING);
  g_string_append_len(a->scratch, data, (gssize)len);
  a->scratch_at[i] = (gssize)at;
  a->lens[i] = len + 1;
}

void
sluice_redis_argv__add_record_ttl(SluiceRedisArgv *a, gint64 ttl_ms)
{
  sluice_redis_argv__add_int(
      a, ttl_ms > 0 ? ttl_ms : SLUICE_REDIS_DEFAULT_RECORD_TTL_MS);
}

void
sluice_redis_argv__add_submit(SluiceRedisArgv *a, const SluiceSubmit *item)
{
  sluice_redis_argv__add_str(a, item->id);
  sluice_redis_argv__add_str(a, item->queue);
  sluice_redis_argv__add_bytes(a, item->payload);
  sluice_redis_argv__add_int(a, MAX(item->due_at, 0));
  sluice_redis_argv__add_int(a, MAX(item->dedup_ttl_ms, 0));
  sluice_redis_argv__add_record(a, item->record, FALSE);
  sluice_redis_argv__add_record_ttl(a, item->record_ttl_ms);
}

void
sluice_redis_argv__add_key(SluiceRedisArgv *a, const SluiceRedisKeys *keys,
                           const gchar *suffix, const gchar *name)
{
  guint i = argv_slot(a);
  gsize at = sluice_redis_keys__append(keys, a->scratch, suffix, name);

  a->scratch_at[i] = (gssize)at;
  a->lens[i] = a->scratch->len - at;
}

void
sluice_redis_argv__finish(SluiceRedisArgv *a)
{
  for (guint i = 0; i < a->len; i++)
    if (a->scratch_at[i] >= 0)
      a->argv[i] = a->scratch->str + a->scratch_at[i];
}

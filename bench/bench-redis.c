/* bench-redis.c - Redis's own counters for the benchmarks. */
#include "config.h"

#include <string.h>

#include <gio/gio.h>

#include "bench/bench-redis.h"

redisContext *
bench_redis_connect(const gchar *url, GError **error)
{
  g_autoptr(GUri) uri = g_uri_parse(url, G_URI_FLAGS_NONE, error);
  redisContext *c;
  const gchar *path;

  if (uri == NULL)
    return NULL;
  if (g_strcmp0(g_uri_get_scheme(uri), "redis") != 0) {
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                "%s: the benchmarks read Redis's counters over TCP; give a "
                "redis://HOST:PORT/DB URL",
                url);
    return NULL;
  }
  c = redisConnect(g_uri_get_host(uri),
                   g_uri_get_port(uri) > 0 ? g_uri_get_port(uri) : 6379);
  if (c == NULL || c->err) {
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED,
                "%s: cannot connect: %s", url,
                c != NULL ? c->errstr : "out of memory");
    if (c != NULL)
      redisFree(c);
    return NULL;
  }
  path = g_uri_get_path(uri);
  if (path != NULL && path[0] == '/' && path[1] != '\0') {
    redisReply *reply = redisCommand(c, "SELECT %s", path + 1);
    gboolean ok = reply != NULL && reply->type == REDIS_REPLY_STATUS;
    if (reply != NULL)
      freeReplyObject(reply);
    if (!ok) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                  "%s: cannot select database %s", url, path + 1);
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

BenchRedisCounters
bench_redis_counters(redisContext *c)
{
  BenchRedisCounters out = {0};
  redisReply *reply;
  g_auto(GStrv) lines = NULL;

  if (c == NULL)
    return out;
  reply = redisCommand(c, "INFO all");
  if (reply == NULL || reply->type != REDIS_REPLY_STRING) {
    if (reply != NULL)
      freeReplyObject(reply);
    return out;
  }
  lines = g_strsplit(reply->str, "\r\n", -1);
  freeReplyObject(reply);
  out.ok = TRUE;
  for (guint i = 0; lines[i] != NULL; i++) {
    const gchar *l = lines[i];
    if (g_str_has_prefix(l, "used_cpu_sys:") ||
        g_str_has_prefix(l, "used_cpu_user:"))
      out.cpu_s += g_ascii_strtod(strchr(l, ':') + 1, NULL);
    else if (g_str_has_prefix(l, "used_memory:"))
      out.used_memory = g_ascii_strtoull(strchr(l, ':') + 1, NULL, 10);
    else if (g_str_has_prefix(l, "cmdstat_")) {
      const gchar *calls = strstr(l, "calls=");
      if (calls != NULL)
        out.calls += g_ascii_strtoull(calls + 6, NULL, 10);
    }
  }
  return out;
}

void
bench_redis_print_costs(GString *line, BenchRedisCounters before,
                        BenchRedisCounters after, guint64 own_calls,
                        gint64 tasks)
{
  gint64 calls;

  if (!before.ok || !after.ok || tasks <= 0)
    return;
  /* The INFO call that read @before is counted in @after (a command's
   * statistics are updated once it has run). */
  calls = (gint64)(after.calls - before.calls) - 1 - (gint64)own_calls;
  g_string_append_printf(line,
                         " redis_cmds_per_task=%.3f redis_cpu_us_per_task=%.2f",
                         (gdouble)MAX(calls, 0) / (gdouble)tasks,
                         (after.cpu_s - before.cpu_s) * 1e6 / (gdouble)tasks);
}

GHashTable *
bench_redis_command_calls(redisContext *c)
{
  redisReply *reply;
  g_auto(GStrv) lines = NULL;
  GHashTable *out;

  if (c == NULL)
    return NULL;
  reply = redisCommand(c, "INFO commandstats");
  if (reply == NULL || reply->type != REDIS_REPLY_STRING) {
    if (reply != NULL)
      freeReplyObject(reply);
    return NULL;
  }
  lines = g_strsplit(reply->str, "\r\n", -1);
  freeReplyObject(reply);
  out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; lines[i] != NULL; i++) {
    const gchar *l = lines[i];
    const gchar *colon = strchr(l, ':');
    const gchar *calls = strstr(l, "calls=");
    if (!g_str_has_prefix(l, "cmdstat_") || colon == NULL || calls == NULL)
      continue;
    g_hash_table_insert(
        out, g_strndup(l + 8, colon - (l + 8)),
        GSIZE_TO_POINTER(g_ascii_strtoull(calls + 6, NULL, 10)));
  }
  return out;
}

typedef struct {
  const gchar *name;
  guint64 calls;
} CommandCalls;

static gint
by_calls_desc(gconstpointer a, gconstpointer b)
{
  const CommandCalls *x = a, *y = b;
  return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

void
bench_redis_print_breakdown(GString *line, GHashTable *before,
                            GHashTable *after, gint64 tasks)
{
  g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(CommandCalls));
  GHashTableIter iter;
  gpointer key, value;
  const gchar *sep = " cmds=";

  if (before == NULL || after == NULL || tasks <= 0)
    return;
  g_hash_table_iter_init(&iter, after);
  while (g_hash_table_iter_next(&iter, &key, &value)) {
    guint64 was = GPOINTER_TO_SIZE(g_hash_table_lookup(before, key));
    CommandCalls row = {key, GPOINTER_TO_SIZE(value) - was};
    if (row.calls * 1000 >= (guint64)tasks)
      g_array_append_val(rows, row);
  }
  g_array_sort(rows, by_calls_desc);
  for (guint i = 0; i < rows->len; i++) {
    const CommandCalls *row = &g_array_index(rows, CommandCalls, i);
    g_string_append_printf(line, "%s%s:%.3f", sep, row->name,
                           (gdouble)row->calls / (gdouble)tasks);
    sep = ",";
  }
}

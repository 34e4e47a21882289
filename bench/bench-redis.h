/* bench-redis.h - what the benchmarks read from Redis about Redis: its CPU
 * time, the commands it ran and the memory it holds, from INFO.
 *
 * Shared by bench/bench.c and bench/bench-cli.c, so that every figure of
 * Redis cost is taken the same way.
 */
#pragma once

#include <glib.h>
#include <hiredis/hiredis.h>

G_BEGIN_DECLS

typedef struct {
  gdouble cpu_s;       /* used_cpu_sys + used_cpu_user */
  guint64 calls;       /* sum of cmdstat_*:calls, scripts' inner calls too */
  guint64 used_memory; /* bytes */
  gboolean ok;         /* FALSE when INFO could not be read */
} BenchRedisCounters;

/* Returns: (transfer full) (nullable): a connection to the redis:// @url,
 * or NULL (and a message in @error) when it is not a TCP Redis URL or
 * cannot be reached. */
redisContext *bench_redis_connect(const gchar *url, GError **error);

/* Reads the counters with one INFO call; that call itself is counted in
 * the calls of the next reading. */
BenchRedisCounters bench_redis_counters(redisContext *c);

/* Appends " redis_cmds_per_task=... redis_cpu_us_per_task=..." for the
 * span between @before and @after, taking off the INFO call that read
 * @before and @own_calls commands the benchmark itself sent in between. */
void bench_redis_print_costs(GString *line, BenchRedisCounters before,
                             BenchRedisCounters after, guint64 own_calls,
                             gint64 tasks);

/* Returns: (transfer full): command name -> calls (guint64 in a pointer
 * sized integer), from INFO commandstats; NULL if it cannot be read. */
GHashTable *bench_redis_command_calls(redisContext *c);

/* Appends " cmds=NAME:PER_TASK,..." with each command's calls per task
 * between @before and @after, most frequent first, leaving out those
 * under 0.001 per task. */
void bench_redis_print_breakdown(GString *line, GHashTable *before,
                                 GHashTable *after, gint64 tasks);

G_END_DECLS

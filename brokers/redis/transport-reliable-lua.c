/* transport-reliable-lua.c - the scripts of the redis-reliable transport.
 * Its Lua is in brokers/redis/lua/: transport-reliable.lua, its fragment
 * for the shared scripts (the t_* functions of redis-transport.h, on
 * streams and one consumer group per stream), and reliable/<name>.lua, the
 * scripts only it runs (group creation, the priority read, reclaim, the
 * hand-back of surplus reads, the reclaim count), each documented in its
 * file. transport-reliable.c says why the transport works as it does; the
 * Lua is how.
 *
 * The rules of redis-scripts.c hold there too: every check of a step
 * before its first write, keys named only through the prelude, times from
 * the caller.
 *
 * Ownership (fencing) is read in batches: t_owns asks XPENDING for this
 * consumer's pending entries from the handle on, 128 at a time, and
 * answers later questions about handles in that range from the answer. A
 * script's own writes never give a consumer an entry, and t_ack marks what
 * it acknowledged, so the answers stay true for the rest of the script.
 * pcall turns "no such group" (a restart without persistence) into "not
 * owned" instead of an error that would fail a whole batch.
 *
 * Acknowledgements are deferred to t_flush, at the end of the settle
 * script: one XACK per queue, then the entries are removed by XTRIM MINID
 * up to the newest one acknowledged (and an XDEL of that one), which
 * provably removes only acknowledged entries: every entry below an
 * acknowledged one was delivered before it (XREADGROUP > delivers in id
 * order, and ids only grow), and none below the oldest pending entry is
 * pending. When an older entry is still pending (a long task runs), the
 * trim stops at it and the acknowledged entries above it are removed by
 * XDEL. Measured on Redis 7.0: about a third of the Redis CPU of XACK +
 * XDEL per entry.
 */
#include "config.h"

#include "brokers/redis/transport-reliable-lua.h"

#include "brokers/redis/redis-lua.h"

void
sluice_redis__reliable_scripts_init(SluiceRedisReliableScripts *scripts)
{
  const gchar *lua = sluice_redis_lua__transport_reliable;

  sluice_redis_script__init(&scripts->ensure, "ensure_groups", lua,
                            sluice_redis_lua__reliable_ensure_groups);
  sluice_redis_script__init(&scripts->fetch, "fetch", lua,
                            sluice_redis_lua__reliable_fetch);
  sluice_redis_script__init(&scripts->reclaim, "reclaim", lua,
                            sluice_redis_lua__reliable_reclaim);
  sluice_redis_script__init(&scripts->requeue, "requeue", lua,
                            sluice_redis_lua__reliable_requeue);
  sluice_redis_script__init(&scripts->count_reclaimable, "count_reclaimable",
                            lua, sluice_redis_lua__reliable_count_reclaimable);
}

void
sluice_redis__reliable_scripts_clear(SluiceRedisReliableScripts *scripts)
{
  sluice_redis_script__clear(&scripts->ensure);
  sluice_redis_script__clear(&scripts->fetch);
  sluice_redis_script__clear(&scripts->reclaim);
  sluice_redis_script__clear(&scripts->requeue);
  sluice_redis_script__clear(&scripts->count_reclaimable);
}

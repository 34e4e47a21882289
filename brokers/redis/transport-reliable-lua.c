/* transport-reliable-lua.c - the Lua of the redis-reliable transport: its
 * fragment for the shared scripts (the t_* functions of redis-transport.h,
 * on streams and one consumer group per stream) and the scripts only it
 * runs (group creation, the priority read, reclaim, the hand-back of
 * surplus reads, the reclaim count). transport-reliable.c says why the
 * transport works as it does; this file is how, in Lua.
 *
 * The rules of redis-scripts.c hold here too: every check of a step
 * before its first write, keys named only through the prelude, times from
 * the caller.
 */
#include "config.h"

#include "brokers/redis/transport-reliable-lua.h"

/* ---- The Lua fragment ----------------------------------------------------
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
const gchar sluice_redis__reliable_lua[] =
    "local GROUP = '" SLUICE_REDIS_RELIABLE_GROUP "'\n"
    /* Per stream key: owned[handle] = true (pending for the consumer
     * asked about) or false (not, or acknowledged by this script); spans:
     * the id ranges XPENDING answered for completely. */
    "local owned, spans, acks, ack_keys = {}, {}, {}, {}\n"
    /* An entry id as two numbers (ms, seq), or nil if it is not one. */
    "local function id_num(id)\n"
    "  local ms, seq = string.match(id, '^(%d+)-(%d+)$')\n"
    "  if not ms then return nil end\n"
    "  return tonumber(ms), tonumber(seq)\n"
    "end\n"
    "local function id_cmp(ams, aseq, bms, bseq)\n"
    "  if ams ~= bms then return ams < bms and -1 or 1 end\n"
    "  if aseq ~= bseq then return aseq < bseq and -1 or 1 end\n"
    "  return 0\n"
    "end\n"
    /* Is id a newer than id b, whose '-' is at d? Without parsing when a
     * has its '-' there too (as many ms digits: every id of this era):
     * ids of one length then compare as strings; otherwise the ms parts
     * (of one length) compare as strings, and if they are equal the
     * longer sequence number is the larger (no leading zeros). Parsing
     * each id costs more Redis CPU than the rest of a settlement. */
    "local function id_newer(a, b, d)\n"
    "  if string.byte(a, d) == 45 and string.byte(b, d) == 45 then\n"
    "    if #a == #b then return a > b end\n"
    "    local am, bm = string.sub(a, 1, d - 1), string.sub(b, 1, d - 1)\n"
    "    if am ~= bm then return am > bm end\n"
    "    return #a > #b\n"
    "  end\n"
    "  local ams, aseq = id_num(a)\n"
    "  local bms, bseq = id_num(b)\n"
    "  return id_cmp(ams, aseq, bms, bseq) > 0\n"
    "end\n"
    "local function t_owns(key, handle, consumer)\n"
    "  local known = owned[key]\n"
    "  if known then\n"
    "    local v = known[handle]\n"
    "    if v ~= nil then return v end\n"
    "  else\n"
    "    known = {}; owned[key] = known; spans[key] = {}\n"
    "  end\n"
    "  local ms, seq = id_num(handle)\n"
    "  if not ms then return false end\n"
    "  for _, r in ipairs(spans[key]) do\n"
    "    if id_cmp(ms, seq, r[1], r[2]) >= 0 and\n"
    "       (not r[3] or id_cmp(ms, seq, r[3], r[4]) <= 0) then\n"
    "      return false\n"
    "    end\n"
    "  end\n"
    "  local ok, list = pcall(redis.call, 'XPENDING', key, GROUP, handle,\n"
    "                         '+', 128, consumer)\n"
    "  if not ok then return false end\n"
    "  for _, e in ipairs(list) do\n"
    "    if known[e[1]] == nil then known[e[1]] = true end\n"
    "  end\n"
    "  local r = {ms, seq}\n"
    "  if #list == 128 then r[3], r[4] = id_num(list[#list][1]) end\n"
    "  table.insert(spans[key], r)\n"
    "  return known[handle] == true\n"
    "end\n"
    "local function t_push(queue, payload)\n"
    "  redis.call('XADD', K_STREAM .. queue, '*', 'p', payload)\n"
    "end\n"
    "local function t_push_many(queue, payloads)\n"
    "  local key = K_STREAM .. queue\n"
    "  for i = 1, #payloads do\n"
    "    redis.call('XADD', key, '*', 'p', payloads[i])\n"
    "  end\n"
    "end\n"
    "local function t_check(queue, handle, consumer)\n"
    "  return t_owns(K_STREAM .. queue, handle, consumer)\n"
    "end\n"
    "local function t_ack(queue, handle, consumer)\n"
    "  local key = K_STREAM .. queue\n"
    "  local list = acks[key]\n"
    "  if not list then\n"
    "    list = {}; acks[key] = list; ack_keys[#ack_keys + 1] = key\n"
    "  end\n"
    "  list[#list + 1] = handle\n"
    "  if owned[key] then owned[key][handle] = false end\n"
    "end\n"
    "local function t_flush()\n"
    "  for _, key in ipairs(ack_keys) do\n"
    "    local ids = acks[key]\n"
    "    for s = 1, #ids, 1000 do\n"
    "      redis.call('XACK', key, GROUP,\n"
    "                 unpack(ids, s, math.min(s + 999, #ids)))\n"
    "    end\n"
    "    local top = ids[1]\n"
    "    local d = string.find(top, '-', 1, true)\n"
    "    for i = 2, #ids do\n"
    "      if id_newer(ids[i], top, d) then top = ids[i] end\n"
    "    end\n"
    "    local first = redis.call('XPENDING', key, GROUP, '-', '+', 1)[1]\n"
    /* Below top and top itself (no id arithmetic: ids may be any
     * 64-bit numbers). */
    "    if not first or id_newer(first[1], top, d) then\n"
    "      redis.call('XTRIM', key, 'MINID', top)\n"
    "      redis.call('XDEL', key, top)\n"
    "    else\n"
    "      local p = first[1]\n"
    "      local dp = string.find(p, '-', 1, true)\n"
    "      redis.call('XTRIM', key, 'MINID', p)\n"
    "      local rest = {}\n"
    "      for _, id in ipairs(ids) do\n"
    "        if id_newer(id, p, dp) then rest[#rest + 1] = id end\n"
    "      end\n"
    "      for s = 1, #rest, 1000 do\n"
    "        redis.call('XDEL', key, unpack(rest, s, math.min(s + 999, "
    "#rest)))\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    /* A release is a requeue: a copy at the end of the stream, for any
     * consumer to read at once, carrying the deliveries that came before
     * this one in field d (the release itself is not one), then the
     * original acknowledged and deleted, all in the settle script. Leaving
     * it pending for a peer's reclaim would wait for a reclaim tick and
     * count as one more delivery. */
    "local function t_release(queue, handle, consumer, payload, count)\n"
    "  local key = K_STREAM .. queue\n"
    "  local prior = (tonumber(count) or 1) - 1\n"
    "  if prior > 0 then\n"
    "    redis.call('XADD', key, '*', 'p', payload, 'd', prior)\n"
    "  else\n"
    "    redis.call('XADD', key, '*', 'p', payload)\n"
    "  end\n"
    "  redis.call('XACK', key, GROUP, handle)\n"
    "  redis.call('XDEL', key, handle)\n"
    "  if owned[key] then owned[key][handle] = false end\n"
    "end\n"
    /* Refused by t_check: is the entry pending for nobody (settled
     * already, or lost with Redis's data) rather than for a peer? */
    "local function t_gone(queue, handle)\n"
    "  local ok, r = pcall(redis.call, 'XPENDING', K_STREAM .. queue, GROUP,\n"
    "                      handle, handle, 1)\n"
    "  return not ok or #r == 0\n"
    "end\n"
    /* The payload and the prior deliveries of a stream entry's fields. */
    "local function t_fields(f)\n"
    "  local p, d = '', 0\n"
    "  if f then\n"
    "    for j = 1, #f - 1, 2 do\n"
    "      if f[j] == 'p' then p = f[j + 1]\n"
    "      elseif f[j] == 'd' then d = tonumber(f[j + 1]) or 0 end\n"
    "    end\n"
    "  end\n"
    "  return p, d\n"
    "end\n"
    "local function t_pending(key)\n"
    "  local ok, r = pcall(redis.call, 'XPENDING', key, GROUP)\n"
    "  if ok then return r[1] end\n"
    "  return 0\n"
    "end\n"
    /* Acknowledged entries are deleted, so what is in the stream and not
     * pending has not been delivered yet. */
    "local function t_depth(queue)\n"
    "  local key = K_STREAM .. queue\n"
    "  local n = redis.call('XLEN', key) - t_pending(key)\n"
    "  if n < 0 then n = 0 end\n"
    "  return n\n"
    "end\n"
    "local function t_in_flight(queues)\n"
    "  local n = 0\n"
    "  for _, q in ipairs(queues) do n = n + t_pending(K_STREAM .. q) end\n"
    "  return n\n"
    "end\n"
    /* The ready messages are those after the group's last delivered id
     * (all of them without a group): acknowledged entries are deleted, so
     * what is at or before it is pending. Returns the XRANGE start of the
     * ready ones, and the last delivered id (nil without a group); nil
     * without a stream. */
    "local function t_ready_start(key)\n"
    "  if redis.call('EXISTS', key) == 0 then return nil end\n"
    "  local groups = redis.call('XINFO', 'GROUPS', key)\n"
    "  for _, g in ipairs(groups) do\n"
    "    local name, last\n"
    "    for j = 1, #g, 2 do\n"
    "      if g[j] == 'name' then name = g[j + 1]\n"
    "      elseif g[j] == 'last-delivered-id' then last = g[j + 1] end\n"
    "    end\n"
    "    if name == GROUP and last then return '(' .. last, last end\n"
    "  end\n"
    "  return '-'\n"
    "end\n"
    /* Up to limit ready entries after entry `after` ('' = from the first
     * ready one), oldest (next to be read) first, read with one XRANGE
     * COUNT: {cursor, payload, ...}, the cursor the id of the last one when
     * the page is full, else ''; {false} for a cursor that is no entry
     * id. A cursor that the group's reads have passed meanwhile resumes
     * at the first ready entry. */
    "local function t_peek(queue, after, limit)\n"
    "  local key = K_STREAM .. queue\n"
    "  local start, last = t_ready_start(key)\n"
    "  if not start then return {''} end\n"
    "  if after ~= '' then\n"
    "    local ams, aseq = id_num(after)\n"
    "    if not ams then return {false} end\n"
    "    local lms, lseq\n"
    "    if last then lms, lseq = id_num(last) end\n"
    "    if not lms or id_cmp(ams, aseq, lms, lseq) > 0 then\n"
    "      start = '(' .. after\n"
    "    end\n"
    "  end\n"
    "  local e = redis.call('XRANGE', key, start, '+', 'COUNT', limit)\n"
    "  local out = {''}\n"
    "  for _, x in ipairs(e) do out[#out + 1] = t_fields(x[2]) end\n"
    "  if #e == limit then out[1] = e[#e][1] end\n"
    "  return out\n"
    "end\n"
    "local function t_purge(queue)\n"
    "  local key = K_STREAM .. queue\n"
    "  local start = t_ready_start(key)\n"
    "  if not start then return 0 end\n"
    "  local n = 0\n"
    "  while true do\n"
    "    local e = redis.call('XRANGE', key, start, '+', 'COUNT', 1000)\n"
    "    if #e == 0 then break end\n"
    "    local ids = {}\n"
    "    for i, x in ipairs(e) do ids[i] = x[1] end\n"
    "    n = n + redis.call('XDEL', key, unpack(ids))\n"
    "    start = '(' .. ids[#ids]\n"
    "  end\n"
    "  return n\n"
    "end\n"
    "local function t_heartbeat(consumer, lease_ms, argv, first)\n"
    "  local mine, order = {}, {}\n"
    "  local held, gone = 0, 0\n"
    "  for i = first, #argv - 1, 2 do\n"
    "    local key = K_STREAM .. argv[i]\n"
    "    held = held + 1\n"
    "    if t_owns(key, argv[i + 1], consumer) then\n"
    "      local ids = mine[key]\n"
    "      if not ids then\n"
    "        ids = {'XCLAIM', key, GROUP, consumer, 0}\n"
    "        mine[key] = ids; order[#order + 1] = key\n"
    "      end\n"
    "      ids[#ids + 1] = argv[i + 1]\n"
    "    else\n"
    "      gone = gone + 1\n"
    "    end\n"
    "  end\n"
    "  local lapsed = false\n"
    "  if lease_ms > 0 then\n"
    "    lapsed = not redis.call('SET', K_ALIVE .. consumer, '1', 'PX',\n"
    "                            lease_ms, 'GET')\n"
    "  end\n"
    "  for _, key in ipairs(order) do\n"
    "    local cmd = mine[key]\n"
    "    cmd[#cmd + 1] = 'JUSTID'\n"
    "    redis.call(unpack(cmd))\n"
    "  end\n"
    "  if lapsed and held > 0 then\n"
    "    return redis.error_reply('LEASE the liveness key of consumer ' ..\n"
    "      consumer .. ' had expired while it held ' .. held ..\n"
    "      ' deliveries; ' .. gone .. ' of them are no longer its own ' ..\n"
    "      '(reclaimed by a peer, or settled meanwhile); renewed now')\n"
    "  end\n"
    "end\n"
    "local function t_leave(consumer)\n"
    "  local empty = {}\n"
    "  for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do\n"
    "    local key = K_STREAM .. q\n"
    "    local ok, r = pcall(redis.call, 'XPENDING', key, GROUP, '-', '+', 1,\n"
    "                        consumer)\n"
    "    if ok and #r == 0 then empty[#empty + 1] = key end\n"
    "  end\n"
    "  redis.call('DEL', K_ALIVE .. consumer)\n"
    "  for _, key in ipairs(empty) do\n"
    "    redis.call('XGROUP', 'DELCONSUMER', key, GROUP, consumer)\n"
    "  end\n"
    "end\n";

/* ---- The transport's own scripts ------------------------------------------
 *
 * Each is assembled like a shared script (redis-scripts.h), with the
 * fragment above spliced in.
 */

/* ARGV: the queues. Creates each missing group at 0 (MKSTREAM). Returns
 * one char per queue: '1' created now, '0' it existed. */
static const gchar body_ensure[] =
    "local out = {}\n"
    "for i = 1, #ARGV do\n"
    "  local ok, err = pcall(redis.call, 'XGROUP', 'CREATE',\n"
    "                        K_STREAM .. ARGV[i], GROUP, '0', 'MKSTREAM')\n"
    "  if ok then out[i] = '1'\n"
    "  elseif string.find(tostring(err), 'BUSYGROUP', 1, true) then\n"
    "    out[i] = '0'\n"
    "  else return redis.error_reply(tostring(err)) end\n"
    "end\n"
    "return table.concat(out)\n";

/* ARGV: consumer, max, the queues in priority order. Reads them in order
 * without blocking, each for what is still missing. Returns {{queue index
 * (1-based), id, payload, prior deliveries, ...}, {indexes of queues
 * without a group}}. */
static const gchar body_fetch[] =
    "local me, left = ARGV[1], tonumber(ARGV[2])\n"
    "local out, missing = {}, {}\n"
    "for qi = 3, #ARGV do\n"
    "  if left <= 0 then break end\n"
    "  local ok, r = pcall(redis.call, 'XREADGROUP', 'GROUP', GROUP, me,\n"
    "                      'COUNT', left, 'STREAMS', K_STREAM .. ARGV[qi],\n"
    "                      '>')\n"
    "  if not ok then\n"
    "    if string.find(tostring(r), 'NOGROUP', 1, true) then\n"
    "      missing[#missing + 1] = qi - 2\n"
    "    else\n"
    "      return redis.error_reply(tostring(r))\n"
    "    end\n"
    "  elseif r then\n"
    "    for _, e in ipairs(r[1][2]) do\n"
    "      local p, d = t_fields(e[2])\n"
    "      out[#out + 1] = qi - 2; out[#out + 1] = e[1]; out[#out + 1] = p\n"
    "      out[#out + 1] = d\n"
    "      left = left - 1\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {out, missing}\n";

/* ARGV: consumer, max, idle_ms, the queues in priority order. Takes over
 * entries of consumers without a liveness key, and entries idle past
 * idle_ms, up to max in all; forgets dead consumers that hold nothing.
 * Every check comes before the writes of its queue. Returns {{queue index,
 * id, delivery count, payload, ...}, {queue index, entries found deleted,
 * ...}, consumers forgotten} or, when the caller holds no lease itself,
 * {{}, {}, 0, 'nolease'} without looking: a consumer whose own liveness key
 * lapsed has just come back from a stall (its own, or Redis's, which let
 * every key lapse at once), and the owners it would judge dead may simply
 * not have renewed yet. */
static const gchar body_reclaim[] =
    "local me, max, idle = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local out, deleted, forgotten, taken = {}, {}, 0, 0\n"
    "if redis.call('EXISTS', K_ALIVE .. me) == 0 then\n"
    "  return {out, deleted, 0, 'nolease'}\n"
    "end\n"
    "for qi = 4, #ARGV do\n"
    "  if taken >= max then break end\n"
    "  local key = K_STREAM .. ARGV[qi]\n"
    "  local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', key,\n"
    "                              GROUP)\n"
    "  if ok then\n"
    "    local ids, counts, dead = {}, {}, {}\n"
    "    for _, c in ipairs(consumers) do\n"
    "      local name, pending, cidle = '', 0, 0\n"
    "      for j = 1, #c - 1, 2 do\n"
    "        if c[j] == 'name' then name = c[j + 1]\n"
    "        elseif c[j] == 'pending' then pending = c[j + 1]\n"
    "        elseif c[j] == 'idle' then cidle = c[j + 1] end\n"
    "      end\n"
    "      if name ~= me and redis.call('EXISTS', K_ALIVE .. name) == 0 then\n"
    "        dead[#dead + 1] = {name, cidle}\n"
    "        local room = max - taken - #ids\n"
    "        if pending > 0 and room > 0 then\n"
    "          for _, e in ipairs(redis.call('XPENDING', key, GROUP, '-', "
    "'+',\n"
    "                                        room, name)) do\n"
    "            ids[#ids + 1] = e[1]; counts[e[1]] = e[4]\n"
    "          end\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "    if max - taken - #ids > 0 then\n"
    "      for _, e in ipairs(redis.call('XPENDING', key, GROUP, 'IDLE', "
    "idle,\n"
    "                                    '-', '+', max - taken)) do\n"
    "        if not counts[e[1]] and #ids < max - taken then\n"
    "          ids[#ids + 1] = e[1]; counts[e[1]] = e[4]\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "    if #ids > 0 then\n"
    "      local cmd = {'XCLAIM', key, GROUP, me, 0}\n"
    "      for _, id in ipairs(ids) do cmd[#cmd + 1] = id end\n"
    "      local present, gone = {}, 0\n"
    "      for _, e in ipairs(redis.call(unpack(cmd))) do\n"
    "        local p, d = t_fields(e[2])\n"
    "        present[e[1]] = true\n"
    "        out[#out + 1] = qi - 3; out[#out + 1] = e[1]\n"
    "        out[#out + 1] = counts[e[1]] + 1 + d; out[#out + 1] = p\n"
    "        taken = taken + 1\n"
    "      end\n"
    "      for _, id in ipairs(ids) do\n"
    "        if not present[id] then gone = gone + 1 end\n"
    "      end\n"
    "      if gone > 0 then\n"
    "        deleted[#deleted + 1] = qi - 3; deleted[#deleted + 1] = gone\n"
    "      end\n"
    "    end\n"
    "    for _, d in ipairs(dead) do\n"
    "      if d[2] >= idle and\n"
    "         #redis.call('XPENDING', key, GROUP, '-', '+', 1, d[1]) == 0 "
    "then\n"
    "        redis.call('XGROUP', 'DELCONSUMER', key, GROUP, d[1])\n"
    "        forgotten = forgotten + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {out, deleted, forgotten}\n";

/* ARGV: consumer, then queue id payload delivery_count quadruples of
 * deliveries read beyond what fetch was asked for. Each one still pending
 * for the consumer is handed back as a release is (t_release: a copy at
 * the end, the original acknowledged and deleted). Returns how many were
 * handed back. Repeating it is harmless (the originals are gone). */
static const gchar body_requeue[] =
    "local me, n = ARGV[1], 0\n"
    "for i = 2, #ARGV - 3, 4 do\n"
    "  local key = K_STREAM .. ARGV[i]\n"
    "  if t_owns(key, ARGV[i + 1], me) then\n"
    "    t_release(ARGV[i], ARGV[i + 1], me, ARGV[i + 2], ARGV[i + 3])\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";

/* ARGV: consumer, max, idle_ms, the queues. What body_reclaim would take
 * over now, without taking anything: entries of consumers whose liveness
 * key is gone, and entries idle past idle_ms. Returns min(count, max). */
static const gchar body_count_reclaimable[] =
    "local me, max, idle = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local n = 0\n"
    "if redis.call('EXISTS', K_ALIVE .. me) == 0 then return 0 end\n"
    "for qi = 4, #ARGV do\n"
    "  if n >= max then break end\n"
    "  local key = K_STREAM .. ARGV[qi]\n"
    "  local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', key,\n"
    "                              GROUP)\n"
    "  if ok then\n"
    "    for _, c in ipairs(consumers) do\n"
    "      local name, pending = '', 0\n"
    "      for j = 1, #c - 1, 2 do\n"
    "        if c[j] == 'name' then name = c[j + 1]\n"
    "        elseif c[j] == 'pending' then pending = c[j + 1] end\n"
    "      end\n"
    "      if name ~= me and pending > 0 and\n"
    "         redis.call('EXISTS', K_ALIVE .. name) == 0 then\n"
    "        n = n + pending\n"
    "      end\n"
    "    end\n"
    "    if n < max then\n"
    "      n = n + #redis.call('XPENDING', key, GROUP, 'IDLE', idle, '-',\n"
    "                          '+', max - n)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return math.min(n, max)\n";

void
sluice_redis__reliable_scripts_init(SluiceRedisReliableScripts *scripts)
{
  sluice_redis_script__init(&scripts->ensure, "ensure_groups",
                            SLUICE_REDIS_LUA_DRAINS, sluice_redis__reliable_lua,
                            body_ensure);
  sluice_redis_script__init(&scripts->fetch, "fetch", SLUICE_REDIS_LUA_DRAINS,
                            sluice_redis__reliable_lua, body_fetch);
  sluice_redis_script__init(&scripts->reclaim, "reclaim",
                            SLUICE_REDIS_LUA_DRAINS, sluice_redis__reliable_lua,
                            body_reclaim);
  sluice_redis_script__init(&scripts->requeue, "requeue",
                            SLUICE_REDIS_LUA_DRAINS, sluice_redis__reliable_lua,
                            body_requeue);
  sluice_redis_script__init(&scripts->count_reclaimable, "count_reclaimable",
                            SLUICE_REDIS_LUA_READS, sluice_redis__reliable_lua,
                            body_count_reclaimable);
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

/* reliable-transport.c - the "redis-reliable" broker: one Redis stream and
 * one consumer group per queue.
 *
 * DELIVERY GUARANTEE: at least once. A fetched message stays in the
 * group's pending entries list (PEL) under the consumer that read it until
 * a settle acknowledges it, in the same script that writes its record, its
 * retry or its dead letter. A consumer that dies leaves its entries
 * pending; a peer reclaims them once the dead consumer's liveness key has
 * expired (or an entry sat idle past the lease) and runs them again.
 *
 * A task runs twice when its worker died (crash, kill -9, power loss)
 * after it started the task and before its settle reached Redis; when its
 * worker stalled (a pause, a partition, a swapped-out process) longer than
 * the lease, so that a peer reclaimed it while it still ran; when a
 * fetch's reply was lost on the network (the entries wait in the PEL for
 * the lease, then run); when a stop outlasts shutdown_timeout (the
 * cancelled task is given back and runs again elsewhere); and when Redis
 * lost its consumer group (restarted without persistence): every entry
 * still in the stream is delivered again. A late settle
 * of the stalled worker is refused (fencing), so the task is never retried
 * or buried twice, but its side effects happen twice and the last record
 * written wins. A task is lost only with Redis's data: what Redis had
 * acknowledged and not yet written to disk when it died (appendfsync
 * everysec loses up to a second, always loses nothing, RDB-only loses
 * everything since the last save), an entry deleted or trimmed by hand
 * while pending (reclaim logs it), a dead letter dropped by the
 * dead_letter_max cap, or a Redis that evicts keys (maxmemory-policy other
 * than noeviction; the pool warns about it).
 *
 * What it omits: Redis 7.0 has no XNACK, so a delivery cannot be made
 * "undelivered" again: RELEASE leaves it pending and relies on `leave`
 * (below), and every redelivery counts toward max_deliveries, graceful
 * ones included. There is no per-message lease: liveness is per consumer.
 *
 * Everything that is not the queue itself (records, schedule, revocations,
 * periodic claims, dead letters, stats, reconnection) is the shared Redis
 * layer in brokers/redis/. Decisions of this transport, and why:
 *
 *   stream   {ns}:s:<queue>, one field "p" holding the payload bytes. A
 *            plain enqueue batch (no claims, records or due times) is
 *            pipelined XADDs without a script; others use the shared
 *            enqueue script (t_push_many: one XADD per message).
 *   group    "sluice", one per stream, created at id 0 with MKSTREAM (so
 *            messages added before any worker existed are delivered), by
 *            an allow-oom script (a full Redis still drains) that
 *            tolerates BUSYGROUP. Groups known to exist are cached per
 *            broker. NOGROUP (Redis restarted without persistence, the
 *            stream deleted by hand) re-creates the group once and
 *            carries on; a second NOGROUP in the same fetch is reported
 *            UNAVAILABLE, so the worker backs off instead of spinning.
 *            Because acknowledged entries are deleted, a re-created group
 *            at 0 redelivers exactly what was never acknowledged.
 *   fetch    one queue: XREADGROUP COUNT max [BLOCK ms], one round trip.
 *            Several queues: a script reads them in priority order
 *            without blocking, asking each for what is still missing
 *            (strict priority, never more than asked, one round trip);
 *            only when all were empty does one XREADGROUP BLOCK wait on
 *            all of them. A blocked XREADGROUP is served from one stream
 *            (at most COUNT entries), but one that finds data at once
 *            answers up to COUNT per stream: what exceeds max is handed
 *            back at once by a script that re-adds a copy and acknowledges
 *            and deletes the original (it was never given to the worker;
 *            it moves to the end of its stream). `wakeup` interrupts the
 *            blocking read (CLIENT UNBLOCK).
 *   settle   the shared settle script; t_check fences: the entry must be
 *            pending for this consumer (XPENDING key group <range>
 *            consumer, read in batches; XACK alone does not fence: a late
 *            XACK removes a peer's pending entry, REDIS-NOTES §0.1). Acks
 *            are deferred to t_flush at the end of the script: one XACK
 *            per queue, then XTRIM MINID (XDEL above a still-pending
 *            entry) removes exactly the acknowledged entries (proof below,
 *            at the fragment), so a stream holds only undelivered and
 *            pending entries and XLEN and the PEL return to 0 after a
 *            run. A refused (stale) settle is counted in {ns}:stale.
 *   release  nothing: the entry stays pending for its consumer, and the
 *            worker's `leave` (after its last settle) deletes the
 *            consumer's liveness key, so the next reclaim of any peer
 *            takes it at once.
 *   heartbeat SET {ns}:alive:<consumer> PX lease (GET tells whether it had
 *            expired), and a self-claim XCLAIM key group <me> 0 ids JUSTID
 *            of every held entry still pending for this consumer: resets
 *            its idle time without bumping its delivery count, so a long
 *            task of a live worker is never reclaimed. Ownership is
 *            checked first, so a renewal never takes back what a peer
 *            reclaimed. If the liveness key had expired while deliveries
 *            were held, the heartbeat renews and then fails, so the worker
 *            logs "lease lost; message may be executed again".
 *   reclaim  one script per call: for each queue in priority order, the
 *            entries of consumers whose liveness key is gone (any idle
 *            time) and entries idle past idle_ms (any owner), claimed with
 *            XCLAIM, which bumps the delivery count reported to the core
 *            (the payload, and so `attempt`, is untouched). Entries
 *            deleted from the stream while pending are dropped from the
 *            PEL by XCLAIM and reported (logged), never looped on. A dead
 *            consumer is deleted from the group in the same script, only
 *            when its PEL is empty and it has been idle past idle_ms.
 *            Liveness is judged by the server (key expiry, PEL idle
 *            time), never by worker clocks. A reclaimer must hold a lease
 *            itself: one whose own liveness key lapsed is back from a
 *            stall (its own, or Redis's, which lets every key lapse at
 *            once) and takes nothing until it has renewed. After a
 *            contact gap (no successful reclaim for 2/3 of idle_ms, or a
 *            PING that took longer than idle_ms / 4: Redis was down or
 *            stalled, and live consumers' liveness keys and entries may
 *            look expired until their next renewal) the reclaimer skips
 *            one round, so live workers renew first (REDIS-NOTES R17).
 *   leave    deletes the liveness key and removes the consumer from every
 *            group where it holds nothing.
 *   stats    depth = XLEN - pending per queue; in_flight = the pending
 *            counts summed; stale settles from {ns}:stale.
 *   persistence  the first fetch reads appendonly and appendfsync and
 *            warns when they can lose acknowledged work (R15).
 *
 * Payloads are handed to the core without a copy: each delivery's GBytes
 * takes over the buffer hiredis allocated for the reply element.
 *
 * To extend: a stream operation that a shared script needs belongs in the
 * Lua fragment (see redis-transport.h for its contract); one that only this
 * transport needs is a script of its own below (made in reliable_init())
 * or a C function.
 */
#include "config.h"

#include "core/sluice-private.h"

#include "brokers/redis-reliable/reliable-transport.h"
#include "brokers/redis/redis-broker.h"

/* The consumer group of every stream. */
#define GROUP "sluice"
/* The most entries one reclaim takes (keeps Lua's argument lists short). */
#define RECLAIM_MAX 1000
/* Per-consumer reclaim bookkeeping is pruned beyond this many consumers. */
#define CONTACT_PRUNE_AT 64

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
static const gchar reliable_lua[] =
    "local GROUP = '" GROUP "'\n"
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
    /* Stays pending; `leave` lets peers reclaim it at once. */
    "local function t_release(queue, handle, consumer, payload) end\n"
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
     * (all of them without a group); pending ones stay. */
    "local function t_purge(queue)\n"
    "  local key = K_STREAM .. queue\n"
    "  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', key)\n"
    "  if not ok then return 0 end\n"
    "  local start = '-'\n"
    "  for _, g in ipairs(groups) do\n"
    "    local name, last\n"
    "    for j = 1, #g, 2 do\n"
    "      if g[j] == 'name' then name = g[j + 1]\n"
    "      elseif g[j] == 'last-delivered-id' then last = g[j + 1] end\n"
    "    end\n"
    "    if name == GROUP and last then start = '(' .. last end\n"
    "  end\n"
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

/* ---- The transport's own scripts ----------------------------------------
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
 * (1-based), id, payload, ...}, {indexes of queues without a group}}. */
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
    "      local p, f = '', e[2]\n"
    "      if f then\n"
    "        for j = 1, #f - 1, 2 do if f[j] == 'p' then p = f[j + 1] end end\n"
    "      end\n"
    "      out[#out + 1] = qi - 2; out[#out + 1] = e[1]; out[#out + 1] = p\n"
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
    "        local p, f = '', e[2]\n"
    "        if f then\n"
    "          for j = 1, #f - 1, 2 do if f[j] == 'p' then p = f[j + 1] end "
    "end\n"
    "        end\n"
    "        present[e[1]] = true\n"
    "        out[#out + 1] = qi - 3; out[#out + 1] = e[1]\n"
    "        out[#out + 1] = counts[e[1]] + 1; out[#out + 1] = p\n"
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

/* ARGV: consumer, then queue id payload triples of deliveries read beyond
 * what fetch was asked for. Each one still pending for the consumer is
 * re-added as a new entry, then acknowledged and deleted. Returns how many
 * were handed back. Repeating it is harmless (the originals are gone). */
static const gchar body_requeue[] =
    "local me, n = ARGV[1], 0\n"
    "for i = 2, #ARGV - 2, 3 do\n"
    "  local key = K_STREAM .. ARGV[i]\n"
    "  if t_owns(key, ARGV[i + 1], me) then\n"
    "    redis.call('XADD', key, '*', 'p', ARGV[i + 2])\n"
    "    redis.call('XACK', key, GROUP, ARGV[i + 1])\n"
    "    redis.call('XDEL', key, ARGV[i + 1])\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";

/* ---- Transport state -----------------------------------------------------
 */

typedef struct {
  /* The scripts above, with the fragment and the shared library spliced
   * in (sluice_redis_script__init). Read-only after init. */
  SluiceRedisScript ensure;
  SluiceRedisScript fetch;
  SluiceRedisScript reclaim;
  SluiceRedisScript requeue;

  GMutex lock; /* guards what follows */
  /* Queue names (owned) whose group this broker created or found. */
  GHashTable *groups;
  /* Consumer name (owned) -> gint64* (owned): monotonic time (us) at the
   * end of its last successful reclaim, for the contact-gap rule. */
  GHashTable *contact;
  gboolean persistence_checked;
  gboolean skip_priority_read; /* test hook */
} ReliableData;

static ReliableData *
data_of(SluiceRedisBroker *self)
{
  return self->transport_data;
}

static gboolean
reliable_init(SluiceRedisBroker *self, GError **error)
{
  ReliableData *d = g_new0(ReliableData, 1);

  sluice_redis_script__init(&d->ensure, "ensure_groups",
                            SLUICE_REDIS_LUA_DRAINS, reliable_lua, body_ensure);
  sluice_redis_script__init(&d->fetch, "fetch", SLUICE_REDIS_LUA_DRAINS,
                            reliable_lua, body_fetch);
  sluice_redis_script__init(&d->reclaim, "reclaim", SLUICE_REDIS_LUA_DRAINS,
                            reliable_lua, body_reclaim);
  sluice_redis_script__init(&d->requeue, "requeue", SLUICE_REDIS_LUA_DRAINS,
                            reliable_lua, body_requeue);
  g_mutex_init(&d->lock);
  d->groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  d->contact = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->transport_data = d;
  return TRUE;
}

static void
reliable_finalize(SluiceRedisBroker *self)
{
  ReliableData *d = data_of(self);

  if (d == NULL)
    return;
  sluice_redis_script__clear(&d->ensure);
  sluice_redis_script__clear(&d->fetch);
  sluice_redis_script__clear(&d->reclaim);
  sluice_redis_script__clear(&d->requeue);
  g_hash_table_unref(d->groups);
  g_hash_table_unref(d->contact);
  g_mutex_clear(&d->lock);
  g_free(d);
  self->transport_data = NULL;
}

/* ---- Reply helpers -------------------------------------------------------
 */

static gboolean
unexpected(SluiceRedisBroker *self, const gchar *what, GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
              "%s: Redis at %s sent a reply of an unexpected shape; is it "
              "Redis 7.0 or newer, and are the namespace's streams only "
              "written by Sluice?",
              what, sluice_redis_pool__get_display_url(self->pool));
  return FALSE;
}

static gboolean
is_string(const redisReply *r)
{
  return r != NULL &&
         (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static gboolean
to_int(const redisReply *r, gint64 *out)
{
  gchar buf[32];
  gchar *end = NULL;

  if (r == NULL)
    return FALSE;
  if (r->type == REDIS_REPLY_INTEGER) {
    *out = r->integer;
    return TRUE;
  }
  if (!is_string(r) || r->len == 0 || r->len >= sizeof buf)
    return FALSE;
  memcpy(buf, r->str, r->len);
  buf[r->len] = '\0';
  *out = g_ascii_strtoll(buf, &end, 10);
  return *end == '\0';
}

/* The payload of a stream entry's field list ([field, value, ...], or nil
 * for an entry deleted meanwhile): the value of "p", stolen without a
 * copy; empty when missing, which the core buries as malformed. */
static GBytes *
entry_payload(redisReply *fields)
{
  if (fields != NULL && fields->type == REDIS_REPLY_ARRAY) {
    for (size_t j = 0; j + 1 < fields->elements; j += 2) {
      redisReply *f = fields->element[j];
      if (is_string(f) && f->len == 1 && f->str[0] == 'p' &&
          fields->element[j + 1]->type == REDIS_REPLY_STRING)
        return sluice_redis_reply__steal_bytes(fields->element[j + 1], 0);
    }
  }
  return g_bytes_new(NULL, 0);
}

static void
add_delivery(GPtrArray *out, const gchar *queue, redisReply *id,
             GBytes *payload, guint delivery_count)
{
  g_autofree gchar *handle = g_strndup(id->str, id->len);

  g_ptr_array_add(out,
                  sluice_delivery_new(queue, payload, handle, delivery_count));
  g_bytes_unref(payload);
}

/* ---- Consumer groups -----------------------------------------------------
 */

/* Makes sure every queue of @queues has its group. With @lost, the groups
 * were found missing (NOGROUP): they are created again, and a warning names
 * each queue whose group this broker had seen before. */
static gboolean
ensure_groups(SluiceRedisBroker *self, const gchar *const *queues, guint n,
              gboolean lost, GError **error)
{
  ReliableData *d = data_of(self);
  g_autoptr(GPtrArray) missing = g_ptr_array_new();
  g_autoptr(GArray) known = g_array_new(FALSE, FALSE, sizeof(gboolean));
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  g_mutex_lock(&d->lock);
  for (guint i = 0; i < n; i++) {
    gboolean seen = g_hash_table_contains(d->groups, queues[i]);
    if (seen && !lost)
      continue;
    g_hash_table_remove(d->groups, queues[i]);
    g_ptr_array_add(missing, (gpointer)queues[i]);
    g_array_append_val(known, seen);
  }
  g_mutex_unlock(&d->lock);
  if (missing->len == 0)
    return TRUE;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + missing->len, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  for (guint i = 0; i < missing->len; i++)
    sluice_redis_argv__add_str(&a, missing->pdata[i]);
  sluice_redis_argv__finish(&a);
  /* Creating a group that exists is a no-op: safe to repeat. */
  ok = sluice_redis_broker__eval_script(self, &d->ensure, TRUE, &a, &reply,
                                        error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (!is_string(reply) || reply->len != missing->len) {
    freeReplyObject(reply);
    return unexpected(self, "ensure_groups", error);
  }
  for (guint i = 0; i < missing->len; i++) {
    if (reply->str[i] == '1' && g_array_index(known, gboolean, i))
      sluice_log__message(
          G_LOG_LEVEL_WARNING,
          "the consumer group of queue “%s” was missing on Redis at %s "
          "(restarted without persistence, or its stream deleted): "
          "re-created it; every message still in the stream is delivered "
          "again",
          (const gchar *)missing->pdata[i],
          sluice_redis_pool__get_display_url(self->pool));
  }
  freeReplyObject(reply);

  g_mutex_lock(&d->lock);
  for (guint i = 0; i < missing->len; i++)
    g_hash_table_add(d->groups, g_strdup(missing->pdata[i]));
  g_mutex_unlock(&d->lock);
  return TRUE;
}

/* ---- Persistence ----------------------------------------------------------
 */

/* At-least-once holds only for what Redis keeps: says once, at the first
 * fetch, when its persistence settings can lose acknowledged work (REDIS-
 * NOTES R15). A server that refuses CONFIG (ACL, renamed command) is not
 * an error: it is only not checked. */
static void
check_persistence(SluiceRedisBroker *self)
{
  ReliableData *d = data_of(self);
  const gchar *url = sluice_redis_pool__get_display_url(self->pool);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *aof = NULL;
  g_autofree gchar *fsync = NULL;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean first;

  g_mutex_lock(&d->lock);
  first = !d->persistence_checked;
  d->persistence_checked = TRUE;
  g_mutex_unlock(&d->lock);
  if (!first)
    return;

  sluice_redis_argv__init(&a, 4, 0);
  sluice_redis_argv__add_str(&a, "CONFIG");
  sluice_redis_argv__add_str(&a, "GET");
  sluice_redis_argv__add_str(&a, "appendonly");
  sluice_redis_argv__add_str(&a, "appendfsync");
  sluice_redis_argv__finish(&a);
  if (!sluice_redis_broker__command(self, "CONFIG GET", TRUE, &a, 0, &reply,
                                    &error)) {
    /* A least-privilege user must not silence the warning below. */
    if (g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH))
      sluice_log__message(G_LOG_LEVEL_MESSAGE,
                          "could not check the persistence of Redis at %s: "
                          "CONFIG GET is not permitted for this user; make "
                          "sure it runs with appendonly yes (and appendfsync "
                          "always), or acknowledged work can be lost (grant "
                          "+config|get to have it checked)",
                          url);
    else
      sluice_log__message(G_LOG_LEVEL_INFO,
                          "could not read the persistence settings of Redis "
                          "at %s (%s); make sure it runs with appendonly yes",
                          url, error->message);
    sluice_redis_argv__clear(&a);
    return;
  }
  sluice_redis_argv__clear(&a);
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
      redisReply *k = reply->element[i];
      redisReply *v = reply->element[i + 1];
      if (!is_string(k) || !is_string(v))
        continue;
      if (k->len == 10 && memcmp(k->str, "appendonly", 10) == 0)
        aof = g_strndup(v->str, v->len);
      else if (k->len == 11 && memcmp(k->str, "appendfsync", 11) == 0)
        fsync = g_strndup(v->str, v->len);
    }
  }
  freeReplyObject(reply);
  if (g_strcmp0(aof, "no") == 0)
    sluice_log__message(
        G_LOG_LEVEL_WARNING,
        "Redis at %s runs with appendonly no: if it dies, every message, "
        "retry and result written since its last snapshot is lost, "
        "acknowledged or not; for reliable mode set appendonly yes (and "
        "appendfsync always to lose nothing on a power failure)",
        url);
  else if (g_strcmp0(aof, "yes") == 0 && fsync != NULL &&
           g_strcmp0(fsync, "always") != 0)
    sluice_log__message(
        G_LOG_LEVEL_MESSAGE,
        "Redis at %s runs with appendfsync %s: a power failure loses "
        "what it acknowledged in about the last second; appendfsync always "
        "loses nothing",
        url, fsync);
}

/* ---- fetch ----------------------------------------------------------------
 */

/* Hands back deliveries read beyond what fetch was asked for. On failure
 * they stay pending for @consumer, and are reclaimed once idle past the
 * lease: delayed, never lost. */
static void
hand_back(SluiceRedisBroker *self, const gchar *consumer, GPtrArray *surplus)
{
  ReliableData *d = data_of(self);
  g_autoptr(GError) error = NULL;
  SluiceRedisArgv a;
  redisReply *reply = NULL;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 1 + 3 * surplus->len,
                          0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  for (guint i = 0; i < surplus->len; i++) {
    SluiceDelivery *del = surplus->pdata[i];
    sluice_redis_argv__add_str(&a, del->queue);
    sluice_redis_argv__add_str(&a, del->handle);
    sluice_redis_argv__add_bytes(&a, del->payload);
  }
  sluice_redis_argv__finish(&a);
  if (sluice_redis_broker__eval_script(self, &d->requeue, TRUE, &a, &reply,
                                       &error))
    freeReplyObject(reply);
  else
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "fetch: could not hand back %u messages read beyond "
                        "what was asked for: %s; they are redelivered once "
                        "idle for the lease",
                        surplus->len, error->message);
  sluice_redis_argv__clear(&a);
}

/* One XREADGROUP over @queues, blocking up to @block_ms (0 = not at all).
 * Sets @nogroup instead of failing when a group is missing. Keeps at most
 * @max deliveries, in priority order, and hands the rest back. */
static gboolean
read_group(SluiceRedisBroker *self, const gchar *consumer,
           const gchar *const *queues, guint n, guint max, gint64 block_ms,
           GPtrArray *out, gboolean *nogroup, GError **error)
{
  g_autoptr(GPtrArray) by_queue = NULL;
  SluiceRedisConn *conn;
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  guint first_key;
  gboolean ok;

  sluice_redis_argv__init(&a, 10 + 2 * n, n * 32);
  sluice_redis_argv__add_str(&a, "XREADGROUP");
  sluice_redis_argv__add_str(&a, "GROUP");
  sluice_redis_argv__add_str(&a, GROUP);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_str(&a, "COUNT");
  sluice_redis_argv__add_int(&a, max);
  if (block_ms > 0) {
    sluice_redis_argv__add_str(&a, "BLOCK");
    sluice_redis_argv__add_int(&a, block_ms);
  }
  sluice_redis_argv__add_str(&a, "STREAMS");
  first_key = a.len;
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_key(&a, &self->keys, SLUICE_REDIS_K_STREAM,
                               queues[i]);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, ">");
  sluice_redis_argv__finish(&a);

  /* Not repeated on a lost connection: a lost reply's entries are pending
   * for us and are reclaimed once idle past the lease; repeating a
   * blocking read would double its wait. The exchange itself (not
   * sluice_redis_broker__command) because NOGROUP must be told apart. */
  conn = sluice_redis_broker__acquire(self, error);
  if (conn == NULL) {
    sluice_redis_argv__clear(&a);
    return FALSE;
  }
  sluice_redis_conn__append(conn, (int)a.len, a.argv, a.lens);
  ok =
      sluice_redis_conn__exchange(self->pool, conn, 1, &reply, block_ms, error);
  sluice_redis_broker__release(self, conn);
  if (!ok)
    goto out;
  if (sluice_redis_reply__is_error_code(reply, "NOGROUP")) {
    *nogroup = TRUE;
    goto out;
  }
  if (!sluice_redis_reply__check(self->pool, reply, "fetch", error)) {
    ok = FALSE;
    goto out;
  }
  if (reply->type == REDIS_REPLY_NIL)
    goto out; /* timed out, woken up, or nothing new */
  if (reply->type != REDIS_REPLY_ARRAY)
    goto unexpected;

  /* One answer per stream that had entries, each up to COUNT. */
  by_queue = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
  for (guint i = 0; i < n; i++)
    g_ptr_array_add(by_queue, g_ptr_array_new_with_free_func(
                                  (GDestroyNotify)sluice_delivery_free));
  for (size_t s = 0; s < reply->elements; s++) {
    redisReply *stream = reply->element[s];
    redisReply *entries;
    guint qi = n;

    if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2 ||
        !is_string(stream->element[0]) ||
        stream->element[1]->type != REDIS_REPLY_ARRAY)
      goto unexpected;
    for (guint i = 0; i < n && qi == n; i++)
      if (a.lens[first_key + i] == stream->element[0]->len &&
          memcmp(a.argv[first_key + i], stream->element[0]->str,
                 stream->element[0]->len) == 0)
        qi = i;
    if (qi == n)
      goto unexpected;
    entries = stream->element[1];
    for (size_t k = 0; k < entries->elements; k++) {
      redisReply *e = entries->element[k];
      if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
          !is_string(e->element[0]))
        goto unexpected;
      add_delivery(by_queue->pdata[qi], queues[qi], e->element[0],
                   entry_payload(e->element[1]), 1);
    }
  }
  {
    g_autoptr(GPtrArray) surplus =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
    guint kept = 0;

    /* Queues in priority order, each in stream order. */
    for (guint i = 0; i < n; i++) {
      gsize len = 0;
      gpointer *items = g_ptr_array_steal(by_queue->pdata[i], &len);

      for (gsize k = 0; k < len; k++, kept++)
        g_ptr_array_add(kept < max ? out : surplus, items[k]);
      g_free(items);
    }
    if (surplus->len > 0)
      hand_back(self, consumer, surplus);
  }
  goto out;

unexpected:
  ok = unexpected(self, "fetch", error);
out:
  if (reply != NULL)
    freeReplyObject(reply);
  sluice_redis_argv__clear(&a);
  return ok;
}

/* The non-blocking read in priority order (several queues). */
static gboolean
read_in_order(SluiceRedisBroker *self, const gchar *consumer,
              const gchar *const *queues, guint n, guint max, GPtrArray *out,
              gboolean *nogroup, GError **error)
{
  ReliableData *d = data_of(self);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *entries, *missing;
  gboolean ok;

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 2 + n, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, max);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  /* Not idempotent: a lost reply's entries wait in our PEL (see above). */
  ok = sluice_redis_broker__eval_script(self, &d->fetch, FALSE, &a, &reply,
                                        error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      reply->element[1]->type != REDIS_REPLY_ARRAY ||
      reply->element[0]->elements % 3 != 0)
    goto unexpected;
  entries = reply->element[0];
  missing = reply->element[1];
  for (size_t i = 0; i < entries->elements; i += 3) {
    gint64 qi;
    if (!to_int(entries->element[i], &qi) || qi < 1 || qi > n ||
        !is_string(entries->element[i + 1]) ||
        entries->element[i + 2]->type != REDIS_REPLY_STRING)
      goto unexpected;
    add_delivery(out, queues[qi - 1], entries->element[i + 1],
                 sluice_redis_reply__steal_bytes(entries->element[i + 2], 0),
                 1);
  }
  if (missing->elements > 0)
    *nogroup = TRUE;
  freeReplyObject(reply);
  return TRUE;

unexpected:
  freeReplyObject(reply);
  return unexpected(self, "fetch", error);
}

static gboolean
reliable_fetch(SluiceRedisBroker *self, const gchar *consumer,
               const gchar *const *queues, guint max, gint64 block_ms,
               GPtrArray *out, GError **error)
{
  ReliableData *d = data_of(self);
  guint n = g_strv_length((gchar **)queues);
  guint before = out->len;
  gboolean skip;

  if (max == 0 || n == 0)
    return TRUE;
  g_mutex_lock(&d->lock);
  skip = d->skip_priority_read;
  g_mutex_unlock(&d->lock);
  if (!ensure_groups(self, queues, n, FALSE, error))
    return FALSE;
  check_persistence(self);

  for (guint round = 0; round < 2; round++) {
    gboolean nogroup = FALSE;
    gboolean ok;

    if (n == 1) {
      /* One stream: priority is moot and COUNT caps the answer, so the
       * blocking read is the whole fetch, in one round trip. */
      ok = read_group(self, consumer, queues, 1, max, block_ms, out, &nogroup,
                      error);
    } else {
      ok = skip ||
           read_in_order(self, consumer, queues, n, max, out, &nogroup, error);
      if (ok && out->len == before && !nogroup && block_ms > 0)
        ok = read_group(self, consumer, queues, n, max, block_ms, out, &nogroup,
                        error);
    }
    if (!ok)
      return FALSE;
    if (!nogroup)
      return TRUE;
    if (!ensure_groups(self, queues, n, TRUE, error))
      return FALSE;
    if (out->len > before)
      return TRUE;
  }
  /* The group vanished again right after it was made: something deletes
   * the streams. Fail, so the worker backs off rather than spins. */
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
              "fetch: the consumer groups of the queues disappeared again "
              "right after they were re-created on Redis at %s; is something "
              "deleting the namespace's streams ({%s}:s:*)?",
              sluice_redis_pool__get_display_url(self->pool), self->keys.ns);
  return FALSE;
}

/* ---- reclaim --------------------------------------------------------------
 */

/* The contact-gap rule (see the top of the file): TRUE when @consumer's
 * last successful reclaim ended more than two thirds of @idle_ms ago (a
 * stall that long may have let live consumers' liveness keys or entries
 * look expired, until their next renewal). A gap restarts the clock, so
 * one round is skipped, not every round. A consumer seen for the first
 * time has no gap. */
static gboolean
after_contact_gap(ReliableData *d, const gchar *consumer, gint64 idle_ms,
                  gint64 now_us)
{
  gint64 *last;
  gboolean gap = FALSE;

  g_mutex_lock(&d->lock);
  last = g_hash_table_lookup(d->contact, consumer);
  if (last == NULL) {
    if (g_hash_table_size(d->contact) >= CONTACT_PRUNE_AT) {
      /* Consumers silent for long are gone: bound the table. */
      GHashTableIter iter;
      gpointer value;
      g_hash_table_iter_init(&iter, d->contact);
      while (g_hash_table_iter_next(&iter, NULL, &value))
        if (now_us - *(gint64 *)value > 10 * idle_ms * 1000)
          g_hash_table_iter_remove(&iter);
    }
    last = g_new(gint64, 1);
    *last = now_us;
    g_hash_table_insert(d->contact, g_strdup(consumer), last);
  } else if (now_us - *last > idle_ms * 1000 * 2 / 3) {
    gap = TRUE;
    *last = now_us;
  }
  g_mutex_unlock(&d->lock);
  return gap;
}

static void
note_contact(ReliableData *d, const gchar *consumer)
{
  gint64 *last;

  g_mutex_lock(&d->lock);
  last = g_hash_table_lookup(d->contact, consumer);
  if (last != NULL)
    *last = g_get_monotonic_time();
  g_mutex_unlock(&d->lock);
}

/* How long a PING takes now (us), or -1 with @error. */
static gint64
ping_us(SluiceRedisBroker *self, GError **error)
{
  gint64 start = g_get_monotonic_time();
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  gboolean ok;

  sluice_redis_argv__init(&a, 1, 0);
  sluice_redis_argv__add_str(&a, "PING");
  sluice_redis_argv__finish(&a);
  ok =
      sluice_redis_broker__command(self, "reclaim", TRUE, &a, 0, &reply, error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return -1;
  freeReplyObject(reply);
  return g_get_monotonic_time() - start;
}

static gboolean
reliable_reclaim(SluiceRedisBroker *self, const gchar *consumer,
                 const gchar *const *queues, guint max, gint64 idle_ms,
                 GPtrArray *out, GError **error)
{
  ReliableData *d = data_of(self);
  guint n = g_strv_length((gchar **)queues);
  SluiceRedisArgv a;
  redisReply *reply = NULL;
  redisReply *claimed, *deleted;
  gint64 rtt_us;
  gboolean ok;

  if (max == 0 || n == 0)
    return TRUE;
  max = MIN(max, RECLAIM_MAX);
  idle_ms = MAX(idle_ms, 1);

  if (after_contact_gap(d, consumer, idle_ms, g_get_monotonic_time())) {
    /* INFO: a worker that was busy (no room to reclaim) for long gets here
     * too, harmlessly. */
    sluice_log__message(G_LOG_LEVEL_INFO,
                        "reclaim: no reclaim reached Redis for most of a "
                        "lease (%" G_GINT64_FORMAT
                        " ms); skipping one round so that live workers renew "
                        "their leases first",
                        idle_ms);
    return TRUE;
  }
  rtt_us = ping_us(self, error);
  if (rtt_us < 0)
    return FALSE;
  if (rtt_us > idle_ms * 1000 / 4) {
    /* Redis itself stalled: every liveness key looks expired to it now. */
    sluice_log__message(G_LOG_LEVEL_MESSAGE,
                        "reclaim: Redis took %" G_GINT64_FORMAT
                        " ms to answer a PING; skipping one round so that "
                        "live workers renew their leases first",
                        rtt_us / 1000);
    note_contact(d, consumer);
    return TRUE;
  }

  sluice_redis_argv__init(&a, SLUICE_REDIS_SCRIPT_ARGV0 + 3 + n, 0);
  sluice_redis_argv__reserve(&a, SLUICE_REDIS_SCRIPT_ARGV0);
  sluice_redis_argv__add_str(&a, consumer);
  sluice_redis_argv__add_int(&a, max);
  sluice_redis_argv__add_int(&a, idle_ms);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, queues[i]);
  sluice_redis_argv__finish(&a);
  /* Not repeated: a lost reply leaves the entries claimed by us and idle;
   * they are reclaimed again after the lease (one delivery more). */
  ok = sluice_redis_broker__eval_script(self, &d->reclaim, FALSE, &a, &reply,
                                        error);
  sluice_redis_argv__clear(&a);
  if (!ok)
    return FALSE;
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 4) {
    sluice_log__message(G_LOG_LEVEL_INFO,
                        "reclaim: consumer %s holds no lease (it lapsed in "
                        "a stall, or it never heartbeated); taking nothing "
                        "over until it is renewed",
                        consumer);
    freeReplyObject(reply);
    return TRUE;
  }
  note_contact(d, consumer);
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
      reply->element[0]->type != REDIS_REPLY_ARRAY ||
      reply->element[1]->type != REDIS_REPLY_ARRAY ||
      reply->element[0]->elements % 4 != 0 ||
      reply->element[1]->elements % 2 != 0)
    goto unexpected;
  claimed = reply->element[0];
  deleted = reply->element[1];
  for (size_t i = 0; i < claimed->elements; i += 4) {
    gint64 qi, count;
    if (!to_int(claimed->element[i], &qi) || qi < 1 || qi > n ||
        !is_string(claimed->element[i + 1]) ||
        !to_int(claimed->element[i + 2], &count) ||
        claimed->element[i + 3]->type != REDIS_REPLY_STRING)
      goto unexpected;
    add_delivery(out, queues[qi - 1], claimed->element[i + 1],
                 sluice_redis_reply__steal_bytes(claimed->element[i + 3], 0),
                 (guint)CLAMP(count, 1, G_MAXUINT));
  }
  for (size_t i = 0; i < deleted->elements; i += 2) {
    gint64 qi, count;
    if (!to_int(deleted->element[i], &qi) || qi < 1 || qi > n ||
        !to_int(deleted->element[i + 1], &count))
      goto unexpected;
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "reclaim: %" G_GINT64_FORMAT
                        " pending messages of queue “%s” had been deleted "
                        "from its stream before they were acknowledged "
                        "(trimmed or deleted by hand?); they are lost, and "
                        "were dropped from the pending list",
                        count, queues[qi - 1]);
  }
  freeReplyObject(reply);
  return TRUE;

unexpected:
  freeReplyObject(reply);
  return unexpected(self, "reclaim", error);
}

/* ---- push_native ---------------------------------------------------------
 */

/* A plain enqueue batch (no claims, records or due times) as one XADD per
 * message, pipelined by the shared layer: what t_push_many does, without
 * Lua, whose per-argument cost is most of an enqueue's Redis CPU. XADD is
 * refused by a full Redis like the enqueue script is. */
static guint
reliable_push_native(SluiceRedisBroker *self, SluiceRedisConn *conn,
                     const gchar *queue, GBytes *const *payloads, guint n)
{
  g_autofree gchar *key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_STREAM, queue);
  gsize key_len = strlen(key);

  for (guint i = 0; i < n; i++) {
    gsize len = 0;
    gconstpointer data = g_bytes_get_data(payloads[i], &len);
    const char *argv[5] = {"XADD", key, "*", "p", data != NULL ? data : ""};
    size_t lens[5] = {4, key_len, 1, 1, len};

    sluice_redis_conn__append(conn, 5, argv, lens);
  }
  return n;
}

/* ---- The transport ---------------------------------------------------------
 */

static const SluiceRedisTransport reliable_transport = {
    .name = "redis-reliable",
    .caps = SLUICE_BROKER_CAP_SHARED | SLUICE_BROKER_CAP_DURABLE |
            SLUICE_BROKER_CAP_LEASES | SLUICE_BROKER_CAP_FENCING |
            SLUICE_BROKER_CAP_IN_FLIGHT,
    .lua = reliable_lua,
    .ack_is_noop = FALSE,
    .init = reliable_init,
    .finalize = reliable_finalize,
    .fetch = reliable_fetch,
    .reclaim = reliable_reclaim,
    .push_native = reliable_push_native,
};

const SluiceRedisTransport *
sluice_redis__reliable_transport(void)
{
  return &reliable_transport;
}

void
sluice_redis__reliable_test_skip_priority_read(SluiceBroker *broker,
                                               gboolean skip)
{
  SluiceRedisBroker *self = (SluiceRedisBroker *)broker;
  ReliableData *d;

  g_return_if_fail(broker != NULL);
  g_return_if_fail(self->transport == &reliable_transport);
  d = data_of(self);
  g_mutex_lock(&d->lock);
  d->skip_priority_read = skip;
  g_mutex_unlock(&d->lock);
}

-- transport-reliable.lua - the t_* functions of the redis-reliable mode:
-- a stream and one consumer group per queue (see transport-reliable-lua.c).
local GROUP = 'sluice'
-- Per stream key: owned[handle] = true (pending for the consumer
-- asked about) or false (not, or acknowledged by this script); spans:
-- the id ranges XPENDING answered for completely.
local owned, spans, acks, ack_keys = {}, {}, {}, {}
-- An entry id as two numbers (ms, seq), or nil if it is not one.
local function id_num(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if not ms then return nil end
  return tonumber(ms), tonumber(seq)
end
local function id_cmp(ams, aseq, bms, bseq)
  if ams ~= bms then return ams < bms and -1 or 1 end
  if aseq ~= bseq then return aseq < bseq and -1 or 1 end
  return 0
end
-- Is id a newer than id b, whose '-' is at d? Without parsing when a
-- has its '-' there too (as many ms digits: every id of this era):
-- ids of one length then compare as strings; otherwise the ms parts
-- (of one length) compare as strings, and if they are equal the
-- longer sequence number is the larger (no leading zeros). Parsing
-- each id costs more Redis CPU than the rest of a settlement.
local function id_newer(a, b, d)
  if string.byte(a, d) == 45 and string.byte(b, d) == 45 then
    if #a == #b then return a > b end
    local am, bm = string.sub(a, 1, d - 1), string.sub(b, 1, d - 1)
    if am ~= bm then return am > bm end
    return #a > #b
  end
  local ams, aseq = id_num(a)
  local bms, bseq = id_num(b)
  return id_cmp(ams, aseq, bms, bseq) > 0
end
local function t_owns(key, handle, consumer)
  local known = owned[key]
  if known then
    local v = known[handle]
    if v ~= nil then return v end
  else
    known = {}; owned[key] = known; spans[key] = {}
  end
  local ms, seq = id_num(handle)
  if not ms then return false end
  for _, r in ipairs(spans[key]) do
    if id_cmp(ms, seq, r[1], r[2]) >= 0 and
       (not r[3] or id_cmp(ms, seq, r[3], r[4]) <= 0) then
      return false
    end
  end
  local ok, list = pcall(redis.call, 'XPENDING', key, GROUP, handle,
                         '+', 128, consumer)
  if not ok then return false end
  for _, e in ipairs(list) do
    if known[e[1]] == nil then known[e[1]] = true end
  end
  local r = {ms, seq}
  if #list == 128 then r[3], r[4] = id_num(list[#list][1]) end
  table.insert(spans[key], r)
  return known[handle] == true
end
local function t_push(queue, payload)
  redis.call('XADD', K_STREAM .. queue, '*', 'p', payload)
end
local function t_push_many(queue, payloads)
  local key = K_STREAM .. queue
  for i = 1, #payloads do
    redis.call('XADD', key, '*', 'p', payloads[i])
  end
end
local function t_check(queue, handle, consumer)
  return t_owns(K_STREAM .. queue, handle, consumer)
end
local function t_ack(queue, handle, consumer)
  local key = K_STREAM .. queue
  local list = acks[key]
  if not list then
    list = {}; acks[key] = list; ack_keys[#ack_keys + 1] = key
  end
  list[#list + 1] = handle
  if owned[key] then owned[key][handle] = false end
end
local function t_flush()
  for _, key in ipairs(ack_keys) do
    local ids = acks[key]
    for s = 1, #ids, 1000 do
      redis.call('XACK', key, GROUP,
                 unpack(ids, s, math.min(s + 999, #ids)))
    end
    local top = ids[1]
    local d = string.find(top, '-', 1, true)
    for i = 2, #ids do
      if id_newer(ids[i], top, d) then top = ids[i] end
    end
    local first = redis.call('XPENDING', key, GROUP, '-', '+', 1)[1]
    -- Below top and top itself (no id arithmetic: ids may be any
    -- 64-bit numbers).
    if not first or id_newer(first[1], top, d) then
      redis.call('XTRIM', key, 'MINID', top)
      redis.call('XDEL', key, top)
    else
      local p = first[1]
      local dp = string.find(p, '-', 1, true)
      redis.call('XTRIM', key, 'MINID', p)
      local rest = {}
      for _, id in ipairs(ids) do
        if id_newer(id, p, dp) then rest[#rest + 1] = id end
      end
      for s = 1, #rest, 1000 do
        redis.call('XDEL', key, unpack(rest, s, math.min(s + 999, #rest)))
      end
    end
  end
end
-- A release is a requeue: a copy at the end of the stream, for any
-- consumer to read at once, carrying the deliveries that came before
-- this one in field d (the release itself is not one), then the
-- original acknowledged and deleted, all in the settle script. Leaving
-- it pending for a peer's reclaim would wait for a reclaim tick and
-- count as one more delivery.
local function t_release(queue, handle, consumer, payload, count)
  local key = K_STREAM .. queue
  local prior = (tonumber(count) or 1) - 1
  if prior > 0 then
    redis.call('XADD', key, '*', 'p', payload, 'd', prior)
  else
    redis.call('XADD', key, '*', 'p', payload)
  end
  redis.call('XACK', key, GROUP, handle)
  redis.call('XDEL', key, handle)
  if owned[key] then owned[key][handle] = false end
end
-- Refused by t_check: is the entry pending for nobody (settled
-- already, or lost with Redis's data) rather than for a peer?
local function t_gone(queue, handle)
  local ok, r = pcall(redis.call, 'XPENDING', K_STREAM .. queue, GROUP,
                      handle, handle, 1)
  return not ok or #r == 0
end
-- The payload and the prior deliveries of a stream entry's fields.
local function t_fields(f)
  local p, d = '', 0
  if f then
    for j = 1, #f - 1, 2 do
      if f[j] == 'p' then p = f[j + 1]
      elseif f[j] == 'd' then d = tonumber(f[j + 1]) or 0 end
    end
  end
  return p, d
end
local function t_pending(key)
  local ok, r = pcall(redis.call, 'XPENDING', key, GROUP)
  if ok then return r[1] end
  return 0
end
-- Acknowledged entries are deleted, so what is in the stream and not
-- pending has not been delivered yet.
local function t_depth(queue)
  local key = K_STREAM .. queue
  local n = redis.call('XLEN', key) - t_pending(key)
  if n < 0 then n = 0 end
  return n
end
local function t_in_flight(queues)
  local n = 0
  for _, q in ipairs(queues) do n = n + t_pending(K_STREAM .. q) end
  return n
end
-- The ready messages are those after the group's last delivered id
-- (all of them without a group): acknowledged entries are deleted, so
-- what is at or before it is pending. Returns the XRANGE start of the
-- ready ones, and the last delivered id (nil without a group); nil
-- without a stream.
local function t_ready_start(key)
  if redis.call('EXISTS', key) == 0 then return nil end
  local groups = redis.call('XINFO', 'GROUPS', key)
  for _, g in ipairs(groups) do
    local name, last
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1]
      elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
    end
    if name == GROUP and last then return '(' .. last, last end
  end
  return '-'
end
-- Up to limit ready entries after entry `after` ('' = from the first
-- ready one), oldest (next to be read) first, read with one XRANGE
-- COUNT: {cursor, payload, ...}, the cursor the id of the last one when
-- the page is full, else ''; {false} for a cursor that is no entry
-- id. A cursor that the group's reads have passed meanwhile resumes
-- at the first ready entry.
local function t_peek(queue, after, limit)
  local key = K_STREAM .. queue
  local start, last = t_ready_start(key)
  if not start then return {''} end
  if after ~= '' then
    local ams, aseq = id_num(after)
    if not ams then return {false} end
    local lms, lseq
    if last then lms, lseq = id_num(last) end
    if not lms or id_cmp(ams, aseq, lms, lseq) > 0 then
      start = '(' .. after
    end
  end
  local e = redis.call('XRANGE', key, start, '+', 'COUNT', limit)
  local out = {''}
  for _, x in ipairs(e) do
    out[#out + 1] = t_fields(x[2]); out[#out + 1] = x[1]
  end
  if #e == limit then out[1] = e[#e][1] end
  return out
end
-- Per stream key: the group's last delivered id as (ms, seq), or false
-- when every entry is ready (no group yet), read once per script.
local delivered = {}
-- An entry is ready while the group has not delivered it: its id is
-- after the last delivered one (acknowledged entries are deleted, a
-- released one is a new entry). FALSE for a handle that is no entry id
-- and for a stream that does not exist.
local function t_ready(key, handle)
  local ms, seq = id_num(handle)
  if not ms then return false end
  local last = delivered[key]
  if last == nil then
    local start, id = t_ready_start(key)
    if not start then return false end
    last = false
    if id then
      local lms, lseq = id_num(id)
      if lms then last = {lms, lseq} end
    end
    delivered[key] = last
  end
  return not (last and id_cmp(ms, seq, last[1], last[2]) <= 0)
end
-- Only a ready entry is deleted.
local function t_remove(queue, handle, payload)
  local key = K_STREAM .. queue
  if not t_ready(key, handle) then return false end
  return redis.call('XDEL', key, handle) == 1
end
-- An entry cannot change in place: a ready one whose payload is still
-- payload is added again at the end of the stream with every other
-- field as it was (d, the deliveries before a release, too), and
-- deleted. A new entry is after the last delivered id, so it is ready,
-- and t_ready's answers for the others stay true.
local function t_replace(queue, handle, payload, replacement)
  local key = K_STREAM .. queue
  if not t_ready(key, handle) then return false end
  local e = redis.call('XRANGE', key, handle, handle)
  if #e == 0 or e[1][1] ~= handle then return false end
  local f, found = e[1][2], false
  local cmd = {'XADD', key, '*'}
  for j = 1, #f - 1, 2 do
    if f[j] == 'p' then
      if f[j + 1] ~= payload then return false end
      found = true
      cmd[#cmd + 1] = 'p'; cmd[#cmd + 1] = replacement
    else
      cmd[#cmd + 1] = f[j]; cmd[#cmd + 1] = f[j + 1]
    end
  end
  if not found then return false end
  redis.call(unpack(cmd))
  redis.call('XDEL', key, handle)
  return true
end
local function t_purge(queue)
  local key = K_STREAM .. queue
  local start = t_ready_start(key)
  if not start then return 0 end
  local n = 0
  while true do
    local e = redis.call('XRANGE', key, start, '+', 'COUNT', 1000)
    if #e == 0 then break end
    local ids = {}
    for i, x in ipairs(e) do ids[i] = x[1] end
    n = n + redis.call('XDEL', key, unpack(ids))
    start = '(' .. ids[#ids]
  end
  return n
end
local function t_heartbeat(consumer, lease_ms, argv, first)
  local mine, order = {}, {}
  local held, gone = 0, 0
  for i = first, #argv - 1, 2 do
    local key = K_STREAM .. argv[i]
    held = held + 1
    if t_owns(key, argv[i + 1], consumer) then
      local ids = mine[key]
      if not ids then
        ids = {'XCLAIM', key, GROUP, consumer, 0}
        mine[key] = ids; order[#order + 1] = key
      end
      ids[#ids + 1] = argv[i + 1]
    else
      gone = gone + 1
    end
  end
  local lapsed = false
  if lease_ms > 0 then
    lapsed = not redis.call('SET', K_ALIVE .. consumer, '1', 'PX',
                            lease_ms, 'GET')
  end
  for _, key in ipairs(order) do
    local cmd = mine[key]
    cmd[#cmd + 1] = 'JUSTID'
    redis.call(unpack(cmd))
  end
  if lapsed and held > 0 then
    return redis.error_reply('LEASE the liveness key of consumer ' ..
      consumer .. ' had expired while it held ' .. held ..
      ' deliveries; ' .. gone .. ' of them are no longer its own ' ..
      '(reclaimed by a peer, or settled meanwhile); renewed now')
  end
end
local function t_leave(consumer)
  local empty = {}
  for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
    local key = K_STREAM .. q
    local ok, r = pcall(redis.call, 'XPENDING', key, GROUP, '-', '+', 1,
                        consumer)
    if ok and #r == 0 then empty[#empty + 1] = key end
  end
  redis.call('DEL', K_ALIVE .. consumer)
  for _, key in ipairs(empty) do
    redis.call('XGROUP', 'DELCONSUMER', key, GROUP, consumer)
  end
end

#!lua flags=allow-oom
-- ARGV: consumer, max, idle_ms, the queues in priority order. Takes over
-- entries of consumers without a liveness key, and entries idle past
-- idle_ms, up to max in all; forgets dead consumers that hold nothing.
-- Every check comes before the writes of its queue. Returns {{queue index,
-- id, delivery count, payload, ...}, {queue index, entries found deleted,
-- ...}, consumers forgotten} or, when the caller holds no lease itself,
-- {{}, {}, 0, 'nolease'} without looking: a consumer whose own liveness key
-- lapsed has just come back from a stall (its own, or Redis's, which let
-- every key lapse at once), and the owners it would judge dead may simply
-- not have renewed yet.
local me, max, idle = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out, deleted, forgotten, taken = {}, {}, 0, 0
if redis.call('EXISTS', K_ALIVE .. me) == 0 then
  return {out, deleted, 0, 'nolease'}
end
for qi = 4, #ARGV do
  if taken >= max then break end
  local key = K_STREAM .. ARGV[qi]
  local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', key,
                              GROUP)
  if ok then
    local ids, counts, dead = {}, {}, {}
    for _, c in ipairs(consumers) do
      local name, pending, cidle = '', 0, 0
      for j = 1, #c - 1, 2 do
        if c[j] == 'name' then name = c[j + 1]
        elseif c[j] == 'pending' then pending = c[j + 1]
        elseif c[j] == 'idle' then cidle = c[j + 1] end
      end
      if name ~= me and redis.call('EXISTS', K_ALIVE .. name) == 0 then
        dead[#dead + 1] = {name, cidle}
        local room = max - taken - #ids
        if pending > 0 and room > 0 then
          for _, e in ipairs(redis.call('XPENDING', key, GROUP, '-', '+',
                                        room, name)) do
            ids[#ids + 1] = e[1]; counts[e[1]] = e[4]
          end
        end
      end
    end
    if max - taken - #ids > 0 then
      for _, e in ipairs(redis.call('XPENDING', key, GROUP, 'IDLE', idle,
                                    '-', '+', max - taken)) do
        if not counts[e[1]] and #ids < max - taken then
          ids[#ids + 1] = e[1]; counts[e[1]] = e[4]
        end
      end
    end
    if #ids > 0 then
      local cmd = {'XCLAIM', key, GROUP, me, 0}
      for _, id in ipairs(ids) do cmd[#cmd + 1] = id end
      local present, gone = {}, 0
      for _, e in ipairs(redis.call(unpack(cmd))) do
        local p, d = t_fields(e[2])
        present[e[1]] = true
        out[#out + 1] = qi - 3; out[#out + 1] = e[1]
        out[#out + 1] = counts[e[1]] + 1 + d; out[#out + 1] = p
        taken = taken + 1
      end
      for _, id in ipairs(ids) do
        if not present[id] then gone = gone + 1 end
      end
      if gone > 0 then
        deleted[#deleted + 1] = qi - 3; deleted[#deleted + 1] = gone
      end
    end
    for _, d in ipairs(dead) do
      if d[2] >= idle and
         #redis.call('XPENDING', key, GROUP, '-', '+', 1, d[1]) == 0 then
        redis.call('XGROUP', 'DELCONSUMER', key, GROUP, d[1])
        forgotten = forgotten + 1
      end
    end
  end
end
return {out, deleted, forgotten}

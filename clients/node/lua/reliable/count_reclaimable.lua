#!lua flags=no-writes,allow-oom
-- ARGV: consumer, max, idle_ms, the queues. What body_reclaim would take
-- over now, without taking anything: entries of consumers whose liveness
-- key is gone, and entries idle past idle_ms. Returns min(count, max).
local me, max, idle = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = 0
if redis.call('EXISTS', K_ALIVE .. me) == 0 then return 0 end
for qi = 4, #ARGV do
  if n >= max then break end
  local key = K_STREAM .. ARGV[qi]
  local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', key,
                              GROUP)
  if ok then
    for _, c in ipairs(consumers) do
      local name, pending = '', 0
      for j = 1, #c - 1, 2 do
        if c[j] == 'name' then name = c[j + 1]
        elseif c[j] == 'pending' then pending = c[j + 1] end
      end
      if name ~= me and pending > 0 and
         redis.call('EXISTS', K_ALIVE .. name) == 0 then
        n = n + pending
      end
    end
    if n < max then
      n = n + #redis.call('XPENDING', key, GROUP, 'IDLE', idle, '-',
                          '+', max - n)
    end
  end
end
return math.min(n, max)

#!lua
-- ARGV: n, then n times: bucket interval_us tolerance_us block_ms.
-- Returns {now_ms, granted_1, wait_ms_1, ..., granted_n, wait_ms_n}.
-- The generic cell rate algorithm on the buckets' theoretical arrival
-- times (microseconds), on this server's clock (TIME): never a worker's.
-- A bucket is a string key that expires a second after its time has
-- passed (an absent bucket admits at once). Its suffix is defined here,
-- not in the prelude, so that adding it changed no other script's bytes
-- (and SHA) that the clients share.
local K_RATE = P .. 'rl:'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {math.floor(now / 1000)}
for i = 0, tonumber(ARGV[1]) - 1 do
  local key = K_RATE .. ARGV[2 + i * 4]
  local interval = tonumber(ARGV[3 + i * 4])
  local tolerance = tonumber(ARGV[4 + i * 4])
  local block = tonumber(ARGV[5 + i * 4])
  local tat = tonumber(redis.call('GET', key) or 0) or 0
  local nxt = nil
  if tat < now then tat = now end
  if block > 0 then
    nxt = math.max(tat, now + block * 1000 + tolerance)
    out[#out + 1] = 0
    out[#out + 1] = block
  elseif tat - tolerance <= now then
    nxt = tat + interval
    out[#out + 1] = 1
    out[#out + 1] = 0
  else
    out[#out + 1] = 0
    out[#out + 1] = math.ceil((tat - tolerance - now) / 1000)
  end
  if nxt then
    redis.call('SET', key, string.format('%.0f', nxt), 'PX',
               math.ceil((nxt - now) / 1000) + 1000)
  end
end
return out

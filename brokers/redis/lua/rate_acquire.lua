#!lua
-- bare: assembled with the prelude only (no hooks, transport or library:
-- defining them is most of what a script this short costs per fetch).
-- ARGV: n, then n times: bucket interval_us tolerance_us block_ms count.
-- Returns {now_ms, granted_1, wait_ms_1, ..., granted_n, wait_ms_n}.
-- The generic cell rate algorithm on the buckets' theoretical arrival
-- times (microseconds), on this server's clock (TIME): never a worker's.
-- An item asks for `count` admissions of one bucket at once (the C broker
-- groups a fetch's messages by bucket): granted is how many of them, in
-- order; the rest wait wait_ms (a refusal changes nothing, so they all
-- wait alike). A bucket is a string key that expires a second after its
-- time has passed (an absent bucket admits at once). Its suffix is defined
-- here, not in the prelude, so that adding it changed no other script's
-- bytes (and SHA) that the clients share.
local K_RATE = P .. 'rl:'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {math.floor(now / 1000)}
for i = 0, tonumber(ARGV[1]) - 1 do
  local key = K_RATE .. ARGV[2 + i * 5]
  local interval = tonumber(ARGV[3 + i * 5])
  local tolerance = tonumber(ARGV[4 + i * 5])
  local block = tonumber(ARGV[5 + i * 5])
  local count = tonumber(ARGV[6 + i * 5])
  local tat = tonumber(redis.call('GET', key) or 0) or 0
  local granted, wait = 0, 0
  if tat < now then tat = now end
  if block > 0 then
    tat = math.max(tat, now + block * 1000 + tolerance)
    wait = block
  else
    if tat - tolerance <= now then
      granted = math.min(count,
                         math.floor((now + tolerance - tat) / interval) + 1)
      tat = tat + granted * interval
    end
    if granted < count then
      wait = math.ceil((tat - tolerance - now) / 1000)
    end
  end
  if block > 0 or granted > 0 then
    redis.call('SET', key, string.format('%.0f', tat), 'PX',
               math.ceil((tat - now) / 1000) + 1000)
  end
  out[#out + 1] = granted
  out[#out + 1] = wait
end
return out

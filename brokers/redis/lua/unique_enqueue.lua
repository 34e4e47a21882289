#!lua
-- ARGV: n, then n times: key claim_ttl replace id queue payload due
-- dedup_ttl rec rec_ttl (the last seven a submit's, as library.lua's
-- submit_write takes them). Returns {status_1, holder_1, ...}: 0 written,
-- 1 the key is held by holder (nothing written), 2 written, replacing
-- holder, 3 the id's idempotency claim existed (nothing written).
-- A claim is the string uq:<key> = state letter ('w' waiting, 'r'
-- running) and the holder's id, PX its lifetime on the server's clock.
-- Replacing takes a waiting holder off the schedule if it is there; one
-- already in its queue is skipped by the worker when it starts.
local K_UNIQUE = P .. 'uq:'
local out = {}
for i = 0, tonumber(ARGV[1]) - 1 do
  local b = 2 + i * 10
  local key, id = K_UNIQUE .. ARGV[b], ARGV[b + 3]
  local claim = redis.call('GET', key)
  local holder = claim and string.sub(claim, 2) or ''
  if claim and (ARGV[b + 2] ~= '1' or string.sub(claim, 1, 1) == 'r' or
                holder == id) then
    out[#out + 1] = 1
    out[#out + 1] = holder
  elseif submit_claimed(id, ARGV[b + 7]) then
    out[#out + 1] = 3
    out[#out + 1] = ''
  else
    submit_write(id, ARGV[b + 4], ARGV[b + 5], ARGV[b + 6], ARGV[b + 7],
                 ARGV[b + 8], ARGV[b + 9])
    redis.call('SADD', K_QUEUES, ARGV[b + 4])
    if claim then
      if redis.call('ZSCORE', K_SCHEDULE, holder) then
        schedule_remove(holder)
      end
      out[#out + 1] = 2
      out[#out + 1] = holder
    else
      out[#out + 1] = 0
      out[#out + 1] = ''
    end
    redis.call('SET', key, 'w' .. id, 'PX', ARGV[b + 1])
  end
end
return out

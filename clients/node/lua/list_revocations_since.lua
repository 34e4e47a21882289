#!lua flags=allow-oom
-- ARGV: cursor now. Drops lapsed revocations, then returns {cursor', id,
-- expiry, ...}: those recorded after the cursor, in insertion order.
-- cursor' covers every number given so far.
local lapsed = redis.call('ZRANGEBYSCORE', K_REVOKED, '-inf', ARGV[2])
for s = 1, #lapsed, 1000 do
  local chunk = {unpack(lapsed, s, math.min(s + 999, #lapsed))}
  redis.call('ZREM', K_REVOKED, unpack(chunk))
  redis.call('ZREM', K_REVOKED_SEQ, unpack(chunk))
end
local out = {redis.call('GET', K_REVOKED_N) or '0'}
local ids = redis.call('ZRANGEBYSCORE', K_REVOKED_SEQ,
                       '(' .. ARGV[1], '+inf')
for _, id in ipairs(ids) do
  local e = redis.call('ZSCORE', K_REVOKED, id)
  if e then out[#out + 1] = id; out[#out + 1] = e end
end
return out

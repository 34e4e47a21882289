#!lua
-- bare: assembled with the prelude only (no hooks, transport or library:
-- defining them is most of what a script this short costs per fetch).
-- ARGV: n, then n times: key max holder lease_ms waiter ('' for none).
-- Returns {granted_1, ..., granted_n}.
-- The holders of a key are a sorted set, holder -> lease expiry (ms of
-- this server's TIME, the time every worker shares); its waiters another,
-- task id -> when it began waiting, so the oldest is first. Both suffixes
-- are defined here and in slot_release.lua, not in the prelude, so that
-- adding them changed no other script's bytes.
local K_SLOTS = P .. 'cs:'
local K_WAITERS = P .. 'cw:'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 0, tonumber(ARGV[1]) - 1 do
  local key = ARGV[2 + i * 5]
  local max = tonumber(ARGV[3 + i * 5])
  local holder = ARGV[4 + i * 5]
  local lease = tonumber(ARGV[5 + i * 5])
  local waiter = ARGV[6 + i * 5]
  local slots = K_SLOTS .. key
  redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
  local granted = redis.call('ZSCORE', slots, holder) or
                  redis.call('ZCARD', slots) < max
  if granted then
    redis.call('ZADD', slots, now + lease, holder)
    redis.call('PEXPIRE', slots, lease)
    if waiter ~= '' then redis.call('ZREM', K_WAITERS .. key, waiter) end
    out[#out + 1] = 1
  else
    if waiter ~= '' then
      redis.call('ZADD', K_WAITERS .. key, 'NX', now, waiter)
    end
    out[#out + 1] = 0
  end
end
return out

#!lua
-- ARGV: limit. Returns {key_1, waiting_1, {holder, ...}, ...}: up to
-- limit concurrency keys that have a live holder or a waiter (see
-- slot_acquire.lua for the keys), found with SCAN, for operators.
-- Changes nothing.
local K_SLOTS = P .. 'cs:'
local K_WAITERS = P .. 'cw:'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local seen, order = {}, {}
-- The prefix, its glob characters escaped, then the set's own prefix.
local function scan(prefix)
  local pattern = string.gsub(prefix, '([%*%?%[%]\\])', '\\%1') .. '*'
  local cursor = '0'
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = r[1]
    for _, k in ipairs(r[2]) do
      local key = string.sub(k, #prefix + 1)
      if not seen[key] and #order < limit then
        seen[key] = true
        order[#order + 1] = key
      end
    end
  until cursor == '0' or #order >= limit
end
scan(K_SLOTS)
scan(K_WAITERS)
local out = {}
for _, key in ipairs(order) do
  local holders = redis.call('ZRANGEBYSCORE', K_SLOTS .. key, '(' .. now,
                             '+inf')
  local waiting = redis.call('ZCARD', K_WAITERS .. key)
  if #holders > 0 or waiting > 0 then
    out[#out + 1] = key
    out[#out + 1] = waiting
    out[#out + 1] = holders
  end
end
return out

#!lua flags=no-writes,allow-oom
-- ARGV: join with_outcomes ('1' or '0'). Returns {} when the join does
-- not exist; else {total, arrived, status, meta} followed, with
-- outcomes, by member outcome pairs.
local key = K_JOIN .. ARGV[1]
local h = redis.call('HMGET', key, 't', 'n', 's', 'm')
if not h[1] then return {} end
local out = {h[1], h[2], h[3], h[4] or ''}
if ARGV[2] == '1' then
  local all = redis.call('HGETALL', key)
  for j = 1, #all, 2 do
    if string.byte(all[j], 1) == 111 then -- 'o'
      out[#out + 1] = string.sub(all[j], 2)
      out[#out + 1] = all[j + 1]
    end
  end
end
return out

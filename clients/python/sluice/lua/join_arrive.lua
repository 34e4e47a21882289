#!lua flags=allow-oom
-- ARGV: n, then n arrivals, each: join member outcome step (0 count, 1
-- release now, 2 abandon). Each is one step: a member is stored once
-- (HSETNX o<member>), counted once, and the one arrival that completes
-- an open join (or releases it early) pushes its release and deletes it
-- from the hash. Returns one char per arrival: '0' not counted (a repeat,
-- or no such join), '1' counted, '2' counted and released.
-- allow-oom: arrivals are on the settle path, which drains.
local out = {}
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local key, member, step = K_JOIN .. ARGV[i], tonumber(ARGV[i + 1]),
                            ARGV[i + 3]
  local r = '0'
  local total = tonumber(redis.call('HGET', key, 't') or '-1')
  if member < total and
     redis.call('HSETNX', key, 'o' .. member, ARGV[i + 2]) == 1 then
    r = '1'
    local n = redis.call('HINCRBY', key, 'n', 1)
    if redis.call('HGET', key, 's') == '0' then
      if step == '2' then
        redis.call('HSET', key, 's', 2)
      elseif n == total or step == '1' then
        redis.call('HSET', key, 's', 1)
        local nrel = tonumber(redis.call('HGET', key, 'rn') or '0')
        for k = 1, nrel do
          local qp = redis.call('HMGET', key, 'q' .. k, 'p' .. k)
          if qp[1] and qp[2] then t_push(qp[1], qp[2]) end
          redis.call('HDEL', key, 'q' .. k, 'p' .. k)
        end
        r = '2'
      end
    end
  end
  out[#out + 1] = r
  i = i + 4
end
return table.concat(out)

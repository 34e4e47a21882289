#!lua flags=allow-oom
-- ARGV: n, then n arrivals, each: join member outcome step (0 count, 1
-- release now, 2 abandon). Each is one step: a member is stored once
-- (HSETNX on K_JOIN..join..':o', field member), counted once, and the
-- one arrival that completes
-- an open join (or releases it early) pushes its release and deletes it
-- from the hash. Returns one char per arrival: '0' not counted (a repeat,
-- or no such join), '1' counted, '2' counted and released.
-- A batch's arrivals mostly go to one join: its total, count and status
-- are read once per join and the count written once at the end, so an
-- arrival costs one HSETNX (Redis CPU per member is the point: bench op
-- chord).
-- allow-oom: arrivals are on the settle path, which drains.
local out, joins, order = {}, {}, {}
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local id, member, step = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 3]
  local key = K_JOIN .. id
  local j = joins[id]
  if not j then
    local h = redis.call('HMGET', key, 't', 'n', 's')
    j = {total = tonumber(h[1] or '-1'), n = tonumber(h[2] or '0'),
         s = h[3], added = 0, key = key, okey = key .. ':o'}
    joins[id] = j
    order[#order + 1] = id
  end
  local r = '0'
  if member < j.total and
     redis.call('HSETNX', j.okey, member, ARGV[i + 2]) == 1 then
    r = '1'
    j.n = j.n + 1
    j.added = j.added + 1
    if j.s == '0' then
      if step == '2' then
        j.s = '2'
        redis.call('HSET', key, 's', 2)
      elseif j.n == j.total or step == '1' then
        j.s = '1'
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
for _, id in ipairs(order) do
  local j = joins[id]
  if j.added > 0 then
    redis.call('HINCRBY', j.key, 'n', j.added)
    -- The outcomes expire with their join (made here, not at opening:
    -- Redis keeps no empty hash).
    redis.call('PEXPIRE', j.okey, redis.call('PTTL', j.key))
  end
end
return table.concat(out)

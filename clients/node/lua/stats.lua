#!lua flags=no-writes,allow-oom
-- ARGV: '*' (every known queue) or the queues (none: figures without
-- queues). Returns {{queue, depth, ...}, scheduled, dead letters, {reason,
-- count, ...}, {worker, seen, announcement or false, ...}, in_flight,
-- stale settles, {reason, dropped, ...}}. A worker without an
-- announcement has lapsed: it is shown as not alive until the heartbeat
-- prunes it.
local queues
if ARGV[1] == '*' then
  queues = redis.call('SMEMBERS', K_QUEUES)
  table.sort(queues)
else
  queues = ARGV
end
local depths = {}
for _, q in ipairs(queues) do
  depths[#depths + 1] = q
  depths[#depths + 1] = t_depth(q)
end
local seen = redis.call('ZRANGE', K_WORKERS, 0, -1, 'WITHSCORES')
local workers = {}
for j = 1, #seen, 2 do
  workers[#workers + 1] = seen[j]
  workers[#workers + 1] = seen[j + 1]
  workers[#workers + 1] = redis.call('GET', K_WINFO .. seen[j])
end
return {depths, redis.call('ZCARD', K_SCHEDULE),
        redis.call('XLEN', K_DLQ), redis.call('HGETALL', K_DLQ_COUNT),
        workers, t_in_flight(queues), redis.call('GET', K_STALE) or '0',
        redis.call('HGETALL', K_DLQ_DROPPED)}

#!lua
-- ARGV: now, max. Moves due entries, earliest first. Returns {promoted,
-- earliest due score left or '0'}. An entry whose payload is missing
-- (written by hand) is dropped from the schedule.
local ids = redis.call('ZRANGEBYSCORE', K_SCHEDULE, '-inf', ARGV[1],
                       'LIMIT', 0, ARGV[2])
local n = 0
for _, id in ipairs(ids) do
  local payload = redis.call('HGET', K_SCHED_PAYLOAD, id)
  local queue = redis.call('HGET', K_SCHED_QUEUE, id)
  schedule_remove(id)
  if payload and queue then
    t_push(queue, payload)
    n = n + 1
  end
end
local nxt = redis.call('ZRANGE', K_SCHEDULE, 0, 0, 'WITHSCORES')
return {n, nxt[2] or '0'}

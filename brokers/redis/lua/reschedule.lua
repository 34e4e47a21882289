#!lua
-- ARGV: id due. Returns 1 if id was scheduled, else 0 and nothing
-- written. due 0 moves it to its queue now (as promotion does); due > 0
-- makes it due then.
if not redis.call('ZSCORE', K_SCHEDULE, ARGV[1]) then return 0 end
if tonumber(ARGV[2]) > 0 then
  redis.call('ZADD', K_SCHEDULE, 'XX', ARGV[2], ARGV[1])
  return 1
end
local payload = redis.call('HGET', K_SCHED_PAYLOAD, ARGV[1])
local queue = redis.call('HGET', K_SCHED_QUEUE, ARGV[1])
schedule_remove(ARGV[1])
if payload and queue then t_push(queue, payload) end
return 1

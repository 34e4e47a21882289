#!lua flags=no-writes,allow-oom
-- ARGV: id. Returns {1, due, queue, payload} when it is on the schedule,
-- {2, entry} (an XRANGE element) for its newest dead letter, else {0}.
local due = redis.call('ZSCORE', K_SCHEDULE, ARGV[1])
if due then
  return {1, due, redis.call('HGET', K_SCHED_QUEUE, ARGV[1]) or '',
          redis.call('HGET', K_SCHED_PAYLOAD, ARGV[1]) or ''}
end
local eid = redis.call('HGET', K_DLQ_IDS, ARGV[1])
if eid then
  local e = redis.call('XRANGE', K_DLQ, eid, eid)
  if #e == 1 then return {2, e[1]} end
end
return {0}

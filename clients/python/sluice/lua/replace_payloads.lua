#!lua
-- ARGV, for each item: place queue handle payload replacement, place q
-- (ready in queue, handle as list_queued gave it), s (on the schedule,
-- handle its task id) or d (a dead letter, handle its entry id). Where
-- the message still is, with exactly payload, its bytes become
-- replacement and nothing else of it changes: a queued one through the
-- transport (t_replace), a scheduled one keeps its due time and queue, a
-- dead letter is added again with every other field as it was (its
-- reason, detail, source, deliveries and time: at is a field, not the
-- entry id) and the old entry deleted, so its entry id changes and
-- {ns}:dlq:ids follows; {ns}:dlq:count is unchanged (same reason).
-- Returns one 1 (replaced) or 0 per item.
local out = {}
for i = 1, #ARGV, 5 do
  local place, queue, handle = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local payload, replacement = ARGV[i + 3], ARGV[i + 4]
  local done = false
  if place == 'q' then
    done = t_replace(queue, handle, payload, replacement)
  elseif place == 's' then
    if redis.call('ZSCORE', K_SCHEDULE, handle) and
       redis.call('HGET', K_SCHED_PAYLOAD, handle) == payload then
      redis.call('HSET', K_SCHED_PAYLOAD, handle, replacement)
      done = true
    end
  elseif place == 'd' then
    -- pcall: an entry id Redis cannot parse names no entry; nor does
    -- one Redis reads as a range (a bare time: that millisecond's).
    local ok, e = pcall(redis.call, 'XRANGE', K_DLQ, handle, handle,
                        'COUNT', 1)
    if ok and #e == 1 and e[1][1] == handle then
      local f, found, task_id = e[1][2], false, nil
      local cmd = {'XADD', K_DLQ, '*'}
      for j = 1, #f - 1, 2 do
        if f[j] == 'payload' then
          found = f[j + 1] == payload
          cmd[#cmd + 1] = 'payload'; cmd[#cmd + 1] = replacement
        else
          if f[j] == 'task_id' then task_id = f[j + 1] end
          cmd[#cmd + 1] = f[j]; cmd[#cmd + 1] = f[j + 1]
        end
      end
      if found then
        local eid = redis.call(unpack(cmd))
        redis.call('XDEL', K_DLQ, handle)
        if task_id and redis.call('HGET', K_DLQ_IDS, task_id) == handle then
          redis.call('HSET', K_DLQ_IDS, task_id, eid)
        end
        done = true
      end
    end
  end
  out[#out + 1] = done and 1 or 0
end
return out

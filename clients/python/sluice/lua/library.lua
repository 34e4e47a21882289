-- library.lua - helpers every script shares: records, the schedule,
-- submits, dead letters. Calls only the t_* functions to touch a queue.
-- rec: flag byte + record, or '' for none.
local function put_record(id, rec, ttl)
  if rec == '' then return end
  redis.call('SET', K_RECORD .. id, rec, 'PX', ttl)
  if string.byte(rec, 1) == 70 then -- 'F'
    redis.call('PUBLISH', K_DONE .. id, 'F')
  end
end
-- The same, without the notification: settle publishes in one go.
local function set_record(id, rec, ttl)
  if rec == '' then return false end
  redis.call('SET', K_RECORD .. id, rec, 'PX', ttl)
  return string.byte(rec, 1) == 70
end
local function schedule_add(id, queue, payload, at)
  redis.call('ZADD', K_SCHEDULE, at, id)
  redis.call('HSET', K_SCHED_PAYLOAD, id, payload)
  redis.call('HSET', K_SCHED_QUEUE, id, queue)
end
local function schedule_remove(id)
  redis.call('ZREM', K_SCHEDULE, id)
  redis.call('HDEL', K_SCHED_PAYLOAD, id)
  redis.call('HDEL', K_SCHED_QUEUE, id)
end
-- The check half of a submit: TRUE when its idempotency claim exists.
local function submit_claimed(id, dedup_ttl)
  return tonumber(dedup_ttl) > 0 and
         redis.call('EXISTS', K_DEDUP .. id) == 1
end
-- The write half: claim, queue or schedule, record.
local function submit_write(id, queue, payload, due, dedup_ttl, rec,
                            rec_ttl)
  if tonumber(dedup_ttl) > 0 then
    redis.call('SET', K_DEDUP .. id, '1', 'PX', dedup_ttl)
  end
  if tonumber(due) > 0 then
    schedule_add(id, queue, payload, due)
  else
    t_push(queue, payload)
  end
  put_record(id, rec, rec_ttl)
end
local function dlq_count_add(reason, n)
  if redis.call('HINCRBY', K_DLQ_COUNT, reason, n) <= 0 then
    redis.call('HDEL', K_DLQ_COUNT, reason)
  end
end
-- entry: one element of an XRANGE reply. Returns its reason.
local function dlq_remove(entry)
  redis.call('XDEL', K_DLQ, entry[1])
  local f, reason = entry[2], 'unknown'
  for j = 1, #f, 2 do
    if f[j] == 'reason' then
      reason = f[j + 1]; dlq_count_add(reason, -1)
    elseif f[j] == 'task_id' and
           redis.call('HGET', K_DLQ_IDS, f[j + 1]) == entry[1] then
      redis.call('HDEL', K_DLQ_IDS, f[j + 1])
    end
  end
  return reason
end
-- Appends a dead letter, first dropping the oldest entries so that at
-- most max remain: exact, every count kept exact, and every drop
-- counted by reason. Returns how many were dropped.
local function dlq_add(max, payload, task_id, task, reason, detail,
                       source, deliveries, at)
  local over = redis.call('XLEN', K_DLQ) - max + 1
  local old = {}
  if over > 0 then
    old = redis.call('XRANGE', K_DLQ, '-', '+', 'COUNT', over)
  end
  for _, e in ipairs(old) do
    redis.call('HINCRBY', K_DLQ_DROPPED, dlq_remove(e), 1)
  end
  local f = {'XADD', K_DLQ, '*', 'payload', payload, 'reason', reason,
             'source', source, 'deliveries', deliveries, 'at', at}
  if task_id ~= '' then
    f[#f + 1] = 'task_id'; f[#f + 1] = task_id
  end
  if task ~= '' then f[#f + 1] = 'task'; f[#f + 1] = task end
  if detail ~= '' then f[#f + 1] = 'detail'; f[#f + 1] = detail end
  local eid = redis.call(unpack(f))
  if task_id ~= '' then redis.call('HSET', K_DLQ_IDS, task_id, eid) end
  dlq_count_add(reason, 1)
  return #old
end

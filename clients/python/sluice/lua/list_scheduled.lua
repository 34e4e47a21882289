#!lua flags=no-writes,allow-oom
-- ARGV: cursor_id cursor_due limit (cursor_id '' = from the earliest).
-- Returns {next_id, next_due, then id due queue payload per entry}, in due
-- order (ties in id order, as the zset keeps them), next_id '' at the end.
-- The cursor's entry is found by rank, so entries promoted or cancelled
-- meanwhile shift nothing; if it left the schedule, the page resumes at its
-- due time (entries due then may repeat). O(log n + limit).
local start, limit = 0, tonumber(ARGV[3])
if ARGV[1] ~= '' then
  local r = redis.call('ZRANK', K_SCHEDULE, ARGV[1])
  local due = r and redis.call('ZSCORE', K_SCHEDULE, ARGV[1])
  if due and tonumber(due) == tonumber(ARGV[2]) then
    start = r + 1
  else
    start = redis.call('ZCOUNT', K_SCHEDULE, '-inf', '(' .. ARGV[2])
  end
end
local e = redis.call('ZRANGE', K_SCHEDULE, start, start + limit - 1,
                     'WITHSCORES')
local out = {'', ''}
for j = 1, #e, 2 do
  out[#out + 1] = e[j]
  out[#out + 1] = e[j + 1]
  out[#out + 1] = redis.call('HGET', K_SCHED_QUEUE, e[j]) or ''
  out[#out + 1] = redis.call('HGET', K_SCHED_PAYLOAD, e[j]) or ''
end
if #e == 2 * limit then out[1], out[2] = e[#e - 1], e[#e] end
return out

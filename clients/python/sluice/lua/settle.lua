#!lua flags=allow-oom
-- ARGV: dead_letter_max, consumer, then per settlement one of:
-- 'a' id rec rec_ttl       an ACK when the transport's ack is a no-op:
-- only the record (compact: fewer arguments)
-- op queue handle id rec rec_ttl, followed by
-- op 'A' (ack):          nothing
-- op 'R' (retry):        payload at
-- op 'D' (dead letter):  payload task_id task reason detail source
-- deliveries at
-- op 'L' (release):      payload delivery_count
-- Returns {one char per settlement, dead letters dropped by the cap}: 'D'
-- done, 'S' stale (t_check refused: another consumer holds the entry;
-- nothing acknowledged, scheduled or buried; the record is still written,
-- the last to finish wins), 'G' gone (refused too: no consumer holds it,
-- t_gone). Refused ones are added to K_STALE, so stats see fenced settles
-- of every process, not only of the one that asks.
--
-- Final records are announced only on channels someone listens to: one
-- PUBSUB NUMSUB over the batch's channels replaces a PUBLISH per task
-- (a redis.call costs about a microsecond, and most tasks are not
-- awaited). A waiter subscribes before it reads the record, and a script
-- is atomic, so a waiter is either counted here or reads the record.
local max = tonumber(ARGV[1])
local consumer = ARGV[2]
local out, done = {}, {}
local stale, dropped = 0, 0
local i = 3
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'a' then
    if set_record(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]) then
      done[#done + 1] = K_DONE .. ARGV[i + 1]
    end
    out[#out + 1] = 'D'
    i = i + 4
  else
    local queue, handle = ARGV[i + 1], ARGV[i + 2]
    local id, rec, ttl = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
    local f = i + 6
    if op == 'R' then i = f + 2
    elseif op == 'D' then i = f + 8
    elseif op == 'L' then i = f + 2
    else i = f end
    if t_check(queue, handle, consumer) then
      if op == 'L' then
        t_release(queue, handle, consumer, ARGV[f], ARGV[f + 1])
      else
        t_ack(queue, handle, consumer)
        if op == 'R' then
          schedule_add(id, queue, ARGV[f], ARGV[f + 1])
        elseif op == 'D' then
          dropped = dropped + dlq_add(max, ARGV[f], ARGV[f + 1],
                  ARGV[f + 2], ARGV[f + 3], ARGV[f + 4], ARGV[f + 5],
                  ARGV[f + 6], ARGV[f + 7])
        end
      end
      out[#out + 1] = 'D'
    else
      out[#out + 1] = t_gone(queue, handle) and 'G' or 'S'
      stale = stale + 1
    end
    if id ~= '' and set_record(id, rec, ttl) then
      done[#done + 1] = K_DONE .. id
    end
  end
end
if #done > 0 then
  local n = redis.call('PUBSUB', 'NUMSUB', unpack(done))
  for j = 2, #n, 2 do
    if n[j] > 0 then redis.call('PUBLISH', n[j - 1], 'F') end
  end
end
t_flush()
if stale > 0 then redis.call('INCRBY', K_STALE, stale) end
return {table.concat(out), dropped}

#!lua flags=allow-oom
-- ARGV: consumer, only_paused ('1' or '0'), then queue id payload
-- delivery_count quadruples of deliveries a read took that fetch does
-- not hand out: read beyond what was asked for, or (with only_paused) of
-- a queue paused while a blocking read waited. Each one handed back
-- still pending for the consumer is released (t_release: a copy at the
-- end, the original acknowledged and deleted). Returns one 1 (handed
-- back, or not the consumer's any more) or 0 (kept: its queue is not
-- paused) per delivery. Repeating it is harmless (the originals are gone).
local K_PAUSED = P .. 'paused'
local me, only_paused = ARGV[1], ARGV[2] == '1'
local out = {}
for i = 3, #ARGV - 3, 4 do
  local back = 1
  if only_paused and redis.call('SISMEMBER', K_PAUSED, ARGV[i]) == 0 then
    back = 0
  elseif t_owns(K_STREAM .. ARGV[i], ARGV[i + 1], me) then
    t_release(ARGV[i], ARGV[i + 1], me, ARGV[i + 2], ARGV[i + 3])
  end
  out[#out + 1] = back
end
return out

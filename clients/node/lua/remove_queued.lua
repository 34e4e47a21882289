#!lua flags=allow-oom
-- ARGV, for each item: queue handle payload id rec rec_ttl. Takes
-- each message that is still ready out of its queue (t_remove) and writes
-- its record in the same step. Returns one 1 (removed) or 0 per item.
local out = {}
for i = 1, #ARGV, 6 do
  if t_remove(ARGV[i], ARGV[i + 1], ARGV[i + 2]) then
    put_record(ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out

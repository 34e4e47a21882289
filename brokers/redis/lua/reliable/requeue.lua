#!lua flags=allow-oom
-- ARGV: consumer, then queue id payload delivery_count quadruples of
-- deliveries read beyond what fetch was asked for. Each one still pending
-- for the consumer is handed back as a release is (t_release: a copy at
-- the end, the original acknowledged and deleted). Returns how many were
-- handed back. Repeating it is harmless (the originals are gone).
local me, n = ARGV[1], 0
for i = 2, #ARGV - 3, 4 do
  local key = K_STREAM .. ARGV[i]
  if t_owns(key, ARGV[i + 1], me) then
    t_release(ARGV[i], ARGV[i + 1], me, ARGV[i + 2], ARGV[i + 3])
    n = n + 1
  end
end
return n

#!lua flags=allow-oom
-- ARGV: entry_id. Returns 1 if it existed (now deleted), else 0.
local e = redis.call('XRANGE', K_DLQ, ARGV[1], ARGV[1])
if #e == 0 then return 0 end
dlq_remove(e[1])
return 1

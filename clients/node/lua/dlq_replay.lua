#!lua
-- ARGV: entry_id, then one submit. Returns {found, existed}.
local e = redis.call('XRANGE', K_DLQ, ARGV[1], ARGV[1])
if #e == 0 then return {0, 0} end
local existed = submit_claimed(ARGV[2], ARGV[6])
dlq_remove(e[1])
redis.call('SADD', K_QUEUES, ARGV[3])
if existed then return {1, 1} end
submit_write(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7],
             ARGV[8])
return {1, 0}

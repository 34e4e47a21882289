#!lua
-- ARGV: name occurrence_at, then one submit. Returns {claimed, existed}.
local key = K_PERIODIC .. ARGV[1]
local last = redis.call('GET', key)
if last and tonumber(last) >= tonumber(ARGV[2]) then return {0, 0} end
local existed = submit_claimed(ARGV[3], ARGV[7])
redis.call('SET', key, ARGV[2])
redis.call('SADD', K_QUEUES, ARGV[4])
if existed then return {1, 1} end
submit_write(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8],
             ARGV[9])
return {1, 0}

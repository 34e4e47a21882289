#!lua flags=allow-oom
-- bare: assembled with the prelude only (it calls no t_* function).
-- ARGV: queue, then the payloads a blocking pop took from it, in the
-- order it took them. If the queue was paused meanwhile, puts them back
-- at the consuming end in that order (so they are fetched first again
-- once it is resumed) and returns 1; otherwise returns 0 and changes
-- nothing: the pop stands.
local K_PAUSED = P .. 'paused'
if redis.call('SISMEMBER', K_PAUSED, ARGV[1]) == 0 then return 0 end
local key = K_QUEUE .. ARGV[1]
for i = #ARGV, 2, -1 do redis.call('RPUSH', key, ARGV[i]) end
return 1

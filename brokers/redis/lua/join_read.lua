#!lua flags=no-writes,allow-oom
-- ARGV: join. Returns {} when the join does not exist; else {total,
-- arrived, status, meta}. The outcomes are read apart, with one HGETALL of
-- K_JOIN..join..':o' (redis-joins.c): building a reply of thousands of
-- them in Lua costs Redis far more CPU than the command alone.
local h = redis.call('HMGET', K_JOIN .. ARGV[1], 't', 'n', 's', 'm')
if not h[1] then return {} end
return {h[1], h[2], h[3], h[4] or ''}

#!lua flags=allow-oom
-- ARGV: id expires_at. A revocation never gets shorter (GT), and each one
-- gets the next insertion number: the workers' sync cursor.
redis.call('ZADD', K_REVOKED, 'GT', ARGV[2], ARGV[1])
local n = redis.call('INCR', K_REVOKED_N)
redis.call('ZADD', K_REVOKED_SEQ, n, ARGV[1])
return n

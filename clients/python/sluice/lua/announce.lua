#!lua flags=allow-oom
-- ARGV: consumer now ttl_ms info. The announcement lapses with the lease,
-- so a worker killed with -9 shows as not alive within a lease.
redis.call('SET', K_WINFO .. ARGV[1], ARGV[4], 'PX', ARGV[3])
redis.call('ZADD', K_WORKERS, ARGV[2], ARGV[1])
return 1

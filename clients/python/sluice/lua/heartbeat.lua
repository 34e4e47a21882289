#!lua flags=allow-oom
-- ARGV: consumer now lease_ms, then queue handle pairs of the deliveries
-- it holds. Registers the worker for stats, forgets workers silent for
-- three leases, and lets the transport renew leases. Returns 1, or what
-- t_heartbeat returned if anything (an error reply makes the heartbeat
-- fail after its writes: the lease had lapsed before this renewal).
local now, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZADD', K_WORKERS, ARGV[2], ARGV[1])
if lease > 0 then
  redis.call('ZREMRANGEBYSCORE', K_WORKERS, '-inf',
             string.format('(%.0f', now - 3 * lease))
end
return t_heartbeat(ARGV[1], lease, ARGV, 4) or 1

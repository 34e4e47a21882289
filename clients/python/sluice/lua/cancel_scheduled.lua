#!lua flags=allow-oom
-- ARGV: id rec rec_ttl. Returns 1 if id was scheduled (now removed and the
-- record written), else 0 and nothing written.
if not redis.call('ZSCORE', K_SCHEDULE, ARGV[1]) then return 0 end
schedule_remove(ARGV[1])
put_record(ARGV[1], ARGV[2], ARGV[3])
return 1

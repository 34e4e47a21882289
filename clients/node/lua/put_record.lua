#!lua flags=allow-oom
-- ARGV: id rec rec_ttl.
put_record(ARGV[1], ARGV[2], ARGV[3])
return 1

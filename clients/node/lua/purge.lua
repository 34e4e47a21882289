#!lua flags=allow-oom
-- ARGV: queue. Returns how many ready messages were deleted.
return t_purge(ARGV[1])

#!lua flags=allow-oom
-- ARGV: consumer.
redis.call('ZREM', K_WORKERS, ARGV[1])
redis.call('DEL', K_WINFO .. ARGV[1])
t_leave(ARGV[1])
return 1

-- prelude.lua - the key names of a namespace, as locals; KEYS[1] is its
-- prefix "{ns}:". The suffixes are those of SLUICE_REDIS_K_* in
-- redis-keys.h (test-redis-fast checks that they agree). Plain string
-- locals rather than functions: closures made on every call cost Redis CPU.
local P = KEYS[1]
local K_QUEUE = P .. 'q:'
local K_STREAM = P .. 's:'
local K_RECORD = P .. 'r:'
local K_DONE = P .. 'done:'
local K_PERIODIC = P .. 'periodic:'
local K_DEDUP = P .. 'dedup:'
local K_ALIVE = P .. 'alive:'
local K_SCHEDULE = P .. 'schedule'
local K_SCHED_PAYLOAD = P .. 'sched:payload'
local K_SCHED_QUEUE = P .. 'sched:queue'
local K_REVOKED = P .. 'revoked'
local K_DLQ = P .. 'dlq'
local K_DLQ_COUNT = P .. 'dlq:count'
local K_QUEUES = P .. 'queues'
local K_WORKERS = P .. 'workers'
local K_STALE = P .. 'stale'
local K_META = P .. 'meta'
local K_REVOKED_SEQ = P .. 'revoked:seq'
local K_REVOKED_N = P .. 'revoked:n'
local K_DLQ_IDS = P .. 'dlq:ids'
local K_DLQ_DROPPED = P .. 'dlq:dropped'
local K_WINFO = P .. 'winfo:'
local K_JOIN = P .. 'join:'
local K_PROGRESS = P .. 'progress:'

#!lua
-- ARGV: join expected_total by, then submits (id queue payload due dedup
-- rec rec_ttl). A compare-and-set: if the join exists, is open (s 0) and
-- its total is expected_total, adds by to it and submits every item;
-- returns the total then (grown or not), or 0 for a join that is gone or
-- no longer open.
local key = K_JOIN .. ARGV[1]
-- (The outcomes' hash, K_JOIN..join..':o', is not touched.)
local h = redis.call('HMGET', key, 't', 's')
if not h[1] or h[2] ~= '0' then return 0 end
if tonumber(h[1]) ~= tonumber(ARGV[2]) then return tonumber(h[1]) end
local total = redis.call('HINCRBY', key, 't', ARGV[3])
for i = 4, #ARGV, 7 do
  submit_write(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], '0',
               ARGV[i + 5], ARGV[i + 6])
  redis.call('SADD', K_QUEUES, ARGV[i + 1])
end
return total

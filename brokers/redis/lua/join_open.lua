#!lua
-- ARGV: nj, then nj joins, each: id total ttl meta nrel and nrel pairs
-- (queue payload) it releases; then the items to submit at once, each
-- 'r' queue payload (ready, nothing else) or 's' id queue payload due
-- dedup rec rec_ttl (dedup is 0). The whole call is one step: if the
-- first join exists (a repeat of a call whose reply was lost) nothing is
-- written and 1 is returned; otherwise every join is written (one hash
-- K_JOIN..id, PX its ttl: t total, n arrived, s status 0/1/2, m meta, rn
-- and q<k>/p<k> the release), every item
-- submitted, and 0 returned. The outcomes live in a hash of their own,
-- K_JOIN..id..':o' (member -> outcome), made by the first arrival, so
-- that reading them is one HGETALL without a script.
local nj = tonumber(ARGV[1])
if redis.call('EXISTS', K_JOIN .. ARGV[2]) == 1 then return 1 end
local i, queues = 2, {}
for _ = 1, nj do
  local key, nrel = K_JOIN .. ARGV[i], tonumber(ARGV[i + 4])
  redis.call('DEL', key, key .. ':o')
  redis.call('HSET', key, 't', ARGV[i + 1], 'n', 0, 's', 0, 'm', ARGV[i + 3],
             'rn', nrel)
  local f = {}
  for k = 1, nrel do
    local q = ARGV[i + 3 + 2 * k]
    f[#f + 1] = 'q' .. k; f[#f + 1] = q
    f[#f + 1] = 'p' .. k; f[#f + 1] = ARGV[i + 4 + 2 * k]
    queues[q] = true
    if #f >= 1000 then redis.call('HSET', key, unpack(f)); f = {} end
  end
  if #f > 0 then redis.call('HSET', key, unpack(f)) end
  redis.call('PEXPIRE', key, ARGV[i + 2])
  i = i + 5 + 2 * nrel
end
local pushes, order = {}, {}
while i <= #ARGV do
  if ARGV[i] == 'r' then
    local q = ARGV[i + 1]
    local list = pushes[q]
    if not list then list = {}; pushes[q] = list; order[#order + 1] = q end
    list[#list + 1] = ARGV[i + 2]
    queues[q] = true
    i = i + 3
  else
    submit_write(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], '0',
                 ARGV[i + 6], ARGV[i + 7])
    queues[ARGV[i + 2]] = true
    i = i + 8
  end
end
for _, q in ipairs(order) do t_push_many(q, pushes[q]) end
for q in pairs(queues) do redis.call('SADD', K_QUEUES, q) end
return 0

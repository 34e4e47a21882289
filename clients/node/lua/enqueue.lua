#!lua
-- ARGV: token, nq, the nq distinct queues of the batch, then the items,
-- each one of:
-- 'r' queue payload                      ready now, no id-keyed extras
-- 's' id queue payload due dedup_ttl rec rec_ttl   (a full submit)
-- Every check comes first (claims, including an id claimed earlier in the
-- same batch), then the writes: the queues first, one push per queue (the
-- likeliest write to fail, on a key of a wrong type, so a failure leaves no
-- claim without its message), then schedule entries, claims and records.
-- Returns one char per item: '1' when its claim existed (nothing written).
-- A claim holds the token of the call that made it (unique per call): a
-- call replayed after its reply was lost finds its own claims and answers
-- '0' for them, without writing twice.
-- The compact 'r' form and the grouped pushes keep Redis CPU per message
-- low: argument count and redis.call count dominate a script's cost.
local token, nq = ARGV[1], tonumber(ARGV[2])
local out, pushes, order, writes, seen = {}, {}, {}, {}, {}
local i = nq + 3
while i <= #ARGV do
  local q, p
  if ARGV[i] == 'r' then
    q, p = ARGV[i + 1], ARGV[i + 2]
    out[#out + 1] = '0'
    i = i + 3
  else
    local id, dedup = ARGV[i + 1], tonumber(ARGV[i + 5])
    local claim = dedup > 0 and not seen[id] and
                  redis.call('GET', K_DEDUP .. id)
    if claim == token then
      out[#out + 1] = '0'
      seen[id] = true
    elseif dedup > 0 and (seen[id] or claim) then
      out[#out + 1] = '1'
    else
      if dedup > 0 then seen[id] = true end
      writes[#writes + 1] = i
      out[#out + 1] = '0'
      if tonumber(ARGV[i + 4]) <= 0 then
        q, p = ARGV[i + 2], ARGV[i + 3]
      end
    end
    i = i + 8
  end
  if q then
    local list = pushes[q]
    if not list then
      list = {}; pushes[q] = list; order[#order + 1] = q
    end
    list[#list + 1] = p
  end
end
for _, q in ipairs(order) do t_push_many(q, pushes[q]) end
for _, j in ipairs(writes) do
  local id = ARGV[j + 1]
  if tonumber(ARGV[j + 5]) > 0 then
    redis.call('SET', K_DEDUP .. id, token, 'PX', ARGV[j + 5])
  end
  if tonumber(ARGV[j + 4]) > 0 then
    schedule_add(id, ARGV[j + 2], ARGV[j + 3], ARGV[j + 4])
  end
  put_record(id, ARGV[j + 6], ARGV[j + 7])
end
if nq > 0 then redis.call('SADD', K_QUEUES, unpack(ARGV, 3, nq + 2)) end
return table.concat(out)

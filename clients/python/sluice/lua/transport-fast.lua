-- transport-fast.lua - the t_* functions of the redis-fast mode: one
-- list per queue (see transport-fast.c).
local function t_push(queue, payload)
  redis.call('LPUSH', K_QUEUE .. queue, payload)
end
-- One LPUSH per chunk: LPUSH k a b c leaves c b a, and popping from
-- the right gives a b c, so the order holds. Chunks stay well below
-- Lua's unpack limit.
local function t_push_many(queue, payloads)
  local key = K_QUEUE .. queue
  for s = 1, #payloads, 1000 do
    redis.call('LPUSH', key,
               unpack(payloads, s, math.min(s + 999, #payloads)))
  end
end
local function t_check(queue, handle, consumer) return true end
local function t_ack(queue, handle, consumer) end
-- A settle repeated after a lost reply must not release twice: skip
-- when the same bytes already sit at the consuming end.
local function t_release(queue, handle, consumer, payload, count)
  local key = K_QUEUE .. queue
  if redis.call('LINDEX', key, -1) ~= payload then
    redis.call('RPUSH', key, payload)
  end
end
local function t_depth(queue)
  return redis.call('LLEN', K_QUEUE .. queue)
end
local function t_in_flight(queues) return -1 end
local function t_purge(queue)
  local n = redis.call('LLEN', K_QUEUE .. queue)
  redis.call('DEL', K_QUEUE .. queue)
  return n
end
-- The consumer pops from the right: a page of limit from offset off
-- (counted from that end) is one LRANGE of negative indices, which
-- Redis walks from the nearer end of the list; reversed into fetch
-- order.
local function t_peek(queue, after, limit)
  if after ~= '' and not string.match(after, '^%d+$') then
    return {false}
  end
  local off = tonumber(after) or 0
  local e = redis.call('LRANGE', K_QUEUE .. queue, -(off + limit),
                       -(off + 1))
  local out = {''}
  for i = #e, 1, -1 do
    out[#out + 1] = e[i]; out[#out + 1] = ''
  end
  if #e == limit then out[1] = string.format('%d', off + limit) end
  return out
end
-- A list element has no name but its bytes: the first copy from the
-- consuming end goes (two copies are the same task). LREM walks from
-- there, so a page removed in listing order costs O(1) a message.
local function t_remove(queue, handle, payload)
  return redis.call('LREM', K_QUEUE .. queue, -1, payload) > 0
end
-- The same bytes name the element here too: the first copy from the
-- consuming end (LPOS RANK -1, which walks from there) gets the new bytes
-- in place, so the message keeps its place in the order. LSET with the
-- index from that end walks from there as well.
local function t_replace(queue, handle, payload, replacement)
  local key = K_QUEUE .. queue
  local i = redis.call('LPOS', key, payload, 'RANK', -1)
  if not i then return false end
  redis.call('LSET', key, i - redis.call('LLEN', key), replacement)
  return true
end
local function t_heartbeat(consumer, lease_ms, argv, first) end
local function t_leave(consumer) end

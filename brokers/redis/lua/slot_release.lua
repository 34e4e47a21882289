#!lua
-- ARGV: n, then n times: key holder. Returns {woke_1, ..., woke_n}.
-- Gives the holder's slot back, then moves the oldest waiter of the key
-- that is on the schedule to its queue at once (as reschedule.lua does
-- for 0). A waiter not on the schedule may not be settled yet and stays
-- for the next release, unless it has waited a minute (it ran, or was
-- deleted). See slot_acquire.lua for the keys.
local K_SLOTS = P .. 'cs:'
local K_WAITERS = P .. 'cw:'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 0, tonumber(ARGV[1]) - 1 do
  local key = ARGV[2 + i * 2]
  local waiters = K_WAITERS .. key
  local woke = 0
  redis.call('ZREM', K_SLOTS .. key, ARGV[3 + i * 2])
  local oldest = redis.call('ZRANGE', waiters, 0, 15, 'WITHSCORES')
  for j = 1, #oldest, 2 do
    local id = oldest[j]
    if redis.call('ZSCORE', K_SCHEDULE, id) then
      local payload = redis.call('HGET', K_SCHED_PAYLOAD, id)
      local queue = redis.call('HGET', K_SCHED_QUEUE, id)
      schedule_remove(id)
      redis.call('ZREM', waiters, id)
      if payload and queue then
        t_push(queue, payload)
        woke = 1
        break
      end
    elseif now - tonumber(oldest[j + 1]) >= 60000 then
      redis.call('ZREM', waiters, id)
    end
  end
  out[#out + 1] = woke
end
return out

#!lua flags=allow-oom
-- bare: assembled with the prelude only (it calls no t_* function).
-- ARGV: max, then the queues in priority order. Pops up to max from the
-- consuming end of the first queue that is not paused and holds
-- something (as LMPOP would), without blocking: the pause and the pop are
-- one step, so once a pause is stored no fetch takes from the queue.
-- Returns {{queue index (1-based), payload, ...} in the order popped,
-- {indexes of the queues found paused before it}}.
local K_PAUSED = P .. 'paused'
local max = tonumber(ARGV[1])
local out, paused = {}, {}
for qi = 2, #ARGV do
  if redis.call('SISMEMBER', K_PAUSED, ARGV[qi]) == 1 then
    paused[#paused + 1] = qi - 1
  else
    local got = redis.call('RPOP', K_QUEUE .. ARGV[qi], max)
    if got then
      for _, p in ipairs(got) do
        out[#out + 1] = qi - 1; out[#out + 1] = p
      end
      break
    end
  end
end
return {out, paused}

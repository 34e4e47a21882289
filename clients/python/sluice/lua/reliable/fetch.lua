#!lua flags=allow-oom
-- ARGV: consumer, max, the queues in priority order. Reads those that are
-- not paused in order without blocking, each for what is still missing:
-- the pause and the read are one step, so once a pause is stored no fetch
-- takes from the queue. Returns {{queue index (1-based), id, payload,
-- prior deliveries, ...}, {indexes of queues without a group}, {indexes
-- of the queues found paused}}.
local K_PAUSED = P .. 'paused'
local me, left = ARGV[1], tonumber(ARGV[2])
local out, missing, paused = {}, {}, {}
for qi = 3, #ARGV do
  if left <= 0 then break end
  if redis.call('SISMEMBER', K_PAUSED, ARGV[qi]) == 1 then
    paused[#paused + 1] = qi - 2
  else
    local ok, r = pcall(redis.call, 'XREADGROUP', 'GROUP', GROUP, me,
                        'COUNT', left, 'STREAMS', K_STREAM .. ARGV[qi],
                        '>')
    if not ok then
      if string.find(tostring(r), 'NOGROUP', 1, true) then
        missing[#missing + 1] = qi - 2
      else
        return redis.error_reply(tostring(r))
      end
    elseif r then
      for _, e in ipairs(r[1][2]) do
        local p, d = t_fields(e[2])
        out[#out + 1] = qi - 2; out[#out + 1] = e[1]; out[#out + 1] = p
        out[#out + 1] = d
        left = left - 1
      end
    end
  end
end
return {out, missing, paused}

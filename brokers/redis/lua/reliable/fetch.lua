#!lua flags=allow-oom
-- ARGV: consumer, max, the queues in priority order. Reads them in order
-- without blocking, each for what is still missing. Returns {{queue index
-- (1-based), id, payload, prior deliveries, ...}, {indexes of queues
-- without a group}}.
local me, left = ARGV[1], tonumber(ARGV[2])
local out, missing = {}, {}
for qi = 3, #ARGV do
  if left <= 0 then break end
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
return {out, missing}

#!lua
-- ARGV: max_len max_age_ms, then the events. Appends each to K_EVENTS
-- (field e, id chosen by Redis: its time in ms), then trims the stream to
-- max_len entries and drops those older than max_age_ms, both exactly.
-- The age is measured on Redis's clock, the one that stamped the ids, not
-- the caller's (the one exception to "times come from the caller": a
-- caller's clock cannot be compared with ids it did not make; a fake
-- clock would trim everything). Returns the last id.
local id
for i = 3, #ARGV do
  id = redis.call('XADD', K_EVENTS, 'MAXLEN', ARGV[1], '*', 'e', ARGV[i])
end
local t = redis.call('TIME')
local min = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) -
            tonumber(ARGV[2])
if min > 0 then redis.call('XTRIM', K_EVENTS, 'MINID', min) end
return id

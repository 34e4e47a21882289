#!lua
-- bare: assembled with the prelude only (no hooks, transport or library:
-- defining them is most of what a script this short costs per call).
-- ARGV: n, then n times: key id action ttl, action one of c (check),
-- s (start: end the claim), h (hold as running for ttl), w (waiting
-- again, for ttl), r (release), n (renew a running claim for ttl; nothing
-- if it is not running). Returns {superseded_1, ...}: 1 when a
-- live claim names another id (nothing changed). See unique_enqueue.lua
-- for the claim's format.
local K_UNIQUE = P .. 'uq:'
local out = {}
for i = 0, tonumber(ARGV[1]) - 1 do
  local b = 2 + i * 4
  local key, id, act = K_UNIQUE .. ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local claim = redis.call('GET', key)
  if claim and string.sub(claim, 2) ~= id then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
    if act == 's' or act == 'r' then
      if claim then redis.call('DEL', key) end
    elseif act == 'h' then
      redis.call('SET', key, 'r' .. id, 'PX', ARGV[b + 3])
    elseif act == 'w' then
      redis.call('SET', key, 'w' .. id, 'PX', ARGV[b + 3])
    elseif act == 'n' and claim and string.sub(claim, 1, 1) == 'r' then
      redis.call('PEXPIRE', key, ARGV[b + 3])
    end
  end
end
return out

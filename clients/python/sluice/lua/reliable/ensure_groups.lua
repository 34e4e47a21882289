#!lua flags=allow-oom
-- ARGV: the queues. Creates each missing group at 0 (MKSTREAM). Returns
-- one char per queue: '1' created now, '0' it existed.
local out = {}
for i = 1, #ARGV do
  local ok, err = pcall(redis.call, 'XGROUP', 'CREATE',
                        K_STREAM .. ARGV[i], GROUP, '0', 'MKSTREAM')
  if ok then out[i] = '1'
  elseif string.find(tostring(err), 'BUSYGROUP', 1, true) then
    out[i] = '0'
  else return redis.error_reply(tostring(err)) end
end
return table.concat(out)

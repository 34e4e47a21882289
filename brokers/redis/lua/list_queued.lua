#!lua flags=no-writes,allow-oom
-- ARGV: queue cursor limit. The transport's page of ready messages:
-- {cursor', payload, handle, ...}, cursor' '' at the end, handle '' where
-- the transport has none.
return t_peek(ARGV[1], ARGV[2], tonumber(ARGV[3]))

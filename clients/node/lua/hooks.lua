-- hooks.lua - defaults of the optional transport hooks; a transport's
-- fragment, spliced in after this, may redefine them.
-- Called once at the end of every settle script, after each item's
-- writes: a transport may defer the work of t_ack to it.
local function t_flush() end
-- Called when t_check refused a settlement: true when no consumer
-- holds the entry at all (settled already, or lost), rather than
-- another one (stale). Without fencing, nothing is ever refused.
local function t_gone(queue, handle) return false end

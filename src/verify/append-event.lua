-- Appends one event to an authentication (row-events.lua: to its row or to its webhook stream),
-- and marks it for webhook delivery when the authentication has a callback.
-- KEYS: 1 auth, 2 events, 3 hook, 4 webhook pending set.
-- ARGV: 1 the envelope JSON, 2 its compact record ("" for none). Returns 0 when the
-- authentication is gone (expired), 1 when appended, 2 when appended and awaiting webhook delivery.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local _, hooked = row_event(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2])
return 1 + hooked

-- Appends one event to an authentication's list, and marks it for webhook delivery when the
-- authentication has a callback. KEYS: 1 events, 2 hook, 3 webhook pending set.
-- ARGV[1]: the envelope JSON. Returns 0 when the events list is gone (expired), 1 when
-- appended, 2 when appended and awaiting webhook delivery.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local _, hooked = stream_append(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
return 1 + hooked

-- Appends one event to an authentication (row-events.lua: to its row or to its webhook stream),
-- and marks it for webhook delivery when the authentication has a callback.
-- KEYS: 1 auth (its events and hook are named from it: row_event_keys), 2 webhook pending set.
-- ARGV: 1 the envelope JSON, 2 its compact record ("" for none). Returns {'gone'} when the
-- authentication expired, else {'appended', 1 when it awaits webhook delivery else 0}.
local authKey = KEYS[1]
local pendingKey = KEYS[2]
local envelope = ARGV[1]
local compact = ARGV[2]
local eventsKey, hookKey = row_event_keys(authKey)
if redis.call('EXISTS', authKey) == 0 then return {'gone'} end
local _, hooked = row_event(authKey, eventsKey, hookKey, pendingKey, envelope, compact)
return {'appended', hooked}

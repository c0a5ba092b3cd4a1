-- Notes a delivery report of one message (docs/routing.md#undelivered): {'new'} when its state is
-- new for that message, {'repeat'} when the same state was reported already (a repeat changes
-- nothing) or the authentication is gone. Also names the carrier of a message sent by the next
-- channel (`dp`, docs/v2-api.md#fallback): a row that is gone is never made again by a field.
-- KEYS: 1 the authentication. ARGV: 1 the field (`k<attempt>`, `r` added for a re-send, or `dp`), 2 its value.
local authKey = KEYS[1]
local field = ARGV[1]
local state = ARGV[2]
if redis.call('EXISTS', authKey) == 0 then return {'repeat'} end
if redis.call('HGET', authKey, field) == state then return {'repeat'} end
redis.call('HSET', authKey, field, state)
return {'new'}

-- Whether the recovery may drop a customer from the hold index: true when the customer has no
-- hold and no send listed at `listedAt` or before can record one any more. A charging script
-- records its hold only until its issue time plus `staleMs` by this Redis's clock (hold.lua,
-- hold_stale), and its issue time is at most the score it listed the customer with.
-- KEYS: 1 the customer's holds. ARGV: 1 listedAt (the customer's score in the index), 2 staleMs.
-- Returns {'quiet'} when the customer may be dropped, {'busy'} when not.
local holdsKey = KEYS[1]
local listedAt = tonumber(ARGV[1])
local staleMs = tonumber(ARGV[2])
if redis.call('ZCARD', holdsKey) > 0 then return {'busy'} end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ms <= listedAt + staleMs then return {'busy'} end
return {'quiet'}

-- Moves a hold to the next provider of its route after a failed submit (docs/routing.md#availability):
-- names that provider and route in the hold and gives it that provider's span, while its owner
-- still has it: {'moved'}; {'left'} when a recovery claimed it (a claim moves the deadline), {'gone'}
-- when it was resolved.
-- KEYS: 1 the customer's holds, 2 the hold. ARGV: 1 hold id, 2 the deadline its owner recorded,
-- 3 the new deadline, 4 the provider, 5 the route's destination.
local holdsKey = KEYS[1]
local holdKey = KEYS[2]
local holdId = ARGV[1]
local deadline = ARGV[2]
local later = ARGV[3]
local provider = ARGV[4]
local route = ARGV[5]
if redis.call('EXISTS', holdKey) == 0 then return {'gone'} end
if tonumber(redis.call('ZSCORE', holdsKey, holdId)) ~= tonumber(deadline) then return {'left'} end
redis.call('HSET', holdKey, 'provider', provider, 'route', route)
redis.call('ZADD', holdsKey, later, holdId)
return {'moved'}

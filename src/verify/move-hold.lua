-- Moves a hold to the next provider of its route after a failed submit (docs/routing.md#availability):
-- names that provider and route in the hold and gives it that provider's span, while its owner
-- still has it: {'moved'}; {'left'} when a recovery claimed it (a claim moves the deadline), {'gone'}
-- when it was resolved. With a channel (docs/v2-api.md#fallback), the hold takes that channel's
-- message and price too, the account paying or getting back the difference: {'poor'}, nothing
-- changed, when its balance does not cover a dearer channel.
-- KEYS: 1 the customer's holds, 2 the hold, 3 the account, 4 the month's spend.
-- ARGV: 1 hold id, 2 the deadline its owner recorded, 3 the new deadline, 4 the provider, 5 the
-- route's destination, and for a change of channel 6 the channel, 7 its price, 8 its sealed message.
local holdsKey = KEYS[1]
local holdKey = KEYS[2]
local accountKey = KEYS[3]
local spendKey = KEYS[4]
local holdId = ARGV[1]
local deadline = ARGV[2]
local later = ARGV[3]
local provider = ARGV[4]
local route = ARGV[5]
local channel = ARGV[6]
local price = ARGV[7]
local sealed = ARGV[8]
if redis.call('EXISTS', holdKey) == 0 then return {'gone'} end
if tonumber(redis.call('ZSCORE', holdsKey, holdId)) ~= tonumber(deadline) then return {'left'} end
if channel and channel ~= '' then
  local held = tonumber(redis.call('HGET', holdKey, 'price') or '0')
  local more = tonumber(price) - held
  if more > 0 and tonumber(redis.call('HGET', accountKey, 'balance_micros') or '0') < more then
    return {'poor'}
  end
  if more ~= 0 then
    redis.call('HINCRBY', accountKey, 'balance_micros', -more)
    redis.call('INCRBY', spendKey, more)
  end
  redis.call('HSET', holdKey, 'channel', channel, 'price', price, 'sealed', sealed)
end
redis.call('HSET', holdKey, 'provider', provider, 'route', route)
redis.call('ZADD', holdsKey, later, holdId)
return {'moved'}

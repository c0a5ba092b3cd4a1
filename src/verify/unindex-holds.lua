-- Drops a customer from the hold index, unless a send listed it again since the recovery read
-- its score (`listedAt`): that send's hold may be recorded after holds-quiet.lua looked.
-- KEYS: 1 the index. ARGV: 1 customer, 2 listedAt. Returns {'dropped'}, or {'kept'}.
local indexKey = KEYS[1]
local customer = ARGV[1]
local listedAt = ARGV[2]
local score = redis.call('ZSCORE', indexKey, customer)
if not score or tonumber(score) > tonumber(listedAt) then return {'kept'} end
redis.call('ZREM', indexKey, customer)
return {'dropped'}

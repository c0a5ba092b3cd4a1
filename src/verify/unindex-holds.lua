-- Drops a customer from the hold index, unless a send listed it again since the recovery read
-- its score (`listedAt`): that send's hold may be recorded after holds-quiet.lua looked.
-- KEYS: 1 the index. ARGV: 1 customer, 2 listedAt. Returns 1 when dropped.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
return 1

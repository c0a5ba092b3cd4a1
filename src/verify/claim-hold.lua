-- Takes a hold past its deadline for recovery: moves its deadline on (so one instance at a
-- time re-sends it): {'claimed', field, value, ...}, or {'not_due'} when it is not due or already
-- resolved.
-- KEYS: 1 the customer's holds, 2 the hold. ARGV: 1 hold id, 2 now, 3 new deadline.
local holdsKey = KEYS[1]
local holdKey = KEYS[2]
local holdId = ARGV[1]
local now = ARGV[2]
local deadline = ARGV[3]
local score = redis.call('ZSCORE', holdsKey, holdId)
if not score or tonumber(score) > tonumber(now) then return {'not_due'} end
if redis.call('EXISTS', holdKey) == 0 then
  redis.call('ZREM', holdsKey, holdId)
  return {'not_due'}
end
redis.call('ZADD', holdsKey, deadline, holdId)
local fields = redis.call('HGETALL', holdKey)
table.insert(fields, 1, 'claimed')
return fields

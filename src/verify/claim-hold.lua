-- Takes a hold past its deadline for recovery: moves its deadline on (so one instance at a
-- time re-sends it) and returns its fields; nil when it is not due or already resolved.
-- KEYS: 1 the customer's holds, 2 the hold. ARGV: 1 hold id, 2 now, 3 new deadline.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return false
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return redis.call('HGETALL', KEYS[2])

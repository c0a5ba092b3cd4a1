-- Moves a stream's delivered count from what the worker read to the next value, only while the
-- worker still holds the stream's lock and nobody moved the count; keeps the lock a while longer.
-- KEYS[1] stream, KEYS[2] its delivered count, KEYS[3] its lock.
-- ARGV: lock token, expected count, new count, lock ttl in ms.
-- Returns {'advanced', the new count}, {'lock_lost'} or {'count_moved'}.
local streamKey = KEYS[1]
local deliveredKey = KEYS[2]
local lockKey = KEYS[3]
local token = ARGV[1]
local expected = ARGV[2]
local count = ARGV[3]
local lockTtlMs = ARGV[4]
if redis.call('GET', lockKey) ~= token then
  return {'lock_lost'}
end
if tonumber(redis.call('GET', deliveredKey) or '0') ~= tonumber(expected) then
  return {'count_moved'}
end
redis.call('SET', deliveredKey, count)
-- The count lives as long as the stream, so that a stream that expires starts again from 0.
local ttl = redis.call('PTTL', streamKey)
if ttl > 0 then
  redis.call('PEXPIRE', deliveredKey, ttl)
end
redis.call('PEXPIRE', lockKey, lockTtlMs)
return {'advanced', tonumber(count)}

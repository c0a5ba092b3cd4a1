-- Moves a stream's delivered count from what the worker read to the next value, only while the
-- worker still holds the stream's lock and nobody moved the count; keeps the lock a while longer.
-- KEYS[1] stream, KEYS[2] its delivered count, KEYS[3] its lock.
-- ARGV: lock token, expected count, new count, lock ttl in ms.
-- Returns the new count, -1 when the lock was lost, -2 when the count had moved.
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return -1
end
if tonumber(redis.call('GET', KEYS[2]) or '0') ~= tonumber(ARGV[2]) then
  return -2
end
redis.call('SET', KEYS[2], ARGV[3])
-- The count lives as long as the stream, so that a stream that expires starts again from 0.
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return tonumber(ARGV[3])

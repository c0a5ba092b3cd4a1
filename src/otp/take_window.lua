-- A sliding window log: records one use and says whether the window had room for it.
-- KEYS[1]: the window (a sorted set of uses by time). ARGV: now (ms), limit, window (s), member.
-- Returns 1 when taken, 0 when the window is full (nothing recorded).
local now, limit, seconds = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - seconds * 1000)
if redis.call('ZCARD', KEYS[1]) >= limit then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], seconds * 1000)
return 1

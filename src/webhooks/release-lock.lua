-- Releases a lock only if it still holds this holder's token (it may have expired and been taken).
-- KEYS[1] lock. ARGV[1] token. Returns 1 when released.
local lockKey = KEYS[1]
local token = ARGV[1]
if redis.call('GET', lockKey) == token then
  return redis.call('DEL', lockKey)
end
return 0

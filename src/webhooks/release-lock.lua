-- Releases a lock only if it still holds this holder's token (it may have expired and been taken).
-- KEYS[1] lock. ARGV[1] token. Returns 1 when released.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

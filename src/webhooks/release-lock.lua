-- Releases a lock only if it still holds this holder's token (it may have expired and been taken).
-- KEYS[1] lock. ARGV[1] token. Returns {'released'}, or {'not_held'}.
local lockKey = KEYS[1]
local token = ARGV[1]
if redis.call('GET', lockKey) == token then
  redis.call('DEL', lockKey)
  return {'released'}
end
return {'not_held'}

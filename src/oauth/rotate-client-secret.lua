-- Gives a client of one app a new secret. KEYS: 1 client hash. ARGV: 1 app id, 2 the new
-- secret's hash, 3 until when (epoch ms) the current secret keeps working, 0 for not at all.
-- The secret kept from an earlier rotation, if any, is dropped either way.
-- Returns {'rotated'}, or {'not_found'} when the app has no such client.
local clientKey = KEYS[1]
local appId = ARGV[1]
local secretHash = ARGV[2]
local oldUntilMs = ARGV[3]
if redis.call('HGET', clientKey, 'app_id') ~= appId then return {'not_found'} end
if tonumber(oldUntilMs) > 0 then
  local current = redis.call('HGET', clientKey, 'secret_hash')
  redis.call('HSET', clientKey, 'old_secret_hash', current, 'old_secret_until_ms', oldUntilMs)
else
  redis.call('HDEL', clientKey, 'old_secret_hash', 'old_secret_until_ms')
end
redis.call('HSET', clientKey, 'secret_hash', secretHash)
return {'rotated'}

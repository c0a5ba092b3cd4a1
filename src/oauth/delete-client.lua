-- Deletes a client of one app. KEYS: 1 client hash. ARGV: 1 app id.
-- Returns {'deleted'}, or {'not_found'} when the app has no such client.
local clientKey = KEYS[1]
local appId = ARGV[1]
if redis.call('HGET', clientKey, 'app_id') ~= appId then return {'not_found'} end
redis.call('DEL', clientKey)
return {'deleted'}

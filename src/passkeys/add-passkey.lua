-- Keeps a new passkey of a user, unless the user holds it already or holds the most.
-- KEYS: 1 the user's passkeys. ARGV: 1 the credential id, 2 its JSON, 3 the most a user holds.
-- Returns {'added'}, {'exists'} or {'full'}.
local credentialsKey = KEYS[1]
local id = ARGV[1]
local passkey = ARGV[2]
local most = tonumber(ARGV[3])
if redis.call('HEXISTS', credentialsKey, id) == 1 then return {'exists'} end
if redis.call('HLEN', credentialsKey) >= most then return {'full'} end
redis.call('HSET', credentialsKey, id, passkey)
return {'added'}

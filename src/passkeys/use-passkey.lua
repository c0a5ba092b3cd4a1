-- Records a passkey's use: its signature counter moves forward (or stays 0 beside a stored 0, as
-- authenticators without a counter send), and its last use is now. A counter that does not move
-- forward is a cloned authenticator's sign: nothing is written.
-- KEYS: 1 the user's passkeys. ARGV: 1 the credential id, 2 the counter the authenticator sent,
-- 3 now (RFC 3339).
-- Returns {'ok'}, {'backwards', the stored counter} or {'gone'} (removed meanwhile).
local credentialsKey = KEYS[1]
local id = ARGV[1]
local counter = tonumber(ARGV[2])
local now = ARGV[3]
local raw = redis.call('HGET', credentialsKey, id)
if not raw then return {'gone'} end
local stored = cjson.decode(raw)
if (counter > 0 or stored.counter > 0) and counter <= stored.counter then
  return {'backwards', tostring(stored.counter)}
end
stored.counter = counter
stored.lastUsedAt = now
redis.call('HSET', credentialsKey, id, cjson.encode(stored))
return {'ok'}

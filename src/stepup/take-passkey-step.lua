-- Takes a verify_passkey step's challenge: read and removed at once, so that it answers one
-- attempt, right or wrong, whichever process gets it; a code step's challenge is left as it is.
-- KEYS: 1 the challenge. Returns its fields (HGETALL's pairs), or {} when it is not a passkey step's.
local challengeKey = KEYS[1]
if redis.call('HEXISTS', challengeKey, 'passkey_challenge') == 0 then return {} end
local fields = redis.call('HGETALL', challengeKey)
redis.call('DEL', challengeKey)
return fields

-- Keeps the answer of a refresh token's first use, sealed, for a second presentation within
-- REFRESH_REUSE_GRACE_SECONDS (refresh-session.lua): only while that use's successor is the
-- session's refresh token, so a later rotation never takes an older answer.
-- KEYS: 1 the session. ARGV: 1 the successor's hash, 2 the sealed answer.
-- Returns {'kept'} or {'gone'} (the session ended, or rotated again).
local sessionKey = KEYS[1]
local successor = ARGV[1]
local sealed = ARGV[2]
if redis.call('HGET', sessionKey, 'gt') ~= successor then return {'gone'} end
redis.call('HSET', sessionKey, 'gans', sealed)
return {'kept'}

-- Grants a scope to a live session (a step-up decided `continue`). KEYS: 1 session, 2 grants.
-- ARGV: 1 JSON {scope, untilMs, mode}. Returns {'granted'}, or {'no_session'} when the session is
-- gone.
local sessionKey = KEYS[1]
local grantsKey = KEYS[2]
local args = cjson.decode(ARGV[1])
if redis.call('EXISTS', sessionKey) == 0 then return {'no_session'} end
redis.call('HSET', grantsKey, args.scope, cjson.encode({untilMs = args.untilMs, mode = args.mode}))
redis.call('PEXPIREAT', grantsKey, redis.call('PEXPIRETIME', sessionKey))
return {'granted'}

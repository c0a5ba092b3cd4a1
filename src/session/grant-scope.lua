-- Grants a scope to a live session (a step-up decided `continue`). KEYS: 1 session, 2 grants.
-- ARGV[1]: JSON {scope, untilMs, mode}. Returns 0 when the session is gone.
local a = cjson.decode(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], a.scope, cjson.encode({untilMs = a.untilMs, mode = a.mode}))
redis.call('PEXPIREAT', KEYS[2], redis.call('PEXPIRETIME', KEYS[1]))
return 1

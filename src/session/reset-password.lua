-- Writes a new password and consumes the scope that allows it, in one atomic step: of many
-- resets with the same token, exactly one succeeds.
-- KEYS: 1 session, 2 grants, 3 user. ARGV[1]: JSON {scope, jti, now, passwordHash}.
-- Returns 'ok', 'no_session' or 'insufficient_scope'.
local a = cjson.decode(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return 'no_session' end
local raw = redis.call('HGET', KEYS[2], a.scope)
if not raw then return 'insufficient_scope' end
local g = cjson.decode(raw)
if g.untilMs <= a.now then
  redis.call('HDEL', KEYS[2], a.scope)
  return 'insufficient_scope'
end
if g.mode == 'single-use' and g.jti ~= a.jti then return 'insufficient_scope' end
redis.call('HDEL', KEYS[2], a.scope)
redis.call('HSET', KEYS[3], 'password_hash', a.passwordHash, 'password_changed_at', tostring(a.now))
return 'ok'

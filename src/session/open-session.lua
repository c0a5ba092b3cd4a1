-- Opens a session, with an optional scope grant. KEYS: 1 session, 2 grants.
-- ARGV[1]: JSON {appId, createdAt, refreshHash, keepUntil, grant?: {scope, untilMs, mode, jti}}:
-- a single-use grant is attached at once to the token issued with the session (its jti).
local a = cjson.decode(ARGV[1])
redis.call('HSET', KEYS[1], 'app_id', a.appId, 'created_at', a.createdAt, 'refresh_hash', a.refreshHash)
redis.call('PEXPIREAT', KEYS[1], a.keepUntil)
if type(a.grant) == 'table' then
  redis.call('HSET', KEYS[2], a.grant.scope, cjson.encode({untilMs = a.grant.untilMs, mode = a.grant.mode, jti = a.grant.jti}))
  redis.call('PEXPIREAT', KEYS[2], a.keepUntil)
end
return 1

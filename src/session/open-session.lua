-- Opens a session, with an optional scope grant, and adds it to its user's session index.
-- KEYS: 1 session, 2 grants, 3 the user's session index (sorted set: session id → keepUntil).
-- ARGV[1]: JSON {sessionId, appId, createdAt, refreshHash, amr (space-separated), authTime,
-- now, keepUntil, grant?: {scope, untilMs, mode, jti}}: a single-use grant is attached at once
-- to the token issued with the session (its jti).
local a = cjson.decode(ARGV[1])
redis.call('HSET', KEYS[1], 'app_id', a.appId, 'created_at', a.createdAt, 'refresh_hash', a.refreshHash,
  'amr', a.amr, 'auth_time', tostring(a.authTime))
redis.call('PEXPIREAT', KEYS[1], a.keepUntil)
if type(a.grant) == 'table' then
  redis.call('HSET', KEYS[2], a.grant.scope, cjson.encode({untilMs = a.grant.untilMs, mode = a.grant.mode, jti = a.grant.jti}))
  redis.call('PEXPIREAT', KEYS[2], a.keepUntil)
end
-- The index drops the sessions that have expired and lives as long as its last session.
redis.call('ZADD', KEYS[3], a.keepUntil, a.sessionId)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', a.now)
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[3], last[2])
return 1

-- Opens a session, with an optional scope grant, and adds it to its user's session index.
-- KEYS: 1 session, 2 grants, 3 the user's session index (sorted set: session id → keepUntil).
-- ARGV: 1 JSON {sessionId, appId, createdAt, refreshHash, amr (space-separated), acr, authTime,
-- now, keepUntil, grant?: {scope, untilMs, mode, jti}}: a single-use grant is attached at once
-- to the token issued with the session (its jti). Returns {'opened'}.
local sessionKey = KEYS[1]
local grantsKey = KEYS[2]
local indexKey = KEYS[3]
local args = cjson.decode(ARGV[1])
redis.call('HSET', sessionKey, 'app_id', args.appId, 'created_at', args.createdAt,
  'refresh_hash', args.refreshHash, 'amr', args.amr, 'acr', args.acr, 'auth_time', tostring(args.authTime))
redis.call('PEXPIREAT', sessionKey, args.keepUntil)
if type(args.grant) == 'table' then
  redis.call('HSET', grantsKey, args.grant.scope,
    cjson.encode({untilMs = args.grant.untilMs, mode = args.grant.mode, jti = args.grant.jti}))
  redis.call('PEXPIREAT', grantsKey, args.keepUntil)
end
-- The index drops the sessions that have expired and lives as long as its last session.
redis.call('ZADD', indexKey, args.keepUntil, args.sessionId)
redis.call('ZREMRANGEBYSCORE', indexKey, '-inf', args.now)
local last = redis.call('ZRANGE', indexKey, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', indexKey, last[2])
return {'opened'}

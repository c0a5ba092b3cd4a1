-- Rotates a session's refresh token and picks the scopes of the new access token, atomically.
-- With a refresh token: the current one rotates; a previously used one revokes the session
-- (reuse means theft), unless it is presented again within REFRESH_REUSE_GRACE_SECONDS of its
-- first use while its successor is unused: a client that lost the answer gets it again. With a step-up token: it is consumed, its scope granted, the
-- session's acr and auth_time become the step-up's, and the refresh token rotates too. Single-use grants attach to exactly one access token (its jti).
-- KEYS: 1 session, 2 used refresh hashes, 3 grants, 4 step-up token (or the session again),
-- 5 the user's session index (session id → keepUntil).
-- ARGV: 1 JSON {sessionId, now, presentedHash?, newHash, jti, keepUntil, graceMs}.
-- Returns {'ok', scope...}, {'grace', the first use's sealed answer or ''}, {'reused'}, or {'invalid'}.
local sessionKey = KEYS[1]
local usedKey = KEYS[2]
local grantsKey = KEYS[3]
local stepUpKey = KEYS[4]
local indexKey = KEYS[5]
local args = cjson.decode(ARGV[1])
if redis.call('EXISTS', sessionKey) == 0 then return {'invalid'} end

if type(args.presentedHash) == 'string' then
  local s = redis.call('HMGET', sessionKey, 'refresh_hash', 'gf', 'gt', 'ga', 'gans')
  local current = s[1]
  if current ~= args.presentedHash then
    -- Presented again within the grace of its first use, while its successor is unused: the first
    -- use's answer (kept by keep-answer.lua; '' while that use is still being answered).
    if args.graceMs > 0 and s[2] == args.presentedHash and s[3] == current
        and args.now - tonumber(s[4] or '0') <= args.graceMs then
      return {'grace', s[5] or ''}
    end
    if redis.call('SISMEMBER', usedKey, args.presentedHash) == 1 then
      redis.call('DEL', sessionKey, usedKey, grantsKey)
      redis.call('ZREM', indexKey, args.sessionId)
      return {'reused'}
    end
    return {'invalid'}
  end
else
  local sut = redis.call('HGETALL', stepUpKey)
  if #sut == 0 then return {'invalid'} end
  local t = {}
  for i = 1, #sut, 2 do t[sut[i]] = sut[i + 1] end
  redis.call('DEL', stepUpKey)
  if t.session ~= sessionKey then return {'invalid'} end
  redis.call('HSET', grantsKey, t.scope,
    cjson.encode({untilMs = args.now + tonumber(t.granted_for) * 1000, mode = t.grant_mode}))
  -- A completed challenge raises the session's level, from the step-up's time on (kept by refreshes).
  if t.acr ~= nil and t.auth_time ~= nil then
    redis.call('HSET', sessionKey, 'acr', t.acr, 'auth_time', t.auth_time)
  end
end

redis.call('SADD', usedKey, redis.call('HGET', sessionKey, 'refresh_hash'))
redis.call('HSET', sessionKey, 'refresh_hash', args.newHash)
-- The grace of this use (docs/session-api.md#refresh): from which token, to which, when; the
-- answer follows. A step-up token's use leaves none: its refresh token was not presented.
redis.call('HDEL', sessionKey, 'gans')
if type(args.presentedHash) == 'string' and args.graceMs > 0 then
  redis.call('HSET', sessionKey, 'gf', args.presentedHash, 'gt', args.newHash, 'ga', tostring(args.now))
else
  redis.call('HDEL', sessionKey, 'gf', 'gt', 'ga')
end
for _, k in ipairs({sessionKey, usedKey, grantsKey}) do redis.call('PEXPIREAT', k, args.keepUntil) end
redis.call('ZADD', indexKey, args.keepUntil, args.sessionId)
redis.call('ZREMRANGEBYSCORE', indexKey, '-inf', args.now)
local last = redis.call('ZRANGE', indexKey, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', indexKey, last[2])

local scopes = {'ok'}
local grants = redis.call('HGETALL', grantsKey)
for i = 1, #grants, 2 do
  local scope, g = grants[i], cjson.decode(grants[i + 1])
  if g.untilMs <= args.now then
    redis.call('HDEL', grantsKey, scope)
  elseif g.mode ~= 'single-use' then
    scopes[#scopes + 1] = scope
  elseif g.jti == nil then
    g.jti = args.jti
    redis.call('HSET', grantsKey, scope, cjson.encode(g))
    scopes[#scopes + 1] = scope
  end
end
return scopes

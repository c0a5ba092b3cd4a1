-- Rotates a session's refresh token and picks the scopes of the new access token, atomically.
-- With a refresh token: the current one rotates; a previously used one revokes the session
-- (reuse means theft). With a step-up token: it is consumed, its scope granted, and the
-- refresh token rotates too. Single-use grants attach to exactly one access token (its jti).
-- KEYS: 1 session, 2 used refresh hashes, 3 grants, 4 step-up token (or the session again),
-- 5 the user's session index (session id → keepUntil).
-- ARGV[1]: JSON {sessionId, now, presentedHash?, newHash, jti, keepUntil}.
-- Returns {'ok', scope...}, {'reused'}, or {'invalid'}.
local a = cjson.decode(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return {'invalid'} end

if type(a.presentedHash) == 'string' then
  local current = redis.call('HGET', KEYS[1], 'refresh_hash')
  if current ~= a.presentedHash then
    if redis.call('SISMEMBER', KEYS[2], a.presentedHash) == 1 then
      redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
      redis.call('ZREM', KEYS[5], a.sessionId)
      return {'reused'}
    end
    return {'invalid'}
  end
else
  local sut = redis.call('HGETALL', KEYS[4])
  if #sut == 0 then return {'invalid'} end
  local t = {}
  for i = 1, #sut, 2 do t[sut[i]] = sut[i + 1] end
  redis.call('DEL', KEYS[4])
  if t.session ~= KEYS[1] then return {'invalid'} end
  redis.call('HSET', KEYS[3], t.scope,
    cjson.encode({untilMs = a.now + tonumber(t.granted_for) * 1000, mode = t.grant_mode}))
end

redis.call('SADD', KEYS[2], redis.call('HGET', KEYS[1], 'refresh_hash'))
redis.call('HSET', KEYS[1], 'refresh_hash', a.newHash)
for _, k in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do redis.call('PEXPIREAT', k, a.keepUntil) end
redis.call('ZADD', KEYS[5], a.keepUntil, a.sessionId)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', a.now)
local last = redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[5], last[2])

local scopes = {'ok'}
local grants = redis.call('HGETALL', KEYS[3])
for i = 1, #grants, 2 do
  local scope, g = grants[i], cjson.decode(grants[i + 1])
  if g.untilMs <= a.now then
    redis.call('HDEL', KEYS[3], scope)
  elseif g.mode ~= 'single-use' then
    scopes[#scopes + 1] = scope
  elseif g.jti == nil then
    g.jti = a.jti
    redis.call('HSET', KEYS[3], scope, cjson.encode(g))
    scopes[#scopes + 1] = scope
  end
end
return scopes

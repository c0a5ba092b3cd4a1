-- Writes a new password, consumes the scope that allows it and ends every other session of the
-- user, in one atomic step: of many resets with the same token, exactly one succeeds, and no
-- other session of the user outlives the change (its access and refresh tokens stop working).
-- KEYS: 1 session, 2 grants, 3 user, 4 the user's session index (session id → keepUntil), then
-- for each id of ARGV's `others`, in order: its session, used refresh hashes and grants.
-- ARGV[1]: JSON {scope, jti, now, passwordHash, sessionId, others: [session id...]}.
-- Returns {'ok', ended session id...}, {'no_session'}, {'insufficient_scope'}, or {'stale'} when
-- the index holds a live session that `others` does not name (nothing written: read it again).
local a = cjson.decode(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no_session'} end
local raw = redis.call('HGET', KEYS[2], a.scope)
if not raw then return {'insufficient_scope'} end
local g = cjson.decode(raw)
if g.untilMs <= a.now then
  redis.call('HDEL', KEYS[2], a.scope)
  return {'insufficient_scope'}
end
if g.mode == 'single-use' and g.jti ~= a.jti then return {'insufficient_scope'} end

local named = {}
for _, id in ipairs(a.others) do named[id] = true end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', a.now)
for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if id ~= a.sessionId and not named[id] then return {'stale'} end
end

redis.call('HDEL', KEYS[2], a.scope)
redis.call('HSET', KEYS[3], 'password_hash', a.passwordHash, 'password_changed_at', tostring(a.now))
local ended = {'ok'}
for i, id in ipairs(a.others) do
  local first = 4 + (i - 1) * 3 + 1
  if redis.call('DEL', KEYS[first], KEYS[first + 1], KEYS[first + 2]) > 0 then ended[#ended + 1] = id end
  redis.call('ZREM', KEYS[4], id)
end
return ended

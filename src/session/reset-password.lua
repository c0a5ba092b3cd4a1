-- Writes a new password, consumes the scope that allows it and ends every other session of the
-- user, in one atomic step: of many resets with the same token, exactly one succeeds, and no
-- other session of the user outlives the change (its access and refresh tokens stop working).
-- KEYS: 1 session, 2 grants, 3 user, 4 the user's session index (session id → keepUntil), then
-- for each id of ARGV's `others`, in order: its session, used refresh hashes and grants (copied
-- by a loop: a user may have more sessions than `unpack` can return).
-- ARGV: 1 JSON {scope, jti, now, passwordHash, sessionId, others: [session id...]}.
-- Returns {'ok', ended session id...}, {'no_session'}, {'insufficient_scope'}, or {'stale'} when
-- the index holds a live session that `others` does not name (nothing written: read it again).
local sessionKey = KEYS[1]
local grantsKey = KEYS[2]
local userKey = KEYS[3]
local indexKey = KEYS[4]
local otherKeys = {} for i = 5, #KEYS do otherKeys[#otherKeys + 1] = KEYS[i] end
local args = cjson.decode(ARGV[1])
if redis.call('EXISTS', sessionKey) == 0 then return {'no_session'} end
local raw = redis.call('HGET', grantsKey, args.scope)
if not raw then return {'insufficient_scope'} end
local g = cjson.decode(raw)
if g.untilMs <= args.now then
  redis.call('HDEL', grantsKey, args.scope)
  return {'insufficient_scope'}
end
if g.mode == 'single-use' and g.jti ~= args.jti then return {'insufficient_scope'} end

local named = {}
for _, id in ipairs(args.others) do named[id] = true end
redis.call('ZREMRANGEBYSCORE', indexKey, '-inf', args.now)
for _, id in ipairs(redis.call('ZRANGE', indexKey, 0, -1)) do
  if id ~= args.sessionId and not named[id] then return {'stale'} end
end

redis.call('HDEL', grantsKey, args.scope)
redis.call('HSET', userKey, 'password_hash', args.passwordHash, 'password_changed_at', tostring(args.now))
local ended = {'ok'}
for i, id in ipairs(args.others) do
  local first = (i - 1) * 3 + 1
  if redis.call('DEL', otherKeys[first], otherKeys[first + 1], otherKeys[first + 2]) > 0 then
    ended[#ended + 1] = id
  end
  redis.call('ZREM', indexKey, id)
end
return ended

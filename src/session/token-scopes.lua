-- The scopes an access token of a live session holds now, read in one step: the session's grants
-- still within their time, a single-use one only for the token it is attached to (a consumed one
-- is gone from the grants). Writes nothing.
-- KEYS: 1 session, 2 grants. ARGV: 1 now (epoch ms), 2 the access token's jti.
-- Returns {'alive', scope...} (scopes sorted), or {'ended'} when the session is gone.
local sessionKey = KEYS[1]
local grantsKey = KEYS[2]
local now = tonumber(ARGV[1])
local jti = ARGV[2]
if redis.call('EXISTS', sessionKey) == 0 then return {'ended'} end
local scopes = {}
local grants = redis.call('HGETALL', grantsKey)
for i = 1, #grants, 2 do
  local g = cjson.decode(grants[i + 1])
  if g.untilMs > now and (g.mode ~= 'single-use' or g.jti == jti) then
    scopes[#scopes + 1] = grants[i]
  end
end
table.sort(scopes)
table.insert(scopes, 1, 'alive')
return scopes

-- Reserves a user's identifiers in the app's index. KEYS: the index keys (app tag).
-- ARGV: 1 the user id. Returns {'created'}, or {'taken'} (nothing written) when one is another
-- user's.
local indexKeys = { unpack(KEYS, 1) }
local userId = ARGV[1]
for _, k in ipairs(indexKeys) do
  local owner = redis.call('GET', k)
  if owner and owner ~= userId then return {'taken'} end
end
for _, k in ipairs(indexKeys) do redis.call('SET', k, userId) end
return {'created'}

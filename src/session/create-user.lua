-- Reserves a user's identifiers in the app's index. KEYS: the index keys (app tag).
-- ARGV[1]: the user id. Returns 0 (nothing written) when one is taken by another user.
for _, k in ipairs(KEYS) do
  local owner = redis.call('GET', k)
  if owner and owner ~= ARGV[1] then return 0 end
end
for _, k in ipairs(KEYS) do redis.call('SET', k, ARGV[1]) end
return 1

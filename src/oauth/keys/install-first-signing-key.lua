-- Installs the first signing key only if there is still no current key, so that instances
-- starting together end up with one key.
-- KEYS[1] signing-keys hash. ARGV: kid, key record (JSON). Returns the current kid.
local current = redis.call('HGET', KEYS[1], 'current')
if current then
  return current
end
redis.call('HSET', KEYS[1], 'key:' .. ARGV[1], ARGV[2], 'current', ARGV[1])
return ARGV[1]

-- Installs the first signing key only if there is still no current key, so that instances
-- starting together end up with one key.
-- KEYS: 1 signing-keys hash. ARGV: 1 kid, 2 key record (JSON).
-- Returns {'installed', kid}, or {'kept', the current kid} when there already is one.
local signingKeysKey = KEYS[1]
local kid = ARGV[1]
local record = ARGV[2]
local current = redis.call('HGET', signingKeysKey, 'current')
if current then
  return {'kept', current}
end
redis.call('HSET', signingKeysKey, 'key:' .. kid, record, 'current', kid)
return {'installed', kid}

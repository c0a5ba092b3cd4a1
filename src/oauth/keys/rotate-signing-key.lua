-- Stores a new signing key, marks the previous current key retired now, and makes the new key
-- current, in one step so that no instance ever sees a current kid without its key.
-- KEYS: 1 signing-keys hash. ARGV: 1 kid, 2 key record (JSON), 3 now (ms).
-- Returns {'rotated', the new kid}.
local signingKeysKey = KEYS[1]
local kid = ARGV[1]
local record = ARGV[2]
local now = tonumber(ARGV[3])
local previous = redis.call('HGET', signingKeysKey, 'current')
if previous and previous ~= kid then
  local raw = redis.call('HGET', signingKeysKey, 'key:' .. previous)
  if raw then
    local retired = cjson.decode(raw)
    retired.retired_at_ms = now
    redis.call('HSET', signingKeysKey, 'key:' .. previous, cjson.encode(retired))
  end
end
redis.call('HSET', signingKeysKey, 'key:' .. kid, record, 'current', kid)
return {'rotated', kid}

-- Stores a new signing key, marks the previous current key retired now, and makes the new key
-- current, in one step so that no instance ever sees a current kid without its key.
-- KEYS[1] signing-keys hash. ARGV: kid, key record (JSON), now (ms). Returns the new kid.
local previous = redis.call('HGET', KEYS[1], 'current')
if previous and previous ~= ARGV[1] then
  local raw = redis.call('HGET', KEYS[1], 'key:' .. previous)
  if raw then
    local record = cjson.decode(raw)
    record.retired_at_ms = tonumber(ARGV[3])
    redis.call('HSET', KEYS[1], 'key:' .. previous, cjson.encode(record))
  end
end
redis.call('HSET', KEYS[1], 'key:' .. ARGV[1], ARGV[2], 'current', ARGV[1])
return ARGV[1]

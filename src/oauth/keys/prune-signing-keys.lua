-- Removes the retired keys whose tokens have all expired (never the current key), then answers
-- what is left to publish.
-- KEYS: 1 signing-keys hash. ARGV: 1 now (ms), 2 retention after retirement (ms).
-- Returns {'kept', current kid or '', record, record, ...}.
local signingKeysKey = KEYS[1]
local now = tonumber(ARGV[1])
local retention = tonumber(ARGV[2])
local current = redis.call('HGET', signingKeysKey, 'current') or ''
local fields = redis.call('HGETALL', signingKeysKey)
local kept = { 'kept', current }
for i = 1, #fields, 2 do
  local field, raw = fields[i], fields[i + 1]
  if string.sub(field, 1, 4) == 'key:' then
    local retired = cjson.decode(raw).retired_at_ms
    if string.sub(field, 5) ~= current and type(retired) == 'number' and now >= retired + retention then
      redis.call('HDEL', signingKeysKey, field)
    else
      kept[#kept + 1] = raw
    end
  end
end
return kept

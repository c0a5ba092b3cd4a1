-- Adds to counters of one hash and keeps it for a while (see keys.ts: the hourly and conversion
-- counters): ARGV f = {ttl = seconds, add = {field, by, field, by, ...}}. Answers {'counted'}.
local countsKey = KEYS[1]
local f = cjson.decode(ARGV[1])
for i = 1, #f.add, 2 do
  redis.call('HINCRBY', countsKey, f.add[i], f.add[i + 1])
end
redis.call('EXPIRE', countsKey, f.ttl)
return {'counted'}

-- Counts a conversion (a right code, V1 feedback `onboarded`) of the last message sent to a number,
-- in the slice and the day of that send, at each of its destinations and for the tenant. A number
-- converts once per send; a send older than the window no longer counts. engine.lua is prepended.
-- Returns {'converted'} or {'none'} (no send to convert).
local sentKey = KEYS[1]
local allKey = KEYS[2]
local destKeys = { unpack(KEYS, 3) }
local f = cjson.decode(ARGV[1])
local record = redis.call('GET', sentKey)
if not record then return { 'none' } end
redis.call('DEL', sentKey)
local slice, day = string.match(record, '^(%d+)|(%d+)$')
slice, day = tonumber(slice), tonumber(day)
for _, key in ipairs(destKeys) do fraud_bump(key, f, slice, day, 3) end
fraud_bump(allKey, f, slice, day, 3)
return { 'converted' }

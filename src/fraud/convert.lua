-- Counts a conversion (a right code, V1 feedback `onboarded`) of the last message sent to a number,
-- in the slice and the day of that send, at each of its destinations and for the tenant. A number
-- converts once per send; a send older than the window no longer counts. Credit goes per distinct
-- number (docs/fraud.md#how-it-decides): a number counts once per window in the window's slots,
-- and once per day in the day's (the busiest-day baseline), however many codes it enters; a send to
-- a country without history gives its budget back the same way. The number's key then remembers
-- it as a returning user. engine.lua is prepended.
-- Returns {'converted'} or {'none'} (no send to convert).
local sentKey = KEYS[1]
local allKey = KEYS[2]
local numberKey = KEYS[3]
local destKeys = { unpack(KEYS, 4) }
local f = cjson.decode(ARGV[1])
local r = f.rules
local record = redis.call('GET', sentKey)
if not record then return { 'none' } end
redis.call('DEL', sentKey)
local slice, day, new = string.match(record, '^(%d+)|(%d+)|?(%d?)$')
slice, day = tonumber(slice), tonumber(day)
-- '<ms of the last conversion>|<slice it last counted in>|<day it last counted in>'.
local _, lastSlice, lastDay = string.match(redis.call('GET', numberKey) or '', '^(%d+)|(%d+)|(%d+)$')
lastSlice, lastDay = tonumber(lastSlice), tonumber(lastDay)
local window = lastSlice == nil or slice - lastSlice >= r.slices
local daily = lastDay ~= day
local only = nil
if window and not daily then only = 'w' elseif daily and not window then only = 'd' end
if window or daily then
  for _, key in ipairs(destKeys) do fraud_bump(key, f, slice, day, 3, only) end
  fraud_bump(allKey, f, slice, day, 3, only)
end
if window and new == '1' then fraud_budget_bump(allKey, f, slice, 3) end
redis.call('SET', numberKey, f.now .. '|' .. (window and slice or lastSlice) .. '|' ..
  (daily and day or lastDay), 'PX', r.returningMs)
return { 'converted' }

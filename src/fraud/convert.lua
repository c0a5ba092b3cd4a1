-- Counts a conversion (a right code, V1 feedback `onboarded`) of the last message sent to a number,
-- in the slice and the day of that send, at each of its destinations and for the tenant. A number
-- converts once per send; a send older than the window no longer counts. Credit goes per distinct
-- number (docs/fraud.md#how-it-decides): a number counts once per window in the window's slots,
-- and once per day in the day's (the busiest-day baseline), however many codes it enters; a send to
-- a destination without history gives its budget back, and each source of the send its count,
-- the same way. The number's key then remembers it as a returning user. engine.lua is prepended.
-- KEYS: the send record, the tenant's counters, the number's key, the destinations' counters, then
-- the keys of the sources the record names (ARGV f.sources of them, read by the caller).
-- Returns {'converted'}, {'none'} (no send to convert) or {'changed'} (another send's record now:
-- read it again).
local sentKey = KEYS[1]
local allKey = KEYS[2]
local numberKey = KEYS[3]
local tailKeys = { unpack(KEYS, 4) }
local f = cjson.decode(ARGV[1])
local r = f.rules
-- The tail: the destinations' counters, then the f.sources keys of the send's sources.
local destKeys, sourceKeys = {}, {}
for i, key in ipairs(tailKeys) do
  if i <= #tailKeys - f.sources then destKeys[#destKeys + 1] = key else sourceKeys[#sourceKeys + 1] = key end
end
local record = redis.call('GET', sentKey)
if not record then return { 'none' } end
if record ~= f.record then return { 'changed' } end
redis.call('DEL', sentKey)
local slice, day, new = string.match(record, '^(%d+)|(%d+)|?(%d?)')
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
if window then
  if new == '1' then fraud_budget_bump(allKey, f, slice, 3) end
  for _, key in ipairs(sourceKeys) do
    if fraud_source_day(key, day, f).sent > 0 then fraud_source_bump(key, f, day, 3) end
  end
end
redis.call('SET', numberKey, f.now .. '|' .. (window and slice or lastSlice) .. '|' ..
  (daily and day or lastDay), 'PX', r.returningMs)
return { 'converted' }

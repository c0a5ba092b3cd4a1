-- The conversions and blocks of a page of destinations over a range of UTC days
-- (docs/fraud.md#insights): for each counters hash of `counterKeys`, its day slots of `days`
-- added up, in one call for the whole page. engine.lua is prepended (fraud_slot).
-- ARGV[1]: JSON {days: [day, ...], slots (FRAUD_BASELINE_DAYS + 1)}.
-- Returns {'counted', verified and blocked of the first key, of the second, ...}.
local counterKeys = { unpack(KEYS, 1) }
local args = cjson.decode(ARGV[1])
local fields = {}
for j, day in ipairs(args.days) do fields[j] = 'd' .. (day % args.slots) end
local reply = { 'counted' }
for _, key in ipairs(counterKeys) do
  local slots = redis.call('HMGET', key, unpack(fields))
  local verified, blocked = 0, 0
  for j, day in ipairs(args.days) do
    local _, v, b = fraud_slot(slots[j], day)
    verified = verified + v
    blocked = blocked + b
  end
  reply[#reply + 1] = verified
  reply[#reply + 1] = blocked
end
return reply

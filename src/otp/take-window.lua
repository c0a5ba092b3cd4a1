-- Takes one use of every window given, all or none (window.lua is prepended), or only looks
-- ("peek"), only records ("add", for counting failures after the fact), or gives a use back
-- ("remove": a place taken before an attempt that then succeeded).
-- KEYS: the windows, all under one hash tag. ARGV[1]: JSON {now, rules: [rule or null per key],
-- member, mode: "take" | "peek" | "add" | "remove"}.
-- Returns {'room'} when there was room (and, unless peeking, the use is recorded), else {'full',
-- the ms until the full windows free a place, the position (1-based) of the first full window};
-- nothing is recorded then.
local windowKeys = { unpack(KEYS, 1) }
local args = cjson.decode(ARGV[1])
if args.mode == 'remove' then
  for _, key in ipairs(windowKeys) do redis.call('ZREM', key, args.member) end
  return {'room'}
end
local wait = 0
local first = 0
if args.mode ~= 'add' then
  for i, key in ipairs(windowKeys) do
    local rule = args.rules[i]
    if window_full(key, rule, args.now) then
      local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      local frees = rule.windowSeconds * 1000
      if oldest[2] then frees = tonumber(oldest[2]) + rule.windowSeconds * 1000 - args.now end
      if frees < 1 then frees = 1 end
      if frees > wait then wait = frees end
      if first == 0 then first = i end
    end
  end
end
if wait > 0 then return {'full', wait, first} end
if args.mode == 'peek' then return {'room'} end
for i, key in ipairs(windowKeys) do window_record(key, args.rules[i], args.now, args.member) end
return {'room'}

-- Takes one use of every window given, all or none (window.lua is prepended), or only looks
-- ("peek"), only records ("add", for counting failures after the fact), or gives a use back
-- ("remove": a place taken before an attempt that then succeeded).
-- KEYS: the windows, then the keys their conditions read, all under one hash tag.
-- ARGV[1]: JSON {now, rules: [rule or null per window], member, mode: "take" | "peek" | "add" |
-- "remove", when?: [null or {key, exists} per window]}: a window with a condition counts only
-- while KEYS[key] exists (`exists` true) or is absent (false); otherwise it is left alone.
-- Returns {'room'} when there was room (and, unless peeking, the use is recorded), else {'full',
-- the ms until the full windows free a place, the position (1-based) of the first full window};
-- nothing is recorded then.
local windowKeys = { unpack(KEYS, 1) }
local args = cjson.decode(ARGV[1])
if args.mode == 'remove' then
  for i = 1, #args.rules do redis.call('ZREM', windowKeys[i], args.member) end
  return {'room'}
end
local rules = {}
for i, rule in ipairs(args.rules) do
  local cond = type(args.when) == 'table' and args.when[i] or nil
  if type(cond) == 'table' and (redis.call('EXISTS', windowKeys[cond.key]) == 1) ~= cond.exists then
    rule = false
  end
  rules[i] = rule
end
local wait = 0
local first = 0
if args.mode ~= 'add' then
  for i = 1, #rules do
    local key = windowKeys[i]
    local rule = rules[i]
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
for i = 1, #rules do window_record(windowKeys[i], rules[i], args.now, args.member) end
return {'room'}

-- One page of a tenant's destinations ranked by sends (docs/fraud.md#insights): `limit` members
-- of the ranking `rankKey` after `after`, in its order (the most sent first, equals by key), with
-- their scores (minus the sends), and whether more follow. The work is bounded by `limit` whatever
-- the ranking holds: the place after `after` is found by rank (a binary search among equal scores
-- when `after` moved), never by walking the members before it.
-- A range longer than two days passes its day rankings as `dayKeys`: they are added up into
-- `rankKey` (a scratch key, deleted before the script returns) when they hold at most `most`
-- members together, the bound that keeps this call's work bounded too.
-- ARGV[1]: JSON {limit, most, after?: [score, member]}.
-- Returns {'page', members, scores, more (1 or 0)} or {'too_many', members of the day rankings}.
local rankKey = KEYS[1]
local dayKeys = { unpack(KEYS, 2) }
local args = cjson.decode(ARGV[1])

-- Redis orders members with equal scores bytewise; Lua's own comparison follows the locale.
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The rank of the first member after (score, member) in the set's order.
local function start_after(score, member)
  local at = redis.call('ZSCORE', rankKey, member)
  if at and tonumber(at) == score then return redis.call('ZRANK', rankKey, member) + 1 end
  local lo = redis.call('ZCOUNT', rankKey, '-inf', '(' .. score)
  local hi = lo + redis.call('ZCOUNT', rankKey, score, score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if before(member, redis.call('ZRANGE', rankKey, mid, mid)[1]) then hi = mid else lo = mid + 1 end
  end
  return lo
end

if #dayKeys > 0 then
  local total = 0
  for _, key in ipairs(dayKeys) do total = total + redis.call('ZCARD', key) end
  if total > args.most then return { 'too_many', total } end
  redis.call('ZUNIONSTORE', rankKey, #dayKeys, unpack(dayKeys))
end
local from = 0
if type(args.after) == 'table' then from = start_after(args.after[1], args.after[2]) end
local read = redis.call('ZRANGE', rankKey, from, from + args.limit, 'WITHSCORES')
if #dayKeys > 0 then redis.call('DEL', rankKey) end
local members, scores = {}, {}
for i = 1, math.min(#read / 2, args.limit) do
  members[i] = read[2 * i - 1]
  scores[i] = tonumber(read[2 * i])
end
return { 'page', members, scores, #read / 2 > args.limit and 1 or 0 }

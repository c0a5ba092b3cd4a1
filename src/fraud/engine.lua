-- The fraud engine (docs/fraud.md#how-it-decides), prepended to every script that sends a code.
-- Keys are the tenant's (one hash tag): its policy hash, its `all` counters, its destinations
-- index, its decision stream, the number's last-send record, one counters hash per destination
-- (country, network when known, prefix), then the number's own key (fraud_number_key), then one
-- per source of the send (fraud_source_keys): those two kinds, named by keyed hashes, are the
-- scripts' tail (src/fraud/engine.ts fraudTail), the others are named from the policy key
-- (fraud_keys), and the rankings from the index's (fraud_rank_keys). `f` is FraudArgs
-- (src/fraud/engine.ts): now, api, country, network, prefix, masked, e164, dests (destination
-- ids, in the order of the keys) and rules.

-- The engine's keys for one send, named as src/fraud/keys.ts names them, from the tenant's policy
-- key ('<tenant's prefix>:policy') and `tail`, the keys of the number and of the send's sources
-- (src/fraud/engine.ts fraudTail): the counters, the index, the decision stream and the number's
-- last-send record are built here, under the policy key's hash tag (so on its Cluster slot),
-- instead of sent with every send. `dests` holds the destinations' counters (in the order of
-- f.dests), then the tail (fraud_number_key, fraud_source_keys).
local function fraud_keys(policyKey, tail, f)
  local base = string.sub(policyKey, 1, -#':policy' - 1)
  local dests = {}
  for i, dest in ipairs(f.dests) do dests[i] = base .. ':d:' .. dest end
  for _, key in ipairs(tail) do dests[#dests + 1] = key end
  return { policy = policyKey, all = base .. ':d:all', index = base .. ':dests',
    decisions = base .. ':decisions', sent = base .. ':sent:' .. f.e164, dests = dests }
end

-- The keys of a send the engine judges, its rules in `f`; nil for one it does not judge (`f` false:
-- an email code, which costs nothing).
local function fraud_keys_judged(policyKey, tail, f, rules)
  if f == false then return nil end
  f.rules = rules
  return fraud_keys(policyKey, tail, f)
end

-- The counters of one slot: '<stamp>,<sent>,<verified>,<blocked>', zero when the stamp is old.
local function fraud_slot(raw, stamp)
  if not raw then return 0, 0, 0 end
  local at, s, v, b = string.match(raw, '^(%d+),(%d+),(%d+),(%d+)$')
  if tonumber(at) ~= stamp then return 0, 0, 0 end
  return tonumber(s), tonumber(v), tonumber(b)
end

local function fraud_clock(f)
  local r = f.rules
  local slice = math.floor(f.now / r.sliceMs)
  local day = math.floor(f.now / 86400000)
  return slice, day
end

-- The fields of a destination's two top sources, per window parity (fraud_top), then of the
-- narrower destinations refused under a country, per window parity (fraud_spread).
local FRAUD_TOP_FIELDS = { 'm0a', 'm0b', 'm1a', 'm1b' }
local FRAUD_SPREAD_FIELDS = { 'x0', 'x1' }

-- What a destination did: over the window, its sends, their conversions and its refused sends,
-- the same for the sends old enough to have converted (past the grace), its busiest day of
-- conversions, and its best day's conversion over the baseline days before today (`base`, nil
-- when no such day had rules.minSends sends).
local function fraud_read(key, f)
  local r = f.rules
  local slice, day = fraud_clock(f)
  local fields = {}
  for i = 0, r.slices - 1 do fields[#fields + 1] = 'w' .. i end
  for j = 0, r.days do fields[#fields + 1] = 'd' .. j end
  local n = #fields
  for _, field in ipairs(FRAUD_TOP_FIELDS) do fields[#fields + 1] = field end
  for _, field in ipairs(FRAUD_SPREAD_FIELDS) do fields[#fields + 1] = field end
  local raw = redis.call('HMGET', key, unpack(fields))
  -- Kept for fraud_bump, which then writes the slots without reading them again, and for
  -- fraud_top, which reads the top sources read here.
  f.read = f.read or {}
  f.read[key] = { raw[(slice % r.slices) + 1], raw[r.slices + (day % (r.days + 1)) + 1] }
  f.top = f.top or {}
  f.top[key] = { raw[n + 1], raw[n + 2], raw[n + 3], raw[n + 4] }
  f.spread = f.spread or {}
  f.spread[key] = { raw[n + 5], raw[n + 6] }
  local st = { sent = 0, verified = 0, blocked = 0, maturedSent = 0, maturedVerified = 0, busiest = 0 }
  for k = 0, r.slices - 1 do
    local stamp = slice - k
    local s, v, b = fraud_slot(raw[(stamp % r.slices) + 1], stamp)
    st.sent = st.sent + s
    st.verified = st.verified + v
    st.blocked = st.blocked + b
    if (stamp + 1) * r.sliceMs <= f.now - r.graceMs then
      st.maturedSent = st.maturedSent + s
      st.maturedVerified = st.maturedVerified + v
    end
  end
  for k = 0, r.days - 1 do
    local stamp = day - k
    local s, v = fraud_slot(raw[r.slices + (stamp % (r.days + 1)) + 1], stamp)
    if v > st.busiest then st.busiest = v end
    -- Its best day before today with enough sends to say: a day of pumping lowers that day only.
    if k > 0 and s >= r.minSends and (st.base == nil or v / s > st.base) then st.base = v / s end
  end
  return st
end

-- The narrower destinations (networks, prefixes) refused under a country in the window and the one
-- before (docs/fraud.md#narrowest-destination): its fields 'x<window parity>',
-- '<window>,<dest>.<dest>...', at most rules.countrySpread of them. Answers how many there are,
-- and the fields to write for `dest` when it is not among them yet (nil when it is, or when
-- enough are known).
local function fraud_spread(key, f, dest)
  local window = math.floor(f.now / (f.rules.windowSeconds * 1000))
  local raw = (f.spread and f.spread[key]) or redis.call('HMGET', key, unpack(FRAUD_SPREAD_FIELDS))
  local seen, count, mine = {}, 0, nil
  for j = 1, 2 do
    local w, list = string.match(raw[j] or '', '^(%d+),(.*)$')
    w = tonumber(w)
    if w == window or w == window - 1 then
      for id in string.gmatch(list, '[^.]+') do
        if not seen[id] then
          seen[id] = true
          count = count + 1
        end
      end
      if w == window then mine = { field = FRAUD_SPREAD_FIELDS[j], list = list } end
    end
  end
  if dest == nil or seen[dest] or count >= f.rules.countrySpread then return count, nil end
  local field = 'x' .. (window % 2)
  local list = (mine and mine.list ~= '') and (mine.list .. '.' .. dest) or dest
  return count, { field, window .. ',' .. list }
end

-- The key of what the tenant knows of the send's number: after the counters.
local function fraud_number_key(destKeys, f)
  return destKeys[#f.dests + 1]
end

-- A returning user (docs/fraud.md#returning-users): the number converted for the tenant within
-- rules.returningMs. Its key holds '<ms of its last conversion>|<slice>|<day>' (convert.lua).
local function fraud_returning(destKeys, f)
  local key = fraud_number_key(destKeys, f)
  if not key then return false end
  local at = tonumber(string.match(redis.call('GET', key) or '', '^(%d+)|'))
  return at ~= nil and f.now - at <= f.rules.returningMs
end

-- The keys of the send's sources (f.sources, in order): after the number's.
local function fraud_source_keys(destKeys, f)
  local base = #f.dests + 1
  local keys = {}
  for j = 1, #(f.sources or {}) do keys[j] = destKeys[base + j] end
  return keys
end

-- What a source did on UTC day `day` (docs/fraud.md#sources): field 'n' of its key,
-- '<day>,<sent>,<verified>,<countries, dot-separated>'.
local function fraud_source_day(key, day, f)
  -- Read once per script: the decision's read serves the count after it (fraud_source_bump).
  local known = f and f.sourceDays and f.sourceDays[key]
  if known then return known end
  local at, s, v, list = string.match(redis.call('HGET', key, 'n') or '', '^(%d+),(%d+),(%d+),(.*)$')
  local sd = { sent = 0, verified = 0, list = '', countries = {}, count = 0, fresh = true }
  if f then
    f.sourceDays = f.sourceDays or {}
    f.sourceDays[key] = sd
  end
  if tonumber(at) ~= day then return sd end
  sd.fresh = false
  sd.sent, sd.verified, sd.list = tonumber(s), tonumber(v), list
  for cc in string.gmatch(list, '[^.]+') do
    sd.countries[cc] = true
    sd.count = sd.count + 1
  end
  return sd
end

-- Counts a send (column 2, with its country) or a conversion (3) of the day at a source.
local function fraud_source_bump(key, f, day, column)
  local sd = fraud_source_day(key, day, f)
  if column == 2 then
    sd.sent = sd.sent + 1
    -- The countries past the limit are not needed: the list stops one past it.
    if not sd.countries[f.country] and sd.count <= f.rules.sourceCountries then
      sd.list = sd.list == '' and f.country or (sd.list .. '.' .. f.country)
    end
  else
    sd.verified = sd.verified + 1
  end
  redis.call('HSET', key, 'n', day .. ',' .. sd.sent .. ',' .. sd.verified .. ',' .. sd.list)
  -- Its day's first write sets its expiry: the key lives that day and the next.
  if sd.fresh then
    redis.call('PEXPIRE', key, 2 * 86400000)
    sd.fresh = false
  end
end

-- The sources that made most of a destination's sends (docs/fraud.md#sources): two counters per
-- window (Misra-Gries: a source met neither takes a free one, else both lose one), in the fields
-- 'm<window parity><a|b>' of its counters, '<window>,<source digest>,<sends>'. Read for the
-- window and the one before it, which together cover the sliding window.
local function fraud_top(key, f)
  local window = math.floor(f.now / (f.rules.windowSeconds * 1000))
  local fields = FRAUD_TOP_FIELDS
  local raw = (f.top and f.top[key]) or redis.call('HMGET', key, unpack(fields))
  local now, sums = {}, {}
  for j = 1, 4 do
    local w, id, n = string.match(raw[j] or '', '^(%d+),([^,]+),(%d+)$')
    w, n = tonumber(w), tonumber(n)
    if w == window or w == window - 1 then
      sums[id] = (sums[id] or 0) + n
      if w == window then now[#now + 1] = { field = fields[j], id = id, n = n } end
    end
  end
  return window, now, sums
end

-- Whether at most two sources explain a destination's surge to `sent` sends past its `bound`:
-- they made at least rules.sourceShare of the bound, and the other sources' sends stay below the
-- rest of it (a fifth by default: a rotating attacker gains that little; real users, whose codes
-- are entered, raise the bound as they go). Also whether the send's own source is one of the two.
local function fraud_explained(key, f, sent, bound)
  if sent == 0 or f.track == nil or f.track == '' then return false, false end
  local _, _, sums = fraud_top(key, f)
  local ranked = {}
  for id, n in pairs(sums) do ranked[#ranked + 1] = { id = id, n = n } end
  table.sort(ranked, function(a, b) return a.n > b.n end)
  local total, mine = 0, false
  for j = 1, math.min(2, #ranked) do
    total = total + ranked[j].n
    if ranked[j].id == f.track then mine = true end
  end
  local share = f.rules.sourceShare
  return total >= share * bound and sent - total < (1 - share) * bound, mine
end

-- Counts a send of the tracked source (f.track) in a destination's two counters of the window
-- (not past its bound: the counters say who brought it there, and later sends do not wear them).
local function fraud_track(key, f)
  if f.track == nil or f.track == '' then return end
  local window, slots = fraud_top(key, f)
  local p = window % 2
  local names = { 'm' .. p .. 'a', 'm' .. p .. 'b' }
  local byField = {}
  for _, slot in ipairs(slots) do byField[slot.field] = slot end
  local a, b = byField[names[1]], byField[names[2]]
  if a and a.id == f.track then a.n = a.n + 1
  elseif b and b.id == f.track then b.n = b.n + 1
  elseif not a then a = { id = f.track, n = 1 }
  elseif not b then b = { id = f.track, n = 1 }
  else
    a.n, b.n = a.n - 1, b.n - 1
    if a.n == 0 then a = nil end
    if b.n == 0 then b = nil end
  end
  local set, gone = {}, {}
  for j, slot in ipairs({ a or false, b or false }) do
    if slot then
      set[#set + 1] = names[j]
      set[#set + 1] = window .. ',' .. slot.id .. ',' .. slot.n
    elseif byField[names[j]] then
      gone[#gone + 1] = names[j]
    end
  end
  if #set > 0 then redis.call('HSET', key, unpack(set)) end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  if f.top then f.top[key] = nil end
end

-- The new-destination budget used over the window (docs/fraud.md#how-it-decides): the tenant's
-- sends to countries without a conversion in the baseline days, less their conversions, in the
-- slices 'b<i>' of its `all` counters ('<slice>,<sent>,<verified>,0').
local function fraud_budget_used(allKey, f)
  local r = f.rules
  local slice = fraud_clock(f)
  local fields = {}
  for i = 0, r.slices - 1 do fields[#fields + 1] = 'b' .. i end
  local raw = redis.call('HMGET', allKey, unpack(fields))
  local used = 0
  for k = 0, r.slices - 1 do
    local stamp = slice - k
    local s, v = fraud_slot(raw[(stamp % r.slices) + 1], stamp)
    if s > v then used = used + s - v end
  end
  return used
end

-- Adds one to the budget's slot of `slice` (column 2 a send, 3 a conversion given back).
local function fraud_budget_bump(allKey, f, slice, column)
  local field = 'b' .. (slice % f.rules.slices)
  local at, s, v = string.match(redis.call('HGET', allKey, field) or '', '^(%d+),(%d+),(%d+),%d+$')
  if at and tonumber(at) > slice then return end
  local c = { slice, 0, 0, 0 }
  if tonumber(at) == slice then c = { slice, tonumber(s), tonumber(v), 0 } end
  c[column] = c[column] + 1
  redis.call('HSET', allKey, field, table.concat(c, ','))
end

-- The tenant's conversion: its best day before today over the baseline days with
-- rules.minSends sends, else (a new tenant) today's; nil while it has too few sends to say. Sends
-- the engine refused are not in it, and pumping it let through lowers the day it ran on only.
local function fraud_tenant_conversion(allKey, f)
  local r = f.rules
  local _, day = fraud_clock(f)
  local fields = {}
  for j = 0, r.days do fields[#fields + 1] = 'd' .. j end
  local raw = redis.call('HMGET', allKey, unpack(fields))
  local best, today = nil, nil
  for k = 0, r.days - 1 do
    local stamp = day - k
    local s, v = fraud_slot(raw[(stamp % (r.days + 1)) + 1], stamp)
    if s >= r.minSends then
      if k == 0 then today = v / s elseif best == nil or v / s > best then best = v / s end
    end
  end
  return best or today
end

local function fraud_label(dest)
  local kind, id = string.match(dest, '^(%a):(.*)$')
  if kind == 'c' then return 'country ' .. id end
  if kind == 'n' then return 'network ' .. id end
  if kind == 'p' then return 'prefix ' .. id end
  return dest
end

-- The policy fields that would trust the number: 't:' and the number or one of its prefixes
-- ('t:+3', 't:+33', ... 't:+33612345678').
local function fraud_candidates(e164)
  local candidates = {}
  for n = 2, #e164 do candidates[n - 1] = 't:' .. string.sub(e164, 1, n) end
  return candidates
end

-- The engine's decision: {action, rule, detail}, action 'allow', 'block' or 'would_block'.
local function fraud_decide(policyKey, allKey, destKeys, f)
  local r = f.rules
  local candidates = fraud_candidates(f.e164)
  local policy = redis.call('HMGET', policyKey, 'mode', 'g:' .. f.country, unpack(candidates))
  local mode = policy[1] or 'enforce'
  if mode == 'off' then return { 'allow', 'none', 'mode off' } end
  local function verdict(rule, detail)
    return { mode == 'shadow' and 'would_block' or 'block', rule, detail }
  end
  local geo = policy[2] or 'allow'
  if geo == 'block' then return verdict('geo', 'country ' .. f.country .. ' is blocked') end
  if geo == 'trust' then return { 'allow', 'none', 'country ' .. f.country .. ' is trusted' } end
  for i = 3, #policy do
    if policy[i] then return { 'allow', 'none', string.sub(candidates[i - 2], 3) .. ' is trusted' } end
  end
  -- A number that converted for the tenant lately is a returning user: no adaptive rule refuses it.
  if fraud_returning(destKeys, f) then return { 'allow', 'none', 'returning number' } end
  -- The narrowest first: a source that fans out is refused, whatever its destinations.
  local _, today = fraud_clock(f)
  for j, key in ipairs(fraud_source_keys(destKeys, f)) do
    local sd = fraud_source_day(key, today, f)
    -- Each conversion gives its send back and earns FRAUD_CONVERSION_CREDIT more, as at a
    -- destination: real users behind one shared address (a carrier's NAT) never reach the bound.
    local allowed = r.sourceSends + r.credit * sd.verified
    if sd.sent - sd.verified >= allowed then
      return verdict('source_fanout', string.format(
        '%s: %d unconverted sends today, %d verified; allowed %d', f.sources[j],
        sd.sent - sd.verified, sd.verified, math.floor(allowed)))
    end
    if not sd.countries[f.country] and sd.count >= r.sourceCountries then
      return verdict('source_fanout', string.format('%s: sent to %d countries today (%s); allowed %d',
        f.sources[j], sd.count, string.gsub(sd.list, '%.', ', '), r.sourceCountries))
    end
  end
  local tenant = false
  -- Each destination's anomaly, if any (surge or conversion drop), by its place in f.dests
  -- (country, network when known, prefix): the narrowest is refused first, below.
  local found = {}
  for i = 1, #f.dests do
    local key = destKeys[i]
    local kind = string.sub(f.dests[i], 1, 1)
    local st = fraud_read(key, f)
    -- A country or network without a conversion in the baseline days (today's included) nor the
    -- window: the send draws on the tenant's new-destination budget as well (below, and
    -- fraud_count). Prefixes are too many for real users to have history in each: not judged so.
    if kind ~= 'p' and st.busiest == 0 and st.verified == 0 then
      f.newDest = f.newDest or f.dests[i]
    end
    local bound = r.newSends + r.share * st.busiest + r.credit * st.verified
    -- A prefix that converted nothing in the window stays at its bound while refused sends keep
    -- arriving: a pumped range gets its first sends, not more each time a slice leaves the window.
    local load = st.sent
    if kind == 'p' and st.verified == 0 then load = st.sent + st.blocked end
    if load >= bound then
      -- Its sources are counted up to its bound only (fraud_track): who made the surge.
      f.surging = f.surging or {}
      f.surging[i] = true
      -- A surge that at most two sources made refuses them, not the destination's other users.
      local explained, mine = fraud_explained(key, f, st.sent, bound)
      if mine then
        return verdict('source_fanout', string.format(
          '%s: %d sent, %d verified in the last %d s; allowed %d, at least %d%% of them from two ' ..
          'sources or fewer, %s among them', fraud_label(f.dests[i]), st.sent, st.verified,
          r.windowSeconds, math.floor(bound), math.floor(r.sourceShare * 100),
          f.trackLabel or 'this source'))
      end
      if not explained then
        local refused = ''
        if load > st.sent then refused = string.format(', %d refused', st.blocked) end
        found[i] = { 'destination_surge', string.format(
          '%s: %d sent, %d verified%s in the last %d s; allowed %d', fraud_label(f.dests[i]),
          st.sent, st.verified, refused, r.windowSeconds, math.floor(bound)) }
      end
    end
    if not found[i] and st.maturedSent >= r.minSends then
      -- Judged against the destination's own conversion before today when it has one, else the
      -- tenant's: pumping elsewhere, or here today, cannot lower the bar.
      local base, whose = st.base, 'its best day converted'
      if base == nil then
        if tenant == false then tenant = fraud_tenant_conversion(allKey, f) end
        base, whose = tenant, 'the tenant converts'
      end
      local conversion = st.maturedVerified / st.maturedSent
      if base ~= nil and conversion < r.drop * base then
        found[i] = { 'conversion_drop', string.format(
          '%s: conversion %.2f over %d sends, %s %.2f', fraud_label(f.dests[i]), conversion,
          st.maturedSent, whose, base) }
      end
    end
  end
  -- The narrowest destination that explains the anomaly: the prefix, then the network; the
  -- country only once networks or prefixes of it were refused in at least rules.countrySpread
  -- places (docs/fraud.md#narrowest-destination), so a surge in one range leaves the country's
  -- other users served.
  for i = #f.dests, 1, -1 do
    if found[i] then
      if i > 1 then
        local _, write = fraud_spread(destKeys[1], f, f.dests[i])
        f.spreadWrite = write
        return verdict(found[i][1], found[i][2])
      end
      local spread = fraud_spread(destKeys[1], f, nil)
      if spread >= r.countrySpread then
        return verdict(found[i][1], found[i][2] .. string.format(
          '; refused in %d of its networks or prefixes', spread))
      end
    end
  end
  if f.newDest then
    local used = fraud_budget_used(allKey, f)
    if used >= r.newDestinationBudget then
      return verdict('new_destination_budget', string.format(
        '%s has no conversion in the last %d days; the tenant made %d unconverted sends to such ' ..
        'destinations in the last %d s; allowed %d', fraud_label(f.newDest), r.days, used,
        r.windowSeconds, r.newDestinationBudget))
    end
  end
  return { 'allow', 'none', '' }
end

-- Adds one to a slot's counter (2 sent, 3 verified, 4 blocked) of the slice and the day given
-- (or of one of them, `only` 'w' or 'd'). Answers whether the day's slot was new (the key's first
-- write of that day).
local function fraud_bump(key, f, slice, day, column, only)
  local r = f.rules
  local fw, fd = 'w' .. (slice % r.slices), 'd' .. (day % (r.days + 1))
  local known = f.read and f.read[key]
  local raw = known or redis.call('HMGET', key, fw, fd)
  local firstOfDay = not string.match(raw[2] or '', '^' .. day .. ',')
  local function bumped(value, stamp)
    local c = { stamp, 0, 0, 0 }
    local at, s, v, b = string.match(value or '', '^(%d+),(%d+),(%d+),(%d+)$')
    -- A later slice or day took the slot: an earlier one's count has nowhere to go.
    if at and tonumber(at) > stamp then return value end
    if tonumber(at) == stamp then c = { stamp, tonumber(s), tonumber(v), tonumber(b) } end
    c[column] = c[column] + 1
    return table.concat(c, ',')
  end
  local w, d = bumped(raw[1], slice), bumped(raw[2], day)
  -- `only` 'w' or 'd': one of the two counted (a conversion's credit, convert.lua).
  if only == 'w' then
    d = raw[2]
    redis.call('HSET', key, fw, w)
  elseif only == 'd' then
    w = raw[1]
    redis.call('HSET', key, fd, d)
  else
    redis.call('HSET', key, fw, w, fd, d)
  end
  if known then f.read[key] = { w, d } end
  return firstOfDay
end

-- The new-destination budget of blocked sends (docs/fraud.md#what-redis-keeps): true when a
-- blocked send may count at the destination `key`, one already counted, or a new one while the
-- tenant's blocked sends added fewer than rules.newDestinationBudget this window (field
-- `blocked_new` of its `all` counters: '<window>,<count>'). Refused traffic fanned out over many
-- prefixes then cannot grow the tenant's counters and index: past the budget it counts in `all`
-- and in the destinations it already has.
local function fraud_blocked_may_add(allKey, key, f)
  if redis.call('EXISTS', key) == 1 then return true end
  local r = f.rules
  local window = math.floor(f.now / (r.windowSeconds * 1000))
  local at, n = string.match(redis.call('HGET', allKey, 'blocked_new') or '', '^(%d+),(%d+)$')
  n = tonumber(at) == window and tonumber(n) or 0
  if n >= r.newDestinationBudget then return false end
  redis.call('HSET', allKey, 'blocked_new', window .. ',' .. (n + 1))
  return true
end

-- Ranks destination `dest` (`p:+336123`) among those of its kind by sends, in the sets that
-- insights read a page at a time (docs/fraud.md#pages): `rankKeys` rank the send's day (kept as
-- long as the counters' day slots), that day with the one before (read today, for the last 24
-- hours, and tomorrow), and that day with the next (read from tomorrow), each scored by minus the
-- sends, so that a set read in order gives the most sent first and equals by key. A blocked send
-- only lists it, on its first count of the day, which also sets each set's expiry.
local function fraud_rank(rankKeys, dest, f, day, sent, firstOfDay)
  if not sent and not firstOfDay then return end
  local member = string.sub(dest, 3)
  for j = 1, 3 do redis.call('ZINCRBY', rankKeys[j], sent and -1 or 0, member) end
  if firstOfDay then
    -- From now, as the counters: on the engine's own clock (simulate) too.
    redis.call('PEXPIRE', rankKeys[1], (f.rules.days + 2) * 86400000)
    redis.call('PEXPIRE', rankKeys[2], 2 * 86400000)
    redis.call('PEXPIRE', rankKeys[3], 3 * 86400000)
  end
end

-- The rankings of the destinations of kind `kind` that fraud_rank writes for UTC day `day`, named
-- as src/fraud/keys.ts `rank` names them, from the destinations index's key ('<tenant's
-- prefix>:dests'): built here, under the index's hash tag (so on its Cluster slot), instead of
-- sent with every send (nine keys of about 95 bytes).
local function fraud_rank_keys(destsKey, kind, day)
  local base = string.sub(destsKey, 1, -#':dests' - 1) .. ':rank:'
  return { base .. '1:' .. kind .. ':' .. day, base .. '2:' .. kind .. ':' .. day,
    base .. '2:' .. kind .. ':' .. (day + 1) }
end

-- Counts a send the engine let through ('sent') or refused ('blocked'), keeps its destinations
-- listed and ranked, and, for a sent message, remembers where it went so its conversion counts
-- there.
local function fraud_count(allKey, destsKey, sentKey, destKeys, f, outcome)
  local r = f.rules
  local slice, day = fraud_clock(f)
  local column = outcome == 'sent' and 2 or 4
  -- Expiry and the index are renewed on a key's first write of each day only: a key written
  -- today lives the baseline and two days more, whatever the hour.
  local keepMs = (r.days + 2) * 86400000
  local renewed = false
  local n = #f.dests
  for i = 1, n do
    local key = destKeys[i]
    if outcome ~= 'blocked' or fraud_blocked_may_add(allKey, key, f) then
      local firstOfDay = fraud_bump(key, f, slice, day, column)
      fraud_rank(fraud_rank_keys(destsKey, string.sub(f.dests[i], 1, 1), day), f.dests[i], f, day,
        outcome == 'sent', firstOfDay)
      if firstOfDay then
        redis.call('PEXPIRE', key, keepMs)
        if redis.call('ZADD', destsKey, day, f.dests[i]) == 1 then
          redis.call('ZREMRANGEBYSCORE', destsKey, '-inf', day - r.days - 2)
        end
        renewed = true
      end
    end
  end
  if renewed then redis.call('PEXPIRE', destsKey, keepMs) end
  if fraud_bump(allKey, f, slice, day, column) then redis.call('PEXPIRE', allKey, keepMs) end
  if outcome == 'sent' then
    -- A send to a country without history draws on the budget; its conversion gives it back.
    if f.newDest then fraud_budget_bump(allKey, f, slice, 2) end
    -- Its sources count it, and its conversion gives it back to them (convert.lua).
    local digests = {}
    for _, key in ipairs(fraud_source_keys(destKeys, f)) do
      fraud_source_bump(key, f, day, 2)
      digests[#digests + 1] = string.match(key, '([^:]+)$')
    end
    for i = 1, n do
      if not (f.surging and f.surging[i]) then fraud_track(destKeys[i], f) end
    end
    redis.call('SET', sentKey, slice .. '|' .. day .. '|' .. (f.newDest and '1' or '0') .. '|' ..
      table.concat(digests, '.'), 'PX', r.windowSeconds * 1000)
  end
end

-- Keeps a block or would_block (30 days, at most decisionsMax per tenant).
local function fraud_record(decisionsKey, f, decision)
  redis.call('XADD', decisionsKey, 'MAXLEN', '~', f.rules.decisionsMax, '*',
    'created_at', f.now, 'api', f.api, 'country', f.country, 'network', f.network, 'prefix', f.prefix,
    'phone_number', f.masked, 'action', decision[1], 'rule', decision[2], 'detail', decision[3])
  redis.call('XTRIM', decisionsKey, 'MINID', '~', tostring(f.now - 30 * 86400000))
  redis.call('PEXPIRE', decisionsKey, 30 * 86400000)
end

-- One send through the engine: decides, records a block or would_block, counts the outcome
-- ('sent' is counted by the caller once it sends: fraud_count). Returns the decision.
local function fraud_judge(k, f)
  local decision = fraud_decide(k.policy, k.all, k.dests, f)
  if decision[1] ~= 'allow' then
    fraud_record(k.decisions, f, decision)
    -- A network or prefix refused: its country counts it among the places it was refused in.
    if f.spreadWrite then redis.call('HSET', k.dests[1], unpack(f.spreadWrite)) end
  end
  if decision[1] == 'block' then fraud_count(k.all, k.index, k.sent, k.dests, f, 'blocked') end
  return decision
end

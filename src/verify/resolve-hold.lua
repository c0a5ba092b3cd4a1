-- Resolves a hold once: `commit` keeps the charge (the provider accepted the message);
-- `release` refunds it, frees its place in the windows and removes the authentication (send)
-- or gives the retry back (retry), as nothing was sent. A hold already resolved is left alone,
-- so racing owners and recoveries cannot charge or refund twice.
-- A retry given back counts no more against OTP_MAX_RETRIES, but keeps its attempt number (a
-- reference never names two messages, see retry-code.lua). When its code is the one to check,
-- the code it replaced is the one to check again (with its next_retry_at); when a later retry
-- replaced it, that retry now replaces what this one did, so giving that one back too restores
-- the code the user has.
-- KEYS: 1 the customer's holds, 2 the hold, 3 auth, then for a release only (a commit reads
--       none of them): account, month spend, events, hook, webhook pending set, and the windows
--       the send was recorded in
-- ARGV: 1 hold id, 2 commit | release, and optionally 3 the sealed message and 4 the deadline of
--       the hold one caller recorded: then only that hold is resolved, and only while no recovery
--       has claimed it (a claim moves the deadline), else nothing is done.
-- Returns {'resolved'} when this call resolved the hold, {'gone'} when it was already resolved,
-- or {'left'} when it is not that caller's hold any more (left alone).
local holdsKey = KEYS[1]
local holdKey = KEYS[2]
local authKey = KEYS[3]
local releaseKeys = { unpack(KEYS, 4) }
local holdId = ARGV[1]
local outcome = ARGV[2]
local sealed = ARGV[3]
local deadline = ARGV[4]

-- Gives retry `n` of the authentication `row` back (see above); nothing when the row is gone.
-- What retry n replaced: `p<n>` "<attempt> <next_retry_at_ms>" and `ph<n>` its code hash.
local function give_back_retry(row, n)
  local r = redis.call('HMGET', row, 'p' .. n, 'ph' .. n, 'code_attempt', 'attempts', 'validated',
    'retries', 'prev_code_hash', 'prev_next_retry_at_ms')
  if not r[4] then return end
  local attempts = tonumber(r[4])
  local current = tonumber(r[3] or r[4])
  local replaced, code = r[1], r[2] or ''
  if not replaced and r[7] and n == attempts then
    -- Retry n was the latest, recorded by an earlier version (the only one that writes this).
    current = n
    replaced, code = tostring(n - 1) .. ' ' .. (r[8] or '0'), r[7]
    redis.call('HDEL', row, 'prev_code_hash', 'prev_next_retry_at_ms')
  end
  if replaced then
    local attempt, next_at = string.match(replaced, '^(%d+) (%-?%d+)$')
    if current == n then
      -- A validated row compares no code again (check-code.lua dropped its hash).
      if r[5] ~= '1' then
        redis.call('HSET', row, 'code_hash', code, 'code_attempt', attempt, 'next_retry_at_ms', next_at)
      end
    else
      for j = n + 1, attempts do
        local later = redis.call('HGET', row, 'p' .. j)
        if later and tonumber(string.match(later, '^(%d+)')) == n then
          redis.call('HSET', row, 'p' .. j, replaced, 'ph' .. j, code)
          break
        end
      end
    end
    redis.call('HDEL', row, 'p' .. n, 'ph' .. n)
  end
  if tonumber(r[6] or '0') > 0 then redis.call('HINCRBY', row, 'retries', -1) end
end

local h = redis.call('HMGET', holdKey, 'price', 'member', 'kind', 'sealed', 'provider', 'route', 'channel')
if not h[1] then
  redis.call('ZREM', holdsKey, holdId)
  return {'gone'}
end
if sealed and (h[4] ~= sealed or tonumber(redis.call('ZSCORE', holdsKey, holdId)) ~= tonumber(deadline)) then
  return {'left'}
end
if outcome == 'release' then
  local accountKey, spendKey, eventsKey, hookKey, pendingKey = unpack(releaseKeys, 1, 5)
  local price = tonumber(h[1])
  redis.call('HINCRBY', accountKey, 'balance_micros', price)
  redis.call('DECRBY', spendKey, price)
  for i = 6, #releaseKeys do redis.call('ZREM', releaseKeys[i], h[2]) end
  if h[3] == 'send' then
    redis.call('DEL', authKey)
    stream_drop(eventsKey, hookKey, pendingKey)
  else
    give_back_retry(authKey, tonumber(string.match(holdId, '%.(%d+)$')))
  end
else
  if h[3] == 'retry' then
    -- Accepted: its code stays, and nothing needs what it replaced any more.
    local n = string.match(holdId, '%.(%d+)$')
    redis.call('HDEL', authKey, 'p' .. n, 'ph' .. n)
  end
  -- The provider and route of the message accepted: a right code counts for them, and a retry
  -- goes first to another provider (docs/routing.md#retries).
  -- With several providers (a hold names one), its sealed message is kept beside the row while
  -- its code is the one to check and lives, for one re-send should it be reported undelivered
  -- (undelivered.lua reads `<auth>:msg`).
  -- A message that fell back to another channel (docs/v2-api.md#fallback): the verification goes
  -- on from that channel, its retries too.
  if h[7] and redis.call('EXISTS', authKey) == 1 then
    redis.call('HSET', authKey, 'chn', h[7])
  end
  if h[5] and h[5] ~= '' and redis.call('EXISTS', authKey) == 1 then
    redis.call('HSET', authKey, 'dp', (h[6] or 'default') == 'default' and h[5] or (h[5] .. ' ' .. h[6]))
    local row = redis.call('HMGET', authKey, 'code_attempt', 'attempts', 'expires_at_ms')
    local expires = tonumber(row[3] or '0')
    if tonumber(row[1] or row[2]) == tonumber(string.match(holdId, '%.(%d+)$'))
        and expires > tonumber(redis.call('TIME')[1]) * 1000 then
      redis.call('SET', authKey .. ':msg', h[4], 'PXAT', expires)
    end
  end
end
redis.call('DEL', holdKey)
redis.call('ZREM', holdsKey, holdId)
return {'resolved'}

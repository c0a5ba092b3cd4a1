-- Resolves a hold once: `commit` keeps the charge (the provider accepted the message);
-- `release` refunds it, frees its place in the windows and removes the authentication (send)
-- or gives the retry back (retry), as nothing was sent. A hold already resolved is left alone,
-- so racing owners and recoveries cannot charge or refund twice.
-- A retry given back counts no more against OTP_MAX_RETRIES, but keeps its attempt number (a
-- reference is never used twice, see retry-code.lua). When its code is the one to check, the code
-- it replaced is again (with its next_retry_at); when a later retry replaced it, that retry now
-- replaces what this one did, so giving that one back too restores the code the user has.
-- KEYS: 1 the customer's holds, 2 the hold, 3 account, 4 month spend, 5 auth, 6 events,
--       7 hook, 8 webhook pending set, 9..n windows the send was recorded in
-- ARGV: 1 hold id, 2 commit | release, and optionally 3 the sealed message and 4 the deadline of
--       the hold one caller recorded: then only that hold is resolved, and only while no recovery
--       has claimed it (a claim moves the deadline), else nothing is done.
-- Returns 1 when this call resolved the hold, 0 when it was already resolved (or left alone).
-- Gives retry `n` of the authentication `row` back (see above); nothing when the row is gone.
local function give_back_retry(row, n)
  local r = redis.call('HMGET', row, 'p' .. n, 'code_attempt', 'attempts', 'validated', 'retries',
    'prev_code_hash', 'prev_next_retry_at_ms')
  if not r[3] then return end
  local attempts = tonumber(r[3])
  local current = tonumber(r[2] or r[3])
  local replaced = r[1]
  if not replaced and r[6] and current == n then
    -- Recorded by an earlier version: what the latest retry replaced.
    replaced = table.concat({tostring(n - 1), r[6], r[7] or '0'}, ' ')
    redis.call('HDEL', row, 'prev_code_hash', 'prev_next_retry_at_ms')
  end
  if replaced then
    local attempt, code, next_at = string.match(replaced, '^(%d+) (%S*) (%-?%d+)$')
    if current == n then
      -- A validated row compares no code again (check-code.lua dropped its hash).
      if r[4] ~= '1' then
        redis.call('HSET', row, 'code_hash', code, 'code_attempt', attempt, 'next_retry_at_ms', next_at)
      end
    else
      for j = n + 1, attempts do
        local later = redis.call('HGET', row, 'p' .. j)
        if later and tonumber(string.match(later, '^(%d+)')) == n then
          redis.call('HSET', row, 'p' .. j, replaced)
          break
        end
      end
    end
    redis.call('HDEL', row, 'p' .. n)
  end
  if tonumber(r[5] or '0') > 0 then redis.call('HINCRBY', row, 'retries', -1) end
end

local h = redis.call('HMGET', KEYS[2], 'price', 'member', 'kind', 'sealed')
if not h[1] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
if ARGV[3] and (h[4] ~= ARGV[3] or tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1])) ~= tonumber(ARGV[4])) then
  return 0
end
if ARGV[2] == 'release' then
  local price = tonumber(h[1])
  redis.call('HINCRBY', KEYS[3], 'balance_micros', price)
  redis.call('DECRBY', KEYS[4], price)
  for i = 9, #KEYS do redis.call('ZREM', KEYS[i], h[2]) end
  if h[3] == 'send' then
    redis.call('DEL', KEYS[5])
    stream_drop(KEYS[6], KEYS[7], KEYS[8])
  else
    give_back_retry(KEYS[5], tonumber(string.match(ARGV[1], '%.(%d+)$')))
  end
elseif h[3] == 'retry' then
  -- Accepted: its code stays, and nothing needs what it replaced any more.
  redis.call('HDEL', KEYS[5], 'p' .. string.match(ARGV[1], '%.(%d+)$'))
end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return 1

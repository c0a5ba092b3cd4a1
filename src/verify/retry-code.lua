-- Decides and records a retry atomically: the retry rules, the per-number and per-account
-- windows, billing, and the new code replacing the old one.
-- KEYS: 1 account, 2 month spend, 3 auth, 4 per-number window, 5 per-account window,
--       6 the customer's holds, 7 this retry's hold
-- ARGV[1]: JSON {now, attempt, codeHash, maxRetries, retryIntervalMs, price, member, limits, hold}:
-- `attempt` is the number the caller gave this retry's message (its reference `<auth>.<attempt>`),
-- the row's `attempts` plus one as the caller read it.
-- window.lua and hold.lua are prepended.
-- Returns {status, retries, next_retry_at_ms[, the setting of the rule that refused it]} (status `stale`: run too late to answer the
-- caller, or another retry took `attempt` since the caller read the row; nothing done), or an error
-- reply negative_balance | spending_limit_exceeded | suspended_account.
-- The row keeps, per retry whose hold is not resolved yet, what its code replaced (fields
-- `p<attempt>`: "<attempt> <next_retry_at_ms>", and `ph<attempt>`: the code hash; two fields, as
-- a value over 64 bytes would turn the row into a hash table, see docs/capacity.md), and which
-- attempt's code is the one to check (`code_attempt`; absent: `attempts`), for resolve-hold.lua
-- to give a retry back.
local a = cjson.decode(ARGV[1])
local now = a.now
if hold_stale(a.hold) then return {'stale', 0, 0} end
-- A replay of this retry (ioredis re-sends unanswered commands after a reconnect), or a
-- concurrent retry of the same attempt: charge nothing again; the hold is recovery's.
if redis.call('EXISTS', KEYS[7]) == 1 then return {'stale', 0, 0} end
local h = redis.call('HMGET', KEYS[3], 'status', 'validated', 'expires_at_ms', 'retries', 'next_retry_at_ms', 'code_hash',
  'attempts', 'code_attempt')
if not h[1] then return {'not_found', 0, 0} end
local retries = tonumber(h[4] or '0')
local next_at = tonumber(h[5] or '0')

if h[2] == '1' then return {'already_validated', retries, next_at} end
if h[1] ~= 'pending' then return {'no_attempt', retries, 0} end
if now >= tonumber(h[3]) then return {'expired_auth', retries, 0} end
if retries >= a.maxRetries then return {'rate_limited', retries, 0, 'OTP_MAX_RETRIES'} end
if now < next_at then return {'denied', retries, next_at, 'OTP_RETRY_INTERVAL_SECONDS'} end

if window_full(KEYS[4], a.limits.number, now) then
  return {'rate_limited', retries, next_at, 'RATE_LIMIT_NUMBER'}
end
if window_full(KEYS[5], a.limits.account, now) then
  return {'rate_limited', retries, next_at, 'RATE_LIMIT_ACCOUNT'}
end

-- A reference is never used twice: the provider would take a second message under it for the
-- first (idempotent by reference) and send nothing. Attempt numbers only grow, even when a retry
-- is given back, so a caller that read the row before another retry took its number is too late.
local attempts = tonumber(h[7] or '1')
if a.attempt ~= attempts + 1 then return {'stale', 0, 0} end

local account = redis.call('HMGET', KEYS[1], 'status', 'balance_micros', 'spending_limit_micros')
if account[1] == 'suspended' then return redis.error_reply('suspended_account') end
local spent = tonumber(redis.call('GET', KEYS[2]) or '0')
if (tonumber(account[2]) or 0) - a.price < 0 then return redis.error_reply('negative_balance') end
if spent + a.price > (tonumber(account[3]) or 0) then return redis.error_reply('spending_limit_exceeded') end
redis.call('HINCRBY', KEYS[1], 'balance_micros', -a.price)
redis.call('INCRBY', KEYS[2], a.price)
redis.call('EXPIRE', KEYS[2], 40 * 86400)
window_record(KEYS[4], a.limits.number, now, a.member)
window_record(KEYS[5], a.limits.account, now, a.member)
hold_record(KEYS[6], KEYS[7], a.hold, a.price, a.member, 'retry')

local next_retry = now + a.retryIntervalMs
redis.call('HSET', KEYS[3], 'code_hash', a.codeHash, 'code_attempt', tostring(a.attempt),
  'p' .. a.attempt, (h[8] or tostring(attempts)) .. ' ' .. tostring(next_at), 'ph' .. a.attempt, h[6] or '',
  'next_retry_at_ms', tostring(next_retry), 'attempts', tostring(a.attempt))
-- Written by earlier versions, meaningless once another code replaced theirs.
redis.call('HDEL', KEYS[3], 'prev_code_hash', 'prev_next_retry_at_ms')
redis.call('HINCRBY', KEYS[3], 'retries', 1)
return {'approved', retries + 1, next_retry}

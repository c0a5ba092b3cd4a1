-- Decides and records a retry atomically: the retry rules, the per-number and per-account
-- windows, billing, and the new code replacing the old one.
-- KEYS: 1 account, 2 month spend, 3 auth, 4 per-number window, 5 per-account window,
--       6 the customer's holds, 7 this retry's hold
-- ARGV[1]: JSON {now, codeHash, maxRetries, retryIntervalMs, price, member, limits, hold}.
-- window.lua and hold.lua are prepended.
-- Returns {status, retries, next_retry_at_ms[, the setting of the rule that refused it]} (status `stale`: run too late to answer the
-- caller, nothing done), or an error reply negative_balance | spending_limit_exceeded |
-- suspended_account.
local a = cjson.decode(ARGV[1])
local now = a.now
if hold_stale(a.hold) then return {'stale', 0, 0} end
-- A replay of this retry (ioredis re-sends unanswered commands after a reconnect), or a
-- concurrent retry of the same attempt: charge nothing again; the hold is recovery's.
if redis.call('EXISTS', KEYS[7]) == 1 then return {'stale', 0, 0} end
local h = redis.call('HMGET', KEYS[3], 'status', 'validated', 'expires_at_ms', 'retries', 'next_retry_at_ms', 'code_hash')
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
redis.call('HSET', KEYS[3], 'code_hash', a.codeHash, 'prev_code_hash', h[6],
  'prev_next_retry_at_ms', tostring(next_at), 'next_retry_at_ms', tostring(next_retry))
redis.call('HINCRBY', KEYS[3], 'attempts', 1)
redis.call('HINCRBY', KEYS[3], 'retries', 1)
return {'approved', retries + 1, next_retry}

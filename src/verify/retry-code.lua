-- Decides and records a retry atomically: the retry rules, the per-number and per-account
-- windows, billing, and the new code replacing the old one.
-- KEYS: 1 account, 2 month spend, 3 auth, 4 per-number window, 5 per-account window,
--       6 the customer's holds, 7 this retry's hold, 8 the fraud engine's policy key, then the
--       number's and the sources' (fraudTail in src/fraud/engine.ts; engine.lua fraud_keys names the others)
-- ARGV[1]: JSON {now, attempt, codeHash, price, member, fraud, hold, codeSealed?}, hold.release the keys a
-- release needs (JSON, hold-store.ts releaseKeys); CONFIG: the fixed settings (SendRules in
-- src/verify/scripts.ts: maxRetries, retryIntervalMs, limits, fraud), in the script's text:
-- `attempt` is the number the caller gave this retry's message (its reference `<auth>.<attempt>`),
-- the row's `attempts` plus one as the caller read it.
-- window.lua, hold.lua and fraud/engine.lua are prepended.
-- Returns {status, retries, next_retry_at_ms[, the setting of the rule that refused it, the fraud
-- engine's action and rule]} (`spam_detected`: the fraud engine blocked it; `stale`: run too late to answer the
-- caller, or another retry took `attempt` since the caller read the row; nothing done), or
-- {'refused', negative_balance | spending_limit_exceeded | suspended_account} (src/redis/script.ts).
-- The row keeps, per retry whose hold is not resolved yet, what its code replaced (fields
-- `p<attempt>`: "<attempt> <next_retry_at_ms>", and `ph<attempt>`: the code hash; two fields, as
-- a value over 64 bytes would turn the row into a hash table, see docs/capacity.md), and which
-- attempt's code is the one to check (`code_attempt`; absent: `attempts`), for resolve-hold.lua
-- to give a retry back.
local accountKey = KEYS[1]
local spendKey = KEYS[2]
local authKey = KEYS[3]
local numberWindowKey = KEYS[4]
local accountWindowKey = KEYS[5]
local holdsKey = KEYS[6]
local holdKey = KEYS[7]
local fraudPolicyKey = KEYS[8]
local fraudTailKeys = { unpack(KEYS, 9) }
local args = cjson.decode(ARGV[1])
local now = args.now
-- An email code costs nothing: the fraud engine does not judge it (`fraud` false).
local fraudKeys = fraud_keys_judged(fraudPolicyKey, fraudTailKeys, args.fraud, CONFIG.fraud)
local judged = fraudKeys ~= nil
if hold_stale(args.hold) then return {'stale', 0, 0} end
-- A replay of this retry (ioredis re-sends unanswered commands after a reconnect), or a
-- concurrent retry of the same attempt: charge nothing again; the hold is recovery's.
if redis.call('EXISTS', holdKey) == 1 then return {'stale', 0, 0} end
local h = redis.call('HMGET', authKey, 'status', 'validated', 'expires_at_ms', 'retries', 'next_retry_at_ms', 'code_hash',
  'attempts', 'code_attempt')
if not h[1] then return {'not_found', 0, 0} end
local retries = tonumber(h[4] or '0')
local next_at = tonumber(h[5] or '0')

if h[2] == '1' then return {'already_validated', retries, next_at} end
if h[1] ~= 'pending' then return {'no_attempt', retries, 0} end
if now >= tonumber(h[3]) then return {'expired_auth', retries, 0} end
if retries >= CONFIG.maxRetries then return {'rate_limited', retries, 0, 'OTP_MAX_RETRIES'} end
if now < next_at then return {'denied', retries, next_at, 'OTP_RETRY_INTERVAL_SECONDS'} end

if window_full(numberWindowKey, CONFIG.limits.number, now) then
  return {'rate_limited', retries, next_at, 'RATE_LIMIT_NUMBER'}
end
if window_full(accountWindowKey, CONFIG.limits.account, now) then
  return {'rate_limited', retries, next_at, 'RATE_LIMIT_ACCOUNT'}
end

-- A reference is never used twice: the provider would take a second message under it for the
-- first (idempotent by reference) and send nothing. Attempt numbers only grow, even when a retry
-- is given back, so a caller that read the row before another retry took its number is too late.
local attempts = tonumber(h[7] or '1')
if args.attempt ~= attempts + 1 then return {'stale', 0, 0} end

-- The fraud engine judges the new message like a first one (docs/fraud.md#how-it-decides).
local fraud = judged and fraud_judge(fraudKeys, args.fraud) or {false, false}
if fraud[1] == 'block' then
  return {'spam_detected', retries, next_at, 'FRAUD_' .. string.upper(fraud[2]), fraud[1], fraud[2]}
end

local account = redis.call('HMGET', accountKey, 'status', 'balance_micros', 'spending_limit_micros')
if account[1] == 'suspended' then return {'refused', 'suspended_account'} end
local spent = tonumber(redis.call('GET', spendKey) or '0')
if (tonumber(account[2]) or 0) - args.price < 0 then return {'refused', 'negative_balance'} end
if spent + args.price > (tonumber(account[3]) or 0) then return {'refused', 'spending_limit_exceeded'} end
-- A free message (an email code) changes no balance: Lua would write -0, which Redis refuses.
if args.price > 0 then
  redis.call('HINCRBY', accountKey, 'balance_micros', -args.price)
  redis.call('INCRBY', spendKey, args.price)
  redis.call('EXPIRE', spendKey, 40 * 86400)
end
window_record(numberWindowKey, CONFIG.limits.number, now, args.member)
window_record(accountWindowKey, CONFIG.limits.account, now, args.member)
hold_record(holdsKey, holdKey, args.hold, args.price, args.member, 'retry', args.hold.release)
if judged then fraud_count(fraudKeys.all, fraudKeys.index, fraudKeys.sent, fraudKeys.dests, args.fraud, 'sent') end

local next_retry = now + CONFIG.retryIntervalMs
redis.call('HSET', authKey, 'code_hash', args.codeHash, 'code_attempt', tostring(args.attempt),
  'p' .. args.attempt, (h[8] or tostring(attempts)) .. ' ' .. tostring(next_at), 'ph' .. args.attempt, h[6] or '',
  'next_retry_at_ms', tostring(next_retry), 'attempts', tostring(args.attempt))
-- Written by earlier versions, meaningless once another code replaced theirs.
redis.call('HDEL', authKey, 'prev_code_hash', 'prev_next_retry_at_ms')
redis.call('HINCRBY', authKey, 'retries', 1)
-- With several channels planned, its code sealed for the next channel's message (docs/v2-api.md#fallback).
if args.codeSealed and args.codeSealed ~= '' then
  redis.call('HSET', authKey, 'sc' .. args.attempt, args.codeSealed)
end
return {'approved', retries + 1, next_retry, false, fraud[1], fraud[2]}

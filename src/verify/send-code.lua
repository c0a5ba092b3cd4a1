-- Decides and records one send-a-code request atomically: rate limits, spam rules, billing,
-- the authentication itself and its first event. All keys share the customer's hash tag.
-- KEYS (named below): the account, its month spend, the authentication's row (its events and
-- hook are named from it: row_event_keys) and webhook pending set, the windows (per number, IP,
-- device, account), numbers per IP and per device, sends into the number's range, the customer's
-- holds (sorted set by deadline), this send's hold, and the number's V2 target index (args.target: compared first, written when the send is pending).
-- Then the fraud engine's policy key, and the number's and the sources' keys last (fraudTail in
-- src/fraud/engine.ts; engine.lua fraud_keys names the others).
-- ARGV[1]: JSON, see src/verify/store.ts (SendArgs). CONFIG: the fixed settings (SendRules in
-- src/verify/scripts.ts), in the script's text (Script.configured). window.lua, hold.lua,
-- stream.lua, row-events.lua and fraud/engine.lua are prepended.
-- A refused send (any status but pending) keeps its row until args.refusedUntil.
-- Returns {status, the setting of the rule that refused it or false, the fraud engine's action
-- and rule or false (when a rule before it refused)}: pending | rate_limited |
-- spam_detected, `raced` (see args.target), `stale` when run too late to answer the caller (nothing
-- done); or {'refused', negative_balance | spending_limit_exceeded | suspended_account |
-- account_invalid} (src/redis/script.ts).
local accountKey = KEYS[1]
local spendKey = KEYS[2]
local authKey = KEYS[3]
local pendingKey = KEYS[4]
local numberWindowKey = KEYS[5]
local ipWindowKey = KEYS[6]
local deviceWindowKey = KEYS[7]
local accountWindowKey = KEYS[8]
local ipNumbersKey = KEYS[9]
local deviceNumbersKey = KEYS[10]
local rangeKey = KEYS[11]
local holdsKey = KEYS[12]
local holdKey = KEYS[13]
local targetKey = KEYS[14]
local fraudPolicyKey = KEYS[15]
local fraudTailKeys = { unpack(KEYS, 16) }
local eventsKey, hookKey = row_event_keys(authKey)
local args = cjson.decode(ARGV[1])
local now = args.now
local limits, spam = CONFIG.limits, CONFIG.spam
-- The first message of the authentication in the windows (a retry's is '<auth>:<attempt>').
local member = args.authUuid .. ':1'
-- An email code costs nothing: the fraud engine does not judge it (`fraud` false).
local fraudKeys = fraud_keys_judged(fraudPolicyKey, fraudTailKeys, args.fraud, CONFIG.fraud)
local judged = fraudKeys ~= nil
if hold_stale(args.hold) then return {'stale'} end
-- A replay of a send that already ran (ioredis re-sends unanswered commands after a reconnect):
-- answer what it decided, charge nothing again.
local prior = redis.call('HGET', authKey, 'status')
if prior then return {prior} end
-- V2: another creation made the number's running verification since the caller looked: it
-- retries that one instead (nothing done here).
if type(args.target) == 'table' and (redis.call('GET', targetKey) or '') ~= args.target.running then
  return {'raced'}
end

local account = redis.call('HMGET', accountKey, 'status', 'balance_micros', 'spending_limit_micros')
if not account[1] then return {'refused', 'account_invalid'} end
if account[1] == 'suspended' then return {'refused', 'suspended_account'} end

local function full(key, rule) return window_full(key, rule, now) end

-- Distinct numbers seen in a window; true when this number would be one too many.
local function too_many_numbers(key, rule)
  if type(rule) ~= 'table' then return false end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - rule.windowSeconds * 1000)
  if redis.call('ZSCORE', key, args.phone) then return false end
  return redis.call('ZCARD', key) >= rule.limit
end

-- The rule that refused the send, by its setting's name (for the refusals metric).
local status = args.staticSpam and 'spam_detected' or 'pending'
local refused_by = args.staticSpam or nil
if status == 'pending' then
  if full(numberWindowKey, limits.number) then refused_by = 'RATE_LIMIT_NUMBER'
  elseif args.hasIp and full(ipWindowKey, limits.ip) then refused_by = 'RATE_LIMIT_IP'
  elseif args.hasDevice and full(deviceWindowKey, limits.device) then refused_by = 'RATE_LIMIT_DEVICE'
  elseif full(accountWindowKey, limits.account) then refused_by = 'RATE_LIMIT_ACCOUNT' end
  if refused_by then status = 'rate_limited' end
end
if status == 'pending' then
  if args.hasIp and too_many_numbers(ipNumbersKey, spam.ipNumbers) then refused_by = 'SPAM_IP_NUMBERS'
  elseif args.hasDevice and too_many_numbers(deviceNumbersKey, spam.deviceNumbers) then refused_by = 'SPAM_DEVICE_NUMBERS'
  elseif full(rangeKey, spam.range) then refused_by = 'SPAM_RANGE_BURST' end
  if refused_by then status = 'spam_detected' end
end
-- The fraud engine judges what the static rules let through (docs/fraud.md#how-it-decides).
local fraud = nil
if status == 'pending' and judged then
  fraud = fraud_judge(fraudKeys, args.fraud)
  if fraud[1] == 'block' then
    status = 'spam_detected'
    refused_by = 'FRAUD_' .. string.upper(fraud[2])
  end
end

if status == 'pending' then
  local balance = tonumber(account[2]) or 0
  local limit = tonumber(account[3]) or 0
  local spent = tonumber(redis.call('GET', spendKey) or '0')
  if balance - args.price < 0 then return {'refused', 'negative_balance'} end
  if spent + args.price > limit then return {'refused', 'spending_limit_exceeded'} end
  -- A free message (an email code) changes no balance: Lua would write -0, which Redis refuses.
  if args.price > 0 then
    redis.call('HINCRBY', accountKey, 'balance_micros', -args.price)
    redis.call('INCRBY', spendKey, args.price)
    redis.call('EXPIRE', spendKey, 40 * 86400)
  end

  local function record(key, rule, member) window_record(key, rule, now, member) end
  record(numberWindowKey, limits.number, member)
  if args.hasIp then record(ipWindowKey, limits.ip, member) end
  if args.hasDevice then record(deviceWindowKey, limits.device, member) end
  record(accountWindowKey, limits.account, member)
  if args.hasIp then record(ipNumbersKey, spam.ipNumbers, args.phone) end
  if args.hasDevice then record(deviceNumbersKey, spam.deviceNumbers, args.phone) end
  record(rangeKey, spam.range, member)
  -- What a release needs, as hold-store.ts releaseKeys lists it.
  hold_record(holdsKey, holdKey, args.hold, args.price, member, 'send', cjson.encode({ accountKey,
    spendKey, authKey, eventsKey, hookKey, pendingKey, numberWindowKey, ipWindowKey, deviceWindowKey,
    accountWindowKey, rangeKey }))
  if judged then fraud_count(fraudKeys.all, fraudKeys.index, fraudKeys.sent, fraudKeys.dests, args.fraud, 'sent') end
end

local fields = args.fields
fields.status = status
if status == 'pending' then
  fields.code_hash = args.codeHash
  fields.attempts = '1'
  fields.next_retry_at_ms = tostring(now + CONFIG.retryIntervalMs)
end
local flat = {}
for k, v in pairs(fields) do
  flat[#flat + 1] = k
  flat[#flat + 1] = tostring(v)
end
-- A send refused before anything was sent is kept until args.refusedUntil only
-- (REFUSED_RETENTION_SECONDS, docs/capacity.md#refused-sends): nothing of it outlives that but
-- its webhook while its delivery is pending.
local refused = status ~= 'pending'
local keepUntil = refused and args.refusedUntil or args.keepUntil
redis.call('HSET', authKey, unpack(flat))
redis.call('PEXPIREAT', authKey, keepUntil)
-- An API may record no event for a status (V2 records none for a refused creation): then a
-- refused send has no stream to deliver, and keeps no hook.
local event, compact = created_event(args.created, status)
local hooked = type(args.hook) == 'table' and (not refused or event ~= '')
if hooked then
  stream_set_hook(hookKey, args.hook.url, args.hook.secretRef)
  redis.call('PEXPIREAT', hookKey, args.keepUntil)
end
if event ~= '' then
  row_event(authKey, eventsKey, hookKey, pendingKey, event, compact)
end
if hooked and refused then
  -- Its webhook is delivered all the same: the stream stays for the outbox's retries (the start
  -- makes AUTHENTICATION_RETENTION_SECONDS cover WEBHOOK_GIVE_UP_MS), and goes with its row once
  -- delivered (finish-stream.lua).
  redis.call('PEXPIREAT', eventsKey, args.keepUntil)
  stream_expire_delivered(hookKey, keepUntil)
end
if type(args.target) == 'table' and status == 'pending' then
  redis.call('SET', targetKey, args.authUuid, 'PXAT', args.fields.expires_at_ms)
end
return {status, refused_by or false, fraud and fraud[1] or false, fraud and fraud[2] or false}

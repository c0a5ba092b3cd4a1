-- Decides and records one send-a-code request atomically: rate limits, spam rules, billing,
-- the authentication itself and its first event. All keys share the customer's hash tag.
-- KEYS: 1 account, 2 month spend, 3 auth, 4 events, 5 hook, 6 webhook pending set,
--       7 per-number window, 8 per-IP window, 9 per-device window, 10 per-account window,
--       11 numbers per IP, 12 numbers per device, 13 sends into the number's range,
--       14 the customer's holds (sorted set by deadline), 15 this send's hold,
--       16 the number's V2 target index (a.target: compared first, written when the send is pending)
-- ARGV[1]: JSON, see store.ts (SendArgs). window.lua, hold.lua, stream.lua and row-events.lua are
-- prepended.
-- Returns the status (pending | rate_limited | spam_detected; `raced`, see a.target; a refusal followed by `:` and the
-- setting of the rule that refused it, e.g. `rate_limited:RATE_LIMIT_NUMBER`), `stale` when run too late to
-- answer the caller (nothing done), or an error reply
-- negative_balance | spending_limit_exceeded | suspended_account.
local a = cjson.decode(ARGV[1])
local now = a.now
if hold_stale(a.hold) then return 'stale' end
-- A replay of a send that already ran (ioredis re-sends unanswered commands after a reconnect):
-- answer what it decided, charge nothing again.
local prior = redis.call('HGET', KEYS[3], 'status')
if prior then return prior end
-- V2: another creation made the number's running verification since the caller looked: it
-- retries that one instead (nothing done here).
if type(a.target) == 'table' and (redis.call('GET', KEYS[16]) or '') ~= a.target.running then
  return 'raced'
end

local account = redis.call('HMGET', KEYS[1], 'status', 'balance_micros', 'spending_limit_micros')
if not account[1] then return redis.error_reply('account_invalid') end
if account[1] == 'suspended' then return redis.error_reply('suspended_account') end

local function full(key, rule) return window_full(key, rule, now) end

-- Distinct numbers seen in a window; true when this number would be one too many.
local function too_many_numbers(key, rule)
  if type(rule) ~= 'table' then return false end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - rule.windowSeconds * 1000)
  if redis.call('ZSCORE', key, a.phone) then return false end
  return redis.call('ZCARD', key) >= rule.limit
end

-- The rule that refused the send, by its setting's name (for the refusals metric).
local status = a.staticSpam and 'spam_detected' or 'pending'
local refused_by = a.staticSpam or nil
if status == 'pending' then
  if full(KEYS[7], a.limits.number) then refused_by = 'RATE_LIMIT_NUMBER'
  elseif a.hasIp and full(KEYS[8], a.limits.ip) then refused_by = 'RATE_LIMIT_IP'
  elseif a.hasDevice and full(KEYS[9], a.limits.device) then refused_by = 'RATE_LIMIT_DEVICE'
  elseif full(KEYS[10], a.limits.account) then refused_by = 'RATE_LIMIT_ACCOUNT' end
  if refused_by then status = 'rate_limited' end
end
if status == 'pending' then
  if a.hasIp and too_many_numbers(KEYS[11], a.spam.ipNumbers) then refused_by = 'SPAM_IP_NUMBERS'
  elseif a.hasDevice and too_many_numbers(KEYS[12], a.spam.deviceNumbers) then refused_by = 'SPAM_DEVICE_NUMBERS'
  elseif full(KEYS[13], a.spam.range) then refused_by = 'SPAM_RANGE_BURST' end
  if refused_by then status = 'spam_detected' end
end

if status == 'pending' then
  local balance = tonumber(account[2]) or 0
  local limit = tonumber(account[3]) or 0
  local spent = tonumber(redis.call('GET', KEYS[2]) or '0')
  if balance - a.price < 0 then return redis.error_reply('negative_balance') end
  if spent + a.price > limit then return redis.error_reply('spending_limit_exceeded') end
  redis.call('HINCRBY', KEYS[1], 'balance_micros', -a.price)
  redis.call('INCRBY', KEYS[2], a.price)
  redis.call('EXPIRE', KEYS[2], 40 * 86400)

  local function record(key, rule, member) window_record(key, rule, now, member) end
  record(KEYS[7], a.limits.number, a.member)
  if a.hasIp then record(KEYS[8], a.limits.ip, a.member) end
  if a.hasDevice then record(KEYS[9], a.limits.device, a.member) end
  record(KEYS[10], a.limits.account, a.member)
  if a.hasIp then record(KEYS[11], a.spam.ipNumbers, a.phone) end
  if a.hasDevice then record(KEYS[12], a.spam.deviceNumbers, a.phone) end
  record(KEYS[13], a.spam.range, a.member)
  hold_record(KEYS[14], KEYS[15], a.hold, a.price, a.member, 'send')
end

local fields = a.fields
fields.status = status
if status == 'pending' then
  fields.code_hash = a.codeHash
  fields.attempts = '1'
  fields.next_retry_at_ms = tostring(now + a.retryIntervalMs)
end
local flat = {}
for k, v in pairs(fields) do
  flat[#flat + 1] = k
  flat[#flat + 1] = tostring(v)
end
redis.call('HSET', KEYS[3], unpack(flat))
redis.call('PEXPIREAT', KEYS[3], a.keepUntil)
if type(a.hook) == 'table' then
  stream_set_hook(KEYS[5], a.hook.url, a.hook.secretRef)
  redis.call('PEXPIREAT', KEYS[5], a.keepUntil)
end
-- An API may record no event for a status (V2 records none for a refused creation).
if a.events[status] ~= '' then
  row_event(KEYS[3], KEYS[4], KEYS[5], KEYS[6], a.events[status], (a.compact or {})[status])
end
if type(a.target) == 'table' and status == 'pending' then
  redis.call('SET', KEYS[16], a.authUuid, 'PXAT', a.fields.expires_at_ms)
end
if refused_by then return status .. ':' .. refused_by end
return status

-- Checks a code against a challenge (a V1 authentication, a login or a step-up step),
-- atomically, so concurrent checks can neither both succeed nor pass the attempt limit.
-- KEYS: 1 challenge hash (fields status, code_hash, validated, expires_at_ms, checks),
--       2 events list, 3 hook, 4 webhook pending set (2 to 4 only used when events are given).
-- ARGV[1]: JSON {now, codeHash, maxChecks, api?, events?: {valid: envelope, invalid: envelope,
-- compact?: {valid, invalid}}}, an envelope being its JSON text or {head, tail} to be completed with
-- the challenge's correlation_id, and `compact` the records the caller's event recorder may keep
-- instead: with events, the caller prepends a library defining row_event (checkCodeWithEvents).
-- `api` (a V1 or V2 verification): a challenge created by another API is not found (field `api`,
-- absent on V1's older rows).
-- Returns {status or 'not_found', 1 when an event awaits webhook delivery, the verification's
-- number when the code was right (else false)}. Only real
-- comparisons are events, so refused checks cannot grow the list.
local challengeKey = KEYS[1]
local eventsKey = KEYS[2]
local hookKey = KEYS[3]
local pendingKey = KEYS[4]
local args = cjson.decode(ARGV[1])
local h = redis.call('HMGET', challengeKey, 'status', 'code_hash', 'validated', 'expires_at_ms', 'checks', 'api')
if not h[1] then return {'not_found', 0} end
if type(args.api) == 'string' and (h[6] or 'v1') ~= args.api then return {'not_found', 0} end

local status
if h[1] ~= 'pending' then
  status = 'without_attempt'
elseif h[3] == '1' then
  status = 'already_validated'
elseif args.now >= tonumber(h[4]) then
  status = 'expired_auth'
elseif tonumber(h[5] or '0') >= args.maxChecks then
  status = 'rate_limited'
else
  redis.call('HINCRBY', challengeKey, 'checks', 1)
  if h[2] == args.codeHash then
    -- A validated challenge compares no code again: its hash is dropped (docs/capacity.md).
    redis.call('HSET', challengeKey, 'validated', '1')
    redis.call('HDEL', challengeKey, 'code_hash')
    status = 'valid'
  else
    status = 'invalid'
  end
end

local hooked = 0
if type(args.events) == 'table' and (status == 'valid' or status == 'invalid') then
  local _
  local envelope = args.events[status]
  if type(envelope) == 'table' then envelope = stream_correlated(envelope, challengeKey) end
  local compact = type(args.events.compact) == 'table' and args.events.compact[status] or ''
  _, hooked = row_event(challengeKey, eventsKey, hookKey, pendingKey, envelope, compact)
end
-- A verification's number (V1 and V2 rows keep it as `p`, older rows as `phone_number`), for the
-- fraud engine to count the conversion, and the provider and route of its last message
-- (`dp`, docs/routing.md#strategies); false for a login or step-up challenge.
local phone, carried = false, false
if status == 'valid' then
  local p = redis.call('HMGET', challengeKey, 'p', 'phone_number', 'dp')
  phone = p[1] or p[2] or false
  carried = p[3] or false
end
return {status, hooked, phone, carried}

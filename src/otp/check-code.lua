-- Checks a code against a challenge (a V1 authentication, a login or a step-up step),
-- atomically, so concurrent checks can neither both succeed nor pass the attempt limit.
-- KEYS: 1 challenge hash (fields status, code_hash, validated, expires_at_ms, checks),
--       2 events list, 3 hook, 4 webhook pending set (2 to 4 only used when events are given).
-- ARGV[1]: JSON {now, codeHash, maxChecks, api?, events?: {valid: envelope, invalid: envelope,
-- compact?: {valid, invalid}}}, an envelope being its JSON text or {head, tail} to be completed with
-- the challenge's correlation_id, and `compact` the records row-events.lua may keep instead.
-- `api` (a V1 or V2 verification): a challenge created by another API is not found (field `api`,
-- absent on V1's older rows).
-- Returns {status or 'not_found', 1 when an event awaits webhook delivery}. Only real
-- comparisons are events, so refused checks cannot grow the list.
local a = cjson.decode(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'status', 'code_hash', 'validated', 'expires_at_ms', 'checks', 'api')
if not h[1] then return {'not_found', 0} end
if type(a.api) == 'string' and (h[6] or 'v1') ~= a.api then return {'not_found', 0} end

local status
if h[1] ~= 'pending' then
  status = 'without_attempt'
elseif h[3] == '1' then
  status = 'already_validated'
elseif a.now >= tonumber(h[4]) then
  status = 'expired_auth'
elseif tonumber(h[5] or '0') >= a.maxChecks then
  status = 'rate_limited'
else
  redis.call('HINCRBY', KEYS[1], 'checks', 1)
  if h[2] == a.codeHash then
    -- A validated challenge compares no code again: its hash is dropped (docs/capacity.md).
    redis.call('HSET', KEYS[1], 'validated', '1')
    redis.call('HDEL', KEYS[1], 'code_hash')
    status = 'valid'
  else
    status = 'invalid'
  end
end

local hooked = 0
if type(a.events) == 'table' and (status == 'valid' or status == 'invalid') then
  local _
  local envelope = a.events[status]
  if type(envelope) == 'table' then envelope = stream_correlated(envelope, KEYS[1]) end
  local compact = type(a.events.compact) == 'table' and a.events.compact[status] or ''
  _, hooked = row_event(KEYS[1], KEYS[2], KEYS[3], KEYS[4], envelope, compact)
end
return {status, hooked}

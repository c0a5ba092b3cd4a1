-- Takes a stream out of its pending set once every envelope in it was delivered; atomic with the
-- domain's appends, so an envelope appended meanwhile keeps the stream pending. A stream whose
-- hook names `expire_delivered_at` (stream_expire_delivered in stream.lua) then expires by that
-- time, with its hook and count.
-- KEYS[1] stream, KEYS[2] its delivered count, KEYS[3] the pending set of its hash tag,
-- KEYS[4] its hook.
-- Returns {'finished'} when the stream is fully delivered, {'pending'} when envelopes remain.
local streamKey = KEYS[1]
local deliveredKey = KEYS[2]
local pendingKey = KEYS[3]
local hookKey = KEYS[4]
local length = redis.call('LLEN', streamKey)
if length > tonumber(redis.call('GET', deliveredKey) or '0') then
  return {'pending'}
end
redis.call('SREM', pendingKey, streamKey)
if length == 0 then
  -- The stream expired: a stream later written under the same key starts from 0.
  redis.call('DEL', deliveredKey)
  return {'finished'}
end
local at = tonumber(redis.call('HGET', hookKey, 'expire_delivered_at') or '')
if at then
  -- LT: never later than the expiry a key already has.
  for _, key in ipairs({ streamKey, hookKey, deliveredKey }) do
    redis.call('PEXPIREAT', key, at, 'LT')
  end
end
return {'finished'}

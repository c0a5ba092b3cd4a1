-- Takes a stream out of its pending set once every envelope in it was delivered; atomic with the
-- domain's appends, so an envelope appended meanwhile keeps the stream pending.
-- KEYS[1] stream, KEYS[2] its delivered count, KEYS[3] the pending set of its hash tag.
-- Returns 1 when the stream is fully delivered, 0 when envelopes remain.
local length = redis.call('LLEN', KEYS[1])
if length > tonumber(redis.call('GET', KEYS[2]) or '0') then
  return 0
end
redis.call('SREM', KEYS[3], KEYS[1])
if length == 0 then
  -- The stream expired: a stream later written under the same key starts from 0.
  redis.call('DEL', KEYS[2])
end
return 1

-- Records one event on the webhook stream of one app webhook subscription (the stream contract of
-- src/webhooks/stream.ts: list, `<list>:hook`, pending set of the hash tag), atomically.
--
-- A subscription lives for ever, so its stream would never go quiet long enough to expire: when the
-- current stream is fully delivered and no worker holds it, this script drops it and starts the next
-- generation (a new list key, so the outbox's per-(stream, length) job ids never repeat). A stream
-- with undelivered envelopes is always appended to, so order holds.
--
-- KEYS: 1 the subscription's generation counter (no TTL; absent = 0);
--       2..5 stream of generation ARGV[1]: list, hook, delivered count, lock;
--       6..8 stream of generation ARGV[1] + 1: list, hook, delivered count;
--       9 the pending set of the hash tag.
-- ARGV: 1 generation the caller read, 2 envelope (the exact JSON bytes to POST), 3 url,
--       4 secret_ref, 5 stream TTL in ms (refreshed on every append).
-- Returns {'appended', the list appended to}, or {'moved'} when the generation moved meanwhile
-- (read it again, retry).
local genKey = KEYS[1]
local streamKey = KEYS[2]
local hookKey = KEYS[3]
local deliveredKey = KEYS[4]
local lockKey = KEYS[5]
local nextStreamKey = KEYS[6]
local nextHookKey = KEYS[7]
local nextDeliveredKey = KEYS[8]
local pendingKey = KEYS[9]
local generation = tonumber(ARGV[1])
local envelope = ARGV[2]
local url = ARGV[3]
local secretRef = ARGV[4]
local ttl = tonumber(ARGV[5])
local gen = tonumber(redis.call('GET', genKey) or '0')
if gen ~= generation then
  return {'moved'}
end
local list, hook, delivered = streamKey, hookKey, deliveredKey
local length = redis.call('LLEN', list)
if length == 0 then
  -- Never written, or expired: a stream written again under the same key starts from 0.
  redis.call('DEL', delivered)
elseif redis.call('EXISTS', lockKey) == 0
    and length <= tonumber(redis.call('GET', delivered) or '0') then
  redis.call('DEL', delivered)
  stream_drop(list, hook, pendingKey)
  redis.call('SET', genKey, gen + 1)
  list, hook, delivered = nextStreamKey, nextHookKey, nextDeliveredKey
end
stream_set_hook(hook, url, secretRef)
stream_append(list, hook, pendingKey, envelope)
redis.call('PEXPIRE', list, ttl)
redis.call('PEXPIRE', hook, ttl)
-- The outbox copies the list's TTL to the count when it moves it; a count that expired before its
-- list would have the list delivered again from the start.
if redis.call('EXISTS', delivered) == 1 then
  redis.call('PEXPIRE', delivered, ttl)
end
return {'appended', list}

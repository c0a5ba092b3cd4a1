-- Records one event on the webhook stream of one app webhook subscription (the stream contract of
-- src/webhooks/stream.ts: list, `<list>:hook`, pending set of the hash tag), atomically.
--
-- A subscription lives for ever, so its stream would never go quiet long enough to expire: when the
-- current stream is fully delivered and no worker holds it, this script drops it and starts the next
-- generation (a new list key, so the outbox's per-(stream, length) job ids never repeat). A stream
-- with undelivered envelopes is always appended to, so order holds.
--
-- KEYS[1] the subscription's generation counter (no TTL; absent = 0)
-- KEYS[2..5] stream of generation ARGV[1]: list, hook, delivered count, lock
-- KEYS[6..8] stream of generation ARGV[1] + 1: list, hook, delivered count
-- KEYS[9] the pending set of the hash tag
-- ARGV: 1 generation the caller read, 2 envelope (the exact JSON bytes to POST), 3 url,
--       4 secret_ref, 5 stream TTL in ms (refreshed on every append).
-- Returns the list appended to, or 0 when the generation moved meanwhile (read it again, retry).
local gen = tonumber(redis.call('GET', KEYS[1]) or '0')
if gen ~= tonumber(ARGV[1]) then
  return 0
end
local list, hook, delivered = KEYS[2], KEYS[3], KEYS[4]
local length = redis.call('LLEN', list)
if length == 0 then
  -- Never written, or expired: a stream written again under the same key starts from 0.
  redis.call('DEL', delivered)
elseif redis.call('EXISTS', KEYS[5]) == 0
    and length <= tonumber(redis.call('GET', delivered) or '0') then
  redis.call('DEL', delivered)
  stream_drop(list, hook, KEYS[9])
  redis.call('SET', KEYS[1], gen + 1)
  list, hook, delivered = KEYS[6], KEYS[7], KEYS[8]
end
stream_set_hook(hook, ARGV[3], ARGV[4])
stream_append(list, hook, KEYS[9], ARGV[2])
local ttl = tonumber(ARGV[5])
redis.call('PEXPIRE', list, ttl)
redis.call('PEXPIRE', hook, ttl)
-- The outbox copies the list's TTL to the count when it moves it; a count that expired before its
-- list would have the list delivered again from the start.
if redis.call('EXISTS', delivered) == 1 then
  redis.call('PEXPIRE', delivered, ttl)
end
return list

-- Records one webhook event on a stream. Domain scripts run these same commands next to their own
-- state change, in their own script, so that the event is recorded atomically with it.
-- KEYS[1] stream (list), KEYS[2] its hook hash, KEYS[3] the pending set of its hash tag
-- (all three share the stream's hash tag; name them with outboxKeys).
-- ARGV: envelope (the exact JSON bytes to POST), url, secret_ref.
-- Returns the new length of the stream.
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('HSETNX', KEYS[2], 'url', ARGV[2])
redis.call('HSETNX', KEYS[2], 'secret_ref', ARGV[3])
redis.call('SADD', KEYS[3], KEYS[1])
return n

-- Records one webhook event on a stream, for callers with no state change of their own to record
-- with it. KEYS: 1 stream (list), 2 its hook hash, 3 the pending set of its hash tag (name them
-- with outboxKeys). ARGV: envelope (the exact JSON bytes to POST), url, secret_ref.
-- Returns the new length of the stream.
stream_set_hook(KEYS[2], ARGV[2], ARGV[3])
local n = stream_append(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
return n

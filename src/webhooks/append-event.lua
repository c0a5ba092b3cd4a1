-- Records one webhook event on a stream, for callers with no state change of their own to record
-- with it. KEYS: 1 stream (list), 2 its hook hash, 3 the pending set of its hash tag (name them
-- with outboxKeys). ARGV: envelope (the exact JSON bytes to POST), url, secret_ref.
-- Returns {'appended', the new length of the stream}.
local streamKey = KEYS[1]
local hookKey = KEYS[2]
local pendingKey = KEYS[3]
local envelope = ARGV[1]
local url = ARGV[2]
local secretRef = ARGV[3]
stream_set_hook(hookKey, url, secretRef)
local n = stream_append(streamKey, hookKey, pendingKey, envelope)
return {'appended', n}

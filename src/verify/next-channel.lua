-- Moves a verification to its next channel (channels.lua, next_channel) when its message on
-- `from` was not reported delivered in time (docs/v2-api.md#fallback).
-- KEYS: 1 the authentication. ARGV: 1 the attempt, 2 the channel it was sent by, 3 now (ms).
-- Returns {'next', channel, sealed code} or {'none'}.
local authKey = KEYS[1]
local attempt = ARGV[1]
local from = ARGV[2]
local now = ARGV[3]
local nextChannel, sealed = next_channel(authKey, attempt, from, now)
if not nextChannel then return {'none'} end
return {'next', nextChannel, sealed}

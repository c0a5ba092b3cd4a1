-- The webhook stream rules of src/webhooks/stream.ts, for every script that records an event next
-- to its own state change (prepended by LuaScript.withLibraries, like otp/window.lua). A stream is
-- a list of envelopes; `<list>:hook` says where and with which secret to deliver; the pending set
-- of its hash tag holds the list while it has envelopes to deliver.

-- Names where a stream is delivered: `url`, and `secret_ref` (`<kind>:<id>`, never a secret).
local function stream_set_hook(hook, url, secret_ref)
  redis.call('HSET', hook, 'url', url, 'secret_ref', secret_ref)
end

-- Says when a stream may go once every envelope in it is delivered (`at`, ms): the outbox then
-- expires the stream, its hook and its count at `at` at the latest (finish-stream.lua), at once
-- when `at` is past. For a stream nothing is appended to later (a refused send's).
local function stream_expire_delivered(hook, at)
  redis.call('HSET', hook, 'expire_delivered_at', tostring(at))
end

-- Appends an envelope (the exact JSON bytes to POST) and, when the stream has a hook, marks the
-- stream pending for the outbox. Returns the new length, and 1 when it awaits delivery (else 0).
local function stream_append(list, hook, pending, envelope)
  local n = redis.call('RPUSH', list, envelope)
  if redis.call('EXISTS', hook) == 1 then
    redis.call('SADD', pending, list)
    return n, 1
  end
  return n, 0
end

-- An envelope given as {head, tail} (correlatedEnvelope in stream.ts), with the correlation_id
-- stored in the hash `owner` put between the two when it has one: the exact JSON bytes to POST.
local function stream_correlated(parts, owner)
  local id = redis.call('HGET', owner, 'correlation_id')
  if id and id ~= '' then
    return parts.head .. ',"correlation_id":' .. cjson.encode(id) .. parts.tail
  end
  return parts.head .. parts.tail
end

-- Drops a stream and its hook, and takes it out of the pending set.
local function stream_drop(list, hook, pending)
  redis.call('DEL', list, hook)
  redis.call('SREM', pending, list)
end

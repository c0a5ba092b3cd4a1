-- An authentication's event list and its webhook stream's hook, named from its row's key by the
-- suffixes src/verify/keys.ts (auth) and src/webhooks/stream.ts (outboxKeys) give them, under the
-- row's hash tag: the scripts that record events are given the row's key only.
local function row_event_keys(authKey)
  local eventsKey = authKey .. ':events'
  return eventsKey, eventsKey .. ':hook'
end

-- Where an authentication's events go (src/verify/row.ts, docs/capacity.md): the webhook
-- stream's list of JSON envelopes when the authentication has a callback (a hook) or already has
-- a list (rows stored before compact events); else the compact record, in the row itself as
-- fields e1, e2, ... counted by `en`. stream.lua is prepended before this.
-- Returns like stream_append: the count, and 1 when the event awaits webhook delivery.
local function row_event(row, list, hook, pending, envelope, compact)
  if type(compact) == 'string' and compact ~= '' and redis.call('EXISTS', hook) == 0
      and redis.call('EXISTS', list) == 0 then
    local n = redis.call('HINCRBY', row, 'en', 1)
    redis.call('HSET', row, 'e' .. n, compact)
    return n, 0
  end
  local n, hooked = stream_append(list, hook, pending, envelope)
  -- A list begun after the row (a record too long to be compact) goes with the row.
  if n == 1 then
    local at = redis.call('PEXPIRETIME', row)
    if at > 0 then redis.call('PEXPIREAT', list, at) end
  end
  return n, hooked
end

-- The `authentication` event of a send for the status its script decided, and its compact
-- record (nil when it has none, or one longer than the 64 bytes a row keeps: MAX_COMPACT of
-- src/verify/row.ts), from `c`, a CreatedEvent of src/verify/store.ts: '' when the event is not
-- recorded for that status.
local function created_event(c, status)
  if type(c) ~= 'table' then return '', nil end
  local listed = false
  for _, s in ipairs(c.statuses) do
    if s == status then listed = true end
  end
  if not listed then return '', nil end
  local event = c.event[2] == nil and c.event[1] or (c.event[1] .. status .. c.event[2])
  local compact = nil
  if type(c.compact) == 'table' then
    compact = c.compact[1] .. status .. c.compact[2]
    if #compact > 64 then compact = nil end
  end
  return event, compact
end

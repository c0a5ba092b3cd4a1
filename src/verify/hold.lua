-- Holds: a charged message whose provider answer is not yet recorded (see hold-store.ts, Hold).
-- hold = {id, issuedAt, staleMs, deadline, sealed, owner, provider, route}: `provider` carries the
-- message (recovery re-sends through it only), `route` the destination of the route that chose it; release: the JSON list of the keys a
-- release needs (hold-store.ts releaseKeys).

-- True when Redis runs this later than the caller could still be waiting for the answer
-- (its command timed out, or ioredis replayed it after a reconnect): then nothing may change.
local function hold_stale(hold)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return ms > hold.issuedAt + hold.staleMs
end

-- Records the hold of a charge just made: in the customer's holds by deadline, and its hash.
local function hold_record(holds, key, hold, price, member, kind, release)
  redis.call('ZADD', holds, hold.deadline, hold.id)
  redis.call('HSET', key, 'price', tostring(price), 'member', member, 'kind', kind,
    'sealed', hold.sealed, 'owner', hold.owner, 'release', release, 'provider', hold.provider or '',
    'route', hold.route or '')
end

-- The index of customers that may have holds (see keys.ts, holdIndex): a sorted set whose
-- score is the issue time of the latest send or retry that listed the customer (ZADD GT).
-- Customers listed by an earlier version (a plain set) move in first, scored now: any send that
-- listed them there was issued before now.
-- KEYS: 1 the index, 2 the earlier set (same hash tag). Returns {'listed', customer, score, ...}.
local indexKey = KEYS[1]
local earlierIndexKey = KEYS[2]
if redis.call('EXISTS', earlierIndexKey) == 1 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, customer in ipairs(redis.call('SMEMBERS', earlierIndexKey)) do
    redis.call('ZADD', indexKey, 'GT', now, customer)
  end
  redis.call('DEL', earlierIndexKey)
end
local listed = redis.call('ZRANGE', indexKey, 0, -1, 'WITHSCORES')
table.insert(listed, 1, 'listed')
return listed

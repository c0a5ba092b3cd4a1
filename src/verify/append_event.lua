-- Appends one event to an authentication's list, and marks it for webhook delivery when the
-- authentication has a callback. KEYS: 1 events, 2 hook, 3 webhook pending set.
-- ARGV[1]: the envelope JSON. Returns 0 when the events list is gone (expired), 1 when
-- appended, 2 when appended and awaiting webhook delivery.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SADD', KEYS[3], KEYS[1])
  return 2
end
return 1

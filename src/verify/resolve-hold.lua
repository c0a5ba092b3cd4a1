-- Resolves a hold once: `commit` keeps the charge (the provider accepted the message);
-- `release` refunds it, frees its place in the windows and removes the authentication (send)
-- or restores the previous code (retry), as nothing was sent. A hold already resolved is left
-- alone, so racing owners and recoveries cannot charge or refund twice.
-- KEYS: 1 the customer's holds, 2 the hold, 3 account, 4 month spend, 5 auth, 6 events,
--       7 hook, 8 webhook pending set, 9..n windows the send was recorded in
-- ARGV: 1 hold id, 2 commit | release, and optionally 3 the sealed message and 4 the deadline of
--       the hold one caller recorded: then only that hold is resolved, and only while no recovery
--       has claimed it (a claim moves the deadline), else nothing is done.
-- Returns 1 when this call resolved the hold, 0 when it was already resolved (or left alone).
local h = redis.call('HMGET', KEYS[2], 'price', 'member', 'kind', 'sealed')
if not h[1] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
if ARGV[3] and (h[4] ~= ARGV[3] or tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1])) ~= tonumber(ARGV[4])) then
  return 0
end
if ARGV[2] == 'release' then
  local price = tonumber(h[1])
  redis.call('HINCRBY', KEYS[3], 'balance_micros', price)
  redis.call('DECRBY', KEYS[4], price)
  for i = 9, #KEYS do redis.call('ZREM', KEYS[i], h[2]) end
  if h[3] == 'send' then
    redis.call('DEL', KEYS[5])
    stream_drop(KEYS[6], KEYS[7], KEYS[8])
  else
    local p = redis.call('HMGET', KEYS[5], 'prev_code_hash', 'prev_next_retry_at_ms')
    if p[1] then
      redis.call('HSET', KEYS[5], 'code_hash', p[1], 'next_retry_at_ms', p[2])
      redis.call('HINCRBY', KEYS[5], 'attempts', -1)
      redis.call('HINCRBY', KEYS[5], 'retries', -1)
    end
  end
end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return 1

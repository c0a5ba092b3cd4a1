-- Undoes a send or retry whose message the provider did not accept: refunds the charge, frees
-- its place in the windows, and removes the authentication (send) or restores the previous
-- code (retry). Nothing was sent, so nothing stays charged.
-- KEYS: 1 account, 2 month spend, 3 auth, 4 events, 5 hook, 6 webhook pending set,
--       7..n windows the send was recorded in
-- ARGV[1]: JSON {price, member, kind: "send" | "retry"}.
local a = cjson.decode(ARGV[1])
redis.call('HINCRBY', KEYS[1], 'balance_micros', a.price)
redis.call('DECRBY', KEYS[2], a.price)
for i = 7, #KEYS do redis.call('ZREM', KEYS[i], a.member) end
if a.kind == 'send' then
  redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
  redis.call('SREM', KEYS[6], KEYS[4])
else
  local h = redis.call('HMGET', KEYS[3], 'prev_code_hash', 'prev_next_retry_at_ms')
  if h[1] then
    redis.call('HSET', KEYS[3], 'code_hash', h[1], 'next_retry_at_ms', h[2])
    redis.call('HINCRBY', KEYS[3], 'attempts', -1)
    redis.call('HINCRBY', KEYS[3], 'retries', -1)
  end
end
return 1

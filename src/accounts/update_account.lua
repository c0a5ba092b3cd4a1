-- Changes an account only if it exists, so that no command can create a half account.
-- KEYS[1] account hash. ARGV: op ("status" | "credit"), value.
-- Returns nil for an unknown account, else the new status or balance.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
if ARGV[1] == 'status' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2])
  return ARGV[2]
end
if ARGV[1] == 'credit' then
  return tostring(redis.call('HINCRBY', KEYS[1], 'balance_micros', ARGV[2]))
end
return redis.error_reply('unknown operation ' .. ARGV[1])

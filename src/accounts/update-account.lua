-- Changes an account only if it exists, so that no command can create a half account.
-- KEYS[1] account hash. ARGV: op ("status" | "credit" | "template"), value(s).
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
if ARGV[1] == 'template' then
  local templates = cjson.decode(redis.call('HGET', KEYS[1], 'templates') or '{}')
  templates[ARGV[2]] = templates[ARGV[2]] or {}
  templates[ARGV[2]][ARGV[3]] = ARGV[4]
  redis.call('HSET', KEYS[1], 'templates', cjson.encode(templates))
  return 'ok'
end
return redis.error_reply('unknown operation ' .. ARGV[1])

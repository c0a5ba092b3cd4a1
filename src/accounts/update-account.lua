-- Changes an account only if it exists, so that no command can create a half account.
-- ARGV: op ("status" | "credit" | "template" | "channels"), its value (the status, the credit in
-- millionths, the template id, the channels comma separated), and for a template its language and text.
-- Returns {'not_found'} for an unknown account, else {'updated', the new status or balance}.
local accountKey = KEYS[1]
local op = ARGV[1]
local value = ARGV[2]
local language = ARGV[3]
local text = ARGV[4]
if redis.call('EXISTS', accountKey) == 0 then
  return {'not_found'}
end
if op == 'status' then
  redis.call('HSET', accountKey, 'status', value)
  return {'updated', value}
end
if op == 'credit' then
  return {'updated', tostring(redis.call('HINCRBY', accountKey, 'balance_micros', value))}
end
if op == 'channels' then
  redis.call('HSET', accountKey, 'channels', value)
  return {'updated', value}
end
if op == 'template' then
  local templates = cjson.decode(redis.call('HGET', accountKey, 'templates') or '{}')
  templates[value] = templates[value] or {}
  templates[value][language] = text
  redis.call('HSET', accountKey, 'templates', cjson.encode(templates))
  return {'updated'}
end
return redis.error_reply('unknown operation ' .. op)

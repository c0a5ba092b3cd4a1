-- Sliding window logs, shared by every script that limits sends: a rule is
-- {limit, windowSeconds}, or null when the rule is off; uses are scored by time (ms).
local function window_full(key, rule, now)
  if type(rule) ~= 'table' then return false end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - rule.windowSeconds * 1000)
  return redis.call('ZCARD', key) >= rule.limit
end

local function window_record(key, rule, now, member)
  if type(rule) ~= 'table' then return end
  redis.call('ZADD', key, now, member)
  redis.call('PEXPIRE', key, rule.windowSeconds * 1000)
end

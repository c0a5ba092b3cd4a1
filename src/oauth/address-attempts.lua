-- The client authentications of one client address at the token endpoint: failures in a sliding
-- window (KEYS[1], scored by time) and attempts in flight (KEYS[2], scored by their start). An
-- attempt may start only while failures + attempts in flight < limit, so concurrent wrong
-- secrets cannot pass the limit; a success gives its place back and counts for nothing.
-- ARGV[1]: JSON {op: "begin" | "fail", now, member, staleMs, rule: {limit, windowSeconds}}.
-- begin answers {0, 0} when the attempt may go on (it is then in flight), {ms, 0} when failures
-- fill the window (ms until one frees), {0, 1} when attempts in flight fill it (try again soon).
-- fail ends an attempt in flight and records it as a failure, answering {0, 0}. A success ends
-- it with a plain ZREM of its member from KEYS[2] (client-credentials.ts).
local a = cjson.decode(ARGV[1])
local failures, inflight = KEYS[1], KEYS[2]
local windowMs = a.rule.windowSeconds * 1000

if a.op == 'fail' then
  redis.call('ZREM', inflight, a.member)
  redis.call('ZADD', failures, a.now, a.member)
  redis.call('PEXPIRE', failures, windowMs)
  return {0, 0}
end

redis.call('ZREMRANGEBYSCORE', failures, '-inf', a.now - windowMs)
-- An attempt in flight for longer than staleMs never ended (its process stopped, or Redis did
-- not answer its end): it holds no place, since no secret was found wrong.
redis.call('ZREMRANGEBYSCORE', inflight, '-inf', a.now - a.staleMs)
local failed = redis.call('ZCARD', failures)
if failed >= a.rule.limit then
  local oldest = redis.call('ZRANGE', failures, 0, 0, 'WITHSCORES')
  local frees = tonumber(oldest[2]) + windowMs - a.now
  if frees < 1 then frees = 1 end
  return {frees, 0}
end
if failed + redis.call('ZCARD', inflight) >= a.rule.limit then return {0, 1} end
redis.call('ZADD', inflight, a.now, a.member)
redis.call('PEXPIRE', inflight, math.max(windowMs, a.staleMs * 2))
return {0, 0}

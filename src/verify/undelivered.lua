-- A message reported undelivered or rejected (docs/routing.md#undelivered): refunded once, and,
-- when it carried the code still to check, still alive and not re-sent yet, handed back for one
-- re-send through the next provider (its sealed message, kept beside the row while the code lives
-- when the route has another provider: `<auth>:msg`, built here from the row's key). A message of
-- a verification with several channels (docs/v2-api.md#fallback) is refunded at its own price and
-- moves the verification to its next channel instead of that re-send, when it has one and is still
-- on the message's channel (channels.lua).
-- A repeated report changes nothing.
-- KEYS: 1 the authentication, 2 the account, 3 the month's spend.
-- ARGV: 1 the attempt, 2 '1' when the message was itself a re-send, 3 now (ms), and for a message of
-- several channels 4 its channel, 5 its price.
-- Returns {'resend', price, sealed}, {'fallback', price, channel, sealed code}, {'refunded', price},
-- {'repeat'} or {'gone'}.
local authKey = KEYS[1]
local accountKey = KEYS[2]
local spendKey = KEYS[3]
local attempt = ARGV[1]
local resent = ARGV[2]
local now = ARGV[3]
local channel = ARGV[4]
local own = ARGV[5]
local h = redis.call('HMGET', authKey, 'validated', 'expires_at_ms', 'attempts', 'code_attempt', 'm',
  'price_micros')
h[7] = redis.call('GET', authKey .. ':msg')
if not h[3] then return {'gone'} end
local several = channel and channel ~= ''
local mark = 'u' .. attempt .. (resent == '1' and 'r' or '') .. (several and channel or '')
if redis.call('HSETNX', authKey, mark, '1') == 0 then return {'repeat'} end
local price = tonumber((several and own) or h[5] or h[6] or '0') or 0
if price > 0 then
  redis.call('HINCRBY', accountKey, 'balance_micros', price)
  redis.call('DECRBY', spendKey, price)
end
if several then
  -- The next channel takes the place of the re-send through another provider.
  local nextChannel, sealed = next_channel(authKey, attempt, channel, now)
  if nextChannel then return {'fallback', price, nextChannel, sealed} end
  return {'refunded', price}
end
local current = tonumber(h[4] or h[3])
if resent ~= '1' and h[1] ~= '1' and tonumber(h[2] or '0') > tonumber(now) and current == tonumber(attempt)
    and h[7] and redis.call('HSETNX', authKey, 'r' .. attempt, '1') == 1 then
  return {'resend', price, h[7]}
end
return {'refunded', price}

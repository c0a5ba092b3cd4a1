-- Charges a re-send the provider accepted (docs/routing.md#undelivered), once: the price the report
-- before it refunded, while the authentication still exists.
-- KEYS: 1 the authentication, 2 the account, 3 the month's spend. ARGV: 1 the attempt, 2 the price (micros).
local authKey = KEYS[1]
local accountKey = KEYS[2]
local spendKey = KEYS[3]
local attempt = ARGV[1]
local price = tonumber(ARGV[2])
if redis.call('EXISTS', authKey) == 0 or price <= 0 then return {'none'} end
if redis.call('HSETNX', authKey, 'c' .. attempt, '1') == 0 then return {'charged'} end
redis.call('HINCRBY', accountKey, 'balance_micros', -price)
redis.call('INCRBY', spendKey, price)
return {'charged'}

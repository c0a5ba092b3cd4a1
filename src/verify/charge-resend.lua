-- Charges a message sent after its attempt's first, once the provider accepted it: the re-send of
-- a message reported undelivered (docs/routing.md#undelivered), or a code's message on the next
-- channel (docs/v2-api.md#fallback), while the authentication still exists. `mark` names the
-- message in the row, so that it is charged once however often this runs.
-- KEYS: 1 the authentication, 2 the account, 3 the month's spend.
-- ARGV: 1 the attempt, 2 the price (micros), 3 the mark ('' for the re-send's, `c<attempt>`).
local authKey = KEYS[1]
local accountKey = KEYS[2]
local spendKey = KEYS[3]
local attempt = ARGV[1]
local price = tonumber(ARGV[2])
local mark = ARGV[3]
if redis.call('EXISTS', authKey) == 0 or price <= 0 then return {'none'} end
if not mark or mark == '' then mark = 'c' .. attempt end
if redis.call('HSETNX', authKey, mark, '1') == 0 then return {'charged'} end
redis.call('HINCRBY', accountKey, 'balance_micros', -price)
redis.call('INCRBY', spendKey, price)
return {'charged'}

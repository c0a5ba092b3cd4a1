-- One code-carrying send through the engine on its own, for the callers whose send is not a
-- verification script (session login and step-up codes, `ringfence fraud simulate`): decides,
-- records a block or would_block, and counts the send as sent unless it is blocked (the caller
-- sends the message next). KEYS: the tenant's policy key, then the number's and the sources'
-- (src/fraud/engine.ts fraudTail); engine.lua (prepended) names the others.
-- Returns {action, rule, detail}.
local policyKey = KEYS[1]
local tailKeys = { unpack(KEYS, 2) }
local f = cjson.decode(ARGV[1])
local k = fraud_keys(policyKey, tailKeys, f)
local decision = fraud_judge(k, f)
if decision[1] ~= 'block' then fraud_count(k.all, k.index, k.sent, k.dests, f, 'sent') end
return decision

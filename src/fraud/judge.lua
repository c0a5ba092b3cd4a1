-- One code-carrying send through the engine on its own, for the callers whose send is not a
-- verification script (session login and step-up codes, `ringfence fraud simulate`): decides,
-- records a block or would_block, and counts the send as sent unless it is blocked (the caller
-- sends the message next). engine.lua is prepended.
-- Returns {action, rule, detail}.
local policyKey = KEYS[1]
local allKey = KEYS[2]
local indexKey = KEYS[3]
local decisionsKey = KEYS[4]
local sentKey = KEYS[5]
local destKeys = { unpack(KEYS, 6) }
local f = cjson.decode(ARGV[1])
local k = { policy = policyKey, all = allKey, index = indexKey, decisions = decisionsKey, sent = sentKey, dests = destKeys }
local decision = fraud_judge(k, f)
if decision[1] ~= 'block' then fraud_count(allKey, indexKey, sentKey, destKeys, f, 'sent') end
return decision

-- Drops from a tenant's destinations index the members whose counters hash is gone (expired
-- FRAUD_BASELINE_DAYS + 1 days after its last send), each checked here so that a send writing
-- one meanwhile keeps it listed. `members` names the destination id of each key, in order.
-- Returns {'pruned', <members removed>}.
local indexKey = KEYS[1]
local destKeys = {} for i = 2, #KEYS do destKeys[#destKeys + 1] = KEYS[i] end
local members = cjson.decode(ARGV[1])
local removed = 0
for i, key in ipairs(destKeys) do
  if redis.call('EXISTS', key) == 0 then
    removed = removed + redis.call('ZREM', indexKey, members[i])
  end
end
return { 'pruned', removed }

-- The channel a V2 code falls back to (docs/v2-api.md#fallback), taken once: while attempt `attempt`'s
-- code is the one to check, unchecked and alive, and the row is still on channel `from`, the row
-- moves to the planned channel after it; answers that channel and the attempt's sealed code, or nil.
-- The row keeps: `ch` the planned channels (comma separated), `chn` the channel it is on (absent:
-- the first), `sc<attempt>` each attempt's code sealed.
local function next_channel(authKey, attempt, from, now)
  local r = redis.call('HMGET', authKey, 'validated', 'expires_at_ms', 'attempts', 'code_attempt', 'ch',
    'chn', 'sc' .. attempt)
  if not r[3] or r[1] == '1' or tonumber(r[2] or '0') <= tonumber(now) then return nil end
  if tonumber(r[4] or r[3]) ~= tonumber(attempt) or not r[5] or not r[7] then return nil end
  local planned = {}
  for c in string.gmatch(r[5], '[^,]+') do planned[#planned + 1] = c end
  if (r[6] or planned[1]) ~= from then return nil end
  for i = 1, #planned - 1 do
    if planned[i] == from then
      redis.call('HSET', authKey, 'chn', planned[i + 1])
      return planned[i + 1], r[7]
    end
  end
  return nil
end

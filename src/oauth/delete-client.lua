-- Deletes a client of one app. KEYS: 1 client hash, 2 in-flight counter. ARGV[1]: app id.
-- Returns -1 when the app has no such client, else the tokens being issued right now.
if redis.call('HGET', KEYS[1], 'app_id') ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
return tonumber(redis.call('GET', KEYS[2]) or '0')

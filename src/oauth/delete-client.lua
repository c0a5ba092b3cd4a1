-- Deletes a client of one app. KEYS: 1 client hash. ARGV[1]: app id.
-- Returns 1 when deleted, 0 when the app has no such client.
if redis.call('HGET', KEYS[1], 'app_id') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1

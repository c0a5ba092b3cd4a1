-- Starts issuing a token for a client, only while the client exists: a lease that a deletion
-- waits for, so no token is issued after the deletion has answered. Answers the client's fields
-- too, so that authenticating the client costs no other round trip.
-- KEYS: 1 client hash, 2 in-flight counter. Returns 0 for an unknown client, else the client
-- hash as a flat field/value list.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], 30000)
return redis.call('HGETALL', KEYS[1])

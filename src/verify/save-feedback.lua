-- Records the onboarding feedback on one number of a customer, unless the same status is already
-- recorded (the original API's duplicated_feedback_status). KEYS: 1 the number's feedback hash.
-- ARGV: 1 status, 2 feedback uuid, 3 time (RFC 3339). Returns 1 when recorded, 0 for a repeat.
if redis.call('HGET', KEYS[1], 'status') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'uuid', ARGV[2], 'updated_at', ARGV[3])
return 1

-- Records the onboarding feedback on one number of a customer, unless the same status is already
-- recorded (the original API's duplicated_feedback_status). KEYS: 1 the number's feedback hash.
-- ARGV: 1 status, 2 feedback uuid, 3 time (RFC 3339). Returns {'recorded'}, or {'repeat'}.
local feedbackKey = KEYS[1]
local status = ARGV[1]
local uuid = ARGV[2]
local at = ARGV[3]
if redis.call('HGET', feedbackKey, 'status') == status then return {'repeat'} end
redis.call('HSET', feedbackKey, 'status', status, 'uuid', uuid, 'updated_at', at)
return {'recorded'}

-- Records one use in a sliding window when it has room (window.lua is prepended).
-- KEYS[1]: the window. ARGV[1]: JSON {now, rule, member}. Returns 1 when taken, 0 when full.
local a = cjson.decode(ARGV[1])
if window_full(KEYS[1], a.rule, a.now) then return 0 end
window_record(KEYS[1], a.rule, a.now, a.member)
return 1

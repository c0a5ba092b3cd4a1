import { RingfenceError } from "../errors.js";
import { AuthFailures } from "../otp/failures.js";
import { WindowKeys } from "../otp/keys.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { WindowRule } from "../otp/code.js";

/** The setting whose window this is, named in refusals (the metric, the request log). */
export const KEY_FAILURES_SETTING = "API_KEY_FAILURES_IP";

/**
 * Failed API-key authentications per client address (API_KEY_FAILURES_IP), for every caller that
 * authenticates with an account's key, V1 and V2 (src/otp/failures.ts says how they are counted).
 */
export function keyFailures(redis: RedisClient, keys: Keys, rule: WindowRule): AuthFailures {
  const windows = new WindowKeys(keys);
  return new AuthFailures(redis, {
    setting: KEY_FAILURES_SETTING,
    rule,
    counter: (subject) => windows.apiKeyFailures(subject),
    isWrong: (err) =>
      err instanceof RingfenceError && (err.code === "account_invalid" || err.code === "invalid_api_key"),
    refusal: "too many wrong API keys from this address; try again later",
  });
}

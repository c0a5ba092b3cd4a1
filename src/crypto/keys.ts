import type { Keys } from "../redis/client.js";

/** Where the check value of SECRETS_KEY is kept (src/crypto/key-check.ts): one well-known key. */
export function secretsCheckKey(keys: Keys): string {
  return keys.key("secrets", "check");
}

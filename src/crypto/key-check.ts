import { timingSafeEqual } from "node:crypto";
import { ConfigError } from "../settings/define.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { secretsCheckKey } from "./keys.js";
import type { Secrets } from "./secrets.js";

/**
 * Refuses to run against a Redis whose data was sealed with another SECRETS_KEY: hashes would
 * never match and sealed values never open, so the service would fail every call and the CLI would
 * print keys that never work. The first process to use the data stores the key's check value
 * (`Secrets.checkValue`, one key under REDIS_KEY_PREFIX, so it works on a Cluster); every later
 * start compares with it. Data stored before the check value existed is tried by `opensStoredData`.
 */
export async function checkSecretsKey(
  redis: RedisClient,
  keys: Keys,
  secrets: Secrets,
  options: { prefix: string; opensStoredData: () => Promise<boolean> },
): Promise<void> {
  const key = secretsCheckKey(keys);
  let stored = await redis.get(key);
  if (stored === null) {
    if (!(await options.opensStoredData())) throw mismatch(options.prefix);
    // Of two first starts with different keys, one writes; the other reads it back and is refused.
    if ((await redis.set(key, secrets.checkValue, "NX")) === "OK") return;
    stored = await redis.get(key);
  }
  if (stored === null || !sameValue(stored, secrets.checkValue)) throw mismatch(options.prefix);
}

function sameValue(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function mismatch(prefix: string): ConfigError {
  return new ConfigError(
    `invalid SECRETS_KEY: the data in Redis under REDIS_KEY_PREFIX ${JSON.stringify(prefix)} was sealed with another SECRETS_KEY`,
  );
}

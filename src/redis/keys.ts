import type { Keys } from "./client.js";

/**
 * The channel on which changes of `topic` are announced to the caches that watch it
 * (src/redis/watched-cache.ts): `changed:{<topic>}`. Each domain names its topic in its own keys.ts.
 */
export function changeChannel(keys: Keys, topic: string): string {
  return keys.key("changed", topic);
}

/**
 * A stream's delivery state in Redis (stream.ts names the keys): how far it is delivered, the
 * scripts that move its cursor and release its lock, and taking it out of its pending set.
 */
import type { RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import type { OutboxKeys } from "./keys.js";

const file = (name: string) => new URL(`./${name}.lua`, import.meta.url);
export const advanceCursor = defineScript({
  file: file("advance-cursor"),
  keys: ["stream", "delivered", "lock"],
  argv: ["token", "expected", "count", "lockTtlMs"],
});
const finishStream = defineScript({
  file: file("finish-stream"),
  keys: ["stream", "delivered", "pending", "hook"],
  argv: [],
});
export const releaseLock = defineScript({ file: file("release-lock"), keys: ["lock"], argv: ["token"] });

/** The stream's length and how many of its envelopes were delivered. */
export async function position(
  redis: RedisClient,
  list: string,
  k: OutboxKeys,
): Promise<{ length: number; delivered: number }> {
  const [length, delivered] = await Promise.all([redis.llen(list), redis.get(k.delivered)]);
  return { length, delivered: Number(delivered ?? "0") };
}

/** Takes a fully delivered stream out of its pending set; true when it was fully delivered. */
export async function finish(redis: RedisClient, list: string, k: OutboxKeys): Promise<boolean> {
  const keys = { stream: list, delivered: k.delivered, pending: k.pending, hook: k.hook };
  const [status] = (await finishStream.run(redis, keys, {})) as ["finished" | "pending"];
  return status === "finished";
}

import type { Keys } from "../redis/client.js";

/**
 * The keys beside a webhook stream (src/webhooks/stream.ts), sharing the hash tag of its list:
 * - `<list>:hook` HASH {url, secret_ref, expire_delivered_at?}: where to POST and which secret signs
 *   (written by the domain), and, for a stream the domain appends nothing to later, when it may go
 *   once delivered (ms; the outbox cuts the expiry of the stream, hook and count to it);
 * - `<list>:delivered` STRING: how many envelopes of the list were delivered (absent = 0; outbox only);
 * - `<list>:lock` STRING: the outbox's per-stream delivery lock (outbox only);
 * - `<prefix>whpending:{<tag>}` SET: holds `<list>` while it has undelivered envelopes (the domain
 *   SADDs on every append; the outbox SREMs once LLEN == delivered, atomically).
 */
export interface OutboxKeys {
  hook: string;
  delivered: string;
  pending: string;
  lock: string;
}

export function outboxKeys(listKey: string, keys: Keys): OutboxKeys {
  return {
    hook: `${listKey}:hook`,
    delivered: `${listKey}:delivered`,
    pending: keys.key("whpending", hashTag(listKey)),
    lock: `${listKey}:lock`,
  };
}

/** The pattern matching every pending set (SCAN, by the recovery sweep). */
export function allPendingSets(keys: Keys): string {
  return keys.key("whpending", "*");
}

/** The prefix of the outbox queue's BullMQ keys: one hash tag, so BullMQ's scripts run on a Cluster. */
export function queuePrefix(redisKeyPrefix: string): string {
  return `{${redisKeyPrefix}bull}`;
}

/** The Redis Cluster hash tag of a key: what lies between its first `{` and the next `}`. */
export function hashTag(key: string): string {
  const open = key.indexOf("{");
  const close = open < 0 ? -1 : key.indexOf("}", open + 1);
  if (close <= open + 1) throw new Error(`webhook stream key has no hash tag: ${key}`);
  return key.slice(open + 1, close);
}

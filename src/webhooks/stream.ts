import { randomUUID } from "node:crypto";
import { z } from "zod";
import { LuaScript, type Keys, type RedisClient } from "../redis/client.js";

/**
 * A webhook stream is a Redis LIST of JSON envelopes, appended to by the domain and delivered in
 * order by the WebhookOutbox. Beside the list, with keys that share its hash tag:
 * - `<list>:hook` HASH {url, secret_ref}: where to POST and which secret signs (written by the domain);
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
    pending: keys.key(PENDING_KIND, hashTag(listKey)),
    lock: `${listKey}:lock`,
  };
}

export const PENDING_KIND = "whpending";

/** The Redis Cluster hash tag of a key: what lies between its first `{` and the next `}`. */
export function hashTag(key: string): string {
  const open = key.indexOf("{");
  const close = open < 0 ? -1 : key.indexOf("}", open + 1);
  if (close <= open + 1) throw new Error(`webhook stream key has no hash tag: ${key}`);
  return key.slice(open + 1, close);
}

/** What the domain writes once per stream in `<list>:hook`. */
export interface WebhookHook {
  url: string;
  /** Handed to `resolveSecret` at send time (an account or app id), never the secret itself. */
  secretRef: string;
}

/** The envelope every webhook carries; `created_at` is an ISO 8601 time. */
export interface WebhookEnvelope {
  id: string;
  type: string;
  created_at: string;
  correlation_id?: string;
  payload: unknown;
}

/** A new envelope, serialized: the exact bytes that will be POSTed (and signed). */
export function newEnvelope(input: {
  type: string;
  payload: unknown;
  correlationId?: string;
  id?: string;
  createdAt?: Date;
}): string {
  const envelope: WebhookEnvelope = {
    id: input.id ?? randomUUID(),
    type: input.type,
    created_at: (input.createdAt ?? new Date()).toISOString(),
    ...(input.correlationId === undefined ? {} : { correlation_id: input.correlationId }),
    payload: input.payload,
  };
  return JSON.stringify(envelope);
}

const envelopeHead = z.object({
  id: z.string().min(1),
  created_at: z.string().refine((v) => !Number.isNaN(Date.parse(v)), "must be an ISO 8601 time"),
});

/** The two fields the outbox needs of a stored envelope; undefined when it cannot be read. */
export function readEnvelopeHead(raw: string): { id: string; createdAtMs: number } | undefined {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const parsed = envelopeHead.safeParse(json);
  return parsed.success ? { id: parsed.data.id, createdAtMs: Date.parse(parsed.data.created_at) } : undefined;
}

const appendEvent = LuaScript.fromFile(new URL("./append_event.lua", import.meta.url));

/**
 * Appends one envelope to a stream with the commands a domain script must run (see
 * append_event.lua), for callers that have no state change of their own to record with it.
 * Call `WebhookOutbox.kick(listKey)` afterwards. Returns the stream's new length.
 */
export async function appendWebhookEvent(
  redis: RedisClient,
  keys: Keys,
  listKey: string,
  hook: WebhookHook,
  envelope: string,
): Promise<number> {
  const k = outboxKeys(listKey, keys);
  return Number(
    await appendEvent.run(redis, [listKey, k.hook, k.pending], [envelope, hook.url, hook.secretRef]),
  );
}

import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { outboxKeys } from "./keys.js";

/**
 * A webhook stream is a Redis LIST of JSON envelopes, appended to by the domain and delivered in
 * order by the WebhookOutbox, beside the keys that src/webhooks/keys.ts names (`outboxKeys`).
 */

/** What the domain writes once per stream in `<list>:hook`. */
export interface WebhookHook {
  url: string;
  /** Handed to `resolveSecret` at send time (`secretRef`), never the secret itself. */
  secretRef: string;
}

/**
 * The `secret_ref` of a stream: `<kind>:<id>`. The kind names the owner of the secret (an
 * account, an app webhook subscription) and so the resolver that finds it (`SecretResolvers`).
 */
export function secretRef(kind: string, id: string): string {
  return `${kind}:${id}`;
}

/** Finds the secret that signs a stream, by the kind of its `secret_ref`: one resolver per owner. */
export class SecretResolvers {
  private readonly byKind = new Map<string, (id: string, ref: string) => Promise<string | undefined>>();

  register(kind: string, resolver: (id: string, ref: string) => Promise<string | undefined>): this {
    this.byKind.set(kind, resolver);
    return this;
  }

  /** The secret of a `secret_ref`; undefined when no resolver knows it (or its owner is gone). */
  readonly resolve = async (ref: string): Promise<string | undefined> => {
    const colon = ref.indexOf(":");
    const resolver = colon > 0 ? this.byKind.get(ref.slice(0, colon)) : undefined;
    return resolver === undefined ? undefined : resolver(ref.slice(colon + 1), ref);
  };
}

/** The envelope every webhook carries; `created_at` is an ISO 8601 time. */
export interface WebhookEnvelope<T extends string = string, P = unknown> {
  id: string;
  type: T;
  created_at: string;
  correlation_id?: string;
  payload: P;
}

/** A new envelope; an empty or absent `correlationId` is left out. */
export function makeEnvelope<T extends string, P>(input: {
  type: T;
  payload: P;
  correlationId?: string | undefined;
  id?: string;
  createdAt?: Date | string;
}): WebhookEnvelope<T, P> {
  const createdAt = input.createdAt ?? new Date();
  return {
    id: input.id ?? randomUUID(),
    type: input.type,
    created_at: typeof createdAt === "string" ? createdAt : createdAt.toISOString(),
    ...(input.correlationId === undefined || input.correlationId === ""
      ? {}
      : { correlation_id: input.correlationId }),
    payload: input.payload,
  };
}

/** A new envelope, serialized: the exact bytes that will be POSTed (and signed). */
export function newEnvelope(input: Parameters<typeof makeEnvelope>[0]): string {
  return JSON.stringify(makeEnvelope(input));
}

/**
 * An envelope to be completed by the script that appends it with the correlation_id stored next
 * to its stream (`stream_correlated` in stream.lua), so the caller needs no read first: the
 * serialized envelope cut where the correlation_id goes. head + tail is the envelope without one.
 */
export interface CorrelatedEnvelope {
  head: string;
  tail: string;
}

export function correlatedEnvelope(
  input: Omit<Parameters<typeof makeEnvelope>[0], "correlationId">,
): CorrelatedEnvelope {
  const json = newEnvelope(input);
  // The fields before payload are an id, a type and a time: none can hold this text.
  const cut = json.indexOf(',"payload":');
  return { head: json.slice(0, cut), tail: json.slice(cut) };
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

/** The stream rules as Lua functions, prepended to every script that records events (stream.lua). */
export const STREAM_LIBRARY = new URL("./stream.lua", import.meta.url);

const appendEvent = defineScript({
  file: new URL("./append-event.lua", import.meta.url),
  libraries: [STREAM_LIBRARY],
  keys: ["stream", "hook", "pending"],
  argv: ["envelope", "url", "secretRef"],
});

/**
 * Appends one envelope to a stream with the commands a domain script must run (see
 * append-event.lua), for callers that have no state change of their own to record with it.
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
  const [, length] = (await appendEvent.run(
    redis,
    { stream: listKey, hook: k.hook, pending: k.pending },
    { envelope, url: hook.url, secretRef: hook.secretRef },
  )) as ["appended", number];
  return length;
}

import { randomBytes } from "node:crypto";
import { z } from "zod";
import { badField, RingfenceError } from "../errors.js";
import { errorMessage, type Logger } from "../log.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { CallScope } from "../observability/calls.js";
import { newSecret, type Secrets } from "../crypto/secrets.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import type { UnaryHandler } from "../rpc/binding.js";
import type {
  CreateAppWebhookRequest,
  CreateAppWebhookResponse,
} from "../gen/ringfence/session/v1/session_service.js";
import { outboxKeys } from "../webhooks/keys.js";
import { newEnvelope, secretRef, STREAM_LIBRARY } from "../webhooks/stream.js";
import { httpUrlField, NOT_HTTP_URL } from "../net/validate.js";
import { APP_ID } from "./app.js";
import { AppKeys } from "./keys.js";
import { appOf } from "./store.js";

/** The event types an app webhook may subscribe to (docs/session-api.md#app-webhooks). */
export const APP_EVENT_TYPES = [
  "session.created",
  "session.revoked",
  "scope.granted",
  "scope.consumed",
  "password.changed",
  "client.created",
  "client.deleted",
  "client.secret_rotated",
  "passkey.suspicious",
] as const;

export type AppEventType = (typeof APP_EVENT_TYPES)[number];

/** What a domain needs to tell an app's webhooks about an event. */
export interface AppEvents {
  /**
   * Records the event for every subscription of the app that wants it. Never rejects: a failure
   * is a line of `options.call`'s log (the call it is emitted for), or of the service's.
   */
  emit(
    appId: string,
    type: AppEventType,
    payload: Readonly<Record<string, unknown>>,
    options?: EmitOptions,
  ): Promise<void>;
}

export interface EmitOptions {
  correlationId?: string;
  /** The call the event is emitted for: its log names the call. */
  call?: CallScope;
}

export interface AppWebhook {
  id: string;
  url: string;
  events: AppEventType[];
  /** The signing secret, in clear: returned once, by `register`. */
  secret: string;
}

export interface AppWebhooksOptions {
  /** TTL of a stream, refreshed on every append; keep it above WEBHOOK_GIVE_UP_MS. Default 25 h. */
  streamTtlMs?: number;
}

/** `secret_ref` of a subscription's streams: `appwh:<app_id>:<sub_id>`. */
export const APP_WEBHOOK_REF_KIND = "appwh";
const SUB_ID = /^wh_[A-Za-z0-9_-]{22}$/;
const DEFAULT_STREAM_TTL_MS = 25 * 3_600_000;
/** Attempts at appending when the generation of the stream moves under us (another emitter rotated it). */
const APPEND_ATTEMPTS = 5;

const stored = z.object({
  url: z.string(),
  events: z.array(z.string()),
  secret_sealed: z.string(),
  created_at: z.string().optional(),
});
type StoredWebhook = z.infer<typeof stored>;

const appendAppEvent = defineScript({
  file: new URL("./append-app-event.lua", import.meta.url),
  libraries: [STREAM_LIBRARY],
  keys: ["gen", "stream", "hook", "delivered", "lock", "nextStream", "nextHook", "nextDelivered", "pending"],
  argv: ["generation", "envelope", "url", "secretRef", "ttl"],
});

/** True when a webhook `secret_ref` names an app webhook subscription (see `appWebhookSecret`). */
export function isAppWebhookRef(ref: string): boolean {
  return ref.startsWith(secretRef(APP_WEBHOOK_REF_KIND, ""));
}

/**
 * The signing secret of an app webhook subscription from its `secret_ref`; undefined when the ref
 * is not one, or the subscription does not exist. For the outbox's `resolveSecret`.
 */
export async function appWebhookSecret(
  redis: RedisClient,
  keys: Keys,
  secrets: Secrets,
  ref: string,
): Promise<string | undefined> {
  const [kind, appId, subId, ...rest] = ref.split(":");
  if (kind !== APP_WEBHOOK_REF_KIND || appId === undefined || subId === undefined || rest.length > 0) {
    return undefined;
  }
  if (!APP_ID.safeParse(appId).success || !SUB_ID.test(subId)) return undefined;
  const raw = await redis.hget(new AppKeys(keys).webhooks(appId), subId);
  const sub = raw === null ? undefined : parseStored(raw);
  return sub === undefined ? undefined : secrets.decrypt(sub.secret_sealed);
}

/**
 * Webhooks of session service apps. Keys, all under the app's hash tag (one slot per app):
 * - `app:{<app_id>}:webhooks` HASH: subscription id → JSON {url, events, secret_sealed, created_at};
 * - `appwh:{<app_id>}:<sub_id>:gen` STRING: generation of the subscription's stream (absent = 0);
 * - `appwh:{<app_id>}:<sub_id>:events:<gen>` LIST: the stream of a subscription (one per
 *   subscription at a time), with `<list>:hook` {url, secret_ref: `appwh:<app_id>:<sub_id>`} and the
 *   outbox's `<list>:delivered` / `<list>:lock`; pending in `whpending:{<app_id>}`.
 * Delivery is the WebhookOutbox's: ordered per subscription, at least once, signed with the
 * subscription's secret (kept only encrypted).
 */
export class AppWebhooks implements AppEvents {
  private readonly streamTtlMs: number;
  private readonly appKeys: AppKeys;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly secrets: Secrets,
    private readonly outbox: { kick(list: string): Promise<void> },
    private readonly log: Logger,
    options: AppWebhooksOptions = {},
  ) {
    this.streamTtlMs = options.streamTtlMs ?? DEFAULT_STREAM_TTL_MS;
    this.appKeys = new AppKeys(keys);
  }

  /** Subscribes a URL to event types of an app; the answer holds the signing secret, shown once. */
  async register(appId: string, input: { url: string; events: readonly string[] }): Promise<AppWebhook> {
    if (!APP_ID.safeParse(appId).success) throw new RingfenceError("not_found", "no such app");
    const url = validUrl(input.url);
    const events = validEvents(input.events);
    const id = `wh_${randomBytes(16).toString("base64url")}`;
    const secret = newSecret("whsec");
    const record: StoredWebhook = {
      url,
      events,
      secret_sealed: this.secrets.encrypt(secret),
      created_at: new Date().toISOString(),
    };
    await this.redis.hset(this.appKeys.webhooks(appId), id, JSON.stringify(record));
    return { id, url, events, secret };
  }

  /**
   * Appends the event to the stream of every subscription of the app that wants `type`, then asks
   * the outbox to deliver. Never rejects: what fails is logged (an appended event whose kick failed
   * is still delivered, after the outbox's next sweep).
   */
  async emit(
    appId: string,
    type: AppEventType,
    payload: Readonly<Record<string, unknown>>,
    { correlationId, call }: EmitOptions = {},
  ): Promise<void> {
    const log = call?.log ?? this.log;
    try {
      if (!APP_ID.safeParse(appId).success) return;
      const subs = await this.redis.hgetall(this.appKeys.webhooks(appId));
      const envelope = newEnvelope({
        type,
        payload,
        ...(correlationId === undefined ? {} : { correlationId }),
      });
      const wanted = Object.entries(subs).flatMap(([subId, raw]) => {
        const sub = parseStored(raw);
        if (sub === undefined) log.error("app webhook unreadable, skipped", { appId, subId });
        return sub?.events.includes(type) === true ? [{ subId, url: sub.url }] : [];
      });
      await Promise.all(wanted.map((sub) => this.append(appId, sub.subId, sub.url, envelope, type, log)));
    } catch (err) {
      log.error("app webhook event not recorded", { appId, type, error: errorMessage(err) });
    }
  }

  /** The secret for a `secret_ref` of this module (`appwh:<app_id>:<sub_id>`). */
  resolveSecret(ref: string): Promise<string | undefined> {
    return appWebhookSecret(this.redis, this.keys, this.secrets, ref);
  }

  /** The key of the current stream of a subscription (whichever generation it is at). */
  async streamKey(appId: string, subId: string): Promise<string> {
    return this.streamOf(appId, subId, Number((await this.redis.get(this.genKey(appId, subId))) ?? "0"));
  }

  private async append(
    appId: string,
    subId: string,
    url: string,
    envelope: string,
    type: AppEventType,
    log: Logger,
  ): Promise<void> {
    let list: string | undefined;
    try {
      list = await this.appendOnce(appId, subId, url, envelope);
    } catch (err) {
      log.error("app webhook event not recorded", { appId, subId, type, error: errorMessage(err) });
      return;
    }
    try {
      await this.outbox.kick(list);
    } catch (err) {
      log.warn("webhook delivery not started; the sweep will", {
        appId,
        subId,
        error: errorMessage(err),
      });
    }
  }

  private async appendOnce(appId: string, subId: string, url: string, envelope: string): Promise<string> {
    const genKey = this.genKey(appId, subId);
    const ref = secretRef(APP_WEBHOOK_REF_KIND, `${appId}:${subId}`);
    for (let attempt = 0; attempt < APPEND_ATTEMPTS; attempt++) {
      const gen = Number((await this.redis.get(genKey)) ?? "0");
      const current = this.streamOf(appId, subId, gen);
      const next = this.streamOf(appId, subId, gen + 1);
      const c = outboxKeys(current, this.keys);
      const n = outboxKeys(next, this.keys);
      const [status, list] = (await appendAppEvent.run(
        this.redis,
        {
          gen: genKey,
          stream: current,
          hook: c.hook,
          delivered: c.delivered,
          lock: c.lock,
          nextStream: next,
          nextHook: n.hook,
          nextDelivered: n.delivered,
          pending: c.pending,
        },
        { generation: gen, envelope, url, secretRef: ref, ttl: this.streamTtlMs },
      )) as ["appended", string] | ["moved"];
      if (status === "appended") return list;
    }
    throw new Error("the stream's generation kept moving");
  }

  private genKey(appId: string, subId: string): string {
    return this.appKeys.webhookGeneration(appId, subId);
  }

  private streamOf(appId: string, subId: string, gen: number): string {
    return this.appKeys.webhookStream(appId, subId, gen);
  }
}

/**
 * `POST /v2/session/apps/{app_id}/webhooks`: the subscription and its secret (once); the app is
 * the caller its binding authenticated (AppStore.managementKey).
 */
export function createAppWebhookHandler(
  webhooks: AppWebhooks,
  outbound: Pick<OutboundGuard, "checkUrl">,
): UnaryHandler<CreateAppWebhookRequest, CreateAppWebhookResponse> {
  return async (req, ctx) => {
    const app = appOf(ctx);
    // The cheap rules first, then the address (a DNS look-up).
    validUrl(req.url);
    validEvents(req.events);
    await outbound.checkUrl(req.url, "url");
    const created = await webhooks.register(app.appId, { url: req.url, events: req.events });
    ctx.setHeader("cache-control", "no-store");
    return { id: created.id, url: created.url, events: created.events, secret: created.secret };
  };
}

function parseStored(raw: string): StoredWebhook | undefined {
  try {
    const parsed = stored.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function validUrl(url: string): string {
  const parsed = WEBHOOK_URL.safeParse(url);
  if (!parsed.success) throw badField("url", parsed.error.issues[0]?.message ?? NOT_HTTP_URL);
  return url;
}

const WEBHOOK_URL = httpUrlField({ required: true });

function validEvents(events: readonly string[]): AppEventType[] {
  if (events.length === 0) {
    throw badField("events", `must hold at least one of ${APP_EVENT_TYPES.join(", ")}`);
  }
  const seen: AppEventType[] = [];
  events.forEach((event, i) => {
    const field = `events[${i}]`;
    if (!isAppEventType(event)) {
      throw badField(
        field,
        `${JSON.stringify(event.slice(0, 64))} is not an event type (${APP_EVENT_TYPES.join(", ")})`,
      );
    }
    if (seen.includes(event)) {
      throw badField(field, `"${event}" is listed twice`);
    }
    seen.push(event);
  });
  return seen;
}

function isAppEventType(event: string): event is AppEventType {
  return (APP_EVENT_TYPES as readonly string[]).includes(event);
}

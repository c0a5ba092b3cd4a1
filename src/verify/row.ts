import type { DeliveryState } from "../messaging/provider.js";
import type { Envelope } from "./model.js";

/**
 * How an authentication is kept in Redis (docs/capacity.md). The fields the scripts read
 * (`status`, `code_hash`, `validated`, `expires_at_ms`, `checks`, `attempts`, `retries`,
 * `next_retry_at_ms`, `api`, `correlation_id`) keep their names in every format; the rest is
 * written under short names, times as milliseconds, empty and zero values left out, so the row
 * stays a small listpack hash. Rows written before this format (`customer_uuid` present) are read
 * as they are.
 */
export interface RowFacts {
  /** The API that created it; only V2 is written (`api` absent is V1, as on the oldest rows). */
  api: "v1" | "v2";
  phoneNumber: string;
  countryCode: string;
  createdAt: string;
  expiresAt: string;
  expiresAtMs: number;
  correlationId: string;
  locale: string;
  templateId: string;
  from: string;
  appRealm: string;
  callbackUrl: string;
  /** The price of one message to this number when it was created, in millionths. */
  priceMicros: number;
  /** Digits of its codes (V2 `code_size`; V1 the service's OTP_LENGTH). */
  codeLength: number;
  /** The channels planned, in fallback order, comma separated; "" for SMS alone (channels.ts). */
  channels?: string | undefined;
  /**
   * With several channels planned, the first code sealed, for the next channel's message ("" else);
   * a retry's is `sc<attempt>` (retry-code.lua).
   */
  codeSealed?: string | undefined;
  signals: {
    ip: string;
    deviceId: string;
    deviceType: string;
    appVersion: string;
    osVersion: string;
    deviceModel: string;
    isReturningUser?: boolean | undefined;
  };
}

/** What a row holds besides its facts: what the scripts change. */
export interface RowState {
  status: string;
  validated: boolean;
  checks: number;
  retries: number;
  attempts: number;
  nextRetryAtMs: number;
  /** The provider that carried the last message accepted ('' when not known). */
  carriedBy?: string;
  /** The channel its messages go by now: the first planned until one fell back ('' for the first). */
  channel?: string;
}

/** Short names of the fields only the service reads (the compact format). */
const SHORT = {
  phoneNumber: "p",
  countryCode: "cc",
  createdAt: "c",
  locale: "l",
  templateId: "t",
  from: "f",
  appRealm: "r",
  callbackUrl: "u",
  priceMicros: "m",
  codeLength: "n",
  channels: "ch",
  codeSealed: "sc1",
  ip: "i",
  deviceId: "d",
  deviceType: "dt",
  appVersion: "av",
  osVersion: "ov",
  deviceModel: "dm",
  isReturningUser: "ru",
} as const;

/** The events kept in the row (compact records e1..en), see row-events.lua. */
const EVENT_COUNT = "en";

/** A time as it was given when it round-trips through milliseconds, else the text itself. */
function packTime(iso: string): string {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) && new Date(ms).toISOString() === iso ? String(ms) : iso;
}

function unpackTime(v: string | undefined): string {
  if (v === undefined) return "";
  return /^\d+$/.test(v) ? new Date(Number(v)).toISOString() : v;
}

/** The fields a new row is written with (send-code.lua adds its status and code). */
export function encodeRow(a: RowFacts): Record<string, string> {
  const s = a.signals;
  const all: Record<string, string> = {
    ...(a.api === "v2" ? { api: "v2" } : {}),
    expires_at_ms: String(a.expiresAtMs),
    correlation_id: a.correlationId,
    [SHORT.phoneNumber]: a.phoneNumber,
    [SHORT.countryCode]: a.countryCode,
    [SHORT.createdAt]: packTime(a.createdAt),
    [SHORT.locale]: a.locale,
    [SHORT.templateId]: a.templateId,
    [SHORT.from]: a.from,
    [SHORT.appRealm]: a.appRealm,
    [SHORT.callbackUrl]: a.callbackUrl,
    [SHORT.priceMicros]: a.priceMicros === 0 ? "" : String(a.priceMicros),
    [SHORT.codeLength]: a.codeLength === 0 ? "" : String(a.codeLength),
    [SHORT.channels]: a.channels ?? "",
    [SHORT.codeSealed]: a.codeSealed ?? "",
    [SHORT.ip]: s.ip,
    [SHORT.deviceId]: s.deviceId,
    [SHORT.deviceType]: s.deviceType,
    [SHORT.appVersion]: s.appVersion,
    [SHORT.osVersion]: s.osVersion,
    [SHORT.deviceModel]: s.deviceModel,
    [SHORT.isReturningUser]: s.isReturningUser === undefined ? "" : s.isReturningUser ? "1" : "0",
  };
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== ""));
}

/**
 * A row as stored, in either format, with its compact events in order; undefined when there is
 * no such row (or only a partial one).
 */
export function decodeRow(
  h: Record<string, string>,
): { row: RowFacts & RowState; events: string[] } | undefined {
  if (h.status === undefined) return undefined;
  const legacy = h.customer_uuid !== undefined;
  if (!legacy && h[SHORT.phoneNumber] === undefined) return undefined;
  const field = (long: string, short: string) => (legacy ? h[long] : h[short]) ?? "";
  const n = (v: string | undefined) => Number(v ?? "0");
  const returning = field("is_returning_user", SHORT.isReturningUser);
  const expiresAtMs = n(h.expires_at_ms);
  const events: string[] = [];
  for (let i = 1; i <= n(h[EVENT_COUNT]); i++) {
    const e = h[`e${i}`];
    if (e !== undefined) events.push(e);
  }
  return {
    row: {
      // Rows stored before V2 existed are V1's.
      api: h.api === "v2" ? "v2" : "v1",
      phoneNumber: field("phone_number", SHORT.phoneNumber),
      countryCode: field("country_code", SHORT.countryCode),
      status: h.status,
      createdAt: legacy ? (h.created_at ?? "") : unpackTime(h[SHORT.createdAt]),
      expiresAt: legacy ? (h.expires_at ?? "") : new Date(expiresAtMs).toISOString(),
      expiresAtMs,
      validated: h.validated === "1",
      checks: n(h.checks),
      retries: n(h.retries),
      attempts: n(h.attempts),
      nextRetryAtMs: n(h.next_retry_at_ms),
      carriedBy: (h.dp ?? "").split(" ")[0] ?? "",
      channel: h.chn ?? "",
      correlationId: h.correlation_id ?? "",
      locale: field("locale", SHORT.locale),
      templateId: field("template_id", SHORT.templateId),
      from: field("from", SHORT.from),
      appRealm: field("app_realm", SHORT.appRealm),
      callbackUrl: field("callback_url", SHORT.callbackUrl),
      priceMicros: n(field("price_micros", SHORT.priceMicros) || undefined),
      codeLength: n(field("code_length", SHORT.codeLength) || undefined),
      channels: h[SHORT.channels] ?? "",
      codeSealed: h[SHORT.codeSealed] ?? "",
      signals: {
        ip: field("ip", SHORT.ip),
        deviceId: field("device_id", SHORT.deviceId),
        deviceType: field("device_type", SHORT.deviceType),
        appVersion: field("app_version", SHORT.appVersion),
        osVersion: field("os_version", SHORT.osVersion),
        deviceModel: field("device_model", SHORT.deviceModel),
        isReturningUser: returning === "" ? undefined : returning === "1",
      },
    },
    events,
  };
}

/** The fields receiptFacts reads, in both formats (HMGET order). */
export const RECEIPT_FIELDS = ["api", "phone_number", SHORT.phoneNumber, "price_micros", SHORT.priceMicros];

/** What a compact event takes from its row: the same for every event of one authentication. */
export interface EventContext {
  authUuid: string;
  phone: string;
  correlationId: string;
  expiresAt: string;
}

/** Kept in the row when it fits a listpack value (hash-max-listpack-value's default). */
const MAX_COMPACT = 64;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function packUuid(id: string): string | undefined {
  return UUID.test(id) ? Buffer.from(id.replace(/-/g, ""), "hex").toString("base64url") : undefined;
}

function unpackUuid(packed: string): string {
  const hex = Buffer.from(packed, "base64url").toString("hex");
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join("-");
}

/** A receipt's state is kept as its place in this list. */
const DELIVERY_STATES: readonly DeliveryState[] = [
  "accepted",
  "delivered",
  "failed",
  "expired",
  "rejected",
  "unknown",
];

type Compact = [kind: string, id: string, at: string, ...rest: (string | number)[]];

/**
 * A V1 event as a compact record (`["k","<id>","<ms base 36>","valid"]`): what it says beyond
 * its row (the id as base64url, the time in base 36, a receipt's state by its place). "" when it cannot be (a V2 event, an odd time or id, a long provider status): then it
 * is kept as the JSON envelope.
 */
export function compactEvent(e: Envelope, ctx: EventContext): string {
  const id = packUuid(e.id);
  const ms = Date.parse(e.created_at);
  if (id === undefined || !Number.isFinite(ms)) return "";
  const head: [string, string] = [id, ms.toString(36)];
  const p = e.payload;
  let c: Compact | undefined;
  if (e.type === "authentication" && typeof p.status === "string") c = ["a", ...head, p.status];
  else if (e.type === "attempt" && p.action === "check" && typeof p.status === "string")
    c = ["k", ...head, p.status];
  else if (e.type === "attempt" && typeof p.attempt === "number" && typeof p.action === "string")
    c = ["s", ...head, p.attempt, p.action];
  else if (e.type === "delivery_status" && typeof p.attempt === "number") {
    const state = DELIVERY_STATES.indexOf(p.status as DeliveryState);
    const code = typeof p.error_code === "string" ? [p.error_code] : [];
    if (state >= 0) c = ["d", ...head, p.attempt, state, String(p.provider_status), ...code];
  }
  if (c === undefined) return "";
  const text = JSON.stringify(c);
  // Only what reads back exactly as it was given is kept compact.
  const exact = JSON.stringify(expandEvent(text, ctx)) === JSON.stringify(e);
  return exact && Buffer.byteLength(text) <= MAX_COMPACT ? text : "";
}

/** The envelope a compact record stands for, in the field order the JSON envelopes have. */
export function expandEvent(text: string, ctx: EventContext): Envelope {
  const [kind, id, at, ...rest] = JSON.parse(text) as Compact;
  const createdAt = new Date(parseInt(at, 36)).toISOString();
  const uuid = ctx.authUuid;
  let type: Envelope["type"];
  let payload: Record<string, unknown>;
  if (kind === "a") {
    type = "authentication";
    payload = {
      authentication_uuid: uuid,
      status: rest[0],
      phone_number: ctx.phone,
      created_at: createdAt,
      expires_at: ctx.expiresAt,
    };
  } else if (kind === "k") {
    type = "attempt";
    payload = { authentication_uuid: uuid, action: "check", status: rest[0] };
  } else if (kind === "s") {
    type = "attempt";
    payload = { authentication_uuid: uuid, attempt: rest[0], action: rest[1], status: "sent" };
  } else {
    type = "delivery_status";
    payload = {
      authentication_uuid: uuid,
      attempt: rest[0],
      status: DELIVERY_STATES[Number(rest[1])],
      provider_status: rest[2],
      ...(rest[3] === undefined ? {} : { error_code: rest[3] }),
    };
  }
  return {
    id: unpackUuid(id),
    type,
    created_at: createdAt,
    ...(ctx.correlationId === "" ? {} : { correlation_id: ctx.correlationId }),
    payload,
  };
}

/** An event as stored: a JSON envelope (a list element) or a compact record (a row field). */
export function readEvent(text: string, ctx: EventContext): Envelope {
  return text.startsWith("[") ? expandEvent(text, ctx) : (JSON.parse(text) as Envelope);
}

/** Where a provider's message id leads: the authentication and attempt it sent. */
export interface MessageRef {
  customer: string;
  auth: string;
  attempt: number;
  /** The destination of the route that chose its provider (absent in references kept before routes). */
  route?: string;
  /** The message is the one re-send of an attempt reported undelivered. */
  resend?: boolean;
  /**
   * Of a verification with several channels: the message's channel and price (millionths), which a
   * report of it undelivered refunds (absent: SMS, at the row's price).
   */
  channel?: string;
  price?: number;
}

/**
 * A message reference as stored under `smsref:`: both uuids as 32 bytes in base64url and the
 * attempt (at most 45 characters, an embedded Redis string); JSON when they are not uuids, as
 * every reference stored before this format.
 */
export function encodeMessageRef(ref: MessageRef): string {
  const c = packUuid(ref.customer);
  const a = packUuid(ref.auth);
  if (c === undefined || a === undefined) return JSON.stringify(ref);
  const both = Buffer.concat([Buffer.from(c, "base64url"), Buffer.from(a, "base64url")]);
  // The default route is the one a reference names by naming none.
  const route = ref.route === undefined || ref.route === "default" ? "" : `/${ref.route}`;
  const priced = ref.channel === undefined ? "" : `!${ref.channel}:${ref.price ?? 0}`;
  return `${both.toString("base64url")}${ref.attempt}${ref.resend === true ? "r" : ""}${route}${priced}`;
}

export function decodeMessageRef(v: string): MessageRef {
  if (v.startsWith("{")) return JSON.parse(v) as MessageRef;
  const both = Buffer.from(v.slice(0, 43), "base64url");
  const [placed = "", priced] = v.slice(43).split("!");
  const [attempt = "", route] = placed.split("/");
  const [channel, price] = priced?.split(":") ?? [];
  return {
    customer: unpackUuid(both.subarray(0, 16).toString("base64url")),
    auth: unpackUuid(both.subarray(16, 32).toString("base64url")),
    attempt: Number(attempt.replace(/r$/, "")),
    ...(route === undefined ? {} : { route }),
    ...(attempt.endsWith("r") ? { resend: true } : {}),
    ...(channel === undefined ? {} : { channel, price: Number(price ?? "0") }),
  };
}

/** The Lua side of the compact events, prepended to the scripts that record them. */
export const ROW_EVENTS_LIBRARY = new URL("./row-events.lua", import.meta.url);

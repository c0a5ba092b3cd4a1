import type { Keys, RedisClient } from "../redis/client.js";
import { LuaScript } from "../redis/client.js";
import { RingfenceError } from "../errors.js";
import { outboxKeys } from "../webhooks/stream.js";
import type { Envelope, RetryStatus } from "./model.js";
import { checkCode, WINDOW_LIBRARY, type CheckStatus } from "../otp/code.js";

const script = (name: string) =>
  LuaScript.withLibraries(new URL(`./${name}.lua`, import.meta.url), WINDOW_LIBRARY);
const sendCode = script("send_code");
const retryCode = script("retry_code");
const releaseSend = script("release_send");
const appendEvent = script("append_event");

export interface Window {
  limit: number;
  windowSeconds: number;
}

/** The keys of one authentication, all under its customer's hash tag. */
export interface AuthKeys {
  auth: string;
  events: string;
  hook: string;
  pending: string;
}

/** What the send script needs; see send_code.lua. */
export interface SendArgs {
  now: number;
  phone: string;
  member: string;
  staticSpam: boolean;
  hasIp: boolean;
  hasDevice: boolean;
  price: number;
  codeHash: string;
  retryIntervalMs: number;
  keepUntil: number;
  limits: { number: Window | null; ip: Window | null; device: Window | null; account: Window | null };
  spam: { ipNumbers: Window | null; deviceNumbers: Window | null; range: Window | null };
  fields: Record<string, string>;
  /** The `authentication` event for each status the script may decide. */
  events: Record<"pending" | "rate_limited" | "spam_detected", string>;
  hook: { url: string; secretRef: string } | null;
}

export interface SendPlace {
  customer: string;
  auth: string;
  phone: string;
  ip: string;
  device: string;
  range: string;
  month: string;
}

export interface StoredAuthentication {
  customerUuid: string;
  phoneNumber: string;
  countryCode: string;
  status: string;
  createdAt: string;
  expiresAt: string;
  expiresAtMs: number;
  validated: boolean;
  checks: number;
  retries: number;
  attempts: number;
  nextRetryAtMs: number;
  correlationId: string;
  locale: string;
  templateId: string;
  from: string;
  appRealm: string;
  callbackUrl: string;
}

/** Redis-backed state of V1 authentications; every rule runs as one script on one slot. */
export class VerifyStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  authKeys(customer: string, auth: string): AuthKeys {
    const base = this.keys.key("auth", customer, auth);
    const events = `${base}:events`;
    const { hook, pending } = outboxKeys(events, this.keys);
    return { auth: base, events, hook, pending };
  }

  private placeKeys(p: SendPlace) {
    const { keys } = this;
    const tag = p.customer;
    return {
      ...this.authKeys(tag, p.auth),
      account: keys.key("acct", tag),
      spend: keys.key("acct", tag, "spend", p.month),
      number: keys.key("rl", tag, "num", p.phone),
      ip: keys.key("rl", tag, "ip", p.ip),
      device: keys.key("rl", tag, "dev", p.device),
      accountWindow: keys.key("rl", tag, "acct"),
      ipNumbers: keys.key("spam", tag, "ipnums", p.ip),
      deviceNumbers: keys.key("spam", tag, "devnums", p.device),
      range: keys.key("spam", tag, "range", p.range),
    };
  }

  async send(place: SendPlace, args: SendArgs): Promise<"pending" | "rate_limited" | "spam_detected"> {
    const k = this.placeKeys(place);
    const keys = [k.account, k.spend, k.auth, k.events, k.hook, k.pending, k.number, k.ip, k.device];
    keys.push(k.accountWindow, k.ipNumbers, k.deviceNumbers, k.range);
    const status = await scriptCall(sendCode, this.redis, keys, args);
    return status as "pending" | "rate_limited" | "spam_detected";
  }

  async check(
    customer: string,
    auth: string,
    args: { now: number; codeHash: string; maxChecks: number; events: Record<"valid" | "invalid", string> },
  ): Promise<{ status: CheckStatus | "not_found"; hooked: boolean }> {
    const k = this.authKeys(customer, auth);
    const { events, ...rest } = args;
    return checkCode(
      this.redis,
      { challenge: k.auth, events: { list: k.events, hook: k.hook, pending: k.pending, ...events } },
      rest,
    );
  }

  async retry(
    place: SendPlace,
    args: {
      now: number;
      codeHash: string;
      maxRetries: number;
      retryIntervalMs: number;
      price: number;
      member: string;
      limits: { number: Window | null; account: Window | null };
    },
  ): Promise<{ status: RetryStatus | "not_found"; retries: number; nextRetryAtMs: number }> {
    const k = this.placeKeys(place);
    const keys = [k.account, k.spend, k.auth, k.number, k.accountWindow];
    const [status, retries, next] = (await scriptCall(retryCode, this.redis, keys, args)) as [
      RetryStatus | "not_found",
      number,
      number,
    ];
    return { status, retries, nextRetryAtMs: next };
  }

  /** Undoes a send or retry the provider refused. */
  async release(
    place: SendPlace,
    args: { price: number; member: string; kind: "send" | "retry" },
  ): Promise<void> {
    const k = this.placeKeys(place);
    const windows =
      args.kind === "send"
        ? [k.number, k.ip, k.device, k.accountWindow, k.range]
        : [k.number, k.accountWindow];
    await releaseSend.run(
      this.redis,
      [k.account, k.spend, k.auth, k.events, k.hook, k.pending, ...windows],
      [JSON.stringify(args)],
    );
  }

  /** Appends an event; says whether it awaits webhook delivery. */
  async appendEvent(customer: string, auth: string, envelope: Envelope): Promise<{ hooked: boolean }> {
    const k = this.authKeys(customer, auth);
    const n = await appendEvent.run(this.redis, [k.events, k.hook, k.pending], [JSON.stringify(envelope)]);
    return { hooked: Number(n) === 2 };
  }

  async get(
    customer: string,
    auth: string,
  ): Promise<{ auth: StoredAuthentication; events: Envelope[] } | undefined> {
    const k = this.authKeys(customer, auth);
    const [h, events] = await Promise.all([this.redis.hgetall(k.auth), this.redis.lrange(k.events, 0, -1)]);
    if (h.customer_uuid === undefined) return undefined;
    const n = (v: string | undefined) => Number(v ?? "0");
    return {
      auth: {
        customerUuid: h.customer_uuid,
        phoneNumber: h.phone_number ?? "",
        countryCode: h.country_code ?? "",
        status: h.status ?? "",
        createdAt: h.created_at ?? "",
        expiresAt: h.expires_at ?? "",
        expiresAtMs: n(h.expires_at_ms),
        validated: h.validated === "1",
        checks: n(h.checks),
        retries: n(h.retries),
        attempts: n(h.attempts),
        nextRetryAtMs: n(h.next_retry_at_ms),
        correlationId: h.correlation_id ?? "",
        locale: h.locale ?? "",
        templateId: h.template_id ?? "",
        from: h.from ?? "",
        appRealm: h.app_realm ?? "",
        callbackUrl: h.callback_url ?? "",
      },
      events: events.map((e) => JSON.parse(e) as Envelope),
    };
  }

  /** The correlation_id given at creation ("" when none, or no such authentication). */
  async correlationId(customer: string, auth: string): Promise<string> {
    return (await this.redis.hget(this.authKeys(customer, auth).auth, "correlation_id")) ?? "";
  }

  /** Remembers which authentication a provider's message id belongs to, for delivery receipts. */
  async rememberMessage(
    providerId: string,
    ref: { customer: string; auth: string; attempt: number },
  ): Promise<void> {
    await this.redis.set(this.keys.key("smsref", providerId), JSON.stringify(ref), "EX", 3 * 86_400);
  }

  async messageOwner(
    providerId: string,
  ): Promise<{ customer: string; auth: string; attempt: number } | undefined> {
    const v = await this.redis.get(this.keys.key("smsref", providerId));
    return v === null ? undefined : (JSON.parse(v) as { customer: string; auth: string; attempt: number });
  }

  /** Records feedback; the same (number, status) keeps its uuid. */
  async saveFeedback(
    customer: string,
    phone: string,
    status: string,
    uuid: string,
    at: string,
  ): Promise<void> {
    await this.redis.hset(this.keys.key("fb", customer, phone), { status, uuid, updated_at: at });
  }
}

/** Runs a script whose refusals come back as error replies named after a V1 error code. */
async function scriptCall(s: LuaScript, redis: RedisClient, keys: string[], args: unknown): Promise<unknown> {
  try {
    return await s.run(redis, keys, [JSON.stringify(args)]);
  } catch (err) {
    // Redis prefixes a lower-case error reply with "ERR " and may add the script's context after it.
    const code = err instanceof Error ? (/^(?:ERR )?(\w+)/.exec(err.message)?.[1] ?? "") : "";
    if (code === "negative_balance")
      throw new RingfenceError(code, "the account balance is too low to send a message");
    if (code === "spending_limit_exceeded") {
      throw new RingfenceError(code, "this message would pass the account's monthly spending limit");
    }
    if (code === "suspended_account") throw new RingfenceError(code, "this account is suspended");
    if (code === "account_invalid") throw new RingfenceError(code, "unknown customer");
    throw err;
  }
}

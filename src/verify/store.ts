import {
  fraudTail,
  type FraudAction,
  type FraudCall,
  type FraudDecision,
  type FraudRule,
  type FraudSendKeys,
} from "../fraud/engine.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { CorrelatedEnvelope } from "../webhooks/stream.js";
import type { Envelope, RetryStatus } from "./model.js";
import type { CreatedEvent, VerifyApi } from "./events.js";
import type { CheckStatus } from "../otp/code.js";
import {
  decodeMessageRef,
  encodeMessageRef,
  encodeRow,
  readEvent,
  RECEIPT_FIELDS,
  type MessageRef,
} from "./row.js";
import { decodeAuthentication, type NewAuthentication, type StoredAuthentication } from "./authentication.js";
import { VerifyKeys, type AuthKeys, type SendPlace } from "./keys.js";
import { HoldStore } from "./hold-store.js";
import * as scripts from "./scripts.js";
import type { HoldArgs, SendRules } from "./scripts.js";

export type { Signals, NewAuthentication, StoredAuthentication } from "./authentication.js";
export type { AuthKeys, SendPlace } from "./keys.js";
export type { HoldArgs, SendRules } from "./scripts.js";
export type { Hold } from "./hold-store.js";

/** What the send script needs besides its SendRules; see send-code.lua. */
export interface SendArgs {
  now: number;
  /** The fraud engine's arguments for this send (src/fraud/engine.lua), its rules in SendRules; false: not judged (email). */
  fraud: FraudCall | false;
  /** The send's uuid: its windows' member is `<authUuid>:1` (a retry's, `<authUuid>:<attempt>`). */
  authUuid: string;
  phone: string;
  /** The static spam setting that refuses the number (SPAM_LINE_TYPES, SPAM_DISPOSABLE), or false. */
  staticSpam: string | false;
  hasIp: boolean;
  hasDevice: boolean;
  price: number;
  codeHash: string;
  /** When the row, its events and webhook stream expire (ms). */
  keepUntil: number;
  /**
   * The same for a send refused before anything was sent (REFUSED_RETENTION_SECONDS after it,
   * docs/capacity.md#refused-sends); its webhook stream stays until `keepUntil` while undelivered.
   */
  refusedUntil: number;
  authentication: NewAuthentication;
  /** The `authentication` event of the status the script decides (see CreatedEvent); null: none. */
  created: CreatedEvent | null;
  /**
   * V2: a pending authentication becomes its number's running verification (the target index,
   * see `VerifyKeys.target`) until `expiresAtMs`, provided the index still names `running` (the uuid the
   * caller read, "" for none); else nothing is done and the script answers `raced`.
   */
  target: { running: string } | null;
  hook: { url: string; secretRef: string } | null;
}

/** Redis-backed state of V1 authentications; every rule runs as one script on one slot. */
export class VerifyStore extends HoldStore {
  constructor(redis: RedisClient, keys: Keys) {
    super(redis, new VerifyKeys(keys));
  }

  authKeys(customer: string, auth: string): AuthKeys {
    return this.keys.auth(customer, auth);
  }

  /** The uuid the V2 target index names for a number (it may have ended since); undefined when none. */
  async targetAuth(customer: string, phone: string): Promise<string | undefined> {
    return (await this.redis.get(this.keys.target(customer, phone))) ?? undefined;
  }

  /**
   * What the V2 target index names for a number ("" for nothing) and that authentication's row,
   * when it still exists: whether it runs is the caller's rule.
   */
  async targetState(
    customer: string,
    phone: string,
  ): Promise<{ indexed: string; auth: StoredAuthentication | undefined }> {
    const indexed = (await this.targetAuth(customer, phone)) ?? "";
    if (indexed === "") return { indexed, auth: undefined };
    const row = decodeAuthentication(
      customer,
      await this.redis.hgetall(this.authKeys(customer, indexed).auth),
    );
    return { indexed, auth: row?.auth };
  }

  /** The correlation_id given at creation ("" when none, or no such authentication). */
  async correlationId(customer: string, auth: string): Promise<string> {
    return (await this.redis.hget(this.authKeys(customer, auth).auth, "correlation_id")) ?? "";
  }

  /**
   * Charges and records a send, with its hold (`holdId`). `stale`: Redis ran it too late,
   * nothing was done.
   */
  async send(
    place: SendPlace,
    rules: SendRules,
    args: SendArgs,
    hold: HoldArgs & { id: string },
    fraud: FraudSendKeys,
  ): Promise<{
    status: "pending" | "rate_limited" | "spam_detected" | "stale" | "raced";
    refusedBy?: string;
    /** The fraud engine's decision, when it judged the send (no rule before it refused). */
    fraud?: Pick<FraudDecision, "action" | "rule">;
  }> {
    const placed = this.keys.place(place);
    const keys = {
      ...placed,
      holds: this.keys.holds(place.customer),
      hold: this.keys.hold(place.customer, hold.id),
      target: this.keys.target(place.customer, place.phone),
      ...fraudKeys(fraud),
    };
    const { authentication, ...rest } = args;
    const fields = encodeRow(authentication);
    const [status, refusedBy, action, rule] = (await this.listed(place, hold, "send", () =>
      scripts.sendCode
        .configured(rules)
        .run(this.redis, keys, { args: JSON.stringify({ ...rest, fields, hold }) }, fraudTail(fraud)),
    )) as [
      "pending" | "rate_limited" | "spam_detected" | "stale" | "raced",
      string?,
      FraudAction?,
      FraudRule?,
    ];
    // A replayed send answers its stored status alone: its refusal was counted when it ran.
    return {
      status,
      ...(typeof refusedBy === "string" ? { refusedBy } : {}),
      ...(typeof action === "string" && typeof rule === "string" ? { fraud: { action, rule } } : {}),
    };
  }

  async check(
    customer: string,
    auth: string,
    args: {
      now: number;
      codeHash: string;
      maxChecks: number;
      /** The API whose authentication this must be: another's is `not_found`. */
      api: VerifyApi;
      /** The event each comparison records; none when undefined. */
      events:
        | (Record<"valid" | "invalid", CorrelatedEnvelope> & { compact: Record<"valid" | "invalid", string> })
        | undefined;
    },
  ): Promise<{ status: CheckStatus | "not_found"; hooked: boolean; phone?: string; carried?: string }> {
    const k = this.authKeys(customer, auth);
    const { events, ...rest } = args;
    return scripts.checkCode(
      this.redis,
      {
        challenge: k.auth,
        ...(events === undefined
          ? {}
          : { events: { list: k.events, hook: k.hook, pending: k.pending, ...events } }),
      },
      rest,
    );
  }

  async retry(
    place: SendPlace,
    rules: SendRules,
    args: {
      now: number;
      /** The number of this attempt, in its message's reference: the row's `attempts` plus one as read. */
      attempt: number;
      codeHash: string;
      price: number;
      member: string;
      fraud: FraudCall | false;
      /** With several channels planned, its code sealed (retry-code.lua). */
      codeSealed?: string | undefined;
    },
    hold: HoldArgs & { id: string },
    fraud: FraudSendKeys,
  ): Promise<{
    status: RetryStatus | "not_found" | "stale";
    retries: number;
    nextRetryAtMs: number;
    /** The setting of the rule that refused the retry, when one did. */
    refusedBy?: string;
    /** The fraud engine's decision, when it judged the retry. */
    fraud?: Pick<FraudDecision, "action" | "rule">;
  }> {
    const k = this.keys.place(place);
    const keys = {
      account: k.account,
      spend: k.spend,
      auth: k.auth,
      numberWindow: k.numberWindow,
      accountWindow: k.accountWindow,
      holds: this.keys.holds(place.customer),
      hold: this.keys.hold(place.customer, hold.id),
      ...fraudKeys(fraud),
    };
    const release = JSON.stringify(this.releaseKeys(place, "retry"));
    const [status, retries, next, refusedBy, action, rule] = (await this.listed(place, hold, "retry", () =>
      scripts.retryCode
        .configured(rules)
        .run(
          this.redis,
          keys,
          { args: JSON.stringify({ ...args, hold: { ...hold, release } }) },
          fraudTail(fraud),
        ),
    )) as [RetryStatus | "not_found" | "stale", number, number, string?, FraudAction?, FraudRule?];
    return {
      status,
      retries,
      nextRetryAtMs: next,
      ...(typeof refusedBy === "string" ? { refusedBy } : {}),
      ...(typeof action === "string" && typeof rule === "string" ? { fraud: { action, rule } } : {}),
    };
  }

  /**
   * Appends an event, or its compact record (`compact`, "" for none) where the row keeps it; says
   * whether it awaits webhook delivery.
   */
  async appendEvent(
    customer: string,
    auth: string,
    envelope: Envelope,
    compact: string,
  ): Promise<{ hooked: boolean }> {
    const [status, hooked] = (await scripts.appendEvent.run(this.redis, this.authKeys(customer, auth), {
      envelope: JSON.stringify(envelope),
      compact,
    })) as ["gone" | "appended", number?];
    return { hooked: status === "appended" && hooked === 1 };
  }

  async get(
    customer: string,
    auth: string,
  ): Promise<{ auth: StoredAuthentication; events: Envelope[] } | undefined> {
    const k = this.authKeys(customer, auth);
    const [h, listed] = await Promise.all([this.redis.hgetall(k.auth), this.redis.lrange(k.events, 0, -1)]);
    const row = decodeAuthentication(customer, h);
    if (row === undefined) return undefined;
    const a = row.auth;
    const ctx = {
      authUuid: auth,
      phone: a.phoneNumber,
      correlationId: a.correlationId,
      expiresAt: a.expiresAt,
    };
    // The row's records come first: a list begun after them only takes what could not be compact.
    const events = [...row.compact, ...listed].map((e) => readEvent(e, ctx));
    return { auth: a, events };
  }

  /**
   * What a delivery receipt's event says of its authentication: the API that created it, its
   * number, price and correlation_id; undefined once it has expired.
   */
  async receiptFacts(
    customer: string,
    auth: string,
  ): Promise<{ api: VerifyApi; phone: string; priceMicros: number; correlationId: string } | undefined> {
    const [api, longPhone, shortPhone, longPrice, shortPrice, correlationId] = await this.redis.hmget(
      this.authKeys(customer, auth).auth,
      ...RECEIPT_FIELDS,
      "correlation_id",
    );
    const phone = longPhone ?? shortPhone;
    const price = longPrice ?? shortPrice;
    if (phone === null || phone === undefined) return undefined;
    return {
      api: api === "v2" ? "v2" : "v1",
      phone,
      priceMicros: Number(price ?? "0"),
      correlationId: correlationId ?? "",
    };
  }

  /**
   * Remembers which authentication a provider's message id belongs to, for delivery receipts,
   * for `seconds` (SMS_RECEIPT_RETENTION_SECONDS).
   */
  async rememberMessage(
    provider: string,
    providerId: string,
    ref: MessageRef,
    seconds: number,
  ): Promise<void> {
    await this.redis.set(this.keys.messageRef(provider, providerId), encodeMessageRef(ref), "EX", seconds);
  }

  /**
   * The owner of `provider`'s message `providerId`, by its name per provider, by a name the provider
   * had before (the back-compat provider was `smpp` or `http`), or the one kept before names.
   */
  async messageOwner(
    provider: string,
    providerId: string,
    formerNames: readonly string[] = [],
  ): Promise<MessageRef | undefined> {
    const found = (
      await this.redis.mget(
        ...[provider, ...formerNames].map((name) => this.keys.messageRef(name, providerId)),
        this.keys.legacyMessageRef(providerId),
      )
    ).find((v): v is string => typeof v === "string");
    return found === undefined ? undefined : decodeMessageRef(found);
  }

  /**
   * Records the feedback on a number; false (nothing changes) when its recorded status is
   * already this one.
   */
  async saveFeedback(
    customer: string,
    phone: string,
    status: string,
    uuid: string,
    at: string,
  ): Promise<boolean> {
    const [saved] = (await scripts.saveFeedback.run(
      this.redis,
      { feedback: this.keys.feedback(customer, phone) },
      { status, uuid, at },
    )) as ["recorded" | "repeat"];
    return saved === "recorded";
  }
}

/** The fraud engine's keys by the names the send and retry scripts give them. */
function fraudKeys(k: FraudSendKeys) {
  return {
    fraudPolicy: k.policy,
  };
}

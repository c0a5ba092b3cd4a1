import { createHash, randomUUID } from "node:crypto";
import { hashCode as hashOtp, newCode } from "../otp/code.js";
import { RingfenceError } from "../errors.js";
import type { Config } from "../config.js";
import { errorMessage, type Logger } from "../log.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { Secrets } from "../crypto/secrets.js";
import type { AccountStore } from "../accounts/store.js";
import type { StoredAccount } from "../accounts/account.js";
import { ACCOUNT_SECRET_KIND } from "../accounts/account.js";
import type { LookupDataSource } from "../lookup/lookup-data.js";
import { describeNumber, parseE164, type ParsedNumber } from "../lookup/numbers.js";
import { screenNumber } from "../lookup/spam.js";
import type { FraudEngine } from "../fraud/engine.js";
import { limitSubject } from "../net/cidr.js";
import type { CallScope } from "../observability/calls.js";
import type { Metrics } from "../observability/metrics.js";
import { renderOtpSms, resolveLocale } from "../messaging/templates.js";
import type { DeliveryReceipt, SmsProvider } from "../messaging/sms.js";
import type { OutgoingSms } from "../messaging/provider.js";
import { secretRef, type CorrelatedEnvelope } from "../webhooks/stream.js";
import type { AuthenticationStatus, CheckStatus, Envelope, RetryStatus } from "./model.js";
import type {
  Hold,
  HoldArgs,
  SendPlace,
  SendRules,
  Signals,
  StoredAuthentication,
  VerifyStore,
} from "./store.js";
import {
  EVENT_SHAPES,
  type CreatedEvent,
  type EventFacts,
  type EventShapes,
  type VerifyApi,
} from "./events.js";
import { holdSpanMs, outcomeUnknown, settleHold, STALE_AFTER_MS, unavailable } from "./holds.js";
import { compactEvent, type EventContext } from "./row.js";

export interface VerifyDeps {
  config: Config;
  log: Logger;
  accounts: AccountStore;
  secrets: Secrets;
  lookupData: LookupDataSource;
  store: VerifyStore;
  sms: SmsProvider;
  /** Starts webhook delivery of an events list (the outbox of src/webhooks). */
  webhooks: { kick(list: string): Promise<void> };
  /** Checks callback_url: no private or reserved address (OUTBOUND_ALLOWED_CIDRS). */
  outbound: Pick<OutboundGuard, "checkUrl" | "refusal">;
  /** Counts what accounts are charged (the spend metric). */
  metrics: Pick<Metrics, "charged">;
  /** The fraud engine: its keys and arguments ride in the send and retry scripts. */
  fraud: FraudEngine;
  now?: () => number;
}

/** A first code for a number, as V1's create and V2's create ask for it (already validated). */
export interface SendRequest {
  api: VerifyApi;
  phone: ParsedNumber;
  /** The user's IP address ("" when not given); IPv6 addresses are limited by their /64. */
  ip: string;
  deviceId: string;
  signals: Signals;
  /** BCP-47; "" lets the number's country choose. */
  locale: string;
  templateId: string;
  /** The sender ID, already checked to be the account's; "" for SMS_FROM. */
  senderId: string;
  appRealm: string;
  callbackUrl: string;
  correlationId: string;
  codeLength: number;
  /**
   * V2: the uuid the number's target index named when the caller looked ("" for none). The send
   * becomes the running verification only if the index still names it; else `raced`, nothing done.
   */
  indexed?: string | undefined;
}

export interface SendOutcome {
  authUuid: string;
  /** `raced`: only with `indexed`, another creation came first (see SendRequest). */
  status: AuthenticationStatus | "raced";
  /** The setting of the rule that refused the send, when one did. */
  refusedBy?: string | undefined;
  createdAt: string;
  expiresAt: string;
}

export interface RetryOutcome {
  status: RetryStatus;
  retries: number;
  nextRetryAtMs: number;
  refusedBy?: string | undefined;
}

/**
 * The verification engine under V1 and V2: one code store, one set of windows and spam rules,
 * one balance, one webhook outbox. The APIs validate their own input and shape their own
 * answers; what a number may receive is decided here, whichever API asks.
 */
export class VerifyEngine {
  private readonly now: () => number;
  /** Names this instance in the holds it records (for the logs of a recovery). */
  private readonly owner = randomUUID();

  /** The send and retry scripts' settings, in their text: one object, so one script each. */
  private readonly rules: SendRules;

  constructor(readonly deps: VerifyDeps) {
    this.now = deps.now ?? Date.now;
    const { config } = deps;
    this.rules = {
      retryIntervalMs: config.OTP_RETRY_INTERVAL_SECONDS * 1000,
      maxRetries: config.OTP_MAX_RETRIES,
      limits: {
        number: config.RATE_LIMIT_NUMBER,
        ip: config.RATE_LIMIT_IP,
        device: config.RATE_LIMIT_DEVICE,
        account: config.RATE_LIMIT_ACCOUNT,
      },
      spam: {
        ipNumbers: config.SPAM_IP_NUMBERS,
        deviceNumbers: config.SPAM_DEVICE_NUMBERS,
        range: config.SPAM_RANGE_BURST,
      },
      fraud: deps.fraud.rules,
    };
  }

  private hashCode(auth: string, code: string): string {
    return hashOtp(this.deps.secrets, auth, code);
  }

  priceFor(country: string): number {
    const prices = this.deps.config.SMS_PRICES;
    return prices[country] ?? prices.default ?? 0;
  }

  /** What the events of an authentication to `phone` say of it. */
  private async facts(
    api: VerifyApi,
    authUuid: string,
    phone: ParsedNumber,
    correlationId: string,
    priceMicros: number,
  ): Promise<EventFacts> {
    const network = api === "v2" ? await describeNumber(phone) : undefined;
    return {
      authUuid,
      phone: phone.e164,
      correlationId,
      priceMicros,
      currency: this.deps.config.SMS_CURRENCY,
      network: network === undefined ? undefined : { mcc: network.mcc, mnc: network.mnc },
    };
  }

  /**
   * Decides, charges and sends a first code: the windows, spam rules and balance say whether, and
   * a refusal is noted on the call.
   */
  async send(account: StoredAccount, req: SendRequest, call: CallScope): Promise<SendOutcome> {
    const { config, store } = this.deps;
    const phone = req.phone;
    const screened = await screenNumber(config, this.deps.lookupData, phone);
    const staticSpam = screened.rule ?? false;
    const t = this.now();
    const { fraud } = this.deps;
    const destination = fraud.destination(phone, screened.facts);
    const authUuid = randomUUID();
    const code = newCode(req.codeLength);
    const locale = resolveLocale(req.locale === "" ? undefined : req.locale, phone.countryCode);
    const from = req.senderId === "" ? config.SMS_FROM : req.senderId;
    const message = renderOtpSms({
      code,
      locale,
      templateId: req.templateId === "" ? undefined : req.templateId,
      customTemplates: account.templates,
      lifetimeMinutes: Math.ceil(config.OTP_TTL_SECONDS / 60),
      appRealm: req.appRealm === "" ? undefined : req.appRealm,
    });
    const createdAt = new Date(t).toISOString();
    const expiresMs = t + config.OTP_TTL_SECONDS * 1000;
    const expiresAt = new Date(expiresMs).toISOString();
    const price = this.priceFor(phone.countryCode);
    const shapes = EVENT_SHAPES[req.api];
    const facts = await this.facts(req.api, authUuid, phone, req.correlationId, price);
    const ctx = eventContext(facts, expiresAt);
    const ip = req.ip === "" ? "" : limitSubject(req.ip);
    const place = sendPlace(account.customerUuid, authUuid, phone, ip, req.deviceId, config, t);
    const source = { ip: req.ip, deviceId: req.deviceId };
    const sms = {
      to: phone.e164,
      from,
      body: message.body,
      locale: message.locale,
      reference: `${authUuid}.1`,
    };

    const held = this.holdArgs(sms);
    const {
      status,
      refusedBy,
      fraud: judged,
    } = await store
      .send(
        place,
        this.rules,
        {
          now: t,
          fraud: fraud.sendArgs(req.api, destination, t, account.customerUuid, source),
          authUuid,
          phone: phone.e164,
          staticSpam,
          hasIp: ip !== "",
          hasDevice: req.deviceId !== "",
          price,
          codeHash: this.hashCode(authUuid, code),
          keepUntil: expiresMs + config.AUTHENTICATION_RETENTION_SECONDS * 1000,
          refusedUntil: t + config.REFUSED_RETENTION_SECONDS * 1000,
          authentication: {
            api: req.api,
            customerUuid: account.customerUuid,
            phoneNumber: phone.e164,
            countryCode: phone.countryCode,
            createdAt,
            expiresAt,
            expiresAtMs: expiresMs,
            correlationId: req.correlationId,
            locale: message.locale,
            templateId: message.templateId,
            from,
            appRealm: req.appRealm,
            callbackUrl: req.callbackUrl,
            priceMicros: price,
            codeLength: req.codeLength,
            signals: req.signals,
          },
          created: createdEvent(shapes, facts, createdAt, expiresAt, ctx),
          target: req.indexed === undefined ? null : { running: req.indexed },
          hook:
            req.callbackUrl === ""
              ? null
              : { url: req.callbackUrl, secretRef: secretRef(ACCOUNT_SECRET_KIND, account.customerUuid) },
        },
        held,
        fraud.sendKeys(account.customerUuid, destination, source),
      )
      .catch((err: unknown) => this.giveBack(store.holdOf(place, sms.reference, "send"), held, call)(err));
    if (judged !== undefined) fraud.noted(req.api, judged, destination.country);
    if (status === "stale") throw unavailable("the service is temporarily unavailable, try again shortly");
    if (refusedBy !== undefined) call.noteRefusal(refusedBy);

    if (status === "pending") {
      await this.deliver(
        store.holdOf(place, sms.reference, "send"),
        sms,
        1,
        shapes.sent(facts, 1, "send", new Date(this.now()).toISOString()),
        ctx,
        call,
      );
      // Settled: the provider took the message, so the charge stands.
      this.deps.metrics.charged(phone.countryCode, price);
    }
    if (req.callbackUrl !== "") {
      await this.kick(store.authKeys(account.customerUuid, authUuid).events, call.log);
    }
    return { authUuid, status, refusedBy, createdAt, expiresAt };
  }

  /**
   * Sends a new code that replaces the previous one, under the retry rules and the number's windows;
   * a refusal is noted on the call.
   */
  async retry(
    account: StoredAccount,
    authUuid: string,
    auth: StoredAuthentication,
    call: CallScope,
  ): Promise<RetryOutcome> {
    const { config, store } = this.deps;
    const phone = parseE164(auth.phoneNumber);
    if (phone === undefined) throw new RingfenceError("internal_server_error", "stored number is unreadable");

    const t = this.now();
    const code = newCode(auth.codeLength > 0 ? auth.codeLength : config.OTP_LENGTH);
    const message = renderOtpSms({
      code,
      locale: auth.locale,
      templateId: auth.templateId === "" ? undefined : auth.templateId,
      customTemplates: account.templates,
      lifetimeMinutes: Math.max(1, Math.ceil((auth.expiresAtMs - t) / 60_000)),
      appRealm: auth.appRealm === "" ? undefined : auth.appRealm,
    });
    const attempt = auth.attempts + 1;
    const price = this.priceFor(phone.countryCode);
    const place = sendPlace(account.customerUuid, authUuid, phone, "", "", config, t);
    const { fraud } = this.deps;
    const destination = await fraud.destinationOf(phone);
    const sms = {
      to: phone.e164,
      from: auth.from,
      body: message.body,
      locale: message.locale,
      reference: `${authUuid}.${attempt}`,
    };
    const held = this.holdArgs(sms);
    const r = await store
      .retry(
        place,
        this.rules,
        {
          now: t,
          attempt,
          codeHash: this.hashCode(authUuid, code),
          price,
          member: `${authUuid}:${attempt}`,
          fraud: fraud.sendArgs(auth.api, destination, t, account.customerUuid),
        },
        held,
        fraud.sendKeys(account.customerUuid, destination),
      )
      .catch((err: unknown) => this.giveBack(store.holdOf(place, sms.reference, "retry"), held, call)(err));
    if (r.fraud !== undefined) fraud.noted(auth.api, r.fraud, destination.country);
    if (r.status === "not_found") throw unknownAuthentication();
    if (r.status === "stale") throw unavailable("the service is temporarily unavailable, try again shortly");
    if (r.refusedBy !== undefined) call.noteRefusal(r.refusedBy);
    if (r.status === "approved") {
      const facts = await this.facts(auth.api, authUuid, phone, auth.correlationId, price);
      const hooked = await this.deliver(
        store.holdOf(place, sms.reference, "retry"),
        sms,
        attempt,
        EVENT_SHAPES[auth.api].sent(facts, attempt, "retry", new Date(this.now()).toISOString()),
        eventContext(facts, auth.expiresAt),
        call,
      );
      this.deps.metrics.charged(phone.countryCode, price);
      if (hooked) await this.kick(store.authKeys(account.customerUuid, authUuid).events, call.log);
    }
    return { status: r.status, retries: r.retries, nextRetryAtMs: r.nextRetryAtMs, refusedBy: r.refusedBy };
  }

  /** Compares a code, at most OTP_MAX_CHECKS times per authentication; `not_found` when none. */
  async check(
    account: StoredAccount,
    authUuid: string,
    code: string,
    api: VerifyApi,
    call: CallScope,
  ): Promise<CheckStatus | "not_found"> {
    const { store, config } = this.deps;
    const t = this.now();
    const at = new Date(t).toISOString();
    const shapes = EVENT_SHAPES[api];
    const valid = shapes.checked(authUuid, "valid", at);
    const invalid = shapes.checked(authUuid, "invalid", at);
    // A check's record names nothing of the row: its correlation_id is added where it is read.
    const ctx = { authUuid, phone: "", correlationId: "", expiresAt: "" };
    const compact = (e: CorrelatedEnvelope) => compactEvent(JSON.parse(e.head + e.tail) as Envelope, ctx);
    const { status, hooked, phone } = await store.check(account.customerUuid, authUuid, {
      now: t,
      codeHash: this.hashCode(authUuid, code),
      maxChecks: config.OTP_MAX_CHECKS,
      api,
      events:
        valid === undefined || invalid === undefined
          ? undefined
          : { valid, invalid, compact: { valid: compact(valid), invalid: compact(invalid) } },
    });
    if (hooked) await this.kick(store.authKeys(account.customerUuid, authUuid).events, call.log);
    if (phone !== undefined) await this.converted(api, account.customerUuid, phone);
    return status;
  }

  /** A right code, or V1 feedback `onboarded`: the fraud engine counts the number's conversion. */
  async converted(api: VerifyApi, customer: string, e164: string): Promise<void> {
    await this.deps.fraud.convertedNumber(api, customer, e164);
  }

  /** Turns a delivery receipt into its authentication's event, in its API's shape. */
  async recordReceipt(receipt: DeliveryReceipt): Promise<void> {
    const { store, log } = this.deps;
    const owner = await store.messageOwner(receipt.providerId);
    if (owner === undefined) {
      log.warn("delivery receipt for an unknown message", { providerId: receipt.providerId });
      return;
    }
    // An expired authentication has nothing left to record against.
    const known = await store.receiptFacts(owner.customer, owner.auth);
    if (known === undefined) return;
    const phone = parseE164(known.phone);
    if (phone === undefined) return;
    const facts = await this.facts(known.api, owner.auth, phone, known.correlationId, known.priceMicros);
    const event = EVENT_SHAPES[known.api].receipt(facts, owner.attempt, receipt);
    const compact = compactEvent(event, eventContext(facts, ""));
    const { hooked } = await store.appendEvent(owner.customer, owner.auth, event, compact);
    if (hooked) await this.kick(store.authKeys(owner.customer, owner.auth).events, this.deps.log);
  }

  /**
   * What a failed charging script (send or retry) leaves: a refusal charged nothing; any other
   * failure may be a script Redis ran all the same, its answer lost or late (a paused, slow or
   * restarting Redis), so a charge for a message nobody sends now, as the caller gets 503. That
   * hold is released (refund, windows freed, authentication removed or previous code restored)
   * in the background once Redis answers, unless a recovery claimed it first. Rethrows.
   */
  private giveBack(hold: Hold, held: HoldArgs, call: CallScope): (err: unknown) => never {
    return (err) => {
      if (!(err instanceof RingfenceError)) {
        void settleHold(this.deps.store, call.log, hold, "release", held);
      }
      throw err;
    };
  }

  /** The hold arguments of a send or retry issued now, its message sealed (it holds the code). */
  private holdArgs(sms: OutgoingSms): HoldArgs & { id: string } {
    const issuedAt = Date.now();
    return {
      id: sms.reference,
      issuedAt,
      staleMs: STALE_AFTER_MS,
      deadline: issuedAt + holdSpanMs(this.deps.config),
      sealed: this.deps.secrets.encrypt(JSON.stringify(sms)),
      owner: this.owner,
    };
  }

  /**
   * Sends one held message. Accepted: the hold is committed (the charge stands; in the
   * background if Redis does not answer), the message id remembered for delivery receipts and
   * the `sent` event recorded, all three in one round trip, and the call succeeds. Refused: the
   * hold is released (refund, windows freed) and the call fails. No answer: the hold stays for
   * the recovery, which re-sends with the same reference and charges by the answer; the caller
   * gets 503. Answers whether the event awaits webhook delivery.
   */
  private async deliver(
    hold: Hold,
    sms: OutgoingSms,
    attempt: number,
    sent: Envelope,
    ctx: EventContext,
    call: CallScope,
  ): Promise<boolean> {
    const { store } = this.deps;
    const { log } = call;
    let providerId: string;
    try {
      ({ providerId } = await this.deps.sms.send(sms, call));
    } catch (err) {
      const error = errorMessage(err);
      if (outcomeUnknown(err)) {
        log.warn("sms outcome unknown; held for recovery", { reference: sms.reference, error });
        throw unavailable("the provider did not answer; the message is charged only if it was accepted");
      }
      await settleHold(store, log, hold, "release");
      log.error("sms not accepted", { provider: this.deps.sms.name, reference: sms.reference, error });
      if (err instanceof RingfenceError) throw err;
      throw new RingfenceError("internal_server_error", "the message could not be sent; nothing was charged");
    }
    const auth = hold.id.split(".")[0] ?? "";
    const [, , hooked] = await Promise.all([
      settleHold(store, log, hold, "commit"),
      store
        .rememberMessage(
          providerId,
          { customer: hold.customer, auth, attempt },
          this.deps.config.SMS_RECEIPT_RETENTION_SECONDS,
        )
        .catch((err: unknown) => {
          log.warn("message id not remembered", { error: String(err) });
        }),
      this.afterSent(hold.customer, auth, sent, compactEvent(sent, ctx), log),
    ]);
    return hooked;
  }

  /** Records an event after the message went out; a failure must not fail the call. */
  private async afterSent(
    customerUuid: string,
    authUuid: string,
    event: Envelope,
    compact: string,
    log: Logger,
  ): Promise<boolean> {
    try {
      return (await this.deps.store.appendEvent(customerUuid, authUuid, event, compact)).hooked;
    } catch (err) {
      log.warn("attempt event not recorded", {
        error: errorMessage(err),
      });
      return false;
    }
  }

  /**
   * Starts delivery of an authentication's webhook events. A failure here must not fail the call:
   * the events are recorded, and the outbox's recovery sweep delivers them later.
   */
  private async kick(list: string, log: Logger): Promise<void> {
    try {
      await this.deps.webhooks.kick(list);
    } catch (err) {
      log.warn("webhook delivery not started; the sweep will", {
        error: errorMessage(err),
      });
    }
  }
}

/** What the compact records of an authentication's events leave to its row. */
function eventContext(f: EventFacts, expiresAt: string): EventContext {
  return { authUuid: f.authUuid, phone: f.phone, correlationId: f.correlationId, expiresAt };
}

export function unknownAuthentication(): RingfenceError {
  return new RingfenceError(
    "no_associated_auth_found",
    "no authentication of this customer has this authentication_uuid",
  );
}

function sendPlace(
  customer: string,
  auth: string,
  phone: ParsedNumber,
  ip: string,
  deviceId: string,
  config: Config,
  t: number,
): SendPlace {
  return {
    customer,
    auth,
    phone: phone.e164,
    ip: ip === "" ? "-" : ip,
    device: deviceId === "" ? "-" : createHash("sha256").update(deviceId).digest("hex").slice(0, 32),
    range: phone.e164.slice(0, -config.SPAM_RANGE_DIGITS),
    month: new Date(t).toISOString().slice(0, 7),
  };
}

/** Stands where the status goes in an `authentication` event, while it is built (createdEvent). */
const STATUS_SLOT = `status-${randomUUID()}`;

/**
 * The `authentication` event a send may record, built once for whichever status its script
 * decides (CreatedEvent, src/verify/events.ts): the event is built with STATUS_SLOT for its status
 * and cut there. An API whose creation event names no status records it once pending only (V2).
 */
function createdEvent(
  shapes: EventShapes,
  facts: EventFacts,
  createdAt: string,
  expiresAt: string,
  ctx: EventContext,
): CreatedEvent | null {
  const slotted = shapes.created(facts, STATUS_SLOT as AuthenticationStatus, createdAt, expiresAt);
  if (slotted === "") {
    const pending = shapes.created(facts, "pending", createdAt, expiresAt);
    return pending === "" ? null : { statuses: ["pending"], event: [pending], compact: null };
  }
  const [before, after, ...more] = slotted.split(STATUS_SLOT);
  if (before === undefined || after === undefined || more.length > 0) {
    throw new Error("an authentication event names its status once");
  }
  // The compact record says the status last: it is cut the same way, and kept where it fits.
  const compact = compactEvent(JSON.parse(before + "pending" + after) as Envelope, ctx);
  const tail = '"pending"]';
  return {
    statuses: ["pending", "rate_limited", "spam_detected"],
    event: [before, after],
    compact: compact.endsWith(tail) ? [compact.slice(0, -tail.length + 1), '"]'] : null,
  };
}

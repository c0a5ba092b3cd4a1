import { createHash, randomUUID } from "node:crypto";
import { hashCode as hashOtp, newCode } from "../otp/code.js";
import { RingfenceError } from "../errors.js";
import type { StoredAccount } from "../accounts/account.js";
import { ACCOUNT_SECRET_KIND } from "../accounts/account.js";
import { describeNumber } from "../lookup/numbers.js";
import { parseE164, type ParsedNumber } from "../phone/e164.js";
import { screenNumber } from "../lookup/spam.js";
import { limitSubject } from "../net/cidr.js";
import type { CallScope } from "../observability/calls.js";
import { renderOtpSms, resolveLocale } from "../messaging/templates.js";
import type { DeliveryReceipt } from "../messaging/sms.js";
import { defaultSmsSender } from "../messaging/settings.js";
import { codePolicy, type CodePolicy } from "../otp/settings.js";
import { secretRef, type CorrelatedEnvelope } from "../webhooks/stream.js";
import type { AuthenticationStatus, CheckStatus, Envelope, RetryStatus } from "./model.js";
import type { SendPlace, SendRules, Signals, StoredAuthentication } from "./store.js";
import { EVENT_SHAPES, type EventFacts, type VerifyApi } from "./events.js";
import type { VerifyDeps } from "./deps.js";
import { giveBack, holdArgs, unavailable } from "./holds.js";
import { deliver, kick } from "./delivery.js";
import { afterUndelivered, UNDELIVERED } from "./undelivered.js";
import { plannedChannels, plannedField, renderAgain, stagesFor } from "./channels.js";
import type { Channel } from "../messaging/providers.js";
import { createdEvent, eventContext } from "./event-records.js";
import { compactEvent } from "./row.js";

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
   * V2: the channels its code goes by, in fallback order (docs/v2-api.md#channels); absent: SMS.
   */
  channels?: readonly [Channel, ...Channel[]] | undefined;
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
  readonly owner = randomUUID();

  /** The send and retry scripts' settings, in their text: one object, so one script each. */
  readonly rules: SendRules;
  /** The codes it sends: length, lifetime, checks (src/otp/settings.ts). */
  readonly code: CodePolicy;

  constructor(readonly deps: VerifyDeps) {
    this.now = deps.now ?? Date.now;
    const { config } = deps;
    this.code = codePolicy(config);
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

  hashCode(auth: string, code: string): string {
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
    const from = req.senderId === "" ? defaultSmsSender(config) : req.senderId;
    const message = renderOtpSms({
      code,
      locale,
      templateId: req.templateId === "" ? undefined : req.templateId,
      customTemplates: account.templates,
      lifetimeMinutes: Math.ceil(this.code.ttlSeconds / 60),
      appRealm: req.appRealm === "" ? undefined : req.appRealm,
    });
    const createdAt = new Date(t).toISOString();
    const expiresMs = t + this.code.ttlSeconds * 1000;
    const expiresAt = new Date(expiresMs).toISOString();
    const sms = {
      to: phone.e164,
      from,
      body: message.body,
      locale: message.locale,
      reference: `${authUuid}.1`,
    };
    const channels = req.channels ?? ONLY_SMS;
    const stages = stagesFor(this.deps, channels, destination, sms, code);
    const [first] = stages;
    const price = first.price;
    const shapes = EVENT_SHAPES[req.api];
    const facts = await this.facts(req.api, authUuid, phone, req.correlationId, price);
    const ctx = eventContext(facts, expiresAt);
    const ip = req.ip === "" ? "" : limitSubject(req.ip);
    const place = sendPlace(account.customerUuid, authUuid, phone, ip, req.deviceId, config, t);
    const source = { ip: req.ip, deviceId: req.deviceId };
    const held = holdArgs(this.deps, this.owner, first.sms, first.plan);
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
            channels: plannedField(channels),
            // The next channel's message is made from the code (docs/v2-api.md#fallback).
            codeSealed: channels.length > 1 ? this.deps.secrets.encrypt(code) : "",
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
      .catch((err: unknown) => giveBack(store, store.holdOf(place, sms.reference, "send"), held, call)(err));
    if (judged !== undefined) fraud.noted(req.api, judged, destination.country);
    if (status === "stale") throw unavailable("the service is temporarily unavailable, try again shortly");
    if (refusedBy !== undefined) call.noteRefusal(refusedBy);

    if (status === "pending") {
      const { stage } = await deliver(
        this.deps,
        { hold: store.holdOf(place, sms.reference, "send"), held, stages },
        1,
        (by) =>
          shapes.sent({ ...facts, priceMicros: by.price }, 1, "send", new Date(this.now()).toISOString()),
        ctx,
        call,
      );
      // Settled: the provider took the message, so the charge stands.
      this.deps.metrics.charged(phone.countryCode, stage.price);
    }
    if (req.callbackUrl !== "") {
      await kick(this.deps, store.authKeys(account.customerUuid, authUuid).events, call.log);
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
    const code = newCode(auth.codeLength > 0 ? auth.codeLength : this.code.length);
    const message = renderAgain(auth, account.templates, code, t);
    const attempt = auth.attempts + 1;
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
    // A retry goes by the channel the verification is on now, then falls back through those after
    // it (docs/v2-api.md#fallback); first to another provider than the one that carried the
    // attempt before it.
    const planned = plannedChannels(auth.channels);
    const from = Math.max(0, planned.indexOf((auth.channel || planned[0]) as Channel));
    const channels = planned.slice(from) as [Channel, ...Channel[]];
    const avoid = auth.carriedBy === "" ? undefined : auth.carriedBy;
    const stages = stagesFor(this.deps, channels, destination, sms, code, avoid);
    const [first] = stages;
    const price = first.price;
    const held = holdArgs(this.deps, this.owner, first.sms, first.plan);
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
          codeSealed: planned.length > 1 ? this.deps.secrets.encrypt(code) : undefined,
        },
        held,
        fraud.sendKeys(account.customerUuid, destination),
      )
      .catch((err: unknown) => giveBack(store, store.holdOf(place, sms.reference, "retry"), held, call)(err));
    if (r.fraud !== undefined) fraud.noted(auth.api, r.fraud, destination.country);
    if (r.status === "not_found") throw unknownAuthentication();
    if (r.status === "stale") throw unavailable("the service is temporarily unavailable, try again shortly");
    if (r.refusedBy !== undefined) call.noteRefusal(r.refusedBy);
    if (r.status === "approved") {
      const facts = await this.facts(auth.api, authUuid, phone, auth.correlationId, price);
      const { hooked, stage } = await deliver(
        this.deps,
        { hold: store.holdOf(place, sms.reference, "retry"), held, stages },
        attempt,
        (by) =>
          EVENT_SHAPES[auth.api].sent(
            { ...facts, priceMicros: by.price },
            attempt,
            "retry",
            new Date(this.now()).toISOString(),
          ),
        eventContext(facts, auth.expiresAt),
        call,
      );
      this.deps.metrics.charged(phone.countryCode, stage.price);
      if (hooked) await kick(this.deps, store.authKeys(account.customerUuid, authUuid).events, call.log);
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
    const { store } = this.deps;
    const t = this.now();
    const at = new Date(t).toISOString();
    const shapes = EVENT_SHAPES[api];
    const valid = shapes.checked(authUuid, "valid", at);
    const invalid = shapes.checked(authUuid, "invalid", at);
    // A check's record names nothing of the row: its correlation_id is added where it is read.
    const ctx = { authUuid, phone: "", correlationId: "", expiresAt: "" };
    const compact = (e: CorrelatedEnvelope) => compactEvent(JSON.parse(e.head + e.tail) as Envelope, ctx);
    const { status, hooked, phone, carried } = await store.check(account.customerUuid, authUuid, {
      now: t,
      codeHash: this.hashCode(authUuid, code),
      maxChecks: this.code.maxChecks,
      api,
      events:
        valid === undefined || invalid === undefined
          ? undefined
          : { valid, invalid, compact: { valid: compact(valid), invalid: compact(invalid) } },
    });
    if (hooked) await kick(this.deps, store.authKeys(account.customerUuid, authUuid).events, call.log);
    // With one provider the row names none (holds.ts, holdArgs): it carried the code.
    const only =
      this.deps.router.providers.length === 1 ? this.deps.router.providers[0]?.spec.name : undefined;
    const by = carried ?? only;
    // An email's code went by no delivery provider (docs/v2-api.md#email).
    if (by !== undefined && phone !== undefined && !phone.includes("@")) {
      const channel = this.deps.router.provider(by.split(" ")[0] ?? "")?.spec.channel ?? "sms";
      this.deps.router.verified(channel, by, phone);
    }
    if (phone !== undefined) await this.converted(api, account.customerUuid, phone);
    return status;
  }

  /** A right code, or V1 feedback `onboarded`: the fraud engine counts the number's conversion. */
  async converted(api: VerifyApi, customer: string, e164: string): Promise<void> {
    await this.deps.fraud.convertedNumber(api, customer, e164);
  }

  /** Turns a delivery receipt of `provider` into its authentication's event, in its API's shape. */
  async recordReceipt(provider: string, receipt: DeliveryReceipt): Promise<void> {
    const { store, log } = this.deps;
    const formerNames = this.deps.router.provider(provider)?.spec.formerNames;
    const owner = await store.messageOwner(provider, receipt.providerId, formerNames);
    if (owner === undefined) {
      log.warn("delivery receipt for an unknown message", { providerId: receipt.providerId });
      return;
    }
    // An expired authentication has nothing left to record against.
    const known = await store.receiptFacts(owner.customer, owner.auth);
    const phone = known === undefined ? undefined : parseE164(known.phone);
    if (known === undefined || phone === undefined) return;
    // Refunded (and re-sent) first, itself once however often it is reported: a report answered
    // with an error comes again, and finds the refund still to do.
    if (UNDELIVERED.has(receipt.state)) await afterUndelivered(this.deps, provider, owner, phone, this.now());
    // Delivered in time: a WhatsApp message no longer falls back (docs/v2-api.md#fallback).
    if (receipt.state === "delivered" && owner.channel === "whatsapp") {
      await store.cancelFallback({ ...owner, channel: owner.channel });
    }
    // A repeated report changes nothing more.
    if (!(await store.reportOnce(owner.customer, owner.auth, owner, receipt.state))) return;
    const price = owner.price ?? known.priceMicros;
    const facts = await this.facts(known.api, owner.auth, phone, known.correlationId, price);
    const channel = this.deps.router.provider(provider)?.spec.channel ?? "sms";
    this.deps.router.reported(channel, provider, phone.countryCode, owner.route ?? "default", receipt.state);
    const event = EVENT_SHAPES[known.api].receipt(facts, owner.attempt, receipt);
    const compact = compactEvent(event, eventContext(facts, ""));
    const { hooked } = await store.appendEvent(owner.customer, owner.auth, event, compact);
    if (hooked) await kick(this.deps, store.authKeys(owner.customer, owner.auth).events, this.deps.log);
  }
}

/** The channels of a send that names none: SMS, as V1 and V2 before channels. */
const ONLY_SMS: readonly [Channel] = ["sms"];

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
  config: VerifyDeps["config"],
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

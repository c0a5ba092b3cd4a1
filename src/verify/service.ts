import { createHash, randomUUID } from "node:crypto";
import { hashCode as hashOtp, newCode } from "../otp/code.js";
import { z } from "zod";
import { badField, badInput, quote, RingfenceError, type ErrorCode } from "../errors.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { Secrets } from "../crypto/secrets.js";
import type { AccountStore } from "../accounts/store.js";
import type { Handlers } from "../rpc/binding.js";
import { accountOf } from "../accounts/authenticate.js";
import type { VerifyServiceService } from "../gen/ringfence/verify/v1/verify_service.js";
import type { LookupDataSource } from "../lookup/lookup-data.js";
import { parseE164, type ParsedNumber } from "../lookup/numbers.js";
import { staticSpamRule } from "../lookup/spam.js";
import { noteRefusal } from "../observability/calls.js";
import type { Metrics } from "../observability/metrics.js";
import { isAppRealm, isBcp47, renderOtpSms, resolveLocale } from "../messaging/templates.js";
import type { DeliveryReceipt, SmsProvider } from "../messaging/sms.js";
import {
  CREATE_FIELD_CODES,
  CreateAuthenticationInput,
  FEEDBACK_STATUSES,
  type Envelope,
  type EventType,
} from "./model.js";
import { readBack } from "./read-back.js";
import type { OutgoingSms } from "../messaging/provider.js";
import type { Hold, SendPlace, VerifyStore } from "./store.js";
import { phoneInRegions } from "../net/validate.js";
import { correlatedEnvelope, makeEnvelope, secretRef } from "../webhooks/stream.js";
import { ACCOUNT_SECRET_KIND } from "../accounts/account.js";
import { holdSpanMs, outcomeUnknown, settleHold, STALE_AFTER_MS, unavailable } from "./holds.js";

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
  outbound: Pick<OutboundGuard, "checkUrl">;
  /** Counts what accounts are charged (the spend metric). */
  metrics: Pick<Metrics, "charged">;
  now?: () => number;
}

const RETENTION_MS = 7 * 86_400_000;

/** The V1 verification: send a code, check it, retry, read back, feedback. */
export function verifyHandlers(deps: VerifyDeps): Handlers<typeof VerifyServiceService> {
  const now = deps.now ?? Date.now;
  const { config, store } = deps;

  const hashCode = (auth: string, code: string) => hashOtp(deps.secrets, auth, code);
  const priceFor = (country: string) => config.SMS_PRICES[country] ?? config.SMS_PRICES.default ?? 0;

  const owner = randomUUID();
  /** The hold arguments of a send or retry issued now, its message sealed (it holds the code). */
  function holdArgs(sms: OutgoingSms) {
    const issuedAt = Date.now();
    return {
      id: sms.reference,
      issuedAt,
      staleMs: STALE_AFTER_MS,
      deadline: issuedAt + holdSpanMs(config),
      sealed: deps.secrets.encrypt(JSON.stringify(sms)),
      owner,
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
  async function deliver(hold: Hold, sms: OutgoingSms, attempt: number, sent: Envelope): Promise<boolean> {
    let providerId: string;
    try {
      ({ providerId } = await deps.sms.send(sms));
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      if (outcomeUnknown(err)) {
        deps.log.warn("sms outcome unknown; held for recovery", { reference: sms.reference, error });
        throw unavailable("the provider did not answer; the message is charged only if it was accepted");
      }
      await settleHold(store, deps.log, hold, "release");
      deps.log.error("sms not accepted", { provider: deps.sms.name, reference: sms.reference, error });
      if (err instanceof RingfenceError) throw err;
      throw new RingfenceError("internal_server_error", "the message could not be sent; nothing was charged");
    }
    const auth = hold.id.split(".")[0] ?? "";
    const [, , hooked] = await Promise.all([
      settleHold(store, deps.log, hold, "commit"),
      store.rememberMessage(providerId, { customer: hold.customer, auth, attempt }).catch((err: unknown) => {
        deps.log.warn("message id not remembered", { error: String(err) });
      }),
      afterSent(hold.customer, auth, sent),
    ]);
    return hooked;
  }

  /** Records an event after the message went out; a failure must not fail the call. */
  async function afterSent(customerUuid: string, authUuid: string, event: Envelope): Promise<boolean> {
    try {
      return (await store.appendEvent(customerUuid, authUuid, event)).hooked;
    } catch (err) {
      deps.log.warn("attempt event not recorded", {
        error: err instanceof Error ? err.message : String(err),
      });
      return false;
    }
  }

  return {
    async createAuthentication(req, ctx) {
      const input = parse(CreateAuthenticationInput, req, CREATE_FIELD_CODES);
      if (input.locale !== "" && !isBcp47(input.locale))
        throw badField("locale", "must be a BCP-47 language tag");
      checkAppRealm(input.appRealm, input.deviceType);
      const account = accountOf(ctx);
      if (input.senderId !== "" && !account.senderIds.includes(input.senderId)) {
        throw badField(
          "sender_id",
          `${quote(input.senderId)} is not one of this account's sender IDs`,
          "unauthorized_sender_id",
        );
      }
      // After authentication, so that anonymous callers cannot make the service resolve names.
      if (input.callbackUrl !== "") await deps.outbound.checkUrl(input.callbackUrl, "callback_url");
      const phone = phoneInRegions(input.phoneNumber, account.regions);
      const staticSpam = (await staticSpamRule(config, deps.lookupData, phone)) ?? false;

      const t = now();
      const authUuid = randomUUID();
      const code = newCode(config.OTP_LENGTH);
      const locale = resolveLocale(input.locale === "" ? undefined : input.locale, phone.countryCode);
      const from = input.senderId === "" ? config.SMS_FROM : input.senderId;
      const message = renderOtpSms({
        code,
        locale,
        templateId: input.templateId === "" ? undefined : input.templateId,
        customTemplates: account.templates,
        lifetimeMinutes: Math.ceil(config.OTP_TTL_SECONDS / 60),
        appRealm: input.appRealm === "" ? undefined : input.appRealm,
      });
      const createdAt = new Date(t).toISOString();
      const expiresMs = t + config.OTP_TTL_SECONDS * 1000;
      const expiresAt = new Date(expiresMs).toISOString();
      const correlationId = input.correlationId;
      const authEvent = (status: string) =>
        JSON.stringify(
          envelope("authentication", createdAt, correlationId, {
            authentication_uuid: authUuid,
            status,
            phone_number: phone.e164,
            created_at: createdAt,
            expires_at: expiresAt,
          }),
        );
      const place = sendPlace(account.customerUuid, authUuid, phone, input.ip, input.deviceId, config, t);
      const price = priceFor(phone.countryCode);
      const member = `${authUuid}:1`;
      const sms = {
        to: phone.e164,
        from,
        body: message.body,
        locale: message.locale,
        reference: `${authUuid}.1`,
      };

      const { status, refusedBy } = await store.send(
        place,
        {
          now: t,
          phone: phone.e164,
          member,
          staticSpam,
          hasIp: input.ip !== "",
          hasDevice: input.deviceId !== "",
          price,
          codeHash: hashCode(authUuid, code),
          retryIntervalMs: config.OTP_RETRY_INTERVAL_SECONDS * 1000,
          keepUntil: expiresMs + RETENTION_MS,
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
          authentication: {
            customerUuid: account.customerUuid,
            phoneNumber: phone.e164,
            countryCode: phone.countryCode,
            createdAt,
            expiresAt,
            expiresAtMs: expiresMs,
            correlationId,
            locale: message.locale,
            templateId: message.templateId,
            from,
            appRealm: input.appRealm,
            callbackUrl: input.callbackUrl,
            priceMicros: price,
            signals: {
              ip: input.ip,
              deviceId: input.deviceId,
              deviceType: input.deviceType,
              appVersion: input.appVersion,
              osVersion: input.osVersion,
              deviceModel: input.deviceModel,
              isReturningUser: input.isReturningUser,
            },
          },
          events: {
            pending: authEvent("pending"),
            rate_limited: authEvent("rate_limited"),
            spam_detected: authEvent("spam_detected"),
          },
          hook:
            input.callbackUrl === ""
              ? null
              : { url: input.callbackUrl, secretRef: secretRef(ACCOUNT_SECRET_KIND, account.customerUuid) },
        },
        holdArgs(sms),
      );
      if (status === "stale") throw unavailable("the service is temporarily unavailable, try again shortly");
      if (refusedBy !== undefined) noteRefusal(refusedBy);

      const keys = store.authKeys(account.customerUuid, authUuid);
      if (status === "pending") {
        await deliver(
          store.holdOf(place, sms.reference, "send"),
          sms,
          1,
          envelope("attempt", new Date(now()).toISOString(), correlationId, {
            authentication_uuid: authUuid,
            attempt: 1,
            action: "send",
            status: "sent",
          }),
        );
        // Settled: the provider took the message, so the charge stands.
        deps.metrics.charged(phone.countryCode, price);
      }
      if (input.callbackUrl !== "") await kick(deps, keys.events);
      return { authenticationUuid: authUuid, status, createdAt, expiresAt };
    },

    async checkAuthentication(req, ctx) {
      const authUuid = authUuidField(req.authenticationUuid);
      if (!/^\d{1,12}$/.test(req.checkCode)) throw badField("check_code", "must be the digits of the code");
      const account = accountOf(ctx);
      const t = now();
      // The script completes each envelope with the correlation_id stored with the authentication.
      const checkEvent = (status: string) =>
        correlatedEnvelope({
          type: "attempt",
          createdAt: new Date(t).toISOString(),
          payload: { authentication_uuid: authUuid, action: "check", status },
        });
      const { status, hooked } = await store.check(account.customerUuid, authUuid, {
        now: t,
        codeHash: hashCode(authUuid, req.checkCode),
        maxChecks: config.OTP_MAX_CHECKS,
        events: { valid: checkEvent("valid"), invalid: checkEvent("invalid") },
      });
      if (status === "not_found") throw unknownAuthentication();
      if (hooked) await kick(deps, store.authKeys(account.customerUuid, authUuid).events);
      return { authenticationUuid: authUuid, status };
    },

    async retryAuthentication(req, ctx) {
      const authUuid = authUuidField(req.authenticationUuid);
      const account = accountOf(ctx);
      const found = await store.get(account.customerUuid, authUuid);
      if (found === undefined) throw unknownAuthentication();
      const { auth } = found;
      const phone = parseE164(auth.phoneNumber);
      if (phone === undefined)
        throw new RingfenceError("internal_server_error", "stored number is unreadable");

      const t = now();
      const code = newCode(config.OTP_LENGTH);
      const message = renderOtpSms({
        code,
        locale: auth.locale,
        templateId: auth.templateId === "" ? undefined : auth.templateId,
        customTemplates: account.templates,
        lifetimeMinutes: Math.max(1, Math.ceil((auth.expiresAtMs - t) / 60_000)),
        appRealm: auth.appRealm === "" ? undefined : auth.appRealm,
      });
      const attempt = auth.attempts + 1;
      const member = `${authUuid}:${attempt}`;
      const price = priceFor(phone.countryCode);
      const place = sendPlace(account.customerUuid, authUuid, phone, "", "", config, t);
      const sms = {
        to: phone.e164,
        from: auth.from,
        body: message.body,
        locale: message.locale,
        reference: `${authUuid}.${attempt}`,
      };
      const r = await store.retry(
        place,
        {
          now: t,
          codeHash: hashCode(authUuid, code),
          maxRetries: config.OTP_MAX_RETRIES,
          retryIntervalMs: config.OTP_RETRY_INTERVAL_SECONDS * 1000,
          price,
          member,
          limits: { number: config.RATE_LIMIT_NUMBER, account: config.RATE_LIMIT_ACCOUNT },
        },
        holdArgs(sms),
      );
      if (r.status === "not_found") throw unknownAuthentication();
      if (r.status === "stale")
        throw unavailable("the service is temporarily unavailable, try again shortly");
      if (r.refusedBy !== undefined) noteRefusal(r.refusedBy);
      if (r.status === "approved") {
        const hooked = await deliver(
          store.holdOf(place, sms.reference, "retry"),
          sms,
          attempt,
          envelope("attempt", new Date(now()).toISOString(), auth.correlationId, {
            authentication_uuid: authUuid,
            attempt,
            action: "retry",
            status: "sent",
          }),
        );
        deps.metrics.charged(phone.countryCode, price);
        if (hooked) await kick(deps, store.authKeys(account.customerUuid, authUuid).events);
      }
      const remaining = Math.max(0, config.OTP_MAX_RETRIES - r.retries);
      const showNext =
        r.nextRetryAtMs > 0 &&
        remaining > 0 &&
        r.status !== "expired_auth" &&
        r.status !== "already_validated";
      return {
        authenticationUuid: authUuid,
        status: r.status,
        createdAt: new Date(t).toISOString(),
        ...(showNext ? { nextRetryAt: new Date(r.nextRetryAtMs).toISOString() } : {}),
        remainingRetry: remaining,
      };
    },

    async getAuthentication(req, ctx) {
      const authUuid = authUuidField(req.authenticationUuid);
      const account = accountOf(ctx);
      const found = await store.get(account.customerUuid, authUuid);
      if (found === undefined) throw unknownAuthentication();
      return readBack(authUuid, found.auth, found.events, now());
    },

    async createFeedback(req, ctx) {
      const status = req.status;
      if (!(FEEDBACK_STATUSES as readonly string[]).includes(status)) {
        throw badField("status", `must be one of ${FEEDBACK_STATUSES.join(", ")}`, "invalid_feedback_status");
      }
      const account = accountOf(ctx);
      const phone = phoneInRegions(req.phoneNumber, account.regions);
      const uuid = stableUuid(`${account.customerUuid}|${phone.e164}|${status}`);
      const saved = await store.saveFeedback(
        account.customerUuid,
        phone.e164,
        status,
        uuid,
        new Date(now()).toISOString(),
      );
      if (!saved) {
        throw badField(
          "status",
          `${phone.e164} is already recorded as ${status} (feedback ${uuid})`,
          "duplicated_feedback_status",
        );
      }
      return { uuid };
    },
  };
}

/**
 * Starts delivery of an authentication's webhook events. A failure here must not fail the call:
 * the events are recorded, and the outbox's recovery sweep delivers them later.
 */
async function kick(deps: VerifyDeps, list: string): Promise<void> {
  try {
    await deps.webhooks.kick(list);
  } catch (err) {
    deps.log.warn("webhook delivery not started; the sweep will", {
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/** Turns an SMPP delivery receipt into a `delivery_status` event of its authentication. */
export async function recordReceipt(deps: VerifyDeps, receipt: DeliveryReceipt): Promise<void> {
  const owner = await deps.store.messageOwner(receipt.providerId);
  if (owner === undefined) {
    deps.log.warn("delivery receipt for an unknown message", { providerId: receipt.providerId });
    return;
  }
  // An expired authentication has no events list left: appendEvent then records nothing.
  const correlationId = await deps.store.correlationId(owner.customer, owner.auth);
  const { hooked } = await deps.store.appendEvent(
    owner.customer,
    owner.auth,
    envelope("delivery_status", receipt.at, correlationId, {
      authentication_uuid: owner.auth,
      attempt: owner.attempt,
      status: receipt.state,
      provider_status: receipt.providerStatus,
      ...(receipt.errorCode === undefined ? {} : { error_code: receipt.errorCode }),
    }),
  );
  if (hooked) await kick(deps, deps.store.authKeys(owner.customer, owner.auth).events);
}

function envelope(
  type: EventType,
  createdAt: string,
  correlationId: string,
  payload: Record<string, unknown>,
): Envelope {
  return makeEnvelope({ type, createdAt, correlationId, payload });
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

/** A UUID (version 8, RFC 9562) derived from a name, so a repeat gives the same one. */
function stableUuid(name: string): string {
  const b = createHash("sha256").update(name).digest().subarray(0, 16);
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x80;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function parse<T>(schema: z.ZodType<T>, value: unknown, codes: Record<string, ErrorCode> = {}): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw badInput(r.error, codes);
}

/**
 * `app_realm` (the Android SMS Retriever hash) needs `device_type` ANDROID: the original API's
 * codes tell a malformed hash, a missing device type and another device type apart.
 */
function checkAppRealm(appRealm: string, deviceType: string): void {
  if (appRealm === "") return;
  if (!isAppRealm(appRealm)) {
    throw badField("app_realm", "must be the 11-character Android SMS Retriever hash", "invalid_app_realm");
  }
  if (deviceType === "") {
    throw badField("app_realm", "requires device_type ANDROID", "app_realm_require_device_type");
  }
  if (deviceType !== "ANDROID") {
    throw badField(
      "app_realm",
      `requires device_type ANDROID, not ${deviceType}`,
      "unsupported_app_realm_device_type",
    );
  }
}

function authUuidField(value: string): string {
  if (!z.uuid().safeParse(value).success) {
    throw badField("authentication_uuid", `${quote(value)} is not a uuid`, "invalid_auth_uuid");
  }
  return value.toLowerCase();
}

function unknownAuthentication(): RingfenceError {
  return new RingfenceError(
    "no_associated_auth_found",
    "no authentication of this customer has this authentication_uuid",
  );
}

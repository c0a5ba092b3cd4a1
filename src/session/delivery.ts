import { randomUUID } from "node:crypto";
import { isRedisUnavailable, refusedBy, RingfenceError } from "../errors.js";
import type { CallScope } from "../observability/calls.js";
import { errorMessage, type Logger } from "../log.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { takeWindows, tooManyAttempts, type Window } from "../otp/code.js";
import { WindowKeys } from "../otp/keys.js";
import { screenNumber } from "../lookup/spam.js";
import type { LookupSettings } from "../lookup/settings.js";
import { defaultEmailSender, defaultSmsSender, type MessagingSettings } from "../messaging/settings.js";
import { sendWindows, type VerifySettings } from "../verify/settings.js";
import type { SessionSettings } from "./settings.js";
import {
  NO_SOURCE,
  refusalName,
  type Destination,
  type FraudEngine,
  type FraudSource,
} from "../fraud/engine.js";
import type { LookupDataSource } from "../lookup/lookup-data.js";
import type { AppStore } from "../apps/store.js";
import { parseE164 } from "../phone/e164.js";
import { limitSubject } from "../net/cidr.js";
import { renderOtpSms, resolveLocale } from "../messaging/templates.js";
import type { SmsProvider } from "../messaging/sms.js";
import { renderOtpEmail, type EmailProvider } from "../messaging/email.js";
import type { Identifier } from "./identity.js";
import { identifierWindows, type LoginSource } from "./known-sources.js";
import type { UserStore } from "./users.js";

/** What code sending reads: its own windows, the send windows and spam rules of verification, the senders. */
export type CodeSenderSettings = Pick<
  SessionSettings,
  "LOGIN_LIMIT_APP" | "LOGIN_LIMIT_IP" | "APP_SMS_DAILY_LIMIT" | "OTP_CHECK_LIMIT"
> &
  Pick<VerifySettings, "RATE_LIMIT_NUMBER" | "SPAM_RANGE_BURST" | "SPAM_RANGE_DIGITS"> &
  Pick<MessagingSettings, "SMS_FROM" | "EMAIL_FROM"> &
  Pick<LookupSettings, "SPAM_LINE_TYPES" | "SPAM_DISPOSABLE">;

/**
 * Sends login and step-up codes by SMS or email under the session abuse limits: windows per
 * identifier (RATE_LIMIT_NUMBER; a known source meets its own, docs/session-api.md#known-sources),
 * app (only codes to identifiers no user holds yet) and client IP for logins (step-up brings its
 * own windows, src/stepup/limits.ts), the V1 spam rules for SMS, and a count of messages per app.
 */
export class CodeSender {
  constructor(
    private readonly deps: {
      config: CodeSenderSettings;
      log: Logger;
      redis: RedisClient;
      keys: Keys;
      sms: SmsProvider;
      email: EmailProvider;
      lookupData: LookupDataSource;
      apps: AppStore;
      fraud: FraudEngine;
      users: Pick<UserStore, "indexKey">;
    },
  ) {}

  /**
   * One more login code to this identifier, asked from `source` (undefined without a client
   * address): 403 spam_detected for a number the spam rules refuse, else 429 when the
   * identifier's (or, from a known source, the source's own), the app's (LOGIN_LIMIT_APP, and
   * APP_SMS_DAILY_LIMIT for an SMS) or the address's window is full. The app's windows count and
   * refuse only codes to an identifier no user of the app holds yet: strangers filling them cannot
   * stop the app's users logging in. Nothing is recorded for a refused request.
   */
  async allowLogin(appId: string, id: Identifier, source: LoginSource | undefined): Promise<void> {
    const { config, keys } = this.deps;
    const rl = new WindowKeys(keys);
    const perIdentifier = {
      key: rl.loginIdentifier(appId, id.type, id.value),
      rule: sendWindows(config).number,
      name: "RATE_LIMIT_NUMBER",
    };
    // The app's windows count only while no user holds the identifier.
    const newcomer = { key: this.deps.users.indexKey(appId, id), exists: false };
    await this.allowSend(
      appId,
      id,
      [
        ...identifierWindows(perIdentifier, source, (digest) => rl.loginIdentifierFrom(appId, digest)),
        { key: rl.login(appId), rule: config.LOGIN_LIMIT_APP, name: "LOGIN_LIMIT_APP", when: newcomer },
        ...(id.type === "phone_number"
          ? [
              {
                key: rl.appSms(appId),
                rule: config.APP_SMS_DAILY_LIMIT,
                name: "APP_SMS_DAILY_LIMIT",
                when: newcomer,
              },
            ]
          : []),
        ...(source === undefined
          ? []
          : [
              {
                key: rl.loginAddress(appId, limitSubject(source.address)),
                rule: config.LOGIN_LIMIT_IP,
                name: "LOGIN_LIMIT_IP",
              },
            ]),
      ],
      { ip: source?.address ?? "", deviceId: "" },
    );
  }

  /**
   * One more code check for a subject (a user for step-up, an app's identifier for logins, checked
   * from `source`), across all its challenges, so that opening new challenges brings no new
   * guesses. A login's known source meets its own window instead of the identifier's.
   */
  async allowCheck(
    subject: { userId: string } | { appId: string; id: Identifier; source: LoginSource | undefined },
  ): Promise<void> {
    const { config, keys, redis } = this.deps;
    const rl = new WindowKeys(keys);
    const rule = config.OTP_CHECK_LIMIT;
    let windows: Window[];
    if ("userId" in subject) {
      windows = [{ key: rl.userChecks(subject.userId), rule }];
    } else {
      const { appId, id, source } = subject;
      const key = rl.identifierChecks(appId, id.type, id.value);
      windows = identifierWindows({ key, rule }, source, (digest) => rl.identifierChecksFrom(appId, digest));
    }
    const { waitMs } = await takeWindows(redis, windows, randomUUID());
    if (waitMs > 0)
      throw refusedBy("OTP_CHECK_LIMIT", tooManyAttempts("too many code checks: try again later", waitMs));
  }

  /**
   * One more code to this identifier for the app: the spam rules of V1 sends for an SMS (static
   * rules, then bursts into the number's range, counted per app), then `windows` (all under one
   * hash tag, the caller's own limits: the login's here, step-up's in src/stepup/limits.ts), all
   * or nothing.
   */
  async allowSend(
    appId: string,
    id: Identifier,
    windows: Window[],
    source: FraudSource = NO_SOURCE,
  ): Promise<void> {
    const { config, keys, redis } = this.deps;
    const member = randomUUID();
    let range: Window | undefined;
    let destination: Destination | undefined;
    if (id.type === "phone_number") {
      const phone = parseE164(id.value);
      const screened =
        phone === undefined ? undefined : await screenNumber(config, this.deps.lookupData, phone);
      const spam = screened?.rule;
      if (spam !== undefined) throw refusedBy(spam, spamDetected());
      if (phone !== undefined && screened !== undefined)
        destination = this.deps.fraud.destination(phone, screened.facts);
      const windows = sendWindows(config);
      const prefix = id.value.slice(0, -windows.rangeDigits);
      range = {
        key: new WindowKeys(keys).range(appId, prefix),
        rule: windows.range,
        name: "SPAM_RANGE_BURST",
      };
    }
    const appTag = new WindowKeys(keys).appTag(appId);
    if (range === undefined || windows.every((w) => w.key.startsWith(`${appTag}:`))) {
      // One script for all: the range refuses as spam, any other full window as too many.
      const all = range === undefined ? windows : [range, ...windows];
      const { waitMs, full } = await takeWindows(redis, all, member);
      if (waitMs === 0) return this.judged(appId, destination, source);
      if (full !== undefined && full === range) throw refusedBy(range.name, spamDetected());
      throw refusedBy(full?.name, tooManyAttempts("too many codes asked for: try again later", waitMs));
    }
    // The range is the app's, the windows the user's (two hash tags): look, take, then record.
    if ((await takeWindows(redis, [range], member, "peek")).waitMs > 0)
      throw refusedBy(range.name, spamDetected());
    const { waitMs, full } = await takeWindows(redis, windows, member);
    if (waitMs > 0)
      throw refusedBy(full?.name, tooManyAttempts("too many codes asked for: try again later", waitMs));
    await takeWindows(redis, [range], member, "add");
    await this.judged(appId, destination, source);
  }

  /**
   * The fraud engine's decision on an SMS the windows let through (docs/fraud.md): 403
   * spam_detected on a block. The app is the tenant.
   */
  private async judged(
    appId: string,
    destination: Destination | undefined,
    source: FraudSource,
  ): Promise<void> {
    if (destination === undefined) return;
    const decision = await this.deps.fraud.judge("session", appId, destination, Date.now(), source);
    if (decision.action === "block") throw refusedBy(refusalName(decision.rule), spamDetected());
  }

  /** A right code for an SMS sent to this identifier: the fraud engine counts the conversion. */
  async converted(appId: string, id: Identifier): Promise<void> {
    if (id.type === "phone_number") await this.deps.fraud.convertedNumber("session", appId, id.value);
  }

  /** Sends a code for `call`; counted for the app once the provider accepted it. */
  async send(
    appId: string,
    id: Identifier,
    code: string,
    purpose: "login" | "step_up",
    ttlSeconds: number,
    call: CallScope,
  ): Promise<void> {
    const { config } = this.deps;
    const { log } = call;
    const reference = randomUUID();
    const minutes = Math.max(1, Math.ceil(ttlSeconds / 60));
    try {
      if (id.type === "phone_number") {
        const country = parseE164(id.value)?.countryCode ?? "";
        const text = renderOtpSms({
          code,
          locale: resolveLocale(undefined, country),
          lifetimeMinutes: minutes,
        });
        await this.deps.sms.send(
          {
            to: id.value,
            from: defaultSmsSender(config),
            body: text.body,
            locale: text.locale,
            reference,
          },
          call,
        );
      } else {
        const text = renderOtpEmail({
          code,
          locale: resolveLocale(undefined, ""),
          lifetimeMinutes: minutes,
          purpose,
        });
        await this.deps.email.send(
          {
            to: id.value,
            from: defaultEmailSender(config),
            subject: text.subject,
            body: text.body,
            reference,
          },
          call,
        );
      }
    } catch (err) {
      // A refusal the caller should see as it is (say "unavailable" while shutting down) stays one.
      if (err instanceof RingfenceError || isRedisUnavailable(err)) throw err;
      log.error("code not delivered", {
        kind: id.type,
        reference,
        error: errorMessage(err),
      });
      throw new RingfenceError("internal_server_error", "the code could not be sent");
    }
    await this.deps.apps
      .countMessage(appId, id.type === "phone_number" ? "sms" : "email")
      .catch((err: unknown) => {
        log.warn("message not counted", { error: errorMessage(err) });
      });
  }
}

function spamDetected(): RingfenceError {
  return new RingfenceError("spam_detected", "codes are not sent to this number");
}

import { randomUUID } from "node:crypto";
import { isRedisUnavailable, RingfenceError } from "../errors.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { takeWindow } from "../otp/code.js";
import { parseE164 } from "../lookup/numbers.js";
import { renderOtpSms, resolveLocale } from "../messaging/templates.js";
import type { SmsProvider } from "../messaging/sms.js";
import { renderOtpEmail, type EmailProvider } from "../messaging/email.js";
import type { Identifier } from "./users.js";

/** Sends login and step-up codes by SMS or email, under the same per-identifier windows as V1. */
export class CodeSender {
  constructor(
    private readonly deps: {
      config: Config;
      log: Logger;
      redis: RedisClient;
      keys: Keys;
      sms: SmsProvider;
      email: EmailProvider;
    },
  ) {}

  /** One more code to this identifier, or 429 when its window (RATE_LIMIT_NUMBER) is full. */
  async allow(appId: string, id: Identifier): Promise<void> {
    const { config, redis, keys } = this.deps;
    const window = keys.key("rl", appId, "ident", id.type, id.value.toLowerCase());
    if (!(await takeWindow(redis, window, config.RATE_LIMIT_NUMBER, randomUUID()))) {
      throw new RingfenceError(
        "too_many_attempts",
        "too many codes sent to this identifier: try again later",
        {
          "retry-after": String(config.RATE_LIMIT_NUMBER?.windowSeconds ?? 60),
        },
      );
    }
  }

  async send(id: Identifier, code: string, purpose: "login" | "step_up", ttlSeconds: number): Promise<void> {
    const { config, log } = this.deps;
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
        await this.deps.sms.send({
          to: id.value,
          from: config.SMS_FROM,
          body: text.body,
          locale: text.locale,
          reference,
        });
      } else {
        const text = renderOtpEmail({
          code,
          locale: resolveLocale(undefined, ""),
          lifetimeMinutes: minutes,
          purpose,
        });
        await this.deps.email.send({
          to: id.value,
          from: config.EMAIL_FROM,
          subject: text.subject,
          body: text.body,
          reference,
        });
      }
    } catch (err) {
      // A refusal the caller should see as it is (say "unavailable" while shutting down) stays one.
      if (err instanceof RingfenceError || isRedisUnavailable(err)) throw err;
      log.error("code not delivered", {
        kind: id.type,
        reference,
        error: err instanceof Error ? err.message : String(err),
      });
      throw new RingfenceError("internal_server_error", "the code could not be sent");
    }
  }
}

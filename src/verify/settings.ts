import { z } from "zod";
import { codePolicy, otpSettings } from "../otp/settings.js";
import { ConfigError, defineSettings, setting } from "../settings/define.js";
import { window, WINDOW_RULE } from "../settings/rules.js";
import { giveUpAfterMs, webhookSettings } from "../webhooks/settings.js";

const n = () => z.coerce.number().int();

/** `default:0.05,FR:0.07,US:0.0079`: price of one SMS by destination country, in micro-units. */
const prices = z
  .string()
  .transform((v) => v.split(",").map((p) => p.trim().split(":")))
  .pipe(
    z
      .array(z.tuple([z.string().regex(/^(default|[A-Z]{2})$/), z.string().regex(/^\d{1,6}(\.\d{1,6})?$/)]), {
        error: "must be a comma list of COUNTRY:price (or default:price), such as default:0.05,FR:0.07",
      })
      .transform((pairs) => {
        const micros = (s: string) => {
          const [w = "0", f = ""] = s.split(".");
          return Number(w) * 1_000_000 + Number(f.padEnd(6, "0"));
        };
        return Object.fromEntries(pairs.map(([c, p]) => [c, micros(p)]));
      }),
  );

/** Days as seconds, for the retention bounds. */
const days = (d: number) => d * 86_400;

/** V1 and V2 verification: prices, retries, retention, send windows and holds. */
export const verifySettings = defineSettings(
  {
    SMS_PRICES: setting({
      schema: prices.default({ default: 50_000 }),
      section: "delivery",
      default: "`default:0.05`",
      rule: "a comma list of `COUNTRY:price` (or `default:price`), up to 6 decimals",
      text: "Price of one SMS by destination country, e.g. `default:0.05,FR:0.07`.",
    }),
    WHATSAPP_PRICES: setting({
      schema: prices.default({ default: 30_000 }),
      section: "delivery",
      default: "`default:0.03`",
      rule: "as `SMS_PRICES`",
      text: "Price of one WhatsApp code message (V2) by destination country.",
    }),
    VOICE_PRICES: setting({
      schema: prices.default({ default: 100_000 }),
      section: "delivery",
      default: "`default:0.10`",
      rule: "as `SMS_PRICES`",
      text: "Price of one voice call speaking a code (V2) by destination country.",
    }),
    // docs/v2-api.md#fallback: a WhatsApp message not reported delivered by then moves the code on.
    CHANNEL_FALLBACK_SECONDS: setting({
      schema: n().min(1).max(600).default(30),
      section: "delivery",
      rule: "a whole number from 1 to 600",
      text:
        "How long a V2 code sent by WhatsApp waits to be reported delivered (or read) before it is sent " +
        "by the account's next channel.",
    }),
    // The currency SMS_PRICES and balances are in, as V2 webhook events name it (ISO 4217).
    SMS_CURRENCY: setting({
      schema: z
        .string()
        .regex(/^[A-Z]{3}$/, "must be an ISO 4217 currency code such as EUR")
        .default("EUR"),
      section: "delivery",
      rule: "an ISO 4217 code",
      text: "Currency of `SMS_PRICES` and balances, named in V2 webhook events' `price`.",
    }),
    OTP_MAX_RETRIES: setting({
      schema: n().min(0).max(20).default(3),
      section: "otp",
      text: "Retries per V1 authentication.",
    }),
    OTP_RETRY_INTERVAL_SECONDS: setting({
      schema: n().min(0).max(3_600).default(30),
      section: "otp",
      text: "Least time between two retries.",
    }),
    // How long V1 and V2 authentications, their events and message ids are kept (docs/capacity.md).
    AUTHENTICATION_RETENTION_SECONDS: setting({
      schema: n().min(30).max(days(90)).default(days(7)),
      section: "retention",
      rule: "a whole number from 30 to 7776000, at least `OTP_TTL_SECONDS` and covering `WEBHOOK_GIVE_UP_MS`",
      text:
        "How long V1 and V2 authentications, their events and webhook streams are kept after they expire " +
        "(read-back answers until then).",
    }),
    SMS_RECEIPT_RETENTION_SECONDS: setting({
      schema: n().min(60).max(days(90)).default(days(3)),
      section: "retention",
      text:
        "How long a provider's message id leads to its authentication: a delivery receipt arriving later " +
        "is logged and dropped.",
    }),
    // How long a send refused before anything was sent keeps its record (docs/capacity.md#refused-sends).
    REFUSED_RETENTION_SECONDS: setting({
      schema: n().min(60).max(days(90)).default(3_600),
      section: "retention",
      text:
        "How long a send refused before anything was sent (V1 `rate_limited` and `spam_detected`, V2 " +
        "`blocked`) keeps its authentication, counted from the send (read-back answers until then); its " +
        "webhook, when it has one, is kept past it only until delivered. Windows and fraud counters keep " +
        "their own lifetimes.",
    }),
    RATE_LIMIT_NUMBER: setting({
      schema: window.default({ limit: 5, windowSeconds: 600 }),
      section: "sends",
      rule: WINDOW_RULE,
      text: "Sends to one number (login codes to one identifier; a known source of it has a window of its own).",
    }),
    RATE_LIMIT_IP: setting({
      schema: window.default({ limit: 20, windowSeconds: 600 }),
      section: "sends",
      rule: WINDOW_RULE,
      text: "Sends from one `ip`.",
    }),
    RATE_LIMIT_DEVICE: setting({
      schema: window.default({ limit: 10, windowSeconds: 600 }),
      section: "sends",
      rule: WINDOW_RULE,
      text: "Sends from one `device_id`.",
    }),
    RATE_LIMIT_ACCOUNT: setting({
      schema: window.default({ limit: 10_000, windowSeconds: 3_600 }),
      section: "sends",
      rule: WINDOW_RULE,
      text: "Sends of one account.",
    }),
    SPAM_IP_NUMBERS: setting({
      schema: window.default({ limit: 5, windowSeconds: 3_600 }),
      section: "sends",
      rule: WINDOW_RULE,
      text: "Distinct numbers one IP may reach.",
    }),
    SPAM_DEVICE_NUMBERS: setting({
      schema: window.default({ limit: 3, windowSeconds: 3_600 }),
      section: "sends",
      rule: WINDOW_RULE,
      text: "Distinct numbers one device may reach.",
    }),
    SPAM_RANGE_BURST: setting({
      schema: window.default({ limit: 10, windowSeconds: 600 }),
      section: "sends",
      rule: WINDOW_RULE,
      text: "Sends into one number range (the number less its last `SPAM_RANGE_DIGITS` digits).",
    }),
    SPAM_RANGE_DIGITS: setting({
      schema: n().min(1).max(6).default(3),
      section: "sends",
      text: "Trailing digits dropped to form a range.",
    }),
    // Holds of charged V1 messages whose provider answer is not recorded yet (docs/verify.md#charges-through-faults).
    SMS_HOLD_MARGIN_MS: setting({
      schema: n().min(100).max(3_600_000).default(30_000),
      section: "holds",
      text: "A held message whose provider answer was never recorded is re-sent this long after the provider timeout.",
    }),
    SMS_HOLD_RECOVERY_INTERVAL_MS: setting({
      schema: n().min(0).max(86_400_000).default(30_000),
      section: "holds",
      text: "How often each instance (its worker 1) looks for such holds (`0`: only at start).",
    }),
  },
  (s, ctx) => {
    const otpTtl = codePolicy(ctx.of(otpSettings)).ttlSeconds;
    if (s.AUTHENTICATION_RETENTION_SECONDS < otpTtl) {
      throw new ConfigError(
        `invalid AUTHENTICATION_RETENTION_SECONDS: must be at least OTP_TTL_SECONDS (${otpTtl}) (got ${ctx.shown("AUTHENTICATION_RETENTION_SECONDS")})`,
      );
    }
    // An authentication's events are its webhook stream: they must outlive the delivery's retries.
    const giveUpMs = giveUpAfterMs(ctx.of(webhookSettings));
    if (s.AUTHENTICATION_RETENTION_SECONDS * 1000 < giveUpMs) {
      throw new ConfigError(
        `invalid AUTHENTICATION_RETENTION_SECONDS: must cover WEBHOOK_GIVE_UP_MS (${giveUpMs / 1000} s), or undelivered webhooks would be dropped (got ${ctx.shown("AUTHENTICATION_RETENTION_SECONDS")})`,
      );
    }
    return s;
  },
);

/** Verification's settings, parsed. */
export type VerifySettings = ReturnType<(typeof verifySettings)["finish"]>;

/** The send windows login codes share with verification: per number, and per number range. */
export interface SendWindows {
  number: VerifySettings["RATE_LIMIT_NUMBER"];
  range: VerifySettings["SPAM_RANGE_BURST"];
  /** Trailing digits dropped to form a range. */
  rangeDigits: number;
}

export function sendWindows(
  s: Pick<VerifySettings, "RATE_LIMIT_NUMBER" | "SPAM_RANGE_BURST" | "SPAM_RANGE_DIGITS">,
): SendWindows {
  return { number: s.RATE_LIMIT_NUMBER, range: s.SPAM_RANGE_BURST, rangeDigits: s.SPAM_RANGE_DIGITS };
}

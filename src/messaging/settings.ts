import { z } from "zod";
import { isMailbox } from "../net/email-address.js";
import { ConfigError, defineSettings, setting } from "../settings/define.js";
import { httpUrl, MS, url } from "../settings/rules.js";
import { parseDeliveryProviders, type ProviderSpec } from "./providers.js";

const n = () => z.coerce.number().int();
const LOG_WHY = "the log provider prints codes instead of sending them";

/** Message delivery (docs/settings.md#message-delivery): the SMS and email providers and senders. */
export const messagingSettings = defineSettings(
  {
    DELIVERY_PROVIDERS: setting({
      schema: z
        .string()
        .optional()
        .transform((v, ctx) => {
          if (v === undefined || v.trim() === "") return undefined;
          try {
            return parseDeliveryProviders(v);
          } catch (err) {
            ctx.addIssue({ code: "custom", message: (err as Error).message });
            return z.NEVER;
          }
        }),
      section: "delivery",
      default: "unset (`SMS_PROVIDER` is one provider named `default`)",
      rule:
        "a JSON array of `{name, channel, url, cost?, timeout_ms?, status_token?}`; a `whatsapp` entry takes " +
        "`phone_number_id`, `token`, `template`, `app_secret`, `verify_token`, `languages?` and `default_language?` " +
        "instead of `status_token`",
      text:
        "The providers messages go through (sms, voice, whatsapp), each with its cost, timeout and the secrets " +
        "of its reports; routes choose among them ([routing.md](routing.md#providers)). Not with `SMS_PROVIDER`.",
      secret: true,
    }),
    SMS_PROVIDER: setting({
      schema: z.enum(["log", "http", "smpp"]).default("log"),
      section: "delivery",
      default: "`log` (warns; refused in production)",
      text:
        "`log` prints the message (code included) in the service's log; `http` POSTs to `SMS_HTTP_URL`; " +
        "`smpp` submits through `SMPP_URL`.",
      // DELIVERY_PROVIDERS replaces it: its default then sends nothing.
      devOnly: { when: (v, all) => v === "log" && all.DELIVERY_PROVIDERS === undefined, why: LOG_WHY },
    }),
    SMS_HTTP_URL: setting({
      schema: httpUrl().optional(),
      section: "delivery",
      rule: "an http or https URL",
      text:
        "Required with `SMS_PROVIDER=http`; receives `{to, from, body, locale, reference}`, and any 2xx " +
        "means accepted. A repeated `reference` is the same message ([verify.md](verify.md#charges-through-faults)).",
      url: true,
    }),
    SMS_HTTP_TIMEOUT_MS: setting({
      schema: n().min(100).max(60_000).default(5_000),
      section: "delivery",
      text: `${MS("the HTTP SMS provider")}.`,
    }),
    SMPP_URL: setting({
      schema: url(["smpp:"]).optional(),
      section: "delivery",
      rule: "`smpp://system_id:password@host:port`",
      text:
        "Required with `SMS_PROVIDER=smpp`; delivery receipts become `delivery_status` events. Each worker " +
        "holds its own bind ([operations.md](operations.md#workers)).",
      url: true,
    }),
    SMPP_ENQUIRE_LINK_MS: setting({
      schema: n().min(1_000).max(600_000).default(30_000),
      section: "delivery",
      text: "SMPP keep-alive interval.",
    }),
    SMPP_SUBMIT_TIMEOUT_MS: setting({
      schema: n().min(100).max(120_000).default(10_000),
      section: "delivery",
      text: "Time a `submit_sm` has to be answered.",
    }),
    SMS_FROM: setting({
      schema: z
        .string()
        .regex(
          /^([A-Za-z0-9 ]{1,11}|\+?\d{1,15})$/,
          "must be a sender ID (up to 11 letters or digits) or a number",
        )
        .default("Ringfence"),
      section: "delivery",
      rule: "up to 11 letters, digits or spaces, or a number",
      text: "Default sender.",
    }),
    EMAIL_PROVIDER: setting({
      schema: z.enum(["log", "http", "smtp"]).default("log"),
      section: "delivery",
      default: "`log` (warns; refused in production)",
      text: "`log` prints the message; `http` POSTs to `EMAIL_HTTP_URL`; `smtp` sends through `SMTP_URL`.",
      devOnly: { when: (v) => v === "log", why: LOG_WHY },
    }),
    EMAIL_HTTP_URL: setting({
      schema: httpUrl().optional(),
      section: "delivery",
      rule: "an http or https URL",
      text:
        "Required with `EMAIL_PROVIDER=http`; receives `{to, from, subject, body, reference}`, and any 2xx " +
        "means accepted.",
      url: true,
    }),
    EMAIL_HTTP_TIMEOUT_MS: setting({
      schema: n().min(100).max(60_000).default(5_000),
      section: "delivery",
      text: `${MS("the HTTP email provider")}.`,
    }),
    SMTP_URL: setting({
      schema: url(["smtp:", "smtps:"]).optional(),
      section: "delivery",
      rule: "an `smtp:` or `smtps:` URL",
      text: "Required with `EMAIL_PROVIDER=smtp`.",
      url: true,
    }),
    SMTP_TIMEOUT_MS: setting({
      schema: n().min(100).max(120_000).default(10_000),
      section: "delivery",
      text: "Time the SMTP server has to accept a message.",
    }),
    EMAIL_FROM: setting({
      schema: z
        .string()
        .refine(isMailbox, "must be an address or Name <address>")
        .default("Ringfence <no-reply@ringfence.dev>"),
      section: "delivery",
      rule: "an address or `Name <address>`",
      text: "Sender of emails.",
    }),
  },
  (s, ctx) => {
    if (s.DELIVERY_PROVIDERS !== undefined && ctx.given("SMS_PROVIDER")) {
      throw new ConfigError(
        "invalid DELIVERY_PROVIDERS: SMS_PROVIDER is set too; set one of DELIVERY_PROVIDERS and SMS_PROVIDER",
      );
    }
    const missing = missingProviderUrl(s);
    if (missing !== undefined)
      throw new ConfigError(`invalid ${missing.name}: required when ${missing.when}`);
    return s;
  },
);

/** The URL setting each provider needs, written once: the settings and the provider factories read it. */
const PROVIDER_URLS = [
  { choice: "SMS_PROVIDER", provider: "http", url: "SMS_HTTP_URL" },
  { choice: "EMAIL_PROVIDER", provider: "http", url: "EMAIL_HTTP_URL" },
  { choice: "EMAIL_PROVIDER", provider: "smtp", url: "SMTP_URL" },
  { choice: "SMS_PROVIDER", provider: "smpp", url: "SMPP_URL" },
] as const;

/** The chosen provider's URL setting when it is missing (unset or empty), else undefined. */
export function missingProviderUrl(
  s: Partial<Record<(typeof PROVIDER_URLS)[number]["choice" | "url"], string | undefined>>,
): { name: string; when: string } | undefined {
  const rule = PROVIDER_URLS.find((r) => s[r.choice] === r.provider && (s[r.url] ?? "") === "");
  return rule === undefined ? undefined : { name: rule.url, when: `${rule.choice}=${rule.provider}` };
}

/** Message delivery's settings, parsed. */
export type MessagingSettings = ReturnType<(typeof messagingSettings)["finish"]>;

/** The sender an SMS gets when its caller names none. */
export function defaultSmsSender(s: Pick<MessagingSettings, "SMS_FROM">): string {
  return s.SMS_FROM;
}

/** The sender of emails. */
export function defaultEmailSender(s: Pick<MessagingSettings, "EMAIL_FROM">): string {
  return s.EMAIL_FROM;
}

/**
 * The providers messages go through: DELIVERY_PROVIDERS, or else the `SMS_PROVIDER` settings as one
 * `sms` provider named `default` (docs/routing.md#providers).
 */
export function deliveryProviders(
  s: Pick<
    MessagingSettings,
    | "DELIVERY_PROVIDERS"
    | "SMS_PROVIDER"
    | "SMS_HTTP_URL"
    | "SMS_HTTP_TIMEOUT_MS"
    | "SMPP_URL"
    | "SMPP_SUBMIT_TIMEOUT_MS"
  >,
): ProviderSpec[] {
  if (s.DELIVERY_PROVIDERS !== undefined) return s.DELIVERY_PROVIDERS;
  const missing = missingProviderUrl(s);
  if (missing !== undefined) throw new Error(`${missing.name} is required when ${missing.when}`);
  const kind = s.SMS_PROVIDER;
  const base = { name: "default", channel: "sms" as const, kind, cost: {}, formerNames: [kind] };
  switch (kind) {
    case "log":
      return [{ ...base, url: "", timeoutMs: 0 }];
    case "http":
      return [{ ...base, url: s.SMS_HTTP_URL ?? "", timeoutMs: s.SMS_HTTP_TIMEOUT_MS }];
    case "smpp":
      return [{ ...base, url: s.SMPP_URL ?? "", timeoutMs: s.SMPP_SUBMIT_TIMEOUT_MS }];
  }
}

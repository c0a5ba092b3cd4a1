import { z } from "zod";
import { isMailbox } from "../net/email-address.js";
import { ConfigError, defineSettings, setting } from "../settings/define.js";
import { httpUrl, MS, url } from "../settings/rules.js";

const n = () => z.coerce.number().int();
const LOG_WHY = "the log provider prints codes instead of sending them";

/** Message delivery (docs/settings.md#message-delivery): the SMS and email providers and senders. */
export const messagingSettings = defineSettings(
  {
    SMS_PROVIDER: setting({
      schema: z.enum(["log", "http", "smpp"]).default("log"),
      section: "delivery",
      default: "`log` (warns; refused in production)",
      text:
        "`log` prints the message (code included) in the service's log; `http` POSTs to `SMS_HTTP_URL`; " +
        "`smpp` submits through `SMPP_URL`.",
      devOnly: { when: (v) => v === "log", why: LOG_WHY },
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
  (s) => {
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

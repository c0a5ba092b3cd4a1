import type { Logger } from "../log.js";
import { isHttpUrl } from "../net/validate.js";
import { HttpEmailProvider } from "./email-http-provider.js";
import { LogEmailProvider } from "./email-log-provider.js";
import type { EmailProvider } from "./email-provider.js";
import { SmtpEmailProvider } from "./email-smtp-provider.js";
import { missingProviderUrl } from "./settings.js";
import { gateSends, type ShutdownGate } from "./shutdown.js";

export type { EmailProvider, OutgoingEmail, SentEmail } from "./email-provider.js";
export { DeliveryError } from "./provider.js";
export { HttpEmailProvider } from "./email-http-provider.js";
export { LogEmailProvider } from "./email-log-provider.js";
export { SmtpEmailProvider, parseSmtpUrl, type SmtpOptions, type SmtpTarget } from "./email-smtp-provider.js";
export {
  renderOtpEmail,
  type OtpEmailInput,
  type OtpEmailPurpose,
  type RenderedEmail,
} from "./email-templates.js";

/** The settings of docs/settings.md#message-delivery that choose and reach the email provider. */
export interface EmailProviderConfig {
  EMAIL_PROVIDER: "log" | "http" | "smtp";
  EMAIL_HTTP_URL?: string | undefined;
  /** Default 5000. */
  EMAIL_HTTP_TIMEOUT_MS?: number | undefined;
  /** `smtp://user:password@host:587` (STARTTLS when offered) or `smtps://user:password@host:465`. */
  SMTP_URL?: string | undefined;
  /** Default 10000. */
  SMTP_TIMEOUT_MS?: number | undefined;
}

/**
 * The configured provider; throws an Error naming the variable when its URL is missing or wrong.
 * With a `gate`, sends are refused (`unavailable`) once shutdown leaves less than the provider's
 * timeout.
 */
export function createEmailProvider(
  cfg: EmailProviderConfig,
  log: Logger,
  gate?: ShutdownGate,
): EmailProvider {
  const provider = openEmailProvider(cfg, log);
  const timeoutMs = {
    log: 0,
    http: cfg.EMAIL_HTTP_TIMEOUT_MS ?? 5_000,
    smtp: cfg.SMTP_TIMEOUT_MS ?? 10_000,
  }[provider.name];
  return gateSends(provider, timeoutMs, gate);
}

function openEmailProvider(cfg: EmailProviderConfig, log: Logger): EmailProvider {
  const missing = missingProviderUrl(cfg);
  if (missing !== undefined) throw new Error(`${missing.name} is required when ${missing.when}`);
  switch (cfg.EMAIL_PROVIDER) {
    case "log":
      return new LogEmailProvider(log);
    case "http": {
      const url = cfg.EMAIL_HTTP_URL ?? "";
      if (!isHttpUrl(url)) throw new Error("EMAIL_HTTP_URL must be an http:// or https:// URL");
      return new HttpEmailProvider(url, { timeoutMs: cfg.EMAIL_HTTP_TIMEOUT_MS ?? 5_000 });
    }
    case "smtp": {
      return new SmtpEmailProvider(cfg.SMTP_URL ?? "", { timeoutMs: cfg.SMTP_TIMEOUT_MS ?? 10_000, log });
    }
  }
}

import type { Logger } from "../log.js";
import { isHttpUrl } from "../net/validate.js";
import { HttpSmsProvider } from "./http-provider.js";
import { LogSmsProvider } from "./log-provider.js";
import type { SmsProvider } from "./provider.js";
import { SmppSmsProvider } from "./smpp-provider.js";
import { missingProviderUrl, type MessagingSettings } from "./settings.js";
import { gateSends, type ShutdownGate } from "./shutdown.js";

export type { DeliveryReceipt, DeliveryState, OutgoingSms, SentSms, SmsProvider } from "./provider.js";
export { DeliveryError } from "./provider.js";
export { HttpSmsProvider } from "./http-provider.js";
export { LogSmsProvider } from "./log-provider.js";
export { SmppSmsProvider, parseSmppUrl, type SmppOptions } from "./smpp-provider.js";
export { ShutdownGate } from "./shutdown.js";

/** The settings of docs/settings.md#message-delivery that choose and reach the SMS provider. */
export interface SmsProviderConfig {
  SMS_PROVIDER: MessagingSettings["SMS_PROVIDER"];
  SMS_HTTP_URL?: string | undefined;
  /** Default 5000. */
  SMS_HTTP_TIMEOUT_MS?: number | undefined;
  SMPP_URL?: string | undefined;
  /** Default 30000. */
  SMPP_ENQUIRE_LINK_MS?: number | undefined;
  /** Default 10000. */
  SMPP_SUBMIT_TIMEOUT_MS?: number | undefined;
}

/**
 * The configured provider; throws an Error naming the variable when its URL is missing or wrong.
 * With a `gate`, sends are refused (`unavailable`) once shutdown leaves less than the provider's
 * timeout.
 */
export function createSmsProvider(cfg: SmsProviderConfig, log: Logger, gate?: ShutdownGate): SmsProvider {
  const provider = openSmsProvider(cfg, log);
  return gateSends(provider, provider.longestSendMs, gate);
}

function openSmsProvider(cfg: SmsProviderConfig, log: Logger): SmsProvider {
  const missing = missingProviderUrl(cfg);
  if (missing !== undefined) throw new Error(`${missing.name} is required when ${missing.when}`);
  switch (cfg.SMS_PROVIDER) {
    case "log":
      return new LogSmsProvider(log);
    case "http": {
      const url = cfg.SMS_HTTP_URL ?? "";
      if (!isHttpUrl(url)) throw new Error("SMS_HTTP_URL must be an http:// or https:// URL");
      return new HttpSmsProvider(url, { timeoutMs: cfg.SMS_HTTP_TIMEOUT_MS ?? 5_000 });
    }
    case "smpp": {
      return new SmppSmsProvider(cfg.SMPP_URL ?? "", {
        log,
        ...(cfg.SMPP_ENQUIRE_LINK_MS === undefined ? {} : { enquireLinkMs: cfg.SMPP_ENQUIRE_LINK_MS }),
        ...(cfg.SMPP_SUBMIT_TIMEOUT_MS === undefined ? {} : { submitTimeoutMs: cfg.SMPP_SUBMIT_TIMEOUT_MS }),
      });
    }
  }
}

import { parseE164 } from "../phone/e164.js";
import { checkDeadline } from "../observability/calls.js";
import type { Metrics } from "../observability/metrics.js";
import type { EmailProvider } from "./email-provider.js";
import { DeliveryError, type SmsProvider } from "./provider.js";

/**
 * `provider` as calls use it: nothing goes out for a call whose caller stopped waiting (504
 * deadline_exceeded, before the message leaves, so the V1 charge is given back), and each message
 * is counted in the sent and failed metrics, by its channel and destination country.
 */
export function guardedSms(
  provider: SmsProvider,
  metrics: Pick<Metrics, "message">,
  channel: "sms" | "voice" | "whatsapp" = "sms",
): SmsProvider {
  return {
    name: provider.name,
    longestSendMs: provider.longestSendMs,
    async send(msg, call) {
      checkDeadline(call);
      const country = parseE164(msg.to)?.countryCode ?? "";
      try {
        const sent = await provider.send(msg, call);
        metrics.message(channel, provider.name, country, true);
        return sent;
      } catch (err) {
        metrics.message(channel, provider.name, country, false);
        throw err;
      }
    },
    onReceipt: (listener) => {
      provider.onReceipt(listener);
    },
    ...(provider.available === undefined ? {} : { available: () => provider.available?.() !== false }),
    close: () => provider.close(),
  };
}

/**
 * `provider` as calls use it: the deadline guard and the metrics of `guardedSms` (no country),
 * and the email families, `ringfence_email_sent_total` and `ringfence_email_failed_total` by reason.
 */
export function guardedEmail(
  provider: EmailProvider,
  metrics: Pick<Metrics, "message" | "email" | "emailProvider">,
): EmailProvider {
  metrics.emailProvider(provider.name);
  return {
    name: provider.name,
    async send(msg, call) {
      checkDeadline(call);
      try {
        const sent = await provider.send(msg, call);
        metrics.message("email", provider.name, "", true);
        metrics.email(provider.name, "sent");
        return sent;
      } catch (err) {
        metrics.message("email", provider.name, "", false);
        metrics.email(
          provider.name,
          err instanceof DeliveryError && !err.retryable ? "refused" : "unavailable",
        );
        throw err;
      }
    },
    close: () => provider.close(),
  };
}

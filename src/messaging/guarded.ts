import { parseE164 } from "../lookup/numbers.js";
import type { Metrics } from "../observability/metrics.js";
import type { EmailProvider } from "./email-provider.js";
import type { SmsProvider } from "./provider.js";

/** `provider` counted in the sent and failed metrics, by destination country. */
export function meteredSms(provider: SmsProvider, metrics: Pick<Metrics, "message">): SmsProvider {
  return {
    name: provider.name,
    async send(msg) {
      const country = parseE164(msg.to)?.countryCode ?? "";
      try {
        const sent = await provider.send(msg);
        metrics.message("sms", provider.name, country, true);
        return sent;
      } catch (err) {
        metrics.message("sms", provider.name, country, false);
        throw err;
      }
    },
    onReceipt: (listener) => {
      provider.onReceipt(listener);
    },
    close: () => provider.close(),
  };
}

/** `provider` counted in the sent and failed metrics (emails have no country). */
export function meteredEmail(provider: EmailProvider, metrics: Pick<Metrics, "message">): EmailProvider {
  return {
    name: provider.name,
    async send(msg) {
      try {
        const sent = await provider.send(msg);
        metrics.message("email", provider.name, "", true);
        return sent;
      } catch (err) {
        metrics.message("email", provider.name, "", false);
        throw err;
      }
    },
    close: () => provider.close(),
  };
}

import type { Module, SharedParts } from "../lifecycle/module.js";
import type { MessagingSettings } from "./settings.js";
import { guardedEmail, guardedSms } from "./guarded.js";
import { createEmailProvider, type EmailProvider } from "./email.js";
import { createSmsProvider, ShutdownGate, type SmsProvider } from "./sms.js";

export interface MessagingModule extends Module {
  sms: SmsProvider;
  email: EmailProvider;
}

/**
 * The SMS and email providers, counted in the metrics. Every process holds its own (with
 * SMS_PROVIDER=smpp, its own bind); sends still in flight at shutdown are cut at the drain's end.
 */
export function messagingModule(
  r: Pick<SharedParts, "log" | "metrics"> & { config: MessagingSettings },
): MessagingModule {
  const gate = new ShutdownGate();
  const sms = guardedSms(createSmsProvider(r.config, r.log, gate), r.metrics);
  const email = guardedEmail(createEmailProvider(r.config, r.log, gate), r.metrics);
  return {
    name: "messaging",
    sms,
    email,
    background: [
      {
        shutdownBegins: (drainEndsMs) => {
          gate.begin(drainEndsMs);
        },
        close: () => Promise.all([sms.close().catch(() => undefined), email.close().catch(() => undefined)]),
      },
    ],
  };
}

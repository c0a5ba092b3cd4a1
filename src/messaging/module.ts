import type { Module, SharedParts } from "../lifecycle/module.js";
import { deliveryProviders, type MessagingSettings } from "./settings.js";
import { guardedEmail, guardedSms } from "./guarded.js";
import { createEmailProvider, type EmailProvider } from "./email.js";
import { ShutdownGate } from "./sms.js";
import { openProviders, type DeliveryProvider } from "./providers.js";

export interface MessagingModule extends Module {
  /** The delivery providers (DELIVERY_PROVIDERS, or the one `SMS_PROVIDER` names), in declared order. */
  providers: DeliveryProvider[];
  email: EmailProvider;
}

/**
 * The delivery providers and the email provider, counted in the metrics. Every process holds its
 * own (an SMPP provider, its own bind); sends still in flight at shutdown are cut at the drain's end.
 */
export function messagingModule(
  r: Pick<SharedParts, "log" | "metrics"> & { config: MessagingSettings },
): MessagingModule {
  const gate = new ShutdownGate();
  const providers = openProviders(deliveryProviders(r.config), {
    log: r.log,
    gate,
    enquireLinkMs: r.config.SMPP_ENQUIRE_LINK_MS,
  }).map((p) => Object.assign(guardedSms(p, r.metrics, p.spec.channel), { spec: p.spec }));
  const email = guardedEmail(createEmailProvider(r.config, r.log, gate), r.metrics);
  return {
    name: "messaging",
    providers,
    email,
    background: [
      {
        shutdownBegins: (drainEndsMs) => {
          gate.begin(drainEndsMs);
        },
        close: () => Promise.all([...providers, email].map((p) => p.close().catch(() => undefined))),
      },
    ],
  };
}

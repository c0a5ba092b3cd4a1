import type { AccountsModule } from "../accounts/module.js";
import { isRedisUnavailable } from "../errors.js";
import type { Module, SharedParts } from "../lifecycle/module.js";
import { errorMessage } from "../log.js";
import type { DeliveryModule } from "../delivery/module.js";
import { bindService } from "../rpc/binding.js";
import { v1ServiceOptions } from "../v1/deprecation.js";
import type { WebhooksModule } from "../webhooks/module.js";
import { bodyCustomerUuid } from "../accounts/authenticate.js";
import { HoldRecovery } from "./holds.js";
import { FallbackWorker } from "./fallback.js";
import { verifyHandlers, VerifyEngine } from "./service.js";
import { VERIFICATION_V2, VERIFY_V1 } from "./surface.js";
import { verificationHandlers } from "./v2.js";
import type { VerifyDeps } from "./deps.js";
import type { MessagingSettings } from "../messaging/settings.js";
import type { VerifyStore } from "./store.js";
import type { EmailProvider } from "../messaging/email-provider.js";

/** What the verify module takes of the process (src/registry.ts gives it). */
export interface VerifyNeeds extends Pick<SharedParts, "log" | "secrets" | "outbound" | "metrics"> {
  config: VerifyDeps["config"] &
    Pick<MessagingSettings, "EMAIL_FROM"> &
    ConstructorParameters<typeof HoldRecovery>[0]["config"] &
    Parameters<typeof v1ServiceOptions>[0];
  accounts: VerifyDeps["accounts"];
  lookupData: VerifyDeps["lookupData"];
  fraud: VerifyDeps["fraud"];
  verify: VerifyStore;
}

/**
 * Phone verification, V1 and V2 on one engine: the delivery receipts it records, and the recovery
 * of charged V1 messages whose provider answer was never recorded (a crash, a timeout). Claims are
 * atomic, so two instances never re-send one hold; one pass per instance is still enough.
 */
export function verifyModule(
  r: VerifyNeeds,
  d: { delivery: DeliveryModule; webhooks: WebhooksModule; accounts: AccountsModule; email: EmailProvider },
): Module {
  const engine = new VerifyEngine({
    config: r.config,
    log: r.log,
    accounts: r.accounts,
    secrets: r.secrets,
    lookupData: r.lookupData,
    store: r.verify,
    router: d.delivery.router,
    webhooks: d.webhooks.outbox,
    outbound: r.outbound,
    metrics: r.metrics,
    fraud: r.fraud,
    email: { provider: d.email, config: r.config },
  });
  for (const provider of d.delivery.router.providers) {
    provider.onReceipt((receipt) => {
      engine.recordReceipt(provider.spec.name, receipt).catch((err: unknown) => {
        r.log[isRedisUnavailable(err) ? "warn" : "error"]("delivery receipt not recorded", {
          provider: provider.spec.name,
          error: errorMessage(err),
        });
      });
    });
  }
  d.delivery.onReport((provider, receipt) => engine.recordReceipt(provider, receipt));
  const holds = new HoldRecovery({
    config: r.config,
    store: r.verify,
    sms: d.delivery.router,
    secrets: r.secrets,
    log: r.log,
  });
  const fallbacks = new FallbackWorker(engine.deps);
  return {
    name: "verify",
    bindings: [
      bindService(VERIFY_V1.definition, verifyHandlers(engine), {
        ...VERIFY_V1.surface,
        ...v1ServiceOptions(r.config, "verify"),
        authenticators: { account: d.accounts.customer(bodyCustomerUuid) },
        // A read-back names no customer: the key alone finds the account.
        methodAuthenticators: { getAuthentication: d.accounts.apiKey },
      }),
      bindService(VERIFICATION_V2.definition, verificationHandlers(engine), {
        ...VERIFICATION_V2.surface,
        authenticators: { account: d.accounts.bearer },
      }),
    ],
    background: [
      {
        singleton: true,
        start: () => {
          holds.start();
        },
        // Settlements of held charges that Redis did not take yet are retried until now.
        close: () => holds.close().catch(() => undefined),
      },
      {
        // WhatsApp codes not reported delivered in time, scheduled by any instance (docs/v2-api.md#fallback).
        singleton: true,
        start: () => {
          fallbacks.start();
        },
        close: () => fallbacks.close(),
      },
    ],
  };
}

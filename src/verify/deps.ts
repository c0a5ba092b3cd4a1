/** What the verification engine needs from the rest of the service; module.ts supplies it. */
import type { Logger } from "../log.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { Secrets } from "../crypto/secrets.js";
import type { AccountStore } from "../accounts/store.js";
import type { LookupDataSource } from "../lookup/lookup-data.js";
import type { FraudEngine } from "../fraud/engine.js";
import type { Metrics } from "../observability/metrics.js";
import type { Router } from "../delivery/router.js";
import type { LookupSettings } from "../lookup/settings.js";
import type { MessagingSettings } from "../messaging/settings.js";
import type { OtpSettings } from "../otp/settings.js";
import type { VerifySettings } from "./settings.js";
import type { VerifyStore } from "./store.js";
import type { EmailProvider } from "../messaging/email-provider.js";

/** What verification reads: its own settings, the code policy, the spam rules of lookups, the sender's name. */
export type VerifyConfig = VerifySettings &
  OtpSettings &
  Pick<LookupSettings, "SPAM_LINE_TYPES" | "SPAM_DISPOSABLE"> &
  Pick<MessagingSettings, "SMS_FROM">;

/** What sends V2 email codes (docs/v2-api.md#email): the session service's provider and its sender. */
export interface EmailCodes {
  provider: EmailProvider;
  config: Pick<MessagingSettings, "EMAIL_FROM">;
}

export interface VerifyDeps {
  config: VerifyConfig;
  log: Logger;
  accounts: AccountStore;
  secrets: Secrets;
  lookupData: LookupDataSource;
  store: VerifyStore;
  /** Chooses the providers of each message (src/delivery/router.ts). */
  router: Router;
  /** Starts webhook delivery of an events list (the outbox of src/webhooks). */
  webhooks: { kick(list: string): Promise<void> };
  /** Checks callback_url: no private or reserved address (OUTBOUND_ALLOWED_CIDRS). */
  outbound: Pick<OutboundGuard, "checkUrl" | "refusal">;
  /** Counts what accounts are charged (the spend metric), and codes moved to their next channel. */
  metrics: Pick<Metrics, "charged" | "channelFallback">;
  /** The fraud engine: its keys and arguments ride in the send and retry scripts. */
  fraud: FraudEngine;
  /** Sends V2 email codes (docs/v2-api.md#email); absent: email targets are refused. */
  email?: EmailCodes | undefined;
  now?: () => number;
}

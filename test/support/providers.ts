import type { SmsProvider } from "../../src/messaging/provider.js";
import type { HoldProviders } from "../../src/verify/holds.js";

/** One provider as a recovery's providers: every hold's name finds it. */
export function soleProvider(p: SmsProvider): HoldProviders {
  return { provider: () => p, providers: [p] };
}

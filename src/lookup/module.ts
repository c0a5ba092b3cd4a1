import type { AccountsModule } from "../accounts/module.js";
import type { Module, SharedParts } from "../lifecycle/module.js";
import { errorMessage } from "../log.js";
import { bindService } from "../rpc/binding.js";
import { v1ServiceOptions } from "../v1/deprecation.js";
import { preloadNumberData } from "./numbers.js";
import type { RedisLookupData } from "./lookup-data.js";
import { lookupHandlers, type LookupDeps } from "./service.js";
import { LOOKUP_V1, LOOKUP_V2 } from "./surface.js";
import { lookupV2Handlers } from "./v2.js";

/**
 * Number lookups, V1 and V2: the number data (its static indexes built before the first call,
 * imported records followed as they change) and the override prefixes records imported before
 * them lack, completed in the background.
 */
/** What the lookup module takes of the process (src/registry.ts gives it). */
export interface LookupNeeds extends Pick<SharedParts, "log" | "secrets"> {
  config: Parameters<typeof v1ServiceOptions>[0];
  accounts: LookupDeps["accounts"];
  lookupData: RedisLookupData;
}

export function lookupModule(r: LookupNeeds, accounts: AccountsModule): Module {
  const deps = { accounts: r.accounts, secrets: r.secrets, data: r.lookupData };
  let completed: Promise<void> = Promise.resolve();
  return {
    name: "lookup",
    bindings: [
      bindService(LOOKUP_V1.definition, lookupHandlers(deps), {
        ...LOOKUP_V1.surface,
        ...v1ServiceOptions(r.config, "lookup"),
        // A lookup names its customer in a header: GET has no body.
        authenticators: { account: accounts.customer((_req, ctx) => ctx.header("customer-uuid")) },
      }),
      bindService(LOOKUP_V2.definition, lookupV2Handlers(deps), {
        ...LOOKUP_V2.surface,
        authenticators: { account: accounts.bearer },
      }),
    ],
    prepare: preloadNumberData,
    watched: [r.lookupData],
    background: [
      {
        singleton: true,
        // Sends skip the number's data unless its prefix has overrides: until its records have
        // theirs, every send reads its number's data.
        start: () => {
          completed = r.lookupData.completeOverridePrefixes().then(
            (read) => {
              if (read > 0) r.log.info("number override prefixes completed", { records: read });
            },
            (err: unknown) => {
              r.log.warn("number override prefixes not completed; the next start completes them", {
                error: errorMessage(err),
              });
            },
          );
        },
        settled: () => completed,
      },
    ],
  };
}

import type { AccountsModule } from "../accounts/module.js";
import { LookupServiceService } from "../gen/ringfence/lookup/v1/lookup_service.js";
import { LookupServiceService as LookupV2Service } from "../gen/ringfence/lookup/v2/lookup_service.js";
import type { Module } from "../lifecycle/module.js";
import { errorMessage } from "../log.js";
import type { Registry } from "../registry.js";
import { bindService } from "../rpc/binding.js";
import { CALLERS } from "../rpc/surface.js";
import { v1ServiceOptions } from "../v1/deprecation.js";
import { preloadNumberData } from "./numbers.js";
import { lookupHandlers } from "./service.js";
import { lookupV2Handlers } from "./v2.js";

/**
 * Number lookups, V1 and V2: the number data (its static indexes built before the first call,
 * imported records followed as they change) and the override prefixes records imported before
 * them lack, completed in the background.
 */
export function lookupModule(r: Registry, accounts: AccountsModule): Module {
  const deps = { accounts: r.accounts, secrets: r.secrets, data: r.lookupData };
  return {
    name: "lookup",
    bindings: [
      bindService(LookupServiceService, lookupHandlers(deps), {
        ...v1ServiceOptions(r.config, "lookup"),
        callers: CALLERS["ringfence.lookup.v1.LookupService"],
        // A lookup names its customer in a header: GET has no body.
        authenticators: { account: accounts.customer((_req, ctx) => ctx.header("customer-uuid")) },
      }),
      bindService(LookupV2Service, lookupV2Handlers(deps), {
        dialect: "v2",
        callers: CALLERS["ringfence.lookup.v2.LookupService"],
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
          r.lookupData.completeOverridePrefixes().then(
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
      },
    ],
  };
}

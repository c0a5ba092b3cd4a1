import type { Module, SharedParts } from "../lifecycle/module.js";
import { errorMessage } from "../log.js";
import { keyed, type CallContext, type CallerAuthenticator } from "../rpc/binding.js";
import type { WebhooksModule } from "../webhooks/module.js";
import { ACCOUNT_SECRET_KIND, type StoredAccount } from "./account.js";
import {
  ACCOUNT_CALLER,
  apiKeyAuthenticator,
  bearerKeyAuthenticator,
  customerAuthenticator,
} from "./authenticate.js";
import type { AccountCache } from "./cache.js";
import { keyFailures } from "./key-failures.js";
import type { AccountsSettings } from "./settings.js";
import type { RedisAccountStore } from "./store.js";

export interface AccountsModule extends Module {
  /** V1: the API key of the account the call names (`customerUuidOf`). */
  customer(
    customerUuidOf: (request: unknown, ctx: CallContext) => string | undefined,
  ): CallerAuthenticator<StoredAccount>;
  /** V1 read-back: the API key alone. */
  apiKey: CallerAuthenticator<StoredAccount>;
  /** V2: the API key as a bearer token. */
  bearer: CallerAuthenticator<StoredAccount>;
}

/**
 * Accounts: the authentication chains of their callers (every one counts its failures per client
 * address), the cache those read (it follows announced changes), the signing secret of their
 * webhook streams, and the API-key index that V1 read-backs need, completed in the background.
 */
/** What the accounts module takes of the process (src/registry.ts gives it). */
export interface AccountsNeeds extends Pick<SharedParts, "log" | "redis" | "keys" | "secrets"> {
  config: AccountsSettings;
  accounts: RedisAccountStore;
  accountCache: AccountCache;
}

export function accountsModule(r: AccountsNeeds, webhooks: WebhooksModule): AccountsModule {
  const failures = keyFailures(r.redis, r.keys, r.config.API_KEY_FAILURES_IP);
  webhooks.resolvers.register(ACCOUNT_SECRET_KIND, (customerUuid) => r.accounts.webhookSecret(customerUuid));
  let indexed: Promise<void> = Promise.resolve();
  return {
    name: "accounts",
    customer: (customerUuidOf) =>
      keyed(ACCOUNT_CALLER, failures.guard(customerAuthenticator(r.accountCache, r.secrets, customerUuidOf))),
    apiKey: keyed(ACCOUNT_CALLER, failures.guard(apiKeyAuthenticator(r.accountCache, r.secrets))),
    bearer: keyed(ACCOUNT_CALLER, failures.guard(bearerKeyAuthenticator(r.accountCache))),
    watched: [r.accountCache],
    background: [
      {
        singleton: true,
        // Accounts stored before the index get their entry; in the background, so that a start
        // never waits for a scan of the whole keyspace.
        start: () => {
          indexed = r.accounts.indexApiKeys().then(
            (indexed) => {
              if (indexed > 0) r.log.info("API keys indexed", { accounts: indexed });
            },
            (err: unknown) => {
              r.log.warn("API key index not completed; the next start completes it", {
                error: errorMessage(err),
              });
            },
          );
        },
        settled: () => indexed,
      },
    ],
  };
}

import type { Secrets } from "../crypto/secrets.js";
import type { RedisClient } from "../redis/client.js";
import { WatchedCache } from "../redis/watched-cache.js";
import type { StoredAccount } from "./account.js";
import { findByApiKey, type AccountReader, type AccountStore } from "./store.js";

/** The longest a kept account is used without reading it again (the bound when an announcement is lost). */
export const ACCOUNT_MAX_AGE_MS = 1_000;
/** The most accounts (and as many API-key owners) one process keeps. */
export const KEPT_ACCOUNTS = 10_000;

/**
 * Accounts as V1 calls authenticate with them, kept in the process so that a lookup, check or
 * read-back spends its one Redis round trip on its own work. A change (suspension, templates,
 * sender IDs, credit) is announced by the store and dropped here at once, or seen within
 * ACCOUNT_MAX_AGE_MS when the announcement is lost. Money is never decided from a kept
 * account: the send and retry scripts read balance, limit and status in Redis.
 */
export class AccountCache implements AccountReader {
  private readonly accounts: WatchedCache<StoredAccount>;
  /** Key hash → account uuid: an index entry never changes, the account check still runs. */
  private readonly owners: WatchedCache<string>;

  constructor(
    private readonly store: AccountStore,
    private readonly secrets: Secrets,
  ) {
    const options = { maxAgeMs: ACCOUNT_MAX_AGE_MS, maxEntries: KEPT_ACCOUNTS };
    this.accounts = new WatchedCache(store.changes, options);
    this.owners = new WatchedCache(store.changes, options);
  }

  get(customerUuid: string): Promise<StoredAccount | undefined> {
    return this.accounts.get(customerUuid, () => this.store.get(customerUuid));
  }

  findByApiKey(apiKey: string): Promise<StoredAccount | undefined> {
    return findByApiKey(
      {
        get: (uuid) => this.get(uuid),
        keyOwner: (hash) => this.owners.get(hash, () => this.store.keyOwner(hash)),
      },
      this.secrets,
      apiKey,
    );
  }

  /** Listens for account changes on `subscriber` (see WatchedCache.watch). */
  async watch(subscriber: RedisClient): Promise<() => Promise<void>> {
    const stops = await Promise.all([this.accounts.watch(subscriber), this.owners.watch(subscriber)]);
    return async () => {
      await Promise.all(stops.map((stop) => stop()));
    };
  }
}

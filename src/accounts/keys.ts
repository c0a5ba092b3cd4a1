import type { Keys } from "../redis/client.js";
import { changeChannel } from "../redis/keys.js";

/** Every key of the accounts domain (names stay as stored: existing data keeps working). */
export class AccountKeys {
  constructor(private readonly keys: Keys) {}

  /** The account hash, under the customer's hash tag (the tag of all its verification keys). */
  account(customer: string): string {
    return this.keys.key("acct", customer);
  }

  /** What the customer spent in `month` (YYYY-MM), in millionths. */
  spend(customer: string, month: string): string {
    return this.keys.key("acct", customer, "spend", month);
  }

  /** The pattern matching every account hash (SCAN). */
  allAccounts(): string {
    return this.keys.key("acct", "*");
  }

  /** The index entry of an API key's keyed hash: the customer it belongs to. */
  apiKey(apiKeyHash: string): string {
    return this.keys.key("apikey", apiKeyHash);
  }

  /** The channel on which account changes are announced to the caches. */
  changes(): string {
    return changeChannel(this.keys, "accounts");
  }
}

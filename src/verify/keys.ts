import type { Keys } from "../redis/client.js";
import { AccountKeys } from "../accounts/keys.js";
import { WindowKeys } from "../otp/keys.js";
import { outboxKeys } from "../webhooks/keys.js";

/** The keys of one authentication, all under its customer's hash tag. */
export interface AuthKeys {
  auth: string;
  events: string;
  hook: string;
  pending: string;
  /** The sealed message of the current code while it lives, when it may be re-sent (docs/routing.md#undelivered). */
  message: string;
}

/** Where a send or retry happens: what its keys are named after. */
export interface SendPlace {
  customer: string;
  auth: string;
  phone: string;
  ip: string;
  device: string;
  range: string;
  month: string;
}

/**
 * Every key of the verification domain, in one place (names stay as stored: existing rows,
 * holds and accounts keep working). All but the hold index share the customer's hash tag.
 */
export class VerifyKeys {
  readonly accounts: AccountKeys;
  readonly windows: WindowKeys;

  constructor(private readonly keys: Keys) {
    this.accounts = new AccountKeys(keys);
    this.windows = new WindowKeys(keys);
  }

  auth(customer: string, auth: string): AuthKeys {
    const base = this.keys.key("auth", customer, auth);
    const events = `${base}:events`;
    const { hook, pending } = outboxKeys(events, this.keys);
    // The sealed message of the current code, kept for one re-send (undelivered.lua builds the same name).
    return { auth: base, events, hook, pending, message: `${base}:msg` };
  }

  /** Every key a send at `p` may touch (see send-code.lua). */
  place(p: SendPlace) {
    const { windows } = this;
    const tag = p.customer;
    return {
      ...this.auth(tag, p.auth),
      account: this.accounts.account(tag),
      spend: this.accounts.spend(tag, p.month),
      numberWindow: windows.sendNumber(tag, p.phone),
      ipWindow: windows.sendAddress(tag, p.ip),
      deviceWindow: windows.sendDevice(tag, p.device),
      accountWindow: windows.sendAccount(tag),
      ipNumbers: this.keys.key("spam", tag, "ipnums", p.ip),
      deviceNumbers: this.keys.key("spam", tag, "devnums", p.device),
      range: this.keys.key("spam", tag, "range", p.range),
    };
  }

  /**
   * The V2 target index: the uuid of the number's running verification (docs/v2-api.md#create),
   * written by the send script, expiring with it.
   */
  target(customer: string, phone: string): string {
    return this.keys.key("v2target", customer, phone);
  }

  /**
   * The index of customers that may have holds: one well-known key, outside any customer's slot.
   * A sorted set scored by the issue time of the latest send or retry that listed the customer,
   * so the recovery can drop a customer without losing a hold recorded as it does (see
   * `unindexIfEmpty` in hold-store.ts).
   */
  holdIndex(): string {
    return this.keys.key("holds", "index", "listed");
  }

  /** The index as earlier versions kept it (a plain set), moved into the new one by the recovery. */
  earlierHoldIndex(): string {
    return this.keys.key("holds", "index");
  }

  /** The customer's holds, a sorted set of hold ids by deadline. */
  holds(customer: string): string {
    return this.keys.key("holds", customer);
  }

  hold(customer: string, id: string): string {
    return this.keys.key("hold", customer, id);
  }

  /**
   * Which authentication a provider's message id belongs to (delivery receipts), per provider: two
   * providers may give the same id. Under the id's hash tag, beside the name kept before
   * (`legacyMessageRef`), so that one MGET reads both, on Redis Cluster too.
   */
  messageRef(provider: string, providerId: string): string {
    return this.keys.key("smsref", providerId, provider);
  }

  /** The same, as stored before ids were kept per provider: still read, for messages in flight. */
  legacyMessageRef(providerId: string): string {
    return this.keys.key("smsref", providerId);
  }

  /**
   * The V2 codes waiting to fall back to their next channel unless their message is reported
   * delivered first (docs/v2-api.md#fallback): one sorted set, outside any customer's slot, of
   * `<customer> <auth> <attempt> <channel>` by when each falls back, so that any instance finds them.
   */
  fallbacks(): string {
    return this.keys.key("fallbacks", "due");
  }

  /** The feedback recorded on one number of a customer. */
  feedback(customer: string, phone: string): string {
    return this.keys.key("fb", customer, phone);
  }
}

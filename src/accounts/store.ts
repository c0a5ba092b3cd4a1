import { randomUUID } from "node:crypto";
import { Keys, scanKeys, type RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { AccountKeys } from "./keys.js";
import { newSecret, type Secrets } from "../crypto/secrets.js";
import { announceChange } from "../redis/watched-cache.js";
import {
  ACCOUNT_CHANNELS,
  ACCOUNT_FEATURES,
  DEFAULT_CHANNELS,
  type AccountChannel,
  type AccountFeature,
  type AccountStatus,
  type NewAccountInput,
  type StoredAccount,
} from "./account.js";

export interface CreatedAccount {
  account: StoredAccount;
  /** Shown once, at creation. */
  apiKey: string;
  webhookSecret: string;
}

/** What authenticating a caller reads of accounts (the store itself, or AccountCache in front of it). */
export interface AccountReader {
  get(customerUuid: string): Promise<StoredAccount | undefined>;
  /** The account whose API key this is, through the index of key hashes. */
  findByApiKey(apiKey: string): Promise<StoredAccount | undefined>;
}

/** What the rest of the service needs of accounts. */
export interface AccountStore extends AccountReader {
  /** The channel on which every change to an account is announced, by its uuid. */
  readonly changes: string;
  create(input: NewAccountInput): Promise<CreatedAccount>;
  /** The account's webhook signing secret, in clear (for the outbox); undefined for no account. */
  webhookSecret(customerUuid: string): Promise<string | undefined>;
  /** The uuid of the account whose API key has this keyed hash (the index), if any. */
  keyOwner(apiKeyHash: string): Promise<string | undefined>;
  setStatus(customerUuid: string, status: AccountStatus): Promise<boolean>;
  /** Adds (or with a negative amount, removes) money; undefined for an unknown account. */
  credit(customerUuid: string, micros: number): Promise<number | undefined>;
  /** Sets one language of a message variant; false for an unknown account. */
  setTemplate(customerUuid: string, templateId: string, language: string, text: string): Promise<boolean>;
  /** Sets the channels V2 may use, in fallback order; false for an unknown account. */
  setChannels(customerUuid: string, channels: readonly AccountChannel[]): Promise<boolean>;
}

export const API_KEY_PURPOSE = "account-api-key";
const updateAccount = defineScript({
  file: new URL("./update-account.lua", import.meta.url),
  keys: ["account"],
  argv: ["op", "value", "language", "text"],
});

export class RedisAccountStore implements AccountStore {
  readonly changes: string;
  private readonly keys: AccountKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
    private readonly secrets: Secrets,
  ) {
    this.keys = new AccountKeys(keys);
    this.changes = this.keys.changes();
  }

  async create(input: NewAccountInput): Promise<CreatedAccount> {
    const customerUuid = randomUUID();
    const apiKey = newSecret("rfk");
    const webhookSecret = newSecret("whsec");
    const account: StoredAccount = {
      customerUuid,
      name: input.name,
      status: "active",
      balanceMicros: input.balanceMicros,
      spendingLimitMicros: input.spendingLimitMicros,
      features: input.features,
      regions: input.regions,
      senderIds: input.senderIds ?? [],
      templates: {},
      channels: [...DEFAULT_CHANNELS],
      createdAt: new Date().toISOString(),
      apiKeyHash: this.secrets.hash(API_KEY_PURPOSE, apiKey),
      webhookSecretSealed: this.secrets.encrypt(webhookSecret),
    };
    await this.redis.hset(this.keys.account(customerUuid), {
      name: account.name,
      status: account.status,
      balance_micros: account.balanceMicros,
      spending_limit_micros: account.spendingLimitMicros,
      features: account.features.join(","),
      regions: account.regions.join(","),
      sender_ids: account.senderIds.join(","),
      templates: "{}",
      created_at: account.createdAt,
      api_key_hash: account.apiKeyHash,
      webhook_secret_sealed: account.webhookSecretSealed,
    });
    // Another slot, so not in one step: an account left without its entry gets it at the next
    // start (indexApiKeys), and an entry without its account finds nothing.
    await this.redis.set(this.apiKeyKey(account.apiKeyHash), customerUuid);
    return { account, apiKey, webhookSecret };
  }

  /** The index entry of a key hash: the keyed hash only, so the key cannot be read back. */
  private apiKeyKey(apiKeyHash: string): string {
    return this.keys.apiKey(apiKeyHash);
  }

  async webhookSecret(customerUuid: string): Promise<string | undefined> {
    const account = await this.get(customerUuid);
    return account === undefined ? undefined : this.secrets.decrypt(account.webhookSecretSealed);
  }

  async keyOwner(apiKeyHash: string): Promise<string | undefined> {
    return (await this.redis.get(this.apiKeyKey(apiKeyHash))) ?? undefined;
  }

  async findByApiKey(apiKey: string): Promise<StoredAccount | undefined> {
    return findByApiKey(this, this.secrets, apiKey);
  }

  /**
   * Gives every stored account its entry in the key index (accounts created before the index
   * existed, or whose entry was not written). Idempotent; scans every primary of a Cluster.
   * Returns how many entries it wrote.
   */
  async indexApiKeys(): Promise<number> {
    let written = 0;
    for await (const keys of scanKeys(this.redis, this.keys.allAccounts(), 500)) {
      for (const key of keys) {
        const customerUuid = /\{([^}]*)\}$/.exec(key)?.[1];
        const hash = customerUuid === undefined ? null : await this.redis.hget(key, "api_key_hash");
        if (customerUuid === undefined || hash === null) continue;
        const set = await this.redis.set(this.apiKeyKey(hash), customerUuid, "NX");
        if (set !== null) written += 1;
      }
    }
    return written;
  }

  async get(customerUuid: string): Promise<StoredAccount | undefined> {
    const h = await this.redis.hgetall(this.keys.account(customerUuid));
    if (h.api_key_hash === undefined) return undefined;
    return {
      customerUuid,
      name: h.name ?? "",
      status: h.status === "suspended" ? "suspended" : "active",
      balanceMicros: Number(h.balance_micros ?? "0"),
      spendingLimitMicros: Number(h.spending_limit_micros ?? "0"),
      features: list(h.features).filter((f): f is AccountFeature =>
        (ACCOUNT_FEATURES as readonly string[]).includes(f),
      ),
      regions: list(h.regions),
      senderIds: list(h.sender_ids),
      templates: JSON.parse(h.templates ?? "{}") as Record<string, Record<string, string>>,
      channels: channelsOf(h.channels),
      createdAt: h.created_at ?? "",
      apiKeyHash: h.api_key_hash,
      webhookSecretSealed: h.webhook_secret_sealed ?? "",
    };
  }

  async setStatus(customerUuid: string, status: AccountStatus): Promise<boolean> {
    return (await this.update(customerUuid, { op: "status", value: status })) !== undefined;
  }

  async setTemplate(
    customerUuid: string,
    templateId: string,
    language: string,
    text: string,
  ): Promise<boolean> {
    return (
      (await this.update(customerUuid, { op: "template", value: templateId, language, text })) !== undefined
    );
  }

  async setChannels(customerUuid: string, channels: readonly AccountChannel[]): Promise<boolean> {
    return (await this.update(customerUuid, { op: "channels", value: channels.join(",") })) !== undefined;
  }

  async credit(customerUuid: string, micros: number): Promise<number | undefined> {
    const balance = await this.update(customerUuid, { op: "credit", value: micros });
    return balance === undefined ? undefined : Number(balance);
  }

  /** Every change goes through here, so that processes keeping the account drop it at once. */
  private async update(
    customerUuid: string,
    args: {
      op: "status" | "credit" | "template" | "channels";
      value: string | number;
      language?: string;
      text?: string;
    },
  ): Promise<string | undefined> {
    const { op, value, language, text } = args;
    const argv = { op, value, language, text };
    const [status, updated] = (await updateAccount.run(
      this.redis,
      { account: this.keys.account(customerUuid) },
      argv,
    )) as ["updated" | "not_found", string?];
    if (status !== "updated") return undefined;
    await announceChange(this.redis, this.changes, customerUuid);
    return updated ?? "";
  }
}

/**
 * The account of an API key: its owner by the key's keyed hash, and only if that account's key
 * is this one (an index entry left by an older key finds nothing).
 */
export async function findByApiKey(
  reader: Pick<AccountStore, "get" | "keyOwner">,
  secrets: Secrets,
  apiKey: string,
): Promise<StoredAccount | undefined> {
  const customerUuid = await reader.keyOwner(secrets.hash(API_KEY_PURPOSE, apiKey));
  if (customerUuid === undefined) return undefined;
  const account = await reader.get(customerUuid);
  return account !== undefined && secrets.matches(API_KEY_PURPOSE, apiKey, account.apiKeyHash)
    ? account
    : undefined;
}

/** The stored channels, those this version knows, in order; none stored: SMS only (DEFAULT_CHANNELS). */
function channelsOf(v: string | undefined): AccountChannel[] {
  const known = list(v).filter((c): c is AccountChannel =>
    (ACCOUNT_CHANNELS as readonly string[]).includes(c),
  );
  return known.length === 0 ? [...DEFAULT_CHANNELS] : known;
}

function list(v: string | undefined): string[] {
  return v === undefined || v === "" ? [] : v.split(",");
}

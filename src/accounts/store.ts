import { randomUUID } from "node:crypto";
import { Keys, LuaScript, type RedisClient } from "../redis/client.js";
import { newSecret, type Secrets } from "../crypto/secrets.js";
import {
  ACCOUNT_FEATURES,
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

/** What the rest of the service needs of accounts. */
export interface AccountStore {
  create(input: NewAccountInput): Promise<CreatedAccount>;
  get(customerUuid: string): Promise<StoredAccount | undefined>;
  setStatus(customerUuid: string, status: AccountStatus): Promise<boolean>;
  /** Adds (or with a negative amount, removes) money; undefined for an unknown account. */
  credit(customerUuid: string, micros: number): Promise<number | undefined>;
  /** Sets one language of a message variant; false for an unknown account. */
  setTemplate(customerUuid: string, templateId: string, language: string, text: string): Promise<boolean>;
}

export const API_KEY_PURPOSE = "account-api-key";
const updateAccount = LuaScript.fromFile(new URL("./update_account.lua", import.meta.url));

export class RedisAccountStore implements AccountStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly secrets: Secrets,
  ) {}

  private key(customerUuid: string): string {
    return this.keys.key("acct", customerUuid);
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
      createdAt: new Date().toISOString(),
      apiKeyHash: this.secrets.hash(API_KEY_PURPOSE, apiKey),
      webhookSecretSealed: this.secrets.encrypt(webhookSecret),
    };
    await this.redis.hset(this.key(customerUuid), {
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
    return { account, apiKey, webhookSecret };
  }

  async get(customerUuid: string): Promise<StoredAccount | undefined> {
    const h = await this.redis.hgetall(this.key(customerUuid));
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
      createdAt: h.created_at ?? "",
      apiKeyHash: h.api_key_hash,
      webhookSecretSealed: h.webhook_secret_sealed ?? "",
    };
  }

  async setStatus(customerUuid: string, status: AccountStatus): Promise<boolean> {
    return (await updateAccount.run(this.redis, [this.key(customerUuid)], ["status", status])) !== null;
  }

  async setTemplate(
    customerUuid: string,
    templateId: string,
    language: string,
    text: string,
  ): Promise<boolean> {
    const r = await updateAccount.run(
      this.redis,
      [this.key(customerUuid)],
      ["template", templateId, language, text],
    );
    return r !== null;
  }

  async credit(customerUuid: string, micros: number): Promise<number | undefined> {
    const balance = await updateAccount.run(this.redis, [this.key(customerUuid)], ["credit", micros]);
    return balance === null ? undefined : Number(balance);
  }
}

function list(v: string | undefined): string[] {
  return v === undefined || v === "" ? [] : v.split(",");
}

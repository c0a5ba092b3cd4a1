import { randomBytes } from "node:crypto";
import { LuaScript, type Keys, type RedisClient } from "../redis/client.js";
import { newSecret, type Secrets } from "../crypto/secrets.js";

export const GRANT_TYPES = ["client_credentials"] as const;
export const CLIENT_SECRET_PURPOSE = "oauth-client-secret";

export interface OAuthClient {
  clientId: string;
  appId: string;
  clientName: string;
  providerUrl: string;
  redirectUris: string[];
  scopes: string[];
  grantTypes: string[];
  issuedAt: number;
}

interface StoredClient extends OAuthClient {
  secretHash: string;
}

const beginIssue = LuaScript.fromFile(new URL("./begin_issue.lua", import.meta.url));
const deleteClient = LuaScript.fromFile(new URL("./delete_client.lua", import.meta.url));

/**
 * OAuth clients in Redis: `client:{<client_id>}` (hash) and its in-flight counter. The secret is
 * a 256-bit random value kept as a keyed hash: a fast check, since its entropy needs no slow hash.
 */
export class ClientStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly secrets: Secrets,
  ) {}

  private key(clientId: string, ...suffix: string[]): string {
    return this.keys.key("client", clientId, ...suffix);
  }

  async create(
    input: Omit<OAuthClient, "clientId" | "issuedAt">,
  ): Promise<{ client: OAuthClient; secret: string }> {
    const clientId = `rfc_${randomBytes(16).toString("base64url")}`;
    const secret = newSecret("rfs");
    const client: OAuthClient = { ...input, clientId, issuedAt: Math.floor(Date.now() / 1000) };
    await this.redis.hset(this.key(clientId), {
      app_id: client.appId,
      client_name: client.clientName,
      provider_url: client.providerUrl,
      redirect_uris: JSON.stringify(client.redirectUris),
      scopes: JSON.stringify(client.scopes),
      grant_types: JSON.stringify(client.grantTypes),
      issued_at: String(client.issuedAt),
      secret_hash: this.secrets.hash(CLIENT_SECRET_PURPOSE, secret),
    });
    return { client, secret };
  }

  /** The client, if it exists and the secret is its own (compared in constant time). */
  async authenticate(clientId: string, secret: string): Promise<OAuthClient | undefined> {
    const found = await this.get(clientId);
    const ok = this.secrets.matches(CLIENT_SECRET_PURPOSE, secret, found?.secretHash ?? "0".repeat(64));
    return found !== undefined && ok ? found : undefined;
  }

  private async get(clientId: string): Promise<StoredClient | undefined> {
    if (!/^rfc_[A-Za-z0-9_-]{22}$/.test(clientId)) return undefined;
    const h = await this.redis.hgetall(this.key(clientId));
    if (h.secret_hash === undefined) return undefined;
    const list = (v: string | undefined) => JSON.parse(v ?? "[]") as string[];
    return {
      clientId,
      appId: h.app_id ?? "",
      clientName: h.client_name ?? "",
      providerUrl: h.provider_url ?? "",
      redirectUris: list(h.redirect_uris),
      scopes: list(h.scopes),
      grantTypes: list(h.grant_types),
      issuedAt: Number(h.issued_at ?? "0"),
      secretHash: h.secret_hash,
    };
  }

  /**
   * Runs `issue` under a lease that deletion waits for; undefined when the client does not exist
   * (any more). See begin_issue.lua.
   */
  async whileExists<T>(clientId: string, issue: () => Promise<T>): Promise<T | undefined> {
    if (!/^rfc_[A-Za-z0-9_-]{22}$/.test(clientId)) return undefined;
    const inflight = this.key(clientId, "inflight");
    if ((await beginIssue.run(this.redis, [this.key(clientId), inflight], [])) !== 1) return undefined;
    try {
      return await issue();
    } finally {
      await this.redis.decr(inflight);
    }
  }

  /**
   * Deletes a client of the app and returns once no token of it is being issued any more (at
   * most `waitMs`); false when the app has no such client.
   */
  async delete(appId: string, clientId: string, waitMs = 5_000): Promise<boolean> {
    if (!/^rfc_[A-Za-z0-9_-]{22}$/.test(clientId)) return false;
    const inflight = this.key(clientId, "inflight");
    let pending = Number(await deleteClient.run(this.redis, [this.key(clientId), inflight], [appId]));
    if (pending < 0) return false;
    const until = Date.now() + waitMs;
    while (pending > 0 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 5));
      pending = Number((await this.redis.get(inflight)) ?? "0");
    }
    return true;
  }
}

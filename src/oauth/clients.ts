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

const CLIENT_ID = /^rfc_[A-Za-z0-9_-]{22}$/;

const beginIssue = LuaScript.fromFile(new URL("./begin-issue.lua", import.meta.url));
const deleteClient = LuaScript.fromFile(new URL("./delete-client.lua", import.meta.url));

/**
 * OAuth clients in Redis: `client:{<client_id>}` (hash) and its in-flight counter. The secret is
 * a 256-bit random value kept as a keyed hash: a fast check, since its entropy needs no slow hash.
 */
export class ClientStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly secrets: Secrets,
    /** Where a lease is given back after the answer (see Registry.afterAnswer). */
    private readonly afterAnswer: RedisClient = redis,
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

  /** The client, if its fields are those of a client and the secret is its own (constant time). */
  private authenticate(
    clientId: string,
    secret: string,
    h: Record<string, string> | undefined,
  ): OAuthClient | undefined {
    const found = h === undefined ? undefined : decodeClient(clientId, h);
    const ok = this.secrets.matches(CLIENT_SECRET_PURPOSE, secret, found?.secretHash ?? "0".repeat(64));
    if (found === undefined || !ok) return undefined;
    const { secretHash: _hash, ...client } = found;
    return client;
  }

  /**
   * Runs `issue` under a lease that deletion waits for, with the client when `secret` is its own
   * (else undefined); answers undefined without calling it when the client does not exist (any
   * more). One round trip (begin-issue.lua reads the client as it takes the lease); the lease is
   * given back after `issue`, off the answer path: a deletion waits for it all the same.
   */
  async whileExists<T>(
    clientId: string,
    secret: string,
    issue: (client: OAuthClient | undefined) => Promise<T>,
  ): Promise<T | undefined> {
    if (!CLIENT_ID.test(clientId)) return undefined;
    const inflight = this.key(clientId, "inflight");
    const flat = (await beginIssue.run(this.redis, [this.key(clientId), inflight], [])) as string[] | 0;
    if (flat === 0) return undefined;
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i] as string] = flat[i + 1] as string;
    try {
      return await issue(this.authenticate(clientId, secret, h));
    } finally {
      // A lease not given back (Redis away) expires with the counter, 30 s after it was taken.
      void this.afterAnswer.decr(inflight).catch(() => undefined);
    }
  }

  /**
   * Deletes a client of the app and returns once no token of it is being issued any more (at
   * most `waitMs`); false when the app has no such client.
   */
  async delete(appId: string, clientId: string, waitMs = 5_000): Promise<boolean> {
    if (!CLIENT_ID.test(clientId)) return false;
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

function decodeClient(clientId: string, h: Record<string, string>): StoredClient | undefined {
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

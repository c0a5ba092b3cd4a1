import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { newSecret, type Secrets } from "../crypto/secrets.js";
import type { PublicJwks } from "./client-keys.js";
import { OAuthKeys } from "./keys.js";
import { TOKEN_ENDPOINT_AUTH_METHODS, type TokenEndpointAuthMethod } from "./metadata.js";
import { andThen, type Awaitable } from "../awaitable.js";

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
  /**
   * The one way the client may authenticate, as its registration named it. Undefined for a
   * client registered without one, or before clients chose one: either secret method, HTTP Basic
   * or the form (docs/session-api.md#client-authentication-methods).
   */
  authMethod: TokenEndpointAuthMethod | undefined;
  /** A `private_key_jwt` client's inline public keys. */
  jwks?: PublicJwks | undefined;
  /** A `private_key_jwt` client's key set URL. */
  jwksUri?: string | undefined;
}

interface StoredClient extends OAuthClient {
  /** None for a `private_key_jwt` client. */
  secretHash: string | undefined;
  /** The secret before the last rotation, while its grace lasts (epoch ms); none after. */
  oldSecret?: { hash: string; untilMs: number };
}

/** The longest an old secret keeps working after a rotation (docs/session-api.md#secret-rotation). */
export const MAX_GRACE_SECONDS = 86_400;

/**
 * The longest a client read from Redis vouches for a token: an answer is sent within this long
 * of the start of the read that found the client, or the client is read again first.
 */
export const CLIENT_READING_MS = 250;
/**
 * How long a deletion waits, after the client is gone from Redis, before it answers: every
 * reading that found the client has expired by then, whatever process holds it, with room left
 * for the last answer to be written.
 */
export const DELETE_SETTLE_MS = 4 * CLIENT_READING_MS;
/** The most clients one process keeps read (the oldest read is dropped first). */
const KEPT_CLIENTS = 10_000;

const CLIENT_ID = /^rfc_[A-Za-z0-9_-]{22}$/;

const deleteClient = defineScript({
  file: new URL("./delete-client.lua", import.meta.url),
  keys: ["client"],
  argv: ["appId"],
});
const rotateClientSecret = defineScript({
  file: new URL("./rotate-client-secret.lua", import.meta.url),
  keys: ["client"],
  argv: ["appId", "secretHash", "oldUntilMs"],
});

/** A client read from Redis and when the read began (monotonic ms, performance.now()). */
interface Reading {
  client: StoredClient;
  readAt: number;
}

/** A client whose secret matched a reading of it; `fresh` says whether that reading still vouches. */
export interface AuthenticatedClient {
  client: OAuthClient;
  /** True while the reading is younger than CLIENT_READING_MS: a token may be answered now. */
  fresh(): boolean;
}

/**
 * OAuth clients in Redis: `client:{<client_id>}` (hash). The secret is a 256-bit random value
 * kept as a keyed hash: a fast check, since its entropy needs no slow hash.
 *
 * No token is answered after the deletion of its client has answered: each process keeps the
 * clients it read for CLIENT_READING_MS at most, counted from the start of the read, and answers a
 * token only within that time (the grant reads the client again when signing took longer); a
 * deletion removes the client, then waits DELETE_SETTLE_MS before it answers. A reading that found
 * the client began before the removal, so it has expired before the deletion answers, on every
 * instance and worker, with no lease or announcement to take, give back or miss. A successful
 * token costs one HGETALL per client, process and CLIENT_READING_MS / 2, and no write.
 */
export class ClientStore {
  private readonly kept = new Map<string, Reading>();
  /** Reads under way, so concurrent callers of one client share one round trip. */
  private readonly reading = new Map<string, Promise<Reading | undefined>>();
  private readonly keys: OAuthKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
    private readonly secrets: Secrets,
    /** Monotonic milliseconds; tests move it to make signing seem slow. */
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.keys = new OAuthKeys(keys);
  }

  /**
   * Registers a client; a `private_key_jwt` one gets no secret. A method named at registration
   * is stored with a mark (`auth_method_named`) that holds the client to it; none is stored for a
   * client registered without one.
   */
  async create(
    input: Omit<OAuthClient, "clientId" | "issuedAt">,
  ): Promise<{ client: OAuthClient; secret: string | undefined }> {
    const clientId = `rfc_${randomBytes(16).toString("base64url")}`;
    const secret = input.authMethod === "private_key_jwt" ? undefined : newSecret("rfs");
    const client: OAuthClient = { ...input, clientId, issuedAt: Math.floor(Date.now() / 1000) };
    await this.redis.hset(this.keys.client(clientId), {
      app_id: client.appId,
      client_name: client.clientName,
      provider_url: client.providerUrl,
      redirect_uris: JSON.stringify(client.redirectUris),
      scopes: JSON.stringify(client.scopes),
      grant_types: JSON.stringify(client.grantTypes),
      issued_at: String(client.issuedAt),
      ...(input.authMethod === undefined
        ? {}
        : { token_endpoint_auth_method: input.authMethod, auth_method_named: "1" }),
      ...(secret === undefined ? {} : { secret_hash: this.secrets.hash(CLIENT_SECRET_PURPOSE, secret) }),
      ...(client.jwks === undefined ? {} : { jwks: JSON.stringify(client.jwks) }),
      ...(client.jwksUri === undefined ? {} : { jwks_uri: client.jwksUri }),
    });
    return { client, secret };
  }

  /**
   * The client, when it exists and `secret` is its own (compared in constant time), from a
   * reading that vouches for it now; undefined otherwise. At once from a kept reading.
   */
  authenticate(clientId: string, secret: string): Awaitable<AuthenticatedClient | undefined> {
    if (!CLIENT_ID.test(clientId)) {
      this.secrets.matches(CLIENT_SECRET_PURPOSE, secret, UNKNOWN_HASH);
      return undefined;
    }
    return andThen(this.read(clientId), (reading) => this.withSecret(reading, secret));
  }

  private withSecret(reading: Reading | undefined, secret: string): AuthenticatedClient | undefined {
    const ok = this.secrets.matches(
      CLIENT_SECRET_PURPOSE,
      secret,
      reading?.client.secretHash ?? UNKNOWN_HASH,
    );
    const old = reading?.client.oldSecret;
    // Within a rotation's grace the secret before it works too (a hash more, no Redis work).
    const oldOk =
      !ok &&
      old !== undefined &&
      Date.now() < old.untilMs &&
      this.secrets.matches(CLIENT_SECRET_PURPOSE, secret, old.hash);
    if (reading === undefined || !(ok || oldOk)) return undefined;
    return this.vouching(reading);
  }

  /**
   * The client, when it exists, with no secret checked: for a client that proved itself
   * otherwise (a signed assertion), from a reading that vouches for it now.
   */
  async find(clientId: string): Promise<AuthenticatedClient | undefined> {
    if (!CLIENT_ID.test(clientId)) return undefined;
    const reading = await this.read(clientId);
    return reading === undefined ? undefined : this.vouching(reading);
  }

  private vouching(reading: Reading): AuthenticatedClient {
    const { secretHash: _hash, oldSecret: _old, ...client } = reading.client;
    const { readAt } = reading;
    return { client, fresh: () => this.clock() - readAt < CLIENT_READING_MS };
  }

  /**
   * Deletes a client of the app and answers once no process may answer a token of it any more
   * (DELETE_SETTLE_MS after the removal); false, at once, when the app has no such client.
   */
  async delete(appId: string, clientId: string): Promise<boolean> {
    if (!CLIENT_ID.test(clientId)) return false;
    const [status] = (await deleteClient.run(
      this.redis,
      { client: this.keys.client(clientId) },
      { appId },
    )) as ["deleted" | "not_found"];
    if (status !== "deleted") return false;
    this.kept.delete(clientId);
    await new Promise((resolve) => setTimeout(resolve, DELETE_SETTLE_MS));
    return true;
  }

  /**
   * Gives the app's client a new secret; the current one keeps working for `graceSeconds` (none
   * when 0), and a secret kept from an earlier rotation stops. Answers once every reading of the
   * client taken before the rotation has expired (DELETE_SETTLE_MS), as a deletion does: from
   * then on every process takes the new secret, and the old one only within its grace. Undefined,
   * at once, when the app has no such client.
   */
  async rotateSecret(appId: string, clientId: string, graceSeconds: number): Promise<string | undefined> {
    if (!CLIENT_ID.test(clientId)) return undefined;
    const secret = newSecret("rfs");
    const [status] = (await rotateClientSecret.run(
      this.redis,
      { client: this.keys.client(clientId) },
      {
        appId,
        secretHash: this.secrets.hash(CLIENT_SECRET_PURPOSE, secret),
        oldUntilMs: String(graceSeconds === 0 ? 0 : Date.now() + graceSeconds * 1000),
      },
    )) as ["rotated" | "not_found"];
    if (status !== "rotated") return undefined;
    this.kept.delete(clientId);
    await new Promise((resolve) => setTimeout(resolve, DELETE_SETTLE_MS));
    return secret;
  }

  /**
   * The key that revokes the server token `jti` of the client, under the client's hash tag so
   * that one round trip reads it with the client (see `tokenStanding`).
   */
  revokedKey(clientId: string, jti: string): string {
    return this.keys.clientRevoked(clientId, jti);
  }

  /**
   * Revokes the client's server token `jti` until `exp` (Unix seconds); nothing when it has
   * expired already.
   */
  async revoke(clientId: string, jti: string, exp: number): Promise<void> {
    if (exp * 1000 <= Date.now()) return;
    await this.redis.set(this.revokedKey(clientId, jti), "1", "EXAT", exp);
  }

  /**
   * Whether the client still exists and whether its token `jti` was revoked, read together in
   * one round trip (both keys share the client's hash tag).
   */
  async tokenStanding(clientId: string, jti: string): Promise<{ clientExists: boolean; revoked: boolean }> {
    if (!CLIENT_ID.test(clientId)) return { clientExists: false, revoked: false };
    const results = await this.redis
      .pipeline()
      .exists(this.keys.client(clientId))
      .exists(this.revokedKey(clientId, jti))
      .exec();
    const [client, revoked] = (results ?? []).map(([err, n]) => {
      if (err !== null) throw err;
      return n === 1;
    });
    return { clientExists: client === true, revoked: revoked === true };
  }

  /**
   * A reading of the client young enough to vouch for a token, kept (answered at once) or read
   * now; one read of a kept client starts once half of its time is gone, off the answer path, so
   * a busy client is never waited for.
   */
  private read(clientId: string): Awaitable<Reading | undefined> {
    const kept = this.kept.get(clientId);
    const age = kept === undefined ? Infinity : this.clock() - kept.readAt;
    if (kept !== undefined && age < CLIENT_READING_MS) {
      if (age >= CLIENT_READING_MS / 2) void this.readFromRedis(clientId).catch(() => undefined);
      return kept;
    }
    return this.readFromRedis(clientId);
  }

  private readFromRedis(clientId: string): Promise<Reading | undefined> {
    const under = this.reading.get(clientId);
    if (under !== undefined) return under;
    const readAt = this.clock();
    const reading = this.redis
      .hgetall(this.keys.client(clientId))
      .then((h) => {
        const client = decodeClient(clientId, h);
        if (client === undefined) {
          this.kept.delete(clientId);
          return undefined;
        }
        const read = { client, readAt };
        this.keep(clientId, read);
        return read;
      })
      .finally(() => {
        this.reading.delete(clientId);
      });
    this.reading.set(clientId, reading);
    return reading;
  }

  private keep(clientId: string, read: Reading): void {
    const before = this.kept.get(clientId);
    if (before !== undefined && before.readAt > read.readAt) return;
    this.kept.delete(clientId);
    if (this.kept.size >= KEPT_CLIENTS) {
      const oldest = this.kept.keys().next();
      if (oldest.done !== true) this.kept.delete(oldest.value);
    }
    this.kept.set(clientId, read);
  }
}

/** Compared against when there is no client, so that an unknown client costs the same time. */
const UNKNOWN_HASH = "0".repeat(64);

/**
 * The method a stored client is held to, if any. Before `auth_method_named` existed, a
 * registration without a method stored `client_secret_basic`: without the mark, that one holds no
 * client to it. The other methods were only ever stored when named.
 */
function heldTo(method: string | undefined, named: boolean): TokenEndpointAuthMethod | undefined {
  if (!(TOKEN_ENDPOINT_AUTH_METHODS as readonly string[]).includes(method ?? "")) return undefined;
  if (method === "client_secret_basic" && !named) return undefined;
  return method as TokenEndpointAuthMethod;
}

function decodeClient(clientId: string, h: Record<string, string>): StoredClient | undefined {
  const method = h.token_endpoint_auth_method;
  // A client is whole with its secret, or with its keys for private_key_jwt.
  if (h.app_id === undefined || (h.secret_hash === undefined && method !== "private_key_jwt")) {
    return undefined;
  }
  const list = (v: string | undefined) => JSON.parse(v ?? "[]") as string[];
  return {
    clientId,
    appId: h.app_id,
    clientName: h.client_name ?? "",
    providerUrl: h.provider_url ?? "",
    redirectUris: list(h.redirect_uris),
    scopes: list(h.scopes),
    grantTypes: list(h.grant_types),
    issuedAt: Number(h.issued_at ?? "0"),
    authMethod: heldTo(method, h.auth_method_named === "1"),
    jwks: h.jwks === undefined ? undefined : (JSON.parse(h.jwks) as PublicJwks),
    jwksUri: h.jwks_uri,
    secretHash: h.secret_hash,
    ...(h.old_secret_hash === undefined
      ? {}
      : { oldSecret: { hash: h.old_secret_hash, untilMs: Number(h.old_secret_until_ms ?? "0") } }),
  };
}

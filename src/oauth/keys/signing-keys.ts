import { sign, type KeyObject } from "node:crypto";
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey } from "jose";
import { z } from "zod";
import { andThen, type Awaitable } from "../../awaitable.js";
import type { Secrets } from "../../crypto/secrets.js";
import type { Keys, RedisClient } from "../../redis/client.js";
import { defineScript } from "../../redis/script.js";
import { announceChange, WatchedCache } from "../../redis/watched-cache.js";
import { OAuthKeys } from "../keys.js";

/**
 * The keys that sign access tokens (ES256), shared by every instance through Redis.
 *
 * Layout: one HASH, `<prefix>signing:{keys}`, so every script keeps to one Cluster slot:
 * - `current` → the kid new tokens are signed with;
 * - `key:<kid>` → JSON {kid, alg, public_jwk, private_sealed, created_at_ms, retired_at_ms?}, where
 *   `private_sealed` is the private JWK encrypted with SECRETS_KEY (never stored in clear).
 *
 * A kid is the RFC 7638 thumbprint of the public key. Rotation stores the new key, marks the old
 * current one retired and switches `current` in one script. A retired key stays published until
 * retired_at + token lifetime + clock skew (the last token it signed has expired by then), and is
 * then removed lazily by a script that rotate() and jwks() run. The current key is never removed.
 *
 * Each instance reads `current` on every call (one HGET), so a rotation made elsewhere is used at
 * once; only the imported private key is kept in memory, so signing needs no decrypt per token.
 */
export interface SigningKey {
  kid: string;
  alg: "ES256";
  /** Not extractable; signed with synchronously through node:crypto (see compactJws). */
  privateKey: CryptoKey;
  publicJwk: PublicJwk;
}

/** A published verification key: public members only. */
export interface PublicJwk {
  kty: "EC";
  crv: "P-256";
  x: string;
  y: string;
  kid: string;
  use: "sig";
  alg: "ES256";
}

export interface SigningKeys {
  /**
   * The key new tokens are signed with, at once when the kept kid is fresh; creates the first
   * key if none exists (race-safe across instances).
   */
  current(): Awaitable<SigningKey>;
  /** Adds a new key and makes it current; the previous one stays published until every token it signed has expired. */
  rotate(): Promise<{ kid: string }>;
  /** Public keys whose tokens may still be alive, current first. */
  jwks(): Promise<{ keys: PublicJwk[] }>;
}

export interface SigningKeysOptions {
  /** Lifetime of the tokens these keys sign: how long a retired key must stay published. */
  tokenLifetimeSeconds: number;
  /** Added to that retention for verifiers whose clocks run behind; default 60. */
  clockSkewSeconds?: number;
  /** Milliseconds since the epoch; tests move it. */
  now?: () => number;
}

const ALG = "ES256";
/** The longest a cached current kid is used without reading it again (the rotation guarantee). */
export const KID_MAX_AGE_MS = 1_000;
const CURRENT = "current";
const field = (kid: string) => `key:${kid}`;

const installFirstKey = defineScript({
  file: new URL("./install-first-signing-key.lua", import.meta.url),
  keys: ["signingKeys"],
  argv: ["kid", "record"],
});
const rotateKey = defineScript({
  file: new URL("./rotate-signing-key.lua", import.meta.url),
  keys: ["signingKeys"],
  argv: ["kid", "record", "now"],
});
const pruneKeys = defineScript({
  file: new URL("./prune-signing-keys.lua", import.meta.url),
  keys: ["signingKeys"],
  argv: ["now", "retention"],
});

const EcPublicJwk = z.object({
  kty: z.literal("EC"),
  crv: z.literal("P-256"),
  x: z.string().min(1),
  y: z.string().min(1),
});
const EcPrivateJwk = EcPublicJwk.extend({ d: z.string().min(1) });

const StoredKey = z.object({
  kid: z.string().min(1),
  alg: z.literal(ALG),
  public_jwk: EcPublicJwk,
  private_sealed: z.string().min(1),
  created_at_ms: z.number(),
  retired_at_ms: z.number().optional(),
});
type StoredKey = z.infer<typeof StoredKey>;

export class RedisSigningKeys implements SigningKeys {
  private readonly hashKey: string;
  private readonly retentionMs: number;
  private readonly now: () => number;
  /** The imported private key of the last current kid seen (or being imported). */
  private cached: { kid: string; key: Promise<SigningKey> } | undefined;
  /** That key once imported: signed with at once while the kept kid names it. */
  private ready: SigningKey | undefined;
  /** The first-key creation under way in this instance, so concurrent callers share it. */
  private creating: Promise<string> | undefined;
  /**
   * The current kid, kept for at most KID_MAX_AGE_MS and dropped at once when a rotation is
   * announced (see `watch`): a token call costs no round trip for its key, while a rotation
   * reaches every instance within a second.
   */
  private readonly kid: WatchedCache<string>;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
    private readonly secrets: Secrets,
    options: SigningKeysOptions,
  ) {
    const skew = options.clockSkewSeconds ?? 60;
    if (!(options.tokenLifetimeSeconds > 0) || !(skew >= 0)) {
      throw new Error("tokenLifetimeSeconds must be positive and clockSkewSeconds not negative");
    }
    const oauthKeys = new OAuthKeys(keys);
    this.hashKey = oauthKeys.signingKeys();
    this.kid = new WatchedCache(oauthKeys.signingRotations(), { maxAgeMs: KID_MAX_AGE_MS, maxEntries: 1 });
    this.retentionMs = (options.tokenLifetimeSeconds + skew) * 1000;
    this.now = options.now ?? Date.now;
  }

  current(): Awaitable<SigningKey> {
    // The hot path: the kept kid is fresh and its key imported, so the answer needs no wait.
    const ready = this.ready;
    if (ready !== undefined && this.kid.peek(CURRENT) === ready.kid) return ready;
    return this.currentRead();
  }

  private async currentRead(): Promise<SigningKey> {
    const kid = await this.currentKid();
    const cached = this.cached;
    if (cached?.kid === kid) return cached.key;
    const key = this.read(kid);
    this.cached = { kid, key };
    key.then(
      (imported) => {
        if (this.cached?.key === key) this.ready = imported;
      },
      // A failed read is not cached: the next call tries again.
      () => {
        if (this.cached?.key === key) this.cached = undefined;
      },
    );
    return key;
  }

  /**
   * Whether the stored current key, if there is one, opens with this SECRETS_KEY: false when it
   * was sealed with another (for data stored before the key check value, src/crypto/key-check.ts).
   */
  async opensWithThisKey(): Promise<boolean> {
    const kid = await this.redis.hget(this.hashKey, CURRENT);
    const raw = kid === null ? null : await this.redis.hget(this.hashKey, field(kid));
    if (raw === null) return true;
    const record = StoredKey.parse(JSON.parse(raw));
    try {
      this.secrets.decrypt(record.private_sealed);
      return true;
    } catch {
      return false;
    }
  }

  async rotate(): Promise<{ kid: string }> {
    const made = await this.generate();
    const rotated = { kid: made.key.kid, record: made.record, now: this.now() };
    await rotateKey.run(this.redis, { signingKeys: this.hashKey }, rotated);
    this.remember(made.key);
    this.kid.set(CURRENT, made.key.kid);
    // Every instance drops its kept kid now; one that misses this reads it within a second.
    await announceChange(this.redis, this.kid.channel, CURRENT);
    await this.prune();
    return { kid: made.key.kid };
  }

  async jwks(): Promise<{ keys: PublicJwk[] }> {
    // Publish the key that will sign the first token before any token exists.
    await this.currentKid();
    const { current, records } = await this.prune();
    const ordered = records.sort(
      (a, b) => Number(b.kid === current) - Number(a.kid === current) || b.created_at_ms - a.created_at_ms,
    );
    return { keys: ordered.map(published) };
  }

  /**
   * Listens, on `subscriber` (a connection of its own: a subscribed one runs nothing else), for
   * rotations made by other instances or the CLI. Resolves once subscribed; the answer stops it.
   */
  async watch(subscriber: RedisClient): Promise<() => Promise<void>> {
    return this.kid.watch(subscriber);
  }

  private async currentKid(): Promise<string> {
    const kid = await this.kid.get(
      CURRENT,
      async () => (await this.redis.hget(this.hashKey, CURRENT)) ?? undefined,
    );
    if (kid !== undefined) return kid;
    this.creating ??= this.installFirst()
      .then((installed) => {
        this.kid.set(CURRENT, installed);
        return installed;
      })
      .finally(() => {
        this.creating = undefined;
      });
    return this.creating;
  }

  /** Generates a key and installs it unless another instance got there first; answers the current kid. */
  private async installFirst(): Promise<string> {
    const made = await this.generate();
    const first = { kid: made.key.kid, record: made.record };
    const answer = await installFirstKey.run(this.redis, { signingKeys: this.hashKey }, first);
    const [, kid] = z.tuple([z.enum(["installed", "kept"]), z.string()]).parse(answer);
    if (kid === made.key.kid) this.remember(made.key);
    return kid;
  }

  private async prune(): Promise<{ current: string; records: StoredKey[] }> {
    const args = { now: this.now(), retention: this.retentionMs };
    const answer = await pruneKeys.run(this.redis, { signingKeys: this.hashKey }, args);
    const [, current, ...raw] = z
      .tuple([z.literal("kept"), z.string()])
      .rest(z.string())
      .parse(answer);
    return { current, records: raw.map((r) => StoredKey.parse(JSON.parse(r))) };
  }

  private remember(key: SigningKey): void {
    this.cached = { kid: key.kid, key: Promise.resolve(key) };
    this.ready = key;
  }

  private async read(kid: string): Promise<SigningKey> {
    const raw = await this.redis.hget(this.hashKey, field(kid));
    if (raw === null) throw new Error(`signing key ${kid} is missing from Redis`);
    const record = StoredKey.parse(JSON.parse(raw));
    let plain: string;
    try {
      plain = this.secrets.decrypt(record.private_sealed);
    } catch (err) {
      throw new Error(
        `signing key ${kid} cannot be decrypted: SECRETS_KEY is not the one it was stored with`,
        {
          cause: err,
        },
      );
    }
    const jwk = EcPrivateJwk.parse(JSON.parse(plain));
    return { kid, alg: ALG, privateKey: await importPrivate(jwk), publicJwk: published(record) };
  }

  private async generate(): Promise<{ key: SigningKey; record: string }> {
    // Extractable once, to seal it; the key kept in memory is imported again, not extractable.
    const pair = await generateKeyPair(ALG, { extractable: true });
    const jwk = EcPrivateJwk.parse(await exportJWK(pair.privateKey));
    const publicJwk = EcPublicJwk.parse(jwk);
    const kid = await calculateJwkThumbprint(publicJwk, "sha256");
    const record: StoredKey = {
      kid,
      alg: ALG,
      public_jwk: publicJwk,
      private_sealed: this.secrets.encrypt(JSON.stringify(jwk)),
      created_at_ms: this.now(),
    };
    return {
      key: { kid, alg: ALG, privateKey: await importPrivate(jwk), publicJwk: published(record) },
      record: JSON.stringify(record),
    };
  }
}

function importPrivate(jwk: z.infer<typeof EcPrivateJwk>): Promise<CryptoKey> {
  return importJWK(jwk, ALG, { extractable: false });
}

function published(record: StoredKey): PublicJwk {
  const { kty, crv, x, y } = record.public_jwk;
  return { kty, crv, x, y, kid: record.kid, use: "sig", alg: ALG };
}

/**
 * The `typ` header of server tokens (client_credentials, RFC 9068): a verifier that requires it
 * never takes a user's session token for one.
 */
export const SERVER_TOKEN_TYPE = "at+jwt";
/** The `typ` header of user session access tokens; the service takes no other on user calls. */
export const SESSION_TOKEN_TYPE = "session+jwt";

/**
 * Signs a JWT with the current key; header {alg: "ES256", kid, typ}: `at+jwt` (a server token)
 * unless told otherwise. The caller supplies every claim, iat and exp included.
 */
export function signAccessToken(
  keys: SigningKeys,
  claims: Record<string, unknown> & { iat: number; exp: number },
  options: { typ?: string } = {},
): Awaitable<string> {
  const typ = options.typ ?? SERVER_TOKEN_TYPE;
  return andThen(keys.current(), (key) =>
    compactJws({ alg: key.alg, kid: key.kid, typ }, claims, key.privateKey),
  );
}

/**
 * A JWS in compact serialization (RFC 7515 section 7.1) signed with ES256: the signature is R || S,
 * 64 bytes (RFC 7518 section 3.4), as any JOSE library verifies it. One synchronous call to
 * node:crypto, where a WebCrypto sign costs a job and a promise per token.
 */
export function compactJws(
  header: { alg: "ES256" } & Record<string, unknown>,
  payload: object,
  key: CryptoKey,
): string {
  const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(payload))}`;
  // node:crypto takes a CryptoKey where its typings name only KeyObject (nodejs.org/api/crypto.html#cryptosignalgorithm-data-key-callback).
  const signature = sign("sha256", Buffer.from(input), {
    key: key as unknown as KeyObject,
    dsaEncoding: "ieee-p1363",
  });
  return `${input}.${signature.toString("base64url")}`;
}

function base64url(text: string): string {
  return Buffer.from(text).toString("base64url");
}

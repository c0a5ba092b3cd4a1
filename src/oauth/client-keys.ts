import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  importJWK,
  type JWK,
  type JWTVerifyGetKey,
} from "jose";
import { badField } from "../errors.js";

/** The most keys an inline JWK Set may hold: room for a rotation, not a key store. */
export const MAX_CLIENT_KEYS = 5;
/** The smallest RSA modulus a client key may have, in bits. */
const MIN_RSA_BITS = 2048;
/** Members that only a private or symmetric key has. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];
/** Key sets fetched from jwks_uri kept in memory, least recently used dropped first. */
const MAX_REMOTE_SETS = 1000;

/** A client's public key set, as registered and stored. */
export interface PublicJwks {
  keys: JWK[];
}

/**
 * A `jwks` given at registration: a JWK Set of 1 to MAX_CLIENT_KEYS public keys, EC P-256 or RSA
 * of at least 2048 bits, each with a distinct `kid`. Refusals are 400 bad_request naming the
 * member at fault (`jwks.keys.0.d`); the answer keeps only the public members.
 */
export async function publicJwks(value: unknown): Promise<PublicJwks> {
  if (!isObject(value) || !Array.isArray(value.keys)) {
    throw badField("jwks", 'must be a JWK Set: {"keys": [...]}');
  }
  const given: unknown[] = value.keys;
  if (given.length === 0) throw badField("jwks.keys", "must hold at least one key");
  if (given.length > MAX_CLIENT_KEYS) {
    throw badField("jwks.keys", `must hold at most ${MAX_CLIENT_KEYS} keys`);
  }
  const kids = new Set<string>();
  const keys: JWK[] = [];
  for (const [i, raw] of given.entries()) {
    const field = `jwks.keys.${i}`;
    if (!isObject(raw)) throw badField(field, "must be a JSON Web Key object");
    const secret = PRIVATE_MEMBERS.find((m) => m in raw);
    if (secret !== undefined) {
      throw badField(`${field}.${secret}`, "must not be given: register the public key only");
    }
    const kid = raw.kid;
    if (typeof kid !== "string" || kid === "" || kid.length > 200) {
      throw badField(`${field}.kid`, "is required (1 to 200 characters)");
    }
    if (kids.has(kid)) throw badField(`${field}.kid`, "must differ from the other keys' kid");
    kids.add(kid);
    if (raw.use !== undefined && raw.use !== "sig")
      throw badField(`${field}.use`, 'must be "sig" when given');
    const key = publicKey(raw, field);
    try {
      await importJWK(key, key.alg ?? (key.kty === "EC" ? "ES256" : "RS256"));
    } catch {
      throw badField(field, "is not a valid key");
    }
    keys.push(key);
  }
  return { keys };
}

/** The public members of an EC P-256 or RSA key, checked. */
function publicKey(raw: Record<string, unknown>, field: string): JWK {
  const str = (name: string) => {
    const v = raw[name];
    if (typeof v !== "string" || !/^[A-Za-z0-9_-]+$/.test(v)) {
      throw badField(`${field}.${name}`, "is required (base64url)");
    }
    return v;
  };
  const common = {
    kid: raw.kid as string,
    ...(raw.use === undefined ? {} : { use: "sig" }),
  };
  if (raw.kty === "EC") {
    if (raw.crv !== "P-256") throw badField(`${field}.crv`, 'must be "P-256"');
    if (raw.alg !== undefined && raw.alg !== "ES256")
      throw badField(`${field}.alg`, 'must be "ES256" for P-256');
    return { kty: "EC", crv: "P-256", x: str("x"), y: str("y"), ...common, ...alg(raw) };
  }
  if (raw.kty === "RSA") {
    const n = str("n");
    if (modulusBits(n) < MIN_RSA_BITS) throw badField(`${field}.n`, `must be at least ${MIN_RSA_BITS} bits`);
    if (raw.alg !== undefined && raw.alg !== "RS256" && raw.alg !== "PS256") {
      throw badField(`${field}.alg`, 'must be "RS256" or "PS256" for RSA');
    }
    return { kty: "RSA", n, e: str("e"), ...common, ...alg(raw) };
  }
  throw badField(`${field}.kty`, 'must be "EC" (P-256) or "RSA"');
}

function alg(raw: Record<string, unknown>): { alg?: string } {
  return typeof raw.alg === "string" ? { alg: raw.alg } : {};
}

function modulusBits(n: string): number {
  const bytes = Buffer.from(n, "base64url");
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i += 1;
  if (i === bytes.length) return 0;
  return (bytes.length - i - 1) * 8 + (32 - Math.clz32(bytes[i] ?? 0));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export interface ClientKeySetOptions {
  /** The outbound guard's fetch: key sets live at caller-supplied URLs. */
  fetch: typeof fetch;
  /** How long a fetched key set is used before it is fetched again; default 600000 (10 min). */
  cacheMs?: number;
  /**
   * The least time between two fetches of one key set: an assertion naming an unknown kid
   * fetches the set again at most this often, so made-up kids cannot make us hammer a client's
   * server; default 5000.
   */
  cooldownMs?: number;
  /** How long a fetch may take; default 3000. */
  timeoutMs?: number;
}

/**
 * The keys a `private_key_jwt` client's assertions are verified with: its inline `jwks`
 * (imported once per reading of the client), or its `jwks_uri` (jose's remote set: cached for
 * cacheMs, fetched again on an unknown kid at most once per cooldownMs, concurrent callers
 * sharing one fetch, through the outbound guard).
 */
export class ClientKeySets {
  private readonly inline = new WeakMap<PublicJwks, JWTVerifyGetKey>();
  private readonly remote = new Map<string, JWTVerifyGetKey>();

  constructor(private readonly opts: ClientKeySetOptions) {}

  of(client: { jwks?: PublicJwks | undefined; jwksUri?: string | undefined }): JWTVerifyGetKey | undefined {
    if (client.jwks !== undefined) {
      let set = this.inline.get(client.jwks);
      if (set === undefined) {
        set = createLocalJWKSet(client.jwks);
        this.inline.set(client.jwks, set);
      }
      return set;
    }
    if (client.jwksUri !== undefined && client.jwksUri !== "") return this.remoteSet(client.jwksUri);
    return undefined;
  }

  private remoteSet(url: string): JWTVerifyGetKey {
    let set = this.remote.get(url);
    if (set !== undefined) {
      this.remote.delete(url);
    } else {
      set = createRemoteJWKSet(new URL(url), {
        cacheMaxAge: this.opts.cacheMs ?? 600_000,
        cooldownDuration: this.opts.cooldownMs ?? 5_000,
        timeoutDuration: this.opts.timeoutMs ?? 3_000,
        [customFetch]: this.opts.fetch,
      });
      const oldest = this.remote.keys().next();
      if (this.remote.size >= MAX_REMOTE_SETS && oldest.done !== true) this.remote.delete(oldest.value);
    }
    this.remote.set(url, set);
    return set;
  }
}

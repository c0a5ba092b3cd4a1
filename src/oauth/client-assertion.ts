import { decodeJwt, jwtVerify } from "jose";
import type { Keys, RedisClient } from "../redis/client.js";
import type { ClientKeySets } from "./client-keys.js";
import type { AuthenticatedClient, ClientStore } from "./clients.js";
import { OAuthKeys } from "./keys.js";
import { CLIENT_ASSERTION_ALGORITHMS } from "./metadata.js";

/** The furthest ahead an assertion's `exp` may be (docs/session-api.md#client-assertions). */
export const MAX_ASSERTION_SECONDS = 300;
/** Clock difference forgiven between the client and us, on `exp`, `nbf` and `iat`. */
const CLOCK_SKEW_SECONDS = 30;
const MAX_JTI_CHARS = 256;
/** A client assertion is at most a few kilobytes (an RSA signature is 342 characters). */
const MAX_ASSERTION_CHARS = 8_192;

export interface ClientAssertionOptions {
  redis: RedisClient;
  keys: Keys;
  keySets: ClientKeySets;
  /** ISSUER_URL: an assertion's `aud` names it or the token endpoint. */
  issuer: string;
  tokenEndpoint: string;
  now?: () => number;
}

/**
 * `private_key_jwt` (RFC 7523 section 2.2, OpenID Connect Core section 9): a JWT the client signs
 * with a key of its registered `jwks` or `jwks_uri`, with `iss` and `sub` its client_id, `aud`
 * the token endpoint or the issuer, an `exp` at most MAX_ASSERTION_SECONDS ahead and a `jti`
 * used once: a Redis key under the client's hash tag (`client:{<client_id>}:jti:<digest>`, SET
 * NX) kept until the assertion expires. Only assertion clients pay that write.
 */
export class ClientAssertions {
  private readonly keys: OAuthKeys;

  constructor(private readonly opts: ClientAssertionOptions) {
    this.keys = new OAuthKeys(opts.keys);
  }

  /**
   * The client, when `assertion` is a valid, unused assertion of `clientId`, a `private_key_jwt`
   * client; undefined otherwise (the caller answers invalid_client).
   */
  async verify(
    clients: ClientStore,
    clientId: string,
    assertion: string,
  ): Promise<AuthenticatedClient | undefined> {
    if (assertion.length > MAX_ASSERTION_CHARS) return undefined;
    const found = await clients.find(clientId);
    if (found?.client.authMethod !== "private_key_jwt") return undefined;
    const keySet = this.opts.keySets.of(found.client);
    if (keySet === undefined) return undefined;
    const now = (this.opts.now ?? Date.now)();
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(assertion, keySet, {
        algorithms: [...CLIENT_ASSERTION_ALGORITHMS],
        issuer: clientId,
        subject: clientId,
        audience: [this.opts.tokenEndpoint, this.opts.issuer],
        requiredClaims: ["exp", "jti"],
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: new Date(now),
      }));
    } catch {
      // A bad signature, an unknown kid, a claim out of bounds, a key set out of reach.
      return undefined;
    }
    const { exp, jti } = payload;
    if (typeof exp !== "number" || exp > now / 1000 + MAX_ASSERTION_SECONDS + CLOCK_SKEW_SECONDS) {
      return undefined;
    }
    if (typeof jti !== "string" || jti === "" || jti.length > MAX_JTI_CHARS) return undefined;
    const ttlMs = Math.max(1_000, Math.ceil((exp + CLOCK_SKEW_SECONDS) * 1000 - now));
    const key = this.keys.assertionUse(clientId, jti);
    const first = await this.opts.redis.set(key, "1", "PX", ttlMs, "NX");
    return first === null ? undefined : found;
  }
}

/**
 * The client an assertion claims to come from, unverified (its `sub`, when `iss` is the same):
 * whose failure window a failure counts in when the form names no client_id.
 */
export function assertedClientId(assertion: string): string | undefined {
  try {
    const { iss, sub } = decodeJwt(assertion);
    return typeof sub === "string" && sub === iss ? sub : undefined;
  } catch {
    return undefined;
  }
}

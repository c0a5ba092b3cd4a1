import { createHash } from "node:crypto";
import type { Keys } from "../redis/client.js";

/**
 * Every key of the OAuth domain (names stay as stored: existing clients and signing keys keep
 * working). A client's keys share its hash tag; a DPoP proof's, its key's thumbprint.
 */
export class OAuthKeys {
  constructor(private readonly keys: Keys) {}

  /** A client (hash), src/oauth/clients.ts. */
  client(clientId: string): string {
    return this.keys.key("client", clientId);
  }

  /** What revokes the client's server token `jti`, read in one round trip with the client. */
  clientRevoked(clientId: string, jti: string): string {
    return this.keys.key("client", clientId, "revoked", jti);
  }

  /** The single use of a client assertion's `jti` (kept as a digest), src/oauth/client-assertion.ts. */
  assertionUse(clientId: string, jti: string): string {
    return this.keys.key("client", clientId, "jti", digest(jti));
  }

  /** The single use of a DPoP proof's `jti` (kept as a digest) with the key `jkt`, src/oauth/dpop.ts. */
  dpopProofUse(jkt: string, jti: string): string {
    return this.keys.key("dpop", jkt, digest(jti));
  }

  /** The signing keys (one hash, one slot), src/oauth/keys/signing-keys.ts. */
  signingKeys(): string {
    return this.keys.key("signing", "keys");
  }

  /** The channel on which signing key rotations are announced. */
  signingRotations(): string {
    return this.keys.key("signing", "rotated");
  }
}

function digest(jti: string): string {
  return createHash("sha256").update(jti).digest("base64url");
}

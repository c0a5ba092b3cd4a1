import type { Keys } from "../redis/client.js";

/**
 * Every key of the passkey domain. A user's passkeys and the challenges of its registrations
 * share the user's hash tag; a credential's owner entry has the credential's own (a login names
 * the credential before anyone knows the user); a login challenge has its own id's.
 */
export class PasskeyKeys {
  constructor(private readonly keys: Keys) {}

  /** A user's passkeys (hash: credential id → JSON {publicKey, counter, transports, createdAt, lastUsedAt?}). */
  credentials(userId: string): string {
    return this.keys.key("pk", userId);
  }

  /** The owner of a credential id (string: user id), so that a credential is one user's only. */
  owner(credentialDigest: string): string {
    return this.keys.key("pkown", credentialDigest);
  }

  /** The challenge of a user session's registration (string, expiring), one per session. */
  registration(userId: string, sessionId: string): string {
    return this.keys.key("pkreg", userId, sessionId);
  }

  /** A login challenge once used (string), until it expires: a login challenge is sealed in its token. */
  usedLogin(challengeDigest: string): string {
    return this.keys.key("pkused", challengeDigest);
  }
}

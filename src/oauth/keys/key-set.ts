import { createLocalJWKSet, errors, type JWTVerifyGetKey } from "jose";
import type { SigningKeys } from "./signing-keys.js";

/**
 * The service's own published keys, for verifying its tokens on every user call without a Redis
 * round trip and a key import each time. The set is read again when older than `maxAgeMs`, or
 * when a token names a kid it lacks (a rotation on another instance). Such reloads happen at most
 * once per `missCooldownMs`: a call with an unknown kid waits for the next one, so made-up kids
 * slow only their own calls and cannot make every call reach Redis.
 */
export class CachedKeySet {
  private set: JWTVerifyGetKey | undefined;
  private loadedAt = 0;
  private loading: Promise<JWTVerifyGetKey> | undefined;

  constructor(
    private readonly keys: SigningKeys,
    private readonly maxAgeMs = 30_000,
    private readonly missCooldownMs = 1_000,
  ) {}

  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const set =
      this.set !== undefined && Date.now() - this.loadedAt < this.maxAgeMs ? this.set : await this.load();
    try {
      return await set(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      // A kid minted by a rotation elsewhere: look again, after the cooldown if we just did.
      const wait = this.loadedAt + this.missCooldownMs - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      return (await this.load())(header, token);
    }
  };

  private load(): Promise<JWTVerifyGetKey> {
    this.loading ??= this.keys
      .jwks()
      .then((jwks) => {
        this.set = createLocalJWKSet(jwks);
        this.loadedAt = Date.now();
        return this.set;
      })
      .finally(() => {
        this.loading = undefined;
      });
    return this.loading;
  }
}

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
  private reloading: Promise<JWTVerifyGetKey> | undefined;

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
      return (await this.reloadAfterMiss())(header, token);
    }
  };

  /**
   * The next reload, shared by every call that missed before it: one timer for all of them.
   * Each caller timing its own wait read the keys again as soon as a reload had finished
   * between two of their timers (a millisecond apart on a busy process), within the cooldown.
   */
  private reloadAfterMiss(): Promise<JWTVerifyGetKey> {
    this.reloading ??= (async () => {
      // A timer may fire a little early by Date.now's clock: wait until the cooldown has passed.
      for (let wait = this.cooldownLeft(); wait > 0; wait = this.cooldownLeft()) {
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
      return this.load();
    })().finally(() => {
      this.reloading = undefined;
    });
    return this.reloading;
  }

  private cooldownLeft(): number {
    return this.loadedAt + this.missCooldownMs - Date.now();
  }

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

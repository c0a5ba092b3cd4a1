import { randomUUID } from "node:crypto";
import { refusedBy, RingfenceError } from "../errors.js";
import { limitSubject } from "../net/cidr.js";
import { takeWindows, tooManyAttempts, type WindowRule } from "../otp/code.js";
import { WindowKeys } from "../otp/keys.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { Authenticator } from "../rpc/binding.js";
import type { StoredAccount } from "./account.js";

/** The setting whose window this is, named in refusals (the metric, the request log). */
export const KEY_FAILURES_SETTING = "API_KEY_FAILURES_IP";
/** The most addresses this process remembers as refused (the oldest is forgotten first). */
const REMEMBERED_ADDRESSES = 10_000;

/**
 * Failed API-key authentications per client address (API_KEY_FAILURES_IP), for every caller that
 * authenticates with an account's key, V1 and V2. They are counted in Redis on the failure path
 * only, so a right key costs nothing more. A right key is served even while its address's window
 * is full (an address may be shared, or named by someone else, and must not lock its accounts
 * out); a wrong key from a full address is refused by this process without counting it in Redis
 * until a place frees, so a flood of wrong keys costs no round trip each.
 */
export class KeyFailures {
  /** Client address (its limit subject) → when its window frees a place (epoch ms). */
  private readonly refusedUntil = new Map<string, number>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly rule: WindowRule,
  ) {}

  /** The authenticator `authenticate`, counting its wrong keys and refusing them from full addresses. */
  guard(authenticate: Authenticator<StoredAccount>): Authenticator<StoredAccount> {
    if (this.rule === null) return authenticate;
    return async (ctx, request) => {
      try {
        return await authenticate(ctx, request);
      } catch (err) {
        const wrongKey =
          err instanceof RingfenceError && (err.code === "account_invalid" || err.code === "invalid_api_key");
        const subject = ctx.clientAddress === undefined ? undefined : limitSubject(ctx.clientAddress);
        if (!wrongKey || subject === undefined) throw err;
        this.refuseIfFull(subject);
        throw (await this.failed(subject)) ?? err;
      }
    };
  }

  private refuseIfFull(subject: string): void {
    const until = this.refusedUntil.get(subject);
    if (until === undefined) return;
    const waitMs = until - Date.now();
    if (waitMs <= 0) {
      this.refusedUntil.delete(subject);
      return;
    }
    throw refusal(waitMs);
  }

  /** Counts a failure; the refusal to answer instead when the window was already full. */
  private async failed(subject: string): Promise<RingfenceError | undefined> {
    const key = new WindowKeys(this.keys).apiKeyFailures(subject);
    const { waitMs } = await takeWindows(this.redis, [{ key, rule: this.rule }], randomUUID());
    if (waitMs === 0) return undefined;
    if (this.refusedUntil.size >= REMEMBERED_ADDRESSES) {
      const oldest = this.refusedUntil.keys().next();
      if (oldest.done !== true) this.refusedUntil.delete(oldest.value);
    }
    this.refusedUntil.set(subject, Date.now() + waitMs);
    return refusal(waitMs);
  }
}

function refusal(waitMs: number): RingfenceError {
  return refusedBy(
    KEY_FAILURES_SETTING,
    tooManyAttempts("too many wrong API keys from this address; try again later", waitMs),
  );
}

import { createHash, randomUUID } from "node:crypto";
import { limitSubject } from "../net/cidr.js";
import { takeWindows, tooManyAttempts, type Window, type WindowRule } from "../otp/code.js";
import { WindowKeys } from "../otp/keys.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { refusedBy, type RingfenceError } from "../errors.js";

/** The settings whose windows these are, named in refusals (the metric, the request log). */
export type TokenFailureSetting = "TOKEN_FAILURES_CLIENT" | "TOKEN_FAILURES_IP";

/** The most windows this process remembers as full (the oldest is forgotten first). */
const REMEMBERED_FULL = 10_000;

/**
 * Failed client authentications at the token endpoint, in sliding windows per client_id
 * (TOKEN_FAILURES_CLIENT) and per client address (TOKEN_FAILURES_IP), counted in Redis on the
 * failure path only: a client that authenticates costs nothing here. A failure takes a place in
 * each window atomically (take-window.lua), so concurrent wrong secrets, from any number of
 * processes, get at most the limit's worth of 401 between them; once a window is full they get
 * 429. A right secret is served whatever its windows hold (docs/session-api.md#abuse-limits: a client_id is public
 * and an address may be shared, and neither must let anyone lock a client out). A wrong secret
 * meeting a window this process saw full is refused without a round trip until a place frees, so
 * a flood of wrong secrets costs no Redis work each.
 */
export class TokenFailures {
  /** Window key → when it frees a place (epoch ms). */
  private readonly fullUntil = new Map<string, { until: number; setting: TokenFailureSetting }>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly rules: { perClient: WindowRule; perAddress: WindowRule },
  ) {}

  /**
   * Counts a failed authentication of `clientId` (when one was named) from `address` (when
   * known): answers the 429 to give when a window was full (nothing is counted in it then), else
   * undefined (the caller answers 401).
   */
  async failed(
    clientId: string | undefined,
    address: string | undefined,
  ): Promise<RingfenceError | undefined> {
    const windows = this.windowsOf(clientId, address);
    const remembered = this.rememberedFull(windows);
    if (remembered !== undefined) return remembered;
    // Each window on its own hash tag: one script each, sent together.
    const taken = await Promise.all(
      windows.map(async ({ window, setting }) => ({
        window,
        setting,
        waitMs: (await takeWindows(this.redis, [window], randomUUID())).waitMs,
      })),
    );
    let refusal: RingfenceError | undefined;
    for (const { window, setting, waitMs } of taken) {
      if (waitMs === 0) continue;
      this.remember(window.key, Date.now() + waitMs, setting);
      refusal ??= tooManyFailures(waitMs, setting);
    }
    return refusal;
  }

  private windowsOf(
    clientId: string | undefined,
    address: string | undefined,
  ): { window: Window; setting: TokenFailureSetting }[] {
    const windows: { window: Window; setting: TokenFailureSetting }[] = [];
    const { perClient, perAddress } = this.rules;
    if (clientId !== undefined && perClient !== null) {
      // A digest: a caller-chosen id shapes neither the key's length nor its hash tag.
      const key = new WindowKeys(this.keys).clientTokenFailures(digest(clientId));
      windows.push({ window: { key, rule: perClient }, setting: "TOKEN_FAILURES_CLIENT" });
    }
    if (address !== undefined && perAddress !== null) {
      const key = new WindowKeys(this.keys).addressTokenFailures(limitSubject(address));
      windows.push({ window: { key, rule: perAddress }, setting: "TOKEN_FAILURES_IP" });
    }
    return windows;
  }

  /** The refusal for a window this process saw full and that has not freed a place since. */
  private rememberedFull(windows: { window: Window }[]): RingfenceError | undefined {
    const now = Date.now();
    for (const { window } of windows) {
      const full = this.fullUntil.get(window.key);
      if (full === undefined) continue;
      if (full.until <= now) {
        this.fullUntil.delete(window.key);
        continue;
      }
      return tooManyFailures(full.until - now, full.setting);
    }
    return undefined;
  }

  private remember(key: string, until: number, setting: TokenFailureSetting): void {
    this.fullUntil.delete(key);
    if (this.fullUntil.size >= REMEMBERED_FULL) {
      const oldest = this.fullUntil.keys().next();
      if (oldest.done !== true) this.fullUntil.delete(oldest.value);
    }
    this.fullUntil.set(key, { until, setting });
  }
}

/** A caller-chosen id as a key part: fixed length, and no brace can move the hash tag. */
function digest(id: string): string {
  return createHash("sha256").update(id).digest("base64url");
}

function tooManyFailures(waitMs: number, setting: TokenFailureSetting): RingfenceError {
  return refusedBy(
    setting,
    tooManyAttempts("too many failed client authentications: try again later", waitMs),
  );
}

import { randomUUID } from "node:crypto";
import { refusedBy, type RingfenceError } from "../errors.js";
import { limitSubject } from "../net/cidr.js";
import type { RedisClient } from "../redis/client.js";
import type { Authenticator } from "../rpc/binding.js";
import { takeWindows, tooManyAttempts, type WindowRule } from "./code.js";

/** The most addresses a process remembers as refused (the oldest is forgotten first). */
const REMEMBERED_ADDRESSES = 10_000;

/** One kind of secret checked per client address: its window, its key, what a wrong one is. */
export interface FailureRule {
  /** The setting of the window, named in refusals (the metric `ringfence_refusals_total`, the request log). */
  setting: string;
  rule: WindowRule;
  /** The window's key for a client address's limit subject. */
  counter(subject: string): string;
  /** True when the error says the secret was wrong (any other is passed on, not counted). */
  isWrong(err: unknown): boolean;
  /** The refusal's message, such as "too many wrong API keys from this address; try again later". */
  refusal: string;
}

/**
 * Failed authentications of one kind of secret per client address. They are counted in Redis on
 * the failure path only, so a right secret costs nothing more. A right secret is served even
 * while its address's window is full (an address may be shared, or named by someone else, and
 * must not lock its owners out); a wrong one from a full address is refused by this process
 * without counting it in Redis until a place frees, so a flood of wrong secrets costs no round
 * trip each.
 */
export class AuthFailures {
  /** Client address (its limit subject) → when its window frees a place (epoch ms). */
  private readonly refusedUntil = new Map<string, number>();

  constructor(
    private readonly redis: RedisClient,
    private readonly f: FailureRule,
  ) {}

  /** The authenticator `authenticate`, counting its wrong secrets and refusing them from full addresses. */
  guard<T>(authenticate: Authenticator<T>): Authenticator<T> {
    if (this.f.rule === null) return authenticate;
    return async (ctx, request) => {
      try {
        return await authenticate(ctx, request);
      } catch (err) {
        const subject = ctx.clientAddress === undefined ? undefined : limitSubject(ctx.clientAddress);
        if (!this.f.isWrong(err) || subject === undefined) throw err;
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
    throw this.refusal(waitMs);
  }

  /** Counts a failure; the refusal to answer instead when the window was already full. */
  private async failed(subject: string): Promise<RingfenceError | undefined> {
    const { waitMs } = await takeWindows(
      this.redis,
      [{ key: this.f.counter(subject), rule: this.f.rule }],
      randomUUID(),
    );
    if (waitMs === 0) return undefined;
    if (this.refusedUntil.size >= REMEMBERED_ADDRESSES) {
      const oldest = this.refusedUntil.keys().next();
      if (oldest.done !== true) this.refusedUntil.delete(oldest.value);
    }
    this.refusedUntil.set(subject, Date.now() + waitMs);
    return this.refusal(waitMs);
  }

  private refusal(waitMs: number): RingfenceError {
    return refusedBy(this.f.setting, tooManyAttempts(this.f.refusal, waitMs));
  }
}

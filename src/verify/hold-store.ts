import type { RedisClient } from "../redis/client.js";
import type { VerifyKeys, SendPlace } from "./keys.js";
import * as scripts from "./scripts.js";
import type { HoldArgs } from "./scripts.js";

/** A recorded hold, enough to commit or release it without the request that made it. */
export interface Hold {
  customer: string;
  id: string;
  /** The keys resolve-hold.lua needs after the two hold keys (account, spend, auth, ..., windows). */
  release: string[];
  sealed: string;
  owner: string;
  kind: "send" | "retry";
  /** The provider that carries its message ('' for a hold recorded before providers were named). */
  provider?: string;
  route?: string;
}

/**
 * The holds of the verification store: recording them with every charge (`listed`), and the
 * index the recovery (holds.ts) reads to commit or release them.
 */
export class HoldStore {
  constructor(
    protected readonly redis: RedisClient,
    readonly keys: VerifyKeys,
  ) {}

  /** The index of customers that may have holds (see keys.ts, holdIndex). */
  holdIndexKey(): string {
    return this.keys.holdIndex();
  }

  holdsKey(customer: string): string {
    return this.keys.holds(customer);
  }

  holdKey(customer: string, id: string): string {
    return this.keys.hold(customer, id);
  }

  /**
   * Customers listed in the hold index (some may have no hold left), with the issue time they were
   * last listed at.
   */
  async holdCustomers(): Promise<{ customer: string; listedAt: number }[]> {
    const keys = { index: this.keys.holdIndex(), earlierIndex: this.keys.earlierHoldIndex() };
    const [, ...flat] = (await scripts.holdIndex.run(this.redis, keys, {})) as ["listed", ...string[]];
    const listed: { customer: string; listedAt: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      listed.push({ customer: flat[i] as string, listedAt: Number(flat[i + 1]) });
    }
    return listed;
  }

  /** True once the Redis connection is closed for good (the service is stopping). */
  closed(): boolean {
    return this.redis.status === "end";
  }

  /**
   * Lists the customer in the hold index at `issuedAt`, the issue time of a reserve (see `listed`:
   * with every reserve); a later listing already there stays.
   */
  protected async indexHolds(customer: string, issuedAt: number): Promise<void> {
    await this.redis.zadd(this.keys.holdIndex(), "GT", issuedAt, customer);
  }

  /** The hold of a send (`kind` send) or retry at `place`, for commit or release by its owner. */
  holdOf(place: SendPlace, id: string, kind: "send" | "retry", sealed = "", owner = ""): Hold {
    return { customer: place.customer, id, release: this.releaseKeys(place, kind), sealed, owner, kind };
  }

  /**
   * The keys a release of the hold at `place` needs; send-code.lua and retry-code.lua record the
   * same list in the hold, from their own KEYS.
   */
  protected releaseKeys(place: SendPlace, kind: "send" | "retry"): string[] {
    const k = this.keys.place(place);
    const windows =
      kind === "send"
        ? [k.numberWindow, k.ipWindow, k.deviceWindow, k.accountWindow, k.range]
        : [k.numberWindow, k.accountWindow];
    return [k.account, k.spend, k.auth, k.events, k.hook, k.pending, ...windows];
  }

  /**
   * Runs a script that may record a hold (`reserve`) in the same round trip as listing the
   * customer in the hold index at the hold's issue time, so the recovery can find the hold: the
   * listing is written first on the same connection (one Redis) or at the same time (a
   * Cluster); either way the recovery keeps the customer listed (see `unindexIfEmpty`). When the
   * listing fails and a hold was made, the hold is given back and the failure thrown: nothing is
   * sent that the recovery could not find.
   */
  protected async listed<T>(
    place: SendPlace,
    hold: HoldArgs & { id: string },
    kind: "send" | "retry",
    reserve: () => Promise<T>,
  ): Promise<T> {
    const [listing, reserved] = await Promise.allSettled([
      this.indexHolds(place.customer, hold.issuedAt),
      reserve(),
    ]);
    if (reserved.status === "rejected") throw reserved.reason;
    if (listing.status === "rejected") {
      await this.resolveHold(this.holdOf(place, hold.id, kind), "release");
      throw listing.reason;
    }
    return reserved.value;
  }

  /**
   * Resolves a hold; true when this call did, false when it was already resolved. With `unclaimed`
   * (what one caller's HoldArgs recorded), only that caller's hold, while no recovery claimed it.
   */
  async resolveHold(
    hold: Hold,
    outcome: "commit" | "release",
    unclaimed?: Pick<HoldArgs, "sealed" | "deadline">,
  ): Promise<boolean> {
    // `release` lists account, spend, the four authentication keys, then the windows; a commit
    // reads only the hold and the authentication, so it sends no more.
    const [account, spend, auth, events, hook, pending, ...windows] = hold.release as [
      string,
      string,
      string,
      string,
      string,
      string,
      ...string[],
    ];
    const keys = {
      holds: this.keys.holds(hold.customer),
      hold: this.keys.hold(hold.customer, hold.id),
      auth,
    };
    const args = { holdId: hold.id, outcome, sealed: unclaimed?.sealed, deadline: unclaimed?.deadline };
    const release = outcome === "release" ? [account, spend, events, hook, pending, ...windows] : [];
    const [status] = (await scripts.resolveHold.run(this.redis, keys, args, release)) as [
      "resolved" | "gone" | "left",
    ];
    return status === "resolved";
  }

  /** Ids of the customer's holds whose deadline has passed (at most `limit`). */
  async dueHolds(customer: string, now: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.holdsKey(customer), "-inf", now, "LIMIT", 0, limit);
  }

  /**
   * Drops a customer listed at `listedAt` from the hold index when it has no hold left (lazy
   * cleaning); true when it did. The customer's holds and the index may be on two Cluster slots,
   * so no script sees both: the first script drops nothing while a send listed at `listedAt` or
   * before could still record a hold (by the clock that send's script compares), the second
   * drops nothing once a send listed the customer later. A send whose hold neither saw has
   * listed the customer after the drop, or later than `listedAt`: it stays listed either way.
   */
  async unindexIfEmpty(customer: string, listedAt: number, staleMs: number): Promise<boolean> {
    const holds = { holds: this.holdsKey(customer) };
    const [quiet] = (await scripts.holdsQuiet.run(this.redis, holds, { listedAt, staleMs })) as [
      "quiet" | "busy",
    ];
    if (quiet !== "quiet") return false;
    const index = { index: this.keys.holdIndex() };
    const [dropped] = (await scripts.unindexHolds.run(this.redis, index, { customer, listedAt })) as [
      "dropped" | "kept",
    ];
    return dropped === "dropped";
  }

  /** Takes a due hold for recovery, moving its deadline to `until`; undefined when not due. */
  async claimHold(customer: string, id: string, now: number, until: number): Promise<Hold | undefined> {
    const keys = { holds: this.keys.holds(customer), hold: this.keys.hold(customer, id) };
    const args = { holdId: id, now, deadline: until };
    const [status, ...flat] = (await scripts.claimHold.run(this.redis, keys, args)) as string[];
    if (status !== "claimed") return undefined;
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i] as string] = flat[i + 1] as string;
    return {
      customer,
      id,
      release: JSON.parse(h.release ?? "[]") as string[],
      sealed: h.sealed ?? "",
      owner: h.owner ?? "",
      kind: h.kind === "retry" ? "retry" : "send",
      provider: h.provider ?? "",
      route: h.route ?? "default",
    };
  }

  /**
   * Names the next provider of the route in the hold, giving it until `until`, while the hold is
   * still its owner's (its deadline is still `deadline`); with `change`, the next channel's message
   * and price, the difference charged or refunded (move-hold.lua). `left` when a recovery claimed
   * it or it is gone; `poor` when the balance does not cover a dearer channel (nothing changed).
   */
  async moveHold(
    hold: Hold,
    deadline: number,
    until: number,
    provider: string,
    route: string,
    change?: { channel: string; price: number; sealed: string },
  ): Promise<"moved" | "left" | "poor"> {
    const now = Date.now();
    const keys = {
      holds: this.keys.holds(hold.customer),
      hold: this.keys.hold(hold.customer, hold.id),
      account: this.keys.accounts.account(hold.customer),
      spend: this.keys.accounts.spend(hold.customer, new Date(now).toISOString().slice(0, 7)),
    };
    const [status] = (await scripts.moveHold.run(this.redis, keys, {
      holdId: hold.id,
      deadline,
      later: until,
      provider,
      route,
      channel: change?.channel ?? "",
      price: change?.price ?? 0,
      sealed: change?.sealed ?? "",
    })) as [string];
    return status === "moved" || status === "poor" ? status : "left";
  }

  /**
   * A message of attempt `attempt` reported undelivered or rejected: refunded once; `resend` with
   * its sealed message when it may be sent once more; for a message of several channels (`priced`:
   * its channel and price), `fallback` with the next channel and the sealed code when the
   * verification has one (see undelivered.lua).
   */
  async undelivered(
    customer: string,
    auth: string,
    attempt: number,
    resent: boolean,
    now: number,
    priced?: { channel: string; price: number },
  ): Promise<
    | { status: "resend"; price: number; sealed: string }
    | { status: "fallback"; price: number; channel: string; sealed: string }
    | { status: "refunded" | "repeat" | "gone"; price: number }
  > {
    const keys = this.moneyKeys(customer, auth, now);
    const [status, price, a, b] = (await scripts.undelivered.run(this.redis, keys, {
      attempt,
      resent: resent ? "1" : "0",
      now,
      channel: priced?.channel ?? "",
      own: priced?.price ?? 0,
    })) as [string, number | undefined, string | undefined, string | undefined];
    if (status === "resend") return { status, price: Number(price), sealed: a ?? "" };
    if (status === "fallback") return { status, price: Number(price), channel: a ?? "", sealed: b ?? "" };
    return { status: status as "refunded" | "repeat" | "gone", price: price ?? 0 };
  }

  /**
   * Moves attempt `attempt` of a verification on from channel `from` (its message not reported
   * delivered in time): the next channel and the sealed code, once; undefined when it has none, the
   * code was checked or replaced, or it already moved (next-channel.lua).
   */
  async nextChannel(
    customer: string,
    auth: string,
    attempt: number,
    from: string,
    now: number,
  ): Promise<{ channel: string; sealed: string } | undefined> {
    const [status, channel, sealed] = (await scripts.nextChannel.run(
      this.redis,
      { auth: this.keys.auth(customer, auth).auth },
      { attempt, from, now },
    )) as [string, string?, string?];
    return status === "next" ? { channel: channel ?? "", sealed: sealed ?? "" } : undefined;
  }

  /**
   * Names the provider (and route) that carried a message sent after its attempt's first, as a
   * commit does for the first: a right code counts for it (docs/routing.md#insights).
   */
  async noteCarrier(customer: string, auth: string, provider: string, route: string): Promise<void> {
    await scripts.reportOnce.run(
      this.redis,
      { auth: this.keys.auth(customer, auth).auth },
      { field: "dp", state: route === "default" ? provider : `${provider} ${route}` },
    );
  }

  /** Schedules `entry`'s fall back to its next channel at `dueMs` (docs/v2-api.md#fallback). */
  async scheduleFallback(entry: FallbackEntry, dueMs: number): Promise<void> {
    await this.redis.zadd(this.keys.fallbacks(), dueMs, fallbackMember(entry));
  }

  /** Drops `entry`'s scheduled fall back (its message was reported delivered). */
  async cancelFallback(entry: FallbackEntry): Promise<void> {
    await this.redis.zrem(this.keys.fallbacks(), fallbackMember(entry));
  }

  /** Up to `limit` fall backs due at `now`, earliest first. */
  async dueFallbacks(now: number, limit: number): Promise<FallbackEntry[]> {
    const members = await this.redis.zrangebyscore(this.keys.fallbacks(), "-inf", now, "LIMIT", 0, limit);
    return members.flatMap((m) => {
      const [customer = "", auth = "", attempt = "", channel = ""] = m.split(" ");
      return channel === "" ? [] : [{ customer, auth, attempt: Number(attempt), channel }];
    });
  }

  /** Takes a due fall back for this instance: true for the one instance whose ZREM removed it. */
  async takeFallback(entry: FallbackEntry): Promise<boolean> {
    return (await this.redis.zrem(this.keys.fallbacks(), fallbackMember(entry))) === 1;
  }

  /** Notes a report of `state` for a message; false when it repeats one already noted (nothing to do). */
  async reportOnce(
    customer: string,
    auth: string,
    ref: { attempt: number; resend?: boolean; channel?: string },
    state: string,
  ): Promise<boolean> {
    const field = `k${ref.attempt}${ref.resend === true ? "r" : ""}${ref.channel ?? ""}`;
    const [fresh] = (await scripts.reportOnce.run(
      this.redis,
      { auth: this.keys.auth(customer, auth).auth },
      { field, state },
    )) as [string];
    return fresh === "new";
  }

  /**
   * Charges an accepted message after its attempt's first once: a re-send (the price its
   * undelivered message was refunded), or the code's message on channel `channel` (its price).
   */
  async chargeResend(
    customer: string,
    auth: string,
    attempt: number,
    price: number,
    now: number,
    channel?: string,
  ): Promise<void> {
    await scripts.chargeResend.run(this.redis, this.moneyKeys(customer, auth, now), {
      attempt,
      price,
      mark: channel === undefined ? "" : `c${attempt}${channel}`,
    });
  }

  private moneyKeys(
    customer: string,
    auth: string,
    now: number,
  ): { auth: string; account: string; spend: string } {
    return {
      auth: this.keys.auth(customer, auth).auth,
      account: this.keys.accounts.account(customer),
      spend: this.keys.accounts.spend(customer, new Date(now).toISOString().slice(0, 7)),
    };
  }
}

/** A message waiting to be reported delivered, or else to fall back to the next channel. */
export interface FallbackEntry {
  customer: string;
  auth: string;
  attempt: number;
  /** The channel the message went by. */
  channel: string;
}

const fallbackMember = (e: FallbackEntry) => `${e.customer} ${e.auth} ${e.attempt} ${e.channel}`;

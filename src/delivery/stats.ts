import { errorMessage } from "../log.js";
import type { RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import type { DeliveryKeys } from "./keys.js";

const count = defineScript({
  file: new URL("./count.lua", import.meta.url),
  keys: ["counts"],
  argv: ["f"],
});

/** The counts of one provider at one destination, as insights print them (docs/routing.md#insights). */
export const COUNTS = [
  "sent",
  "accepted",
  "delivered",
  "undelivered",
  "rejected",
  "verified",
  "cost",
] as const;
export type CountName = (typeof COUNTS)[number];

/** Where a message went: its channel, provider, destination country and the route destination that chose it. */
export interface Place {
  channel: string;
  provider: string;
  country: string;
  /** The destination of the route that chose the provider (`default` without a route). */
  route: string;
}

/** What the `conversion` strategy reads of one provider at one destination over the window. */
export interface Figures {
  /** Submits tried. */
  sent: number;
  accepted: number;
  verified: number;
}

/** The conversion window is counted in this many slices (one more is read: the current one). */
export const SLICES = 12;

/** One hash's additions waiting to be written: its key's life in seconds and the sum per field. */
interface Pending {
  ttl: number;
  add: Map<string, number>;
}

/**
 * The delivery counters in Redis: hourly ones for insights (kept DELIVERY_STATS_RETENTION_DAYS),
 * and slices of ROUTE_WINDOW_SECONDS for the `conversion` strategy. A send adds to them in the
 * process, and `flush` writes the sums (the router does every second, before it reads the figures
 * again, and when the process stops): one script call per hash touched, not two per message, and
 * never awaited by a send (docs/capacity.md#delivery-counters). A lost write costs figures, never
 * a message.
 */
export class DeliveryStats {
  private readonly sliceMs: number;
  /** Per route destination, the slices that no longer change, as read. */
  private readonly settled = new Map<string, Map<number, Record<string, string>>>();
  /** What `flush` writes next, by hash key. */
  private pending = new Map<string, Pending>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: DeliveryKeys,
    private readonly o: { windowSeconds: number; retentionDays: number; now?: () => number },
  ) {
    this.sliceMs = Math.max(1, Math.floor((o.windowSeconds * 1000) / SLICES));
  }

  private now(): number {
    return (this.o.now ?? Date.now)();
  }

  /**
   * Adds to the hourly counts of `at`, and to its conversion slice the `s`, `a` and `v` given, in
   * the hour and slice of now; Redis has them after the next `flush`.
   */
  add(
    at: Place,
    hourly: Partial<Record<CountName, number>>,
    conversion: Partial<Record<"s" | "a" | "v", number>>,
  ): void {
    const t = this.now();
    const prefix = `${at.provider} ${at.country} ${at.route} `;
    for (const [name, by] of Object.entries(hourly)) {
      this.pend(
        this.keys.hourly(at.channel, Math.floor(t / 3_600_000)),
        this.o.retentionDays * 86_400,
        prefix + name,
        by,
      );
    }
    for (const [name, by] of Object.entries(conversion)) {
      this.pend(
        this.keys.conversion(at.channel, at.route, Math.floor(t / this.sliceMs)),
        Math.ceil((this.sliceMs * (SLICES + 2)) / 1000),
        `${at.provider} ${name}`,
        by,
      );
    }
  }

  private pend(key: string, ttl: number, field: string, by: number | undefined): void {
    if (by === undefined || !Number.isFinite(by) || by === 0) return;
    let hash = this.pending.get(key);
    if (hash === undefined) {
      hash = { ttl, add: new Map() };
      this.pending.set(key, hash);
    }
    hash.add.set(field, (hash.add.get(field) ?? 0) + by);
  }

  /**
   * Writes what was added since the last flush, one script call per hash. The sums are taken
   * first: what is added meanwhile waits for the next flush. Rejects when a write failed (those
   * additions are not tried again: a write that timed out may have counted).
   */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const writes = await Promise.allSettled(
      [...batch].map(([key, hash]) => {
        const add = [...hash.add].flat();
        return count.run(this.redis, { counts: key }, { f: JSON.stringify({ ttl: hash.ttl, add }) });
      }),
    );
    const failed = writes.filter((w): w is PromiseRejectedResult => w.status === "rejected");
    if (failed.length > 0) {
      throw new Error(
        `${failed.length} of ${writes.length} counter writes failed: ${errorMessage(failed[0]?.reason)}`,
      );
    }
  }

  /**
   * Each provider's figures at a route destination over the window (the current slice included).
   * A slice two or more behind the current one no longer changes: it is read once and kept, so a
   * read costs two round trips' worth of commands, not thirteen.
   */
  async figures(channel: string, route: string): Promise<Map<string, Figures>> {
    const current = Math.floor(this.now() / this.sliceMs);
    const name = `${channel} ${route}`;
    const kept = this.settled.get(name) ?? new Map<number, Record<string, string>>();
    this.settled.set(name, kept);
    for (const s of kept.keys()) if (s < current - SLICES) kept.delete(s);
    const slices = await Promise.all(
      Array.from({ length: SLICES + 1 }, async (_, i) => {
        const s = current - SLICES + i;
        const known = kept.get(s);
        if (known !== undefined) return known;
        const read = await this.redis.hgetall(this.keys.conversion(channel, route, s));
        if (s <= current - 2) kept.set(s, read);
        return read;
      }),
    );
    const figures = new Map<string, Figures>();
    for (const slice of slices) {
      for (const [field, value] of Object.entries(slice)) {
        const [provider = "", name] = field.split(" ");
        const f = figures.get(provider) ?? { sent: 0, accepted: 0, verified: 0 };
        const n = Number(value);
        if (name === "s") f.sent += n;
        else if (name === "a") f.accepted += n;
        else if (name === "v") f.verified += n;
        figures.set(provider, f);
      }
    }
    return figures;
  }

  /** The hourly counts of `channel` from `sinceMs` to `untilMs`: one row per provider, country and route destination. */
  async hourly(channel: string, sinceMs: number, untilMs: number): Promise<HourlyRow[]> {
    const reads: Promise<Record<string, string>>[] = [];
    // Hours older than the retention hold nothing: they are not read.
    const kept = this.now() - (this.o.retentionDays + 1) * 86_400_000;
    for (let h = Math.floor(Math.max(sinceMs, kept) / 3_600_000); h <= Math.floor(untilMs / 3_600_000); h++) {
      reads.push(this.redis.hgetall(this.keys.hourly(channel, h)));
    }
    const rows = new Map<string, HourlyRow>();
    for (const hour of await Promise.all(reads)) {
      for (const [field, value] of Object.entries(hour)) {
        const [provider = "", country = "", route = "", name = ""] = field.split(" ");
        if (!(COUNTS as readonly string[]).includes(name)) continue;
        const id = `${provider} ${country} ${route}`;
        const row = rows.get(id) ?? { provider, country, route, ...zeroCounts() };
        row[name as CountName] += Number(value);
        rows.set(id, row);
      }
    }
    return [...rows.values()];
  }
}

export type HourlyRow = { provider: string; country: string; route: string } & Record<CountName, number>;

export function zeroCounts(): Record<CountName, number> {
  return { sent: 0, accepted: 0, delivered: 0, undelivered: 0, rejected: 0, verified: 0, cost: 0 };
}

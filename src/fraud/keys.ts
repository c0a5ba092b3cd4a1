import { randomBytes } from "node:crypto";
import type { Keys } from "../redis/client.js";

/** Every key of the fraud engine, all under the tenant's hash tag (docs/fraud.md#what-redis-keeps). */
export class FraudKeys {
  constructor(private readonly keys: Keys) {}

  /** The tenant's mode, geo permissions and trusted numbers and prefixes. */
  policy(tenant: string): string {
    return this.keys.key("fraud", tenant, "policy");
  }

  /** The counters of one destination (`c:FR`, `n:208-15`, `p:+336123`) or of the tenant (`all`). */
  counters(tenant: string, dest: string): string {
    return this.keys.key("fraud", tenant, "d", dest);
  }

  /** The tenant's destinations, scored by the UTC day of their last send. */
  index(tenant: string): string {
    return this.keys.key("fraud", tenant, "dests");
  }

  /**
   * The tenant's destinations of one kind (`c`, `n`, `p`) ranked by their sends on the UTC day
   * `day` (`days` 1) or on that day and the one before (`days` 2, kept until the end of the next day): a
   * sorted set scored by minus the sends, read a page at a time by insights (docs/fraud.md#pages).
   */
  rank(tenant: string, days: 1 | 2, kind: string, day: number): string {
    return this.keys.key("fraud", tenant, "rank", String(days), kind, String(day));
  }

  /** Where insights add up the day rankings of a longer range, within one script (left empty). */
  rankScratch(tenant: string): string {
    return this.keys.key("fraud", tenant, "rank", "scratch");
  }

  /** The tenant's decision records (a stream). */
  decisions(tenant: string): string {
    return this.keys.key("fraud", tenant, "decisions");
  }

  /**
   * What a tenant knows of a number that converted (`number` is its keyed hash): when it last did,
   * and the slice and day its conversion last earned credit in (engine.lua fraud_returning).
   */
  number(tenant: string, number: string): string {
    return this.keys.key("fraud", tenant, "num", number);
  }

  /** A source's sends, conversions and countries of the day (`source` is its keyed hash). */
  source(tenant: string, source: string): string {
    return this.keys.key("fraud", tenant, "src", source);
  }

  /** Where the last message to a number went, for its conversion. */
  sent(tenant: string, e164: string): string {
    return this.keys.key("fraud", tenant, "sent", e164);
  }
}

/** The Redis namespace of one simulation (`ringfence fraud simulate`): `<REDIS_KEY_PREFIX>sim:<random>:`. */
export function simulationPrefix(keyPrefix: string): string {
  return `${keyPrefix}sim:${randomBytes(8).toString("hex")}:`;
}

import { quote } from "../errors.js";
import type { RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import type { FraudAction, FraudApi, FraudRule, FraudRules } from "./engine.js";
import type { FraudKeys } from "./keys.js";
import { FraudInputError } from "./policy.js";

/** How insights group a tenant's destinations, and the id prefix of each kind (docs/fraud.md#insights). */
export const INSIGHTS_GROUPS = { country: "c:", network: "n:", prefix: "p:" } as const;
export type InsightsGroupBy = keyof typeof INSIGHTS_GROUPS;

const DAY_MS = 86_400_000;
/** Without `since`, insights cover the 24 hours before `until`. */
export const DEFAULT_INSIGHTS_MS = DAY_MS;
export const DEFAULT_DECISIONS_LIMIT = 100;
export const MAX_DECISIONS_LIMIT = 1000;
/** Destinations checked per call of the prune script. */
const PRUNE_BATCH = 500;

/** Drops index members whose counters expired. */
export const pruneDestsScript = defineScript({
  file: new URL("./prune-dests.lua", import.meta.url),
  keys: ["index"],
  rest: "dest",
  argv: ["members"],
});

/** What one destination did over the range (the fields of the V2 answer). */
export interface InsightsGroup {
  key: string;
  sent: number;
  verified: number;
  conversionRate: number;
  blocked: number;
}

export interface VerificationInsights {
  /** RFC 3339. */
  since: string;
  until: string;
  groupBy: InsightsGroupBy;
  groups: InsightsGroup[];
}

/** One decision record, as the V2 API and the CLI show it. */
export interface DecisionRecord {
  id: string;
  createdAt: string;
  api: FraudApi;
  country: string;
  network: string | undefined;
  prefix: string;
  phoneNumber: string;
  action: Exclude<FraudAction, "allow">;
  rule: Exclude<FraudRule, "none">;
  detail: string;
}

/** The query of an insights call; an empty string is a parameter left out. */
export interface InsightsQuery {
  since?: string | undefined;
  until?: string | undefined;
  groupBy?: string | undefined;
}

export interface DecisionsQuery {
  since?: string | undefined;
  limit?: string | undefined;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 time in epoch ms; `field` names the parameter in the error. */
export function parseTime(field: string, value: string): number {
  const ms = RFC3339.test(value) ? Date.parse(value.replace(" ", "T")) : NaN;
  if (Number.isNaN(ms))
    throw new FraudInputError(field, `${quote(value)} is not an RFC 3339 time such as 2026-01-02T15:04:05Z`);
  return ms;
}

function given(value: string | undefined): value is string {
  return value !== undefined && value !== "";
}

/** The range and grouping of an insights call, checked (docs/fraud.md#insights). */
export function insightsRange(
  q: InsightsQuery,
  now: number,
): { sinceMs: number; untilMs: number; groupBy: InsightsGroupBy } {
  const groupBy = given(q.groupBy) ? q.groupBy : "country";
  if (!Object.hasOwn(INSIGHTS_GROUPS, groupBy)) {
    throw new FraudInputError(
      "group_by",
      `${quote(groupBy)} is not one of ${Object.keys(INSIGHTS_GROUPS).join(", ")}`,
    );
  }
  const untilMs = given(q.until) ? parseTime("until", q.until) : now;
  const sinceMs = given(q.since) ? parseTime("since", q.since) : untilMs - DEFAULT_INSIGHTS_MS;
  if (sinceMs > untilMs) throw new FraudInputError("since", `${quote(q.since ?? "")} is after until`);
  return { sinceMs, untilMs, groupBy: groupBy as InsightsGroupBy };
}

/** The `since` and `limit` of a decisions call, checked. */
export function decisionsQuery(q: DecisionsQuery): { sinceMs: number | undefined; limit: number } {
  const sinceMs = given(q.since) ? parseTime("since", q.since) : undefined;
  let limit = DEFAULT_DECISIONS_LIMIT;
  if (given(q.limit)) {
    limit = /^\d{1,4}$/.test(q.limit) ? Number(q.limit) : NaN;
    if (!(limit >= 1 && limit <= MAX_DECISIONS_LIMIT))
      throw new FraudInputError(
        "limit",
        `${quote(q.limit)} is not a whole number from 1 to ${MAX_DECISIONS_LIMIT}`,
      );
  }
  return { sinceMs, limit };
}

/** A `d<j>` counter: `<day>,<sent>,<verified>,<blocked>`. */
function dayCounts(raw: string | undefined, day: number): [number, number, number] | undefined {
  const m = raw === undefined ? null : /^(\d+),(\d+),(\d+),(\d+)$/.exec(raw);
  if (m === null || Number(m[1]) !== day) return undefined;
  return [Number(m[2]), Number(m[3]), Number(m[4])];
}

/**
 * What the engine counted and decided, read back for a tenant: insights per destination from the
 * day counters of its destinations index, and its decision records (docs/fraud.md#insights).
 */
export class FraudInsights {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: FraudKeys,
    private readonly rules: Pick<FraudRules, "days">,
  ) {}

  /**
   * Sends, conversions and blocks per destination over every UTC day the range touches (the
   * counters are per day), as far back as the days kept. Members of the index whose counters
   * expired are pruned on the way.
   */
  async verifications(tenant: string, q: InsightsQuery, now = Date.now()): Promise<VerificationInsights> {
    const { sinceMs, untilMs, groupBy } = insightsRange(q, now);
    const today = Math.floor(now / DAY_MS);
    const first = Math.max(Math.floor(sinceMs / DAY_MS), today - this.rules.days);
    const last = Math.min(Math.floor(untilMs / DAY_MS), today);
    const answer = {
      since: new Date(sinceMs).toISOString(),
      until: new Date(untilMs).toISOString(),
      groupBy,
      groups: [] as InsightsGroup[],
    };
    if (first > last) return answer;
    const index = this.keys.index(tenant);
    const kind = INSIGHTS_GROUPS[groupBy];
    // A member's score is the day of its last send: one last written before the range counts nothing in it.
    const members = (await this.redis.zrangebyscore(index, first, "+inf")).filter((m) => m.startsWith(kind));
    if (members.length === 0) return answer;
    const fields: string[] = [];
    for (let day = first; day <= last; day++) fields.push(`d${day % (this.rules.days + 1)}`);
    const pipeline = this.redis.pipeline();
    for (const m of members) pipeline.hgetall(this.keys.counters(tenant, m));
    const replies = (await pipeline.exec()) ?? [];
    const gone: string[] = [];
    members.forEach((member, i) => {
      const [err, hash] = replies[i] ?? [new Error("no reply"), undefined];
      if (err !== null) throw err;
      const counters = hash as Record<string, string>;
      if (Object.keys(counters).length === 0) {
        gone.push(member);
        return;
      }
      let sent = 0;
      let verified = 0;
      let blocked = 0;
      for (let day = first; day <= last; day++) {
        const c = dayCounts(counters[`d${day % (this.rules.days + 1)}`], day);
        if (c === undefined) continue;
        sent += c[0];
        verified += c[1];
        blocked += c[2];
      }
      if (sent + verified + blocked === 0) return;
      answer.groups.push({
        key: member.slice(kind.length),
        sent,
        verified,
        conversionRate: sent === 0 ? 0 : Math.min(1, verified / sent),
        blocked,
      });
    });
    answer.groups.sort((a, b) => b.sent - a.sent || b.blocked - a.blocked || a.key.localeCompare(b.key));
    await this.prune(tenant, gone);
    return answer;
  }

  /** Removes index members whose counters hash is gone, each checked again inside the script. */
  private async prune(tenant: string, members: string[]): Promise<void> {
    for (let i = 0; i < members.length; i += PRUNE_BATCH) {
      const batch = members.slice(i, i + PRUNE_BATCH);
      await pruneDestsScript.run(
        this.redis,
        { index: this.keys.index(tenant) },
        { members: JSON.stringify(batch) },
        batch.map((m) => this.keys.counters(tenant, m)),
      );
    }
  }

  /** The tenant's decision records, newest first: at most `limit`, made at or after `since`. */
  async decisions(tenant: string, q: DecisionsQuery): Promise<{ decisions: DecisionRecord[] }> {
    const { sinceMs, limit } = decisionsQuery(q);
    const entries = await this.redis.xrevrange(
      this.keys.decisions(tenant),
      "+",
      sinceMs === undefined ? "-" : String(Math.max(0, sinceMs)),
      "COUNT",
      limit,
    );
    return {
      decisions: entries.map(([id, flat]) => {
        const f: Record<string, string> = {};
        for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
        const network = f.network ?? "";
        return {
          id,
          createdAt: new Date(Number(f.created_at)).toISOString(),
          api: f.api as FraudApi,
          country: f.country ?? "",
          network: network === "" ? undefined : network,
          prefix: f.prefix ?? "",
          phoneNumber: f.phone_number ?? "",
          action: f.action as DecisionRecord["action"],
          rule: f.rule as DecisionRecord["rule"],
          detail: f.detail ?? "",
        };
      }),
    };
  }
}

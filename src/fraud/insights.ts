import type { Secrets } from "../crypto/secrets.js";
import { quote } from "../errors.js";
import type { RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { FRAUD_LIBRARY, type FraudAction, type FraudApi, type FraudRule, type FraudRules } from "./engine.js";
import type { FraudKeys } from "./keys.js";
import { PageTokens, type DecisionsPage, type InsightsPage } from "./page-token.js";
import { FraudInputError } from "./policy.js";

/** How insights group a tenant's destinations, and the id prefix of each kind (docs/fraud.md#insights). */
export const INSIGHTS_GROUPS = { country: "c:", network: "n:", prefix: "p:" } as const;
export type InsightsGroupBy = keyof typeof INSIGHTS_GROUPS;

const DAY_MS = 86_400_000;
/** Without `since`, insights cover the 24 hours before `until`. */
export const DEFAULT_INSIGHTS_MS = DAY_MS;
/** Groups or decisions per page without `limit`, and the most a page holds (docs/fraud.md#pages). */
export const DEFAULT_PAGE_LIMIT = 100;
export const MAX_PAGE_LIMIT = 1000;
/**
 * The most members the day rankings of a range may hold together for one call to add them up (a
 * range of three days or more, or of two ending before yesterday): past it the call is refused, so
 * that its work stays bounded (docs/fraud.md#pages).
 */
export const MOST_RANKED_PER_CALL = 5_000;
/** The destinations whose counters one Redis call reads (page-counts.lua); a page takes several. */
const COUNTED_PER_CALL = 200;

/** Lets the event loop serve what waits (other callers' requests and replies) before going on. */
const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One page of a ranking (rank-page.lua). */
export const rankPageScript = defineScript({
  file: new URL("./rank-page.lua", import.meta.url),
  keys: ["rank"],
  rest: "day",
  argv: ["args"],
});

/** The conversions and blocks of a page's destinations (page-counts.lua). */
export const pageCountsScript = defineScript({
  file: new URL("./page-counts.lua", import.meta.url),
  libraries: [FRAUD_LIBRARY],
  keys: [],
  rest: "counter",
  argv: ["args"],
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
  /** Where the next page starts; left out on the last one. */
  nextPageToken?: string | undefined;
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

export interface FraudDecisions {
  decisions: DecisionRecord[];
  /** Where the next page starts; left out on the last one. */
  nextPageToken?: string | undefined;
}

/** The query of an insights call; an empty string is a parameter left out. */
export interface InsightsQuery {
  since?: string | undefined;
  until?: string | undefined;
  groupBy?: string | undefined;
  limit?: string | undefined;
  pageToken?: string | undefined;
}

export interface DecisionsQuery {
  since?: string | undefined;
  limit?: string | undefined;
  pageToken?: string | undefined;
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

/** A page's `limit`, checked: 1 to MAX_PAGE_LIMIT, DEFAULT_PAGE_LIMIT when left out. */
export function pageLimit(value: string | undefined): number {
  if (!given(value)) return DEFAULT_PAGE_LIMIT;
  const limit = /^\d{1,4}$/.test(value) ? Number(value) : NaN;
  if (!(limit >= 1 && limit <= MAX_PAGE_LIMIT))
    throw new FraudInputError("limit", `${quote(value)} is not a whole number from 1 to ${MAX_PAGE_LIMIT}`);
  return limit;
}

/** A page token used with another query than the one of its first page. */
function otherQuery(names: string): FraudInputError {
  return new FraudInputError(
    "page_token",
    `was given for another query: ${names} must be left out or stay those of the first page`,
  );
}

/**
 * The range, grouping and page of an insights call, checked (docs/fraud.md#insights): what the
 * parameters say, else what the page token carries, else the defaults.
 */
export function insightsQuery(
  q: InsightsQuery,
  now: number,
  page?: InsightsPage,
): { sinceMs: number; untilMs: number; groupBy: InsightsGroupBy; limit: number } {
  let groupBy: InsightsGroupBy = page?.groupBy ?? "country";
  if (given(q.groupBy)) {
    if (!Object.hasOwn(INSIGHTS_GROUPS, q.groupBy)) {
      throw new FraudInputError(
        "group_by",
        `${quote(q.groupBy)} is not one of ${Object.keys(INSIGHTS_GROUPS).join(", ")}`,
      );
    }
    groupBy = q.groupBy as InsightsGroupBy;
  }
  const untilMs = given(q.until) ? parseTime("until", q.until) : (page?.untilMs ?? now);
  const sinceMs = given(q.since)
    ? parseTime("since", q.since)
    : (page?.sinceMs ?? untilMs - DEFAULT_INSIGHTS_MS);
  if (sinceMs > untilMs) throw new FraudInputError("since", `${quote(q.since ?? "")} is after until`);
  const limit = pageLimit(q.limit);
  if (
    page !== undefined &&
    (page.groupBy !== groupBy || page.sinceMs !== sinceMs || page.untilMs !== untilMs)
  ) {
    throw otherQuery("since, until and group_by");
  }
  return { sinceMs, untilMs, groupBy, limit };
}

/** The `since`, `limit` and page of a decisions call, checked. */
export function decisionsQuery(
  q: DecisionsQuery,
  page?: DecisionsPage,
): { sinceMs: number | undefined; limit: number } {
  const sinceMs = given(q.since) ? parseTime("since", q.since) : (page?.sinceMs ?? undefined);
  const limit = pageLimit(q.limit);
  if (page !== undefined && (page.sinceMs ?? undefined) !== sinceMs) throw otherQuery("since");
  return { sinceMs, limit };
}

/**
 * What the engine counted and decided, read back for a tenant a page at a time: insights per
 * destination from the rankings the send scripts keep (engine.lua fraud_rank) and the day
 * counters of the page's destinations, and its decision records (docs/fraud.md#insights). A call's
 * work is bounded by its page, whatever the number of destinations.
 */
export class FraudInsights {
  private readonly tokens: PageTokens;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: FraudKeys,
    private readonly rules: Pick<FraudRules, "days">,
    secrets: Secrets,
  ) {
    this.tokens = new PageTokens(secrets);
  }

  /**
   * Sends, conversions and blocks per destination over every UTC day the range touches (the
   * counters are per day), as far back as the days kept: the page after `pageToken`, the most sent
   * first and equals by key.
   */
  async verifications(tenant: string, q: InsightsQuery, now = Date.now()): Promise<VerificationInsights> {
    const page = given(q.pageToken) ? this.tokens.insights(tenant, q.pageToken) : undefined;
    const { sinceMs, untilMs, groupBy, limit } = insightsQuery(q, now, page);
    const today = Math.floor(now / DAY_MS);
    const first = Math.max(Math.floor(sinceMs / DAY_MS), today - this.rules.days);
    const last = Math.min(Math.floor(untilMs / DAY_MS), today);
    const answer: VerificationInsights = {
      since: new Date(sinceMs).toISOString(),
      until: new Date(untilMs).toISOString(),
      groupBy,
      groups: [],
    };
    if (first > last) return answer;
    const span = last - first + 1;
    const kind = INSIGHTS_GROUPS[groupBy].slice(0, 1);
    const k = this.keys;
    // A day, and two days ending today (the last 24 hours) or yesterday (a walk begun before
    // midnight), have a ranking of their own; another range adds up the rankings of its days.
    const ranked = span === 1 || (span === 2 && last >= today - 1);
    const rank = ranked ? k.rank(tenant, span === 1 ? 1 : 2, kind, last) : k.rankScratch(tenant);
    const dayKeys: string[] = [];
    if (!ranked) for (let day = first; day <= last; day++) dayKeys.push(k.rank(tenant, 1, kind, day));
    const after = page === undefined ? {} : { after: [-page.after[0], page.after[1]] };
    const reply = (await rankPageScript.run(
      this.redis,
      { rank },
      { args: JSON.stringify({ limit, most: MOST_RANKED_PER_CALL, ...after }) },
      dayKeys,
    )) as ["page", string[], number[], number] | ["too_many", number];
    if (reply[0] === "too_many") {
      throw new FraudInputError(
        "since",
        `the range covers ${span} UTC days, whose ${groupBy} rankings hold ${reply[1]} entries: more ` +
          `than one call adds up (${MOST_RANKED_PER_CALL}); ask for one UTC day, or the last 24 hours, at a time`,
      );
    }
    const [, members, scores, more] = reply;
    const days: number[] = [];
    for (let day = first; day <= last; day++) days.push(day);
    // The counters in slices, one call each: a page of 1000 holds Redis, and this process, for a
    // slice at a time, and other callers' commands and requests are served in between.
    const counted: number[] = [];
    const countArgs = JSON.stringify({ days, slots: this.rules.days + 1 });
    for (let from = 0; from < members.length; from += COUNTED_PER_CALL) {
      if (from > 0) await yieldTurn();
      const slice = members.slice(from, from + COUNTED_PER_CALL);
      const reply = (await pageCountsScript.run(
        this.redis,
        {},
        { args: countArgs },
        slice.map((m) => k.counters(tenant, `${kind}:${m}`)),
      )) as ["counted", ...number[]];
      for (let i = 1; i < reply.length; i++) counted.push(Number(reply[i]));
    }
    members.forEach((key, i) => {
      // Sends as ranked; conversions and blocks from the day counters of the range.
      const sent = -(scores[i] ?? 0);
      const verified = counted[2 * i] ?? 0;
      const blocked = counted[1 + 2 * i] ?? 0;
      answer.groups.push({
        key,
        sent,
        verified,
        conversionRate: sent === 0 ? 0 : Math.min(1, verified / sent),
        blocked,
      });
    });
    const lastGroup = answer.groups.at(-1);
    if (more === 1 && lastGroup !== undefined) {
      answer.nextPageToken = this.tokens.make(tenant, {
        list: "insights",
        groupBy,
        sinceMs,
        untilMs,
        after: [lastGroup.sent, lastGroup.key],
      });
    }
    return answer;
  }

  /** The tenant's decision records, newest first: a page of `limit` after `pageToken`, made at or after `since`. */
  async decisions(tenant: string, q: DecisionsQuery): Promise<FraudDecisions> {
    const page = given(q.pageToken) ? this.tokens.decisions(tenant, q.pageToken) : undefined;
    const { sinceMs, limit } = decisionsQuery(q, page);
    const entries = await this.redis.xrevrange(
      this.keys.decisions(tenant),
      page === undefined ? "+" : `(${page.after}`,
      sinceMs === undefined ? "-" : String(Math.max(0, sinceMs)),
      "COUNT",
      limit + 1,
    );
    const decisions = entries.slice(0, limit).map(([id, flat]): DecisionRecord => {
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
    });
    const lastId = decisions.at(-1)?.id;
    if (entries.length <= limit || lastId === undefined) return { decisions };
    return {
      decisions,
      nextPageToken: this.tokens.make(tenant, { list: "decisions", sinceMs: sinceMs ?? null, after: lastId }),
    };
  }
}

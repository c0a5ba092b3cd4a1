import { COUNTS, zeroCounts, type CountName, type HourlyRow } from "./stats.js";

/** What `ringfence routes insights` groups a channel's counts by (docs/routing.md#insights). */
export const INSIGHTS_GROUP_BY = ["provider", "country", "destination"] as const;
export type InsightsGroupBy = (typeof INSIGHTS_GROUP_BY)[number];

/** One provider's figures, over the whole range or at one country or route destination (`key`). */
export interface InsightsGroup {
  provider: string;
  key?: string;
  /** Submits tried. */
  sent: number;
  /** Submits a provider took. */
  accepted: number;
  delivered: number;
  /** Reported undelivered or rejected. */
  undelivered: number;
  /** Codes of these messages checked right. */
  verified: number;
  /** delivered / accepted, 0 to 1. */
  delivery_rate: number;
  /** verified / accepted, 0 to 1. */
  conversion_rate: number;
  /** What the accepted messages not reported undelivered cost the operator, in currency units. */
  cost: number;
}

/** What `ringfence routes insights` prints. */
export interface DeliveryInsights {
  channel: string;
  since: string;
  until: string;
  group_by: InsightsGroupBy;
  groups: InsightsGroup[];
}

export interface InsightsQuery {
  channel: string;
  sinceMs: number;
  untilMs: number;
  groupBy: InsightsGroupBy;
}

const KEY_OF: Record<InsightsGroupBy, (row: HourlyRow) => string | undefined> = {
  provider: () => undefined,
  country: (row) => row.country,
  destination: (row) => row.route,
};

/** The hourly counts of a channel (DeliveryStats.hourly) summed by provider, and by `group_by` when it is not provider. */
export function deliveryInsights(rows: readonly HourlyRow[], q: InsightsQuery): DeliveryInsights {
  const sums = new Map<
    string,
    { provider: string; key: string | undefined; row: Record<CountName, number> }
  >();
  for (const row of rows) {
    const key = KEY_OF[q.groupBy](row);
    const id = `${row.provider} ${key ?? ""}`;
    const sum = sums.get(id) ?? { provider: row.provider, key, row: zeroCounts() };
    for (const name of COUNTS) sum.row[name] += row[name];
    sums.set(id, sum);
  }
  const groups = [...sums.values()]
    .sort((a, b) => compare(a.provider, b.provider) || compare(a.key ?? "", b.key ?? ""))
    .map(({ provider, key, row }): InsightsGroup => ({
      provider,
      ...(key === undefined ? {} : { key }),
      sent: row.sent,
      accepted: row.accepted,
      delivered: row.delivered,
      // A rejected report is an undelivered message too: refunded and re-sent alike; insights have one count for both.
      undelivered: row.undelivered + row.rejected,
      verified: row.verified,
      delivery_rate: rate(row.delivered, row.accepted),
      conversion_rate: rate(row.verified, row.accepted),
      cost: Math.round(row.cost) / 1_000_000,
    }));
  return {
    channel: q.channel,
    since: new Date(q.sinceMs).toISOString(),
    until: new Date(q.untilMs).toISOString(),
    group_by: q.groupBy,
    groups,
  };
}

function rate(part: number, whole: number): number {
  return whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 10_000;
}

/** Code-point order, the same on every machine (localeCompare is not). */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;
const DURATION = /^(\d{1,6})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * `--since`: an RFC 3339 time, or a duration before `nowMs` (`30m`, `24h`, `7d`), in epoch ms; undefined
 * when it is neither or lies after `nowMs`.
 */
export function parseSince(value: string, nowMs: number): number | undefined {
  const d = DURATION.exec(value);
  const ms =
    d !== null
      ? nowMs - Number(d[1]) * UNIT_MS[d[2] as keyof typeof UNIT_MS]
      : RFC3339.test(value)
        ? Date.parse(value.replace(" ", "T"))
        : NaN;
  return Number.isNaN(ms) || ms > nowMs ? undefined : ms;
}

import { expect } from "chai";
import { destinationOf, type Destination, type FraudApi, type FraudEngine } from "../../src/fraud/engine.js";
import type { Json, RestAnswer } from "./rest.js";

/**
 * A destination of `country` whose prefix (`+9` and `i` on 5 digits) is unique to `i`, with no
 * network: the engine never parses the number, so reports can be filled without a lookup.
 */
export function syntheticDestination(i: number, country = "FR"): Destination {
  const e164 = `+9${String(i).padStart(5, "0")}123456`;
  return destinationOf({ e164, countryCode: country }, { mcc: "", mnc: "", carrier: "" }, 6);
}

/**
 * Judges `sends` messages to each destination through the engine's own script (the same Lua as
 * every send), many at once: a tenant with thousands of destinations in seconds, without a
 * request each. Answers the decisions' actions.
 */
export async function judgeAll(
  engine: FraudEngine,
  tenant: string,
  sends: readonly { d: Destination; times: number; at?: number }[],
  api: FraudApi = "v2",
): Promise<string[]> {
  const calls = sends.flatMap(({ d, times, at }) => Array.from({ length: times }, () => ({ d, at })));
  const actions: string[] = [];
  for (let i = 0; i < calls.length; i += 500) {
    const batch = calls.slice(i, i + 500);
    const decided = await Promise.all(batch.map(({ d, at }) => engine.judge(api, tenant, d, at)));
    actions.push(...decided.map((x) => x.action));
  }
  return actions;
}

/**
 * Every page of a report, from the first (`query` without a page token) until one comes without
 * `next_page_token`: each answer 200, each page at most `limit` long.
 */
export async function walkPages(
  get: (pathAndQuery: string) => Promise<RestAnswer>,
  path: string,
  query: string,
  limit: number,
): Promise<Json[]> {
  const pages: Json[] = [];
  let token: string | undefined;
  for (;;) {
    const sep = query === "" ? "" : "&";
    const page = token === undefined ? "" : `&page_token=${encodeURIComponent(token)}`;
    const res = await get(`${path}?${query}${sep}limit=${limit}${page}`);
    expect(res.status, res.text).to.equal(200);
    pages.push(res.body);
    const items = (res.body.groups ?? res.body.decisions) as Json[];
    expect(items.length).to.be.at.most(limit);
    token = res.body.next_page_token as string | undefined;
    if (token === undefined) return pages;
    expect(items.length, "a page with more after it is full").to.equal(limit);
  }
}

/** Bytewise order of keys, as Redis orders members of equal score. */
export function byKey(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

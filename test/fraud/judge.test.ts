import { randomUUID } from "node:crypto";
import { expect } from "chai";
import type { Destination } from "../../src/fraud/engine.js";
import { describeNumber } from "../../src/lookup/numbers.js";
import { parseE164 } from "../../src/phone/e164.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { FRAUD_DEFAULTS, frNumber } from "../support/fraud.js";

const DAY = 86_400_000;

describe("fraud engine: the judge on its own (src/fraud/engine.lua)", () => {
  let app: TestApp;
  before(async function () {
    this.timeout(30_000);
    app = await startTestApp(FRAUD_DEFAULTS);
  });
  after(async () => app.stop());

  async function dest(phone: string): Promise<Destination> {
    const parsed = parseE164(phone);
    if (parsed === undefined) throw new Error(phone);
    return app.registry.fraud.destination(parsed, await describeNumber(parsed));
  }

  /** The actions of `n` session sends to fresh numbers of one network, at `now`. */
  async function judgeMany(tenant: string, from: number, n: number, now = Date.now()): Promise<string[]> {
    const out: string[] = [];
    for (let i = from; i < from + n; i++) {
      const d = await dest(frNumber("bouygues", i));
      const decision = await app.registry.fraud.judge("session", tenant, d, now);
      out.push(decision.action === "allow" ? "allow" : `${decision.action} ${decision.rule}`);
    }
    return out;
  }

  const setPolicy = (tenant: string, ...fields: string[]) =>
    app.registry.redis.hset(app.registry.fraud.keys.policy(tenant), ...fields);

  it("refuses every send to a country the tenant blocks (rule geo), and records it", async () => {
    const tenant = randomUUID();
    await setPolicy(tenant, "g:FR", "block");
    expect(await judgeMany(tenant, 0, 2)).to.deep.equal(["block geo", "block geo"]);
    const recorded = await app.registry.redis.xrange(app.registry.fraud.keys.decisions(tenant), "-", "+");
    expect(recorded).to.have.length(2);
    expect(recorded[0]?.[1]).to.include.members(["rule", "geo", "detail", "country FR is blocked"]);
  });

  it("in shadow mode sends past the bound, answering and recording would_block", async () => {
    const tenant = randomUUID();
    await setPolicy(tenant, "mode", "shadow");
    const actions = await judgeMany(tenant, 0, 12);
    expect(actions).to.deep.equal([
      ...Array<string>(10).fill("allow"),
      "would_block destination_surge",
      "would_block destination_surge",
    ]);
    // A would_block is sent, so it counts as sent: the detail says 11 at the twelfth.
    const recorded = await app.registry.redis.xrange(app.registry.fraud.keys.decisions(tenant), "-", "+");
    expect(recorded[1]?.[1]).to.include.members(["action", "would_block", "detail"]);
    // The narrowest destination that explains it is named: the one prefix the sends went to.
    expect(recorded[1]?.[1].join(" ")).to.match(/detail prefix \+\d{6}: 11 sent/);
  });

  it("skips the adaptive rules for a trusted country and a trusted prefix", async () => {
    const country = randomUUID();
    await setPolicy(country, "g:FR", "trust");
    expect(new Set(await judgeMany(country, 0, 12))).to.deep.equal(new Set(["allow"]));
    const prefix = randomUUID();
    await setPolicy(prefix, "t:+3366", "1");
    expect(new Set(await judgeMany(prefix, 0, 12))).to.deep.equal(new Set(["allow"]));
  });

  it("starts a destination with history each window with FRAUD_BASELINE_SHARE of its busiest day of conversions", async () => {
    const tenant = randomUUID();
    const yesterday = Math.floor(Date.now() / DAY) * DAY - DAY;
    // Yesterday (one UTC day): 30 sends, each converted, over 3 hours so that the bound allows them.
    for (let i = 0; i < 30; i++) {
      const at = yesterday + 3_600_000 + i * 360_000;
      const d = await dest(frNumber("bouygues", i));
      expect((await app.registry.fraud.judge("session", tenant, d, at)).action).to.equal("allow");
      expect(await app.registry.fraud.converted("session", tenant, d, at)).to.equal(true);
    }
    // Today, to the same country, network and prefix: 10 + 0.1 × 30 = 13 sends before the bound.
    expect(await judgeMany(tenant, 30, 14)).to.deep.equal([
      ...Array<string>(13).fill("allow"),
      "block destination_surge",
    ]);
  });

  it("refuses the narrowest destination that explains a surge: the prefix, and the country only once FRAUD_COUNTRY_SPREAD (3) of its places were refused", async () => {
    const tenant = randomUUID();
    const now = Date.now();
    const judgeOne = async (phone: string) => {
      const decision = await app.registry.fraud.judge("session", tenant, await dest(phone), now);
      return decision.action === "allow"
        ? "allow"
        : `${decision.action} ${decision.rule}: ${decision.detail}`;
    };
    const tenTo = async (network: "orange" | "sfr" | "bouygues") => {
      for (let i = 0; i < 10; i++) expect(await judgeOne(frNumber(network, i))).to.equal("allow");
    };
    // Ten sends to one Orange range, then its eleventh: the range is refused, named by its prefix.
    await tenTo("orange");
    const countryKey = app.registry.fraud.keys.counters(tenant, "c:FR");
    const bytes = async () =>
      Number(await app.registry.redis.call("MEMORY", "USAGE", countryKey, "SAMPLES", "0"));
    const before = await bytes();
    expect(await judgeOne(frNumber("orange", 10))).to.match(
      /^block destination_surge: prefix \+336700: 10 sent/,
    );
    // The country is at its bound too (10 sends), yet one refused place does not explain a country:
    // its other users are served.
    expect(await judgeOne(frNumber("sfr", 0))).to.equal("allow");
    for (let i = 1; i < 10; i++) expect(await judgeOne(frNumber("sfr", i))).to.equal("allow");
    expect(await judgeOne(frNumber("sfr", 10))).to.match(/^block destination_surge: prefix \+336100:/);
    await tenTo("bouygues");
    expect(await judgeOne(frNumber("bouygues", 10))).to.match(/^block destination_surge: prefix \+336600:/);
    // Three places refused in the window: now the country is, a fourth network (Free, 208-15) included.
    expect(await judgeOne("+33695000000")).to.equal(
      "block destination_surge: country FR: 30 sent, 0 verified in the last 3600 s; allowed 10; " +
        "refused in 3 of its networks or prefixes",
    );
    // What the country keeps of the places refused under it (docs/fraud.md#what-redis-keeps).
    const grown = (await bytes()) - before;
    console.log(`      the places refused under a country: +${grown} bytes of its counters`);
    expect(grown).to.be.at.most(100);
  });

  it("keeps a range that converts nothing at its bound while refused sends keep arriving, and serves it an hour after they stop", async () => {
    const tenant = randomUUID();
    const t0 = Math.floor(Date.now() / 300_000) * 300_000;
    const MIN = 60_000;
    let n = 0;
    const judgeAt = async (at: number) => {
      const decision = await app.registry.fraud.judge(
        "session",
        tenant,
        await dest(frNumber("orange", n++)),
        at,
      );
      return decision.action === "allow"
        ? "allow"
        : `${decision.action} ${decision.rule}: ${decision.detail}`;
    };
    for (let i = 0; i < 10; i++) expect(await judgeAt(t0)).to.equal("allow");
    expect(await judgeAt(t0)).to.match(/^block destination_surge: prefix \+336700/);
    // Tries every 5 minutes: at 65 minutes its 10 sends have left the window, its refusals have not.
    for (let m = 5; m <= 60; m += 5) expect(await judgeAt(t0 + m * MIN)).to.match(/^block destination_surge/);
    expect(await judgeAt(t0 + 65 * MIN)).to.equal(
      "block destination_surge: prefix +336700: 0 sent, 0 verified, 11 refused in the last 3600 s; allowed 10",
    );
    // An hour without a try: served again.
    expect(await judgeAt(t0 + 130 * MIN)).to.equal("allow");
  });

  it("judges a destination's conversion against its own best day before today, not against the tenant's", async function () {
    this.timeout(60_000);
    // Yesterday from its midnight (UTC), today at noon.
    const yesterday = Math.floor(Date.now() / DAY) * DAY - DAY;
    const today = yesterday + DAY + 12 * 3_600_000;
    // Each number of its own range (prefix), so that the network alone is judged.
    const spread = (network: "bouygues" | "orange", i: number) =>
      frNumber(network, (i % 100) * 100 + Math.floor(i / 100));
    /** Yesterday, every 4 minutes: Bouygues converts 90 of 300, Orange 300 of 300 (the tenant: 0.65). */
    const history = async (tenant: string) => {
      for (let i = 0; i < 300; i++) {
        const at = yesterday + i * 240_000;
        for (const [network, converts] of [
          ["bouygues", i % 10 < 3],
          ["orange", true],
        ] as const) {
          const d = await dest(spread(network, i));
          expect((await app.registry.fraud.judge("session", tenant, d, at)).action).to.equal("allow");
          if (converts) expect(await app.registry.fraud.converted("session", tenant, d, at)).to.equal(true);
        }
      }
    };
    /** Today, 50 to 12 minutes ago: 20 Bouygues sends, `converting` of them entered; then one more. */
    const judged = async (tenant: string, converting: number) => {
      for (let i = 0; i < 20; i++) {
        const at = today - 3_000_000 + i * 120_000;
        const d = await dest(frNumber("bouygues", i * 100 + 50));
        const decision = await app.registry.fraud.judge("session", tenant, d, at);
        expect(decision.action, `${i}: ${decision.detail}`).to.equal("allow");
        if (i < converting)
          expect(await app.registry.fraud.converted("session", tenant, d, at)).to.equal(true);
      }
      const decision = await app.registry.fraud.judge(
        "session",
        tenant,
        await dest(frNumber("bouygues", 9999)),
        today,
      );
      return decision.action === "allow"
        ? "allow"
        : `${decision.action} ${decision.rule}: ${decision.detail}`;
    };
    // 6 of 20 (0.30): below half the tenant's 0.65, but not below half its own best day, 0.30.
    const steady = randomUUID();
    await history(steady);
    expect(await judged(steady, 6)).to.equal("allow");
    // 2 of 20 (0.10): below half its own.
    const dropped = randomUUID();
    await history(dropped);
    expect(await judged(dropped, 2)).to.equal(
      "block conversion_drop: network 208-20: conversion 0.10 over 20 sends, its best day converted 0.30",
    );
  });

  it("gives every key it writes an expiry", async () => {
    const tenant = randomUUID();
    await judgeMany(tenant, 0, 11);
    const d = await dest(frNumber("bouygues", 0));
    expect(await app.registry.fraud.converted("session", tenant, d)).to.equal(true);
    await judgeMany(tenant, 1000, 1);
    const { redis } = app.registry;
    const pattern = app.registry.fraud.keys.index(tenant).replace(/dests$/, "*");
    const keys: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== "0");
    // counters (all, c:, n:, p: x2), dests, decisions, sent records.
    expect(keys.length).to.be.greaterThan(8);
    for (const key of keys) expect(await redis.pttl(key), key).to.be.greaterThan(0);
  });
});

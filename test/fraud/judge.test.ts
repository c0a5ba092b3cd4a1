import { randomUUID } from "node:crypto";
import { expect } from "chai";
import type { Destination } from "../../src/fraud/engine.js";
import { describeNumber, parseE164 } from "../../src/lookup/numbers.js";
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
    expect(recorded[1]?.[1].join(" ")).to.contain("country FR: 11 sent");
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

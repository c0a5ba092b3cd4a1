import { FRAUD_DEFAULTS } from "../support/fraud.js";
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster, Redis } from "ioredis";
import { runCli } from "../support/app.js";
import { testRedisUrl } from "../support/hooks.js";
import { commandsDuring, keysUnder, startRedisCluster, type RedisCluster } from "../support/redis.js";
import {
  ATTACK_COUNTRY,
  ATTACK_NETWORK,
  fraudScenario,
  scenarioJsonl,
  type TrafficRecord,
} from "../support/fraud-scenario.js";
import { describeNumber } from "../../src/lookup/numbers.js";
import { parseE164 } from "../../src/phone/e164.js";
import { networkOf } from "../../src/fraud/engine.js";
import { parseTraffic, TrafficError, type SimulateReport } from "../../src/fraud/simulate.js";

/** The contract's keys (decisions 8.3), first and in this order. */
const CONTRACT = ["sends", "blocked", "fraud_sends", "fraud_blocked", "legit_sends", "legit_blocked"];

/** The engine's settings, as docs/fraud.md gives their defaults: the tests rely on them. */
const FRAUD_ENV = FRAUD_DEFAULTS;

const TENANT = "0b6f1c9e-7d2a-4e55-8c1b-3a9f5e2d4c60";
const T0 = Date.parse("2025-03-03T09:00:00Z");

/**
 * A small labelled file: 30 FR users over 5 minutes, each from its own address (its sources'
 * conversions counted too), who all enter their code 4 s after the send, then 40 sends in 20 s to
 * LV numbers (a country the tenant never served) nobody verifies.
 */
function smallFile(): TrafficRecord[] {
  const lines: TrafficRecord[] = [];
  for (let i = 0; i < 30; i++) {
    lines.push({
      at: new Date(T0 + i * 10_000).toISOString(),
      api: i % 3 === 0 ? "v1" : "v2",
      tenant: TENANT,
      phone_number: `+336123456${String(i).padStart(2, "0")}`,
      ip: `203.0.${100 + i}.5`,
      verified_after_s: 4,
      label: "legit",
    });
  }
  for (let i = 0; i < 40; i++) {
    lines.push({
      at: new Date(T0 + 300_000 + i * 500).toISOString(),
      api: "v2",
      tenant: TENANT,
      phone_number: `+3712${String(1_000_000 + i * 24_989).slice(-7)}`,
      ip: `198.18.0.${i + 1}`,
      device_id: `bot-${i}`,
      verified_after_s: null,
      label: "fraud",
    });
  }
  return lines;
}

describe("ringfence fraud simulate", function () {
  // Each run is a fresh Node process (the built CLI); seconds apiece on a loaded machine.
  this.timeout(90_000);
  const dir = mkdtempSync(join(tmpdir(), "ringfence-simulate-"));
  let redis: Redis;
  let prefix: string;
  let env: Record<string, string>;

  before(async () => {
    redis = new Redis(testRedisUrl(), { lazyConnect: true });
    await redis.connect();
  });
  after(async () => {
    await redis.quit();
  });
  beforeEach(() => {
    prefix = `t${randomBytes(4).toString("hex")}:`;
    env = { NODE_ENV: "test", REDIS_URL: testRedisUrl(), REDIS_KEY_PREFIX: prefix, ...FRAUD_ENV };
  });

  function file(name: string, text: string): string {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  }

  async function simulate(path: string, extra: string[] = [], more: Record<string, string> = {}) {
    const r = await runCli(["fraud", "simulate", "--input", path, ...extra], { ...env, ...more }, true);
    expect(r.stderr).to.equal("");
    expect(r.code).to.equal(0);
    const report = JSON.parse(r.stdout) as SimulateReport;
    expect(Object.keys(report).slice(0, 6)).to.deep.equal(CONTRACT);
    return report;
  }

  it("says in --help what it takes and prints", async () => {
    const r = await runCli(["fraud", "simulate", "--help"], env, true);
    expect(r.code).to.equal(0);
    const text = r.stdout.replace(/\s+/g, " ");
    for (const word of [
      "--input <file>",
      "verified_after_s",
      '"enforce", "shadow"',
      "fraud_blocked",
      "FRAUD_*",
    ]) {
      expect(text).to.include(word);
    }
  });

  it("blocks a pumping burst to a never-served country after its first sends, and no converting user", async () => {
    const report = await simulate(file("small.jsonl", scenarioJsonl(smallFile())));
    // LV gets FRAUD_NEW_DESTINATION_SENDS sends, then nothing: it converts none. Its surge came
    // from one /24 (198.18.0.0/24, decisions 9.4): that source is refused, not the country.
    expect(report).to.deep.include({
      sends: 70,
      blocked: 30,
      fraud_sends: 40,
      fraud_blocked: 30,
      legit_sends: 30,
      legit_blocked: 0,
      would_block: 0,
      verified: 30,
      rules: { source_fanout: 30 },
    });
  });

  it("takes the FRAUD_* settings from the environment, as the service does", async () => {
    const report = await simulate(file("small.jsonl", scenarioJsonl(smallFile())), [], {
      FRAUD_NEW_DESTINATION_SENDS: "25",
      FRAUD_SOURCE_SENDS: "100",
    });
    expect(report).to.deep.include({ fraud_blocked: 15, legit_blocked: 0 });
  });

  it("counts no conversion entered once its send has left the window", async () => {
    const sends = (after: number) =>
      scenarioJsonl(
        Array.from({ length: 12 }, (_, i) => ({
          at: new Date(T0 + i * 1000).toISOString(),
          api: "v2" as const,
          tenant: TENANT,
          phone_number: `+336123456${String(i).padStart(2, "0")}`,
          verified_after_s: after,
        })),
      );
    const settings = { FRAUD_WINDOW_SECONDS: "60" };
    // 10 sends go out before the first code comes back; the last 2 are a surge.
    expect(await simulate(file("in-time.jsonl", sends(30)), [], settings)).to.deep.include({
      blocked: 2,
      verified: 10,
    });
    expect(await simulate(file("late.jsonl", sends(60)), [], settings)).to.deep.include({
      blocked: 2,
      verified: 0,
    });
  });

  it("blocks nothing in shadow mode, and reports what enforce would have blocked", async () => {
    const report = await simulate(file("small.jsonl", scenarioJsonl(smallFile())), ["--mode", "shadow"]);
    expect(report).to.deep.include({
      sends: 70,
      blocked: 0,
      fraud_blocked: 0,
      legit_blocked: 0,
      would_block: 30,
      fraud_would_block: 30,
      legit_would_block: 0,
      mode: "shadow",
    });
  });

  it("writes only in its own namespace, and deletes it after the run", async () => {
    const written = new Set<string>();
    const commands = await commandsDuring(testRedisUrl(), async () => {
      await simulate(file("small.jsonl", scenarioJsonl(smallFile())));
    });
    for (const args of commands) for (const a of args) if (a.startsWith(prefix)) written.add(a);
    expect(written.size).to.be.greaterThan(5);
    // The keys of one namespace, under the tenant's hash tag (and SCAN's pattern, at the end).
    const namespaces = new Set<string>();
    for (const key of written) {
      const m = new RegExp(`^(${prefix}sim:[0-9a-f]{16}:)(fraud:\\{${TENANT}\\}:.+|\\*)$`).exec(key);
      expect(m, key).not.to.equal(null);
      namespaces.add(m?.[1] ?? "");
    }
    expect(namespaces.size).to.equal(1);
    expect([...(await keysUnder(redis, prefix))]).to.deep.equal([]);
  });

  const good = smallFile()[0];
  const broken: [string, string, string][] = [
    ["bad JSON", '{"at": "2025-03-03T09:00:00Z", "api": ', "is not JSON"],
    [
      "a missing phone_number",
      JSON.stringify({ ...good, phone_number: undefined }),
      "phone_number is missing",
    ],
    ["an unknown api", JSON.stringify({ ...good, api: "v3" }), 'api "v3" is not one of v1, v2, session'],
    ["an invalid number", JSON.stringify({ ...good, phone_number: "+3361234" }), "phone_number"],
    ["a 30 February", JSON.stringify({ ...good, at: "2025-02-30T09:00:00Z" }), "at "],
    ["a date without its zone", JSON.stringify({ ...good, at: "2025-03-03T09:00:00" }), "at "],
    ["a negative verified_after_s", JSON.stringify({ ...good, verified_after_s: -1 }), "verified_after_s"],
    ["no verified_after_s", JSON.stringify({ ...good, verified_after_s: undefined }), "verified_after_s"],
    ["a bad label", JSON.stringify({ ...good, label: "bot" }), "label"],
    ["a misspelt field", JSON.stringify({ ...good, lable: "legit" }), '"lable"'],
  ];
  for (const [what, line, mentions] of broken) {
    it(`rejects a file with ${what}, naming the line and the field, and writes nothing`, async () => {
      const lines = scenarioJsonl(smallFile()).split("\n");
      lines.splice(2, 1, line);
      const r = await runCli(
        ["fraud", "simulate", "--input", file("broken.jsonl", lines.join("\n"))],
        env,
        true,
      );
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stdout).to.equal("");
      expect(r.stderr.trim().split("\n")).to.have.length(1);
      expect(r.stderr).to.include("line 3: ").and.include(mentions);
      // Neither the namespace nor any tenant key: nothing under the prefix at all.
      expect([...(await keysUnder(redis, prefix))]).to.deep.equal([]);
    });
  }

  it("reads RFC 3339 times with offsets and fractions, and skips blank lines", () => {
    const base = { api: "v2", tenant: TENANT, phone_number: "+33612345678", verified_after_s: null };
    const text = [
      JSON.stringify({ ...base, at: "2024-02-29T10:00:00.250+02:00" }),
      "",
      JSON.stringify({ ...base, at: "2024-02-29t08:00:00z" }),
    ].join("\n");
    const lines = parseTraffic(text);
    expect(lines.map((l) => [l.line, l.atMs])).to.deep.equal([
      [1, Date.parse("2024-02-29T08:00:00.250Z")],
      [3, Date.parse("2024-02-29T08:00:00Z")],
    ]);
    expect(() => parseTraffic(JSON.stringify({ ...base, at: "2025-02-29T08:00:00Z" }))).to.throw(
      TrafficError,
      "line 1: at",
    );
  });

  describe("on a Redis Cluster", () => {
    let cluster: RedisCluster;
    let client: Cluster;

    before(async function () {
      this.timeout(60_000);
      cluster = await startRedisCluster();
      client = new Cluster(
        cluster.nodes.split(",").map((n) => ({ host: "127.0.0.1", port: Number(n.split(":")[1]) })),
        { lazyConnect: true },
      );
      await client.connect();
    });
    after(async () => {
      await client.quit();
      await cluster.stop();
    });

    it("runs tenants of several slots, and deletes its keys on every primary", async () => {
      // The same traffic under a second tenant: slot 12277, on another primary than TENANT (7631).
      const other = "8e2a4c71-5b3d-4f69-a0e8-1c7d9b6f2e43";
      const lines = [...smallFile(), ...smallFile().map((l) => ({ ...l, tenant: other }))];
      const report = await simulate(file("two.jsonl", scenarioJsonl(lines)), ["--mode", "shadow"], {
        REDIS_URL: "",
        REDIS_CLUSTER_NODES: cluster.nodes,
      });
      expect(report).to.deep.include({ sends: 140, blocked: 0, would_block: 60, legit_would_block: 0 });
      expect([...(await keysUnder(client, prefix))]).to.deep.equal([]);
    });
  });

  describe("on the generated scenario (test/support/fraud-scenario.ts)", () => {
    const records = fraudScenario();

    it("is the same for the same seed, and numbers never repeat", () => {
      expect(fraudScenario()).to.deep.equal(records);
      expect(fraudScenario({ seed: 2 })).not.to.deep.equal(records);
      expect(new Set(records.map((r) => r.phone_number)).size).to.equal(records.length);
      const at = records.map((r) => Date.parse(r.at));
      expect(at).to.deep.equal([...at].sort((a, b) => a - b));
    });

    it("attacks LV and network 208-25, which takes under 2% of the legitimate sends", async () => {
      const where = async (r: TrafficRecord) => {
        const phone = parseE164(r.phone_number);
        if (phone?.lineType !== "Mobile") throw new Error(`${r.phone_number} is not a valid mobile`);
        return { country: phone.countryCode, network: networkOf(await describeNumber(phone)) };
      };
      const legit = records.filter((r) => r.label === "legit");
      const fraud = records.filter((r) => r.label === "fraud");
      const legitWhere = await Promise.all(legit.map(where));
      const countries = new Set(legitWhere.map((w) => w.country));
      expect([...countries].sort()).to.deep.equal(["DE", "ES", "FR", "GB"]);
      const onNetwork = legitWhere.filter((w) => w.network === ATTACK_NETWORK).length;
      expect(onNetwork).to.be.greaterThan(0);
      expect(onNetwork / legit.length).to.be.below(0.02);
      for (const w of await Promise.all(fraud.map(where))) {
        expect(w.country === ATTACK_COUNTRY || w.network === ATTACK_NETWORK, JSON.stringify(w)).to.equal(
          true,
        );
      }
      expect(fraud.every((r) => r.verified_after_s === null)).to.equal(true);
      expect(new Set(fraud.map((r) => r.ip)).size).to.equal(fraud.length);
      expect(new Set(fraud.map((r) => r.device_id)).size).to.equal(fraud.length);
      const abandoned = legit.filter((r) => r.verified_after_s === null).length / legit.length;
      expect(abandoned).to.be.within(0.1, 0.2);
    });

    it("stops the attack while legitimate users keep getting their codes", async () => {
      const report = await simulate(file("scenario.jsonl", scenarioJsonl(records)));
      console.log(`      scenario (${records.length} sends, default settings): ${JSON.stringify(report)}`);
      expect(report.fraud_blocked / report.fraud_sends).to.be.above(0.9);
      expect(report.legit_blocked / report.legit_sends).to.be.below(0.01);
      expect([...(await keysUnder(redis, prefix))]).to.deep.equal([]);
    });
  });
});

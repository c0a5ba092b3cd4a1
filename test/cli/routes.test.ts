import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { DeliveryKeys } from "../../src/delivery/keys.js";
import { DeliveryStats, type Place } from "../../src/delivery/stats.js";
import { Keys } from "../../src/redis/client.js";
import { runCli, type CliResult } from "../support/app.js";
import { keysUnder, startRedis, waitFor, type RedisServer } from "../support/redis.js";
import type { Json } from "../support/rest.js";

const PROVIDERS = JSON.stringify([
  { name: "alpha", url: "http://127.0.0.1:9/a", cost: { default: 0.04 } },
  { name: "beta", url: "http://127.0.0.1:9/b" },
]);
const HOUR_MS = 3_600_000;

/**
 * `ringfence routes` as operators run it: the built CLI (dist/cli.js, rebuilt by `npm run build`)
 * against a Redis of its own, with two providers in DELIVERY_PROVIDERS that it never contacts.
 */
describe("ringfence routes (CLI)", function () {
  this.timeout(60_000);
  let server: RedisServer;
  let redis: Redis;
  let keys: DeliveryKeys;
  let env: Record<string, string>;
  const prefix = `routes-${randomBytes(4).toString("hex")}:`;

  before(async function () {
    const built = fileURLToPath(new URL("../../dist/delivery/commands.js", import.meta.url));
    const source = fileURLToPath(new URL("../../src/delivery/commands.ts", import.meta.url));
    if ((statSync(built, { throwIfNoEntry: false })?.mtimeMs ?? 0) < statSync(source).mtimeMs) {
      throw new Error("dist/ is older than src/delivery/commands.ts: run `npm run build` first");
    }
    server = await startRedis();
    redis = new Redis(server.url);
    keys = new DeliveryKeys(new Keys(prefix));
    env = {
      NODE_ENV: "test",
      REDIS_URL: server.url,
      REDIS_KEY_PREFIX: prefix,
      DELIVERY_PROVIDERS: PROVIDERS,
    };
    // The first command stamps the data with SECRETS_KEY: later ones find every key they need.
    await ok(["list"]);
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });

  const run = (args: string[], extra: Record<string, string> = {}): Promise<CliResult> =>
    runCli(["routes", ...args], { ...env, ...extra }, true);

  async function ok(args: string[], extra?: Record<string, string>): Promise<Json> {
    const r = await run(args, extra);
    expect(r.stderr).to.equal("");
    expect(r.code).to.equal(0);
    expect(r.stdout.trim().split("\n")).to.have.length(1);
    return JSON.parse(r.stdout) as Json;
  }

  /** What is announced to the running instances on the route change channel while `fn` runs. */
  async function announcedDuring(fn: () => Promise<void>): Promise<string[]> {
    const announced: string[] = [];
    const subscriber = redis.duplicate();
    subscriber.on("message", (_channel: string, message: string) => announced.push(message));
    try {
      await subscriber.subscribe(keys.routeChanges());
      await fn();
      // Messages of one channel arrive in order: once this one is in, every earlier one is.
      await redis.publish(keys.routeChanges(), "end");
      await waitFor(() => Promise.resolve(announced.includes("end")));
      return announced.slice(0, -1);
    } finally {
      subscriber.disconnect();
    }
  }

  /** Runs a refused command: exit 2, one line naming the problem, and Redis as it was, nothing announced. */
  async function refused(args: string[], mentions: string): Promise<void> {
    const routesBefore = await redis.hgetall(keys.routes());
    const keysBefore = await keysUnder(redis, prefix);
    const announced = await announcedDuring(async () => {
      const r = await run(args);
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stdout).to.equal("");
      expect(r.stderr.trim().split("\n")).to.have.length(1);
      expect(r.stderr).to.include(mentions);
    });
    expect(await redis.hgetall(keys.routes())).to.deep.equal(routesBefore);
    expect(await keysUnder(redis, prefix)).to.deep.equal(keysBefore);
    expect(announced).to.deep.equal([]);
  }

  describe("set, list and remove", () => {
    it("sets routes, lists them by channel then destination, and removes one (removed false the second time)", async () => {
      expect(await ok(["set", "--destination", "FR", "--providers", "alpha,beta"])).to.deep.equal({
        channel: "sms",
        destination: "FR",
        providers: ["alpha", "beta"],
        strategy: "failover",
      });
      const weighted = [
        "set",
        "--channel",
        "sms",
        "--destination",
        "+3361",
        "--providers",
        "beta, alpha",
        "--strategy",
        "weighted",
        "--weights",
        "70,30",
      ];
      expect(await ok(weighted)).to.deep.equal({
        channel: "sms",
        destination: "+3361",
        providers: ["beta", "alpha"],
        strategy: "weighted",
        weights: [70, 30],
      });
      await ok(["set", "--destination", "208-01", "--providers", "beta", "--strategy", "cost"]);
      // A second set of a destination replaces its route.
      await ok(["set", "--destination", "FR", "--providers", "beta,alpha", "--strategy", "conversion"]);
      expect(await ok(["list"])).to.deep.equal({
        routes: [
          {
            channel: "sms",
            destination: "+3361",
            providers: ["beta", "alpha"],
            strategy: "weighted",
            weights: [70, 30],
          },
          { channel: "sms", destination: "208-01", providers: ["beta"], strategy: "cost" },
          { channel: "sms", destination: "FR", providers: ["beta", "alpha"], strategy: "conversion" },
        ],
      });
      expect(await ok(["list", "--channel", "voice"])).to.deep.equal({ routes: [] });

      expect(await ok(["remove", "--destination", "208-01"])).to.deep.equal({
        channel: "sms",
        destination: "208-01",
        removed: true,
      });
      expect(await ok(["remove", "--channel", "sms", "--destination", "208-01"])).to.deep.equal({
        channel: "sms",
        destination: "208-01",
        removed: false,
      });
      expect(
        ((await ok(["list", "--channel", "sms"])).routes as Json[]).map((r) => r.destination),
      ).to.deep.equal(["+3361", "FR"]);
      for (const d of ["+3361", "FR"]) await ok(["remove", "--destination", d]);
      expect(await redis.hgetall(keys.routes())).to.deep.equal({});
    });

    it("announces each change to the running instances, and a remove of nothing not at all", async () => {
      const announced = await announcedDuring(async () => {
        await ok(["set", "--destination", "default", "--providers", "alpha"]);
        await ok(["remove", "--destination", "default"]);
        await ok(["remove", "--destination", "default"]);
      });
      expect(announced).to.deep.equal(["routes", "routes"]);
    });

    it("names the one provider `default` when SMS_PROVIDER is set instead of DELIVERY_PROVIDERS", async () => {
      const legacy = { DELIVERY_PROVIDERS: "", SMS_PROVIDER: "log" };
      expect(await ok(["set", "--destination", "US", "--providers", "default"], legacy)).to.include({
        destination: "US",
      });
      const r = await run(["set", "--destination", "US", "--providers", "alpha"], legacy);
      expect([r.code, r.stderr]).to.deep.equal([
        2,
        "ringfence: --providers: alpha is not a provider of DELIVERY_PROVIDERS\n",
      ]);
      expect(await ok(["remove", "--destination", "US"], legacy)).to.include({ removed: true });
    });
  });

  describe("bad input exits 2 with one line and changes nothing", () => {
    before(async () => {
      await ok(["set", "--destination", "DE", "--providers", "alpha"]);
    });
    after(async () => {
      await ok(["remove", "--destination", "DE"]);
    });

    const set = (...args: string[]) => ["set", "--destination", "DE", ...args];
    const cases: [string, string[], string][] = [
      [
        "an unknown provider",
        set("--providers", "alpha,gamma"),
        "--providers: gamma is not a provider of DELIVERY_PROVIDERS",
      ],
      [
        "a provider of another channel",
        set("--channel", "voice", "--providers", "alpha"),
        "--providers: alpha serves sms, not voice",
      ],
      ["a provider named twice", set("--providers", "alpha,alpha"), "--providers: alpha is named twice"],
      [
        "a malformed destination",
        ["set", "--destination", "France", "--providers", "alpha"],
        "--destination must be default, a country",
      ],
      [
        "a network without its MNC",
        ["set", "--destination", "208-", "--providers", "alpha"],
        "--destination must be",
      ],
      [
        "weights not matching the providers",
        set("--providers", "alpha,beta", "--strategy", "weighted", "--weights", "100"),
        "--weights: 1 weights for 2 providers",
      ],
      [
        "weights not summing to 100",
        set("--providers", "alpha,beta", "--strategy", "weighted", "--weights", "70,20"),
        "--weights must sum to 100 (they sum to 90)",
      ],
      [
        "a weight that is not a whole number",
        set("--providers", "alpha,beta", "--strategy", "weighted", "--weights", "70.5,29.5"),
        "--weights must be whole numbers from 0 to 100",
      ],
      [
        "weights without weighted",
        set("--providers", "alpha,beta", "--weights", "70,30"),
        "--weights go with --strategy weighted only",
      ],
      [
        "weighted without weights",
        set("--providers", "alpha,beta", "--strategy", "weighted"),
        "--strategy weighted needs --weights",
      ],
      [
        "an unknown strategy",
        set("--providers", "alpha", "--strategy", "cheapest"),
        "--strategy must be one of failover, weighted, cost, conversion",
      ],
      [
        "an unknown channel",
        set("--channel", "fax", "--providers", "alpha"),
        "--channel must be one of sms, voice, whatsapp",
      ],
      ["no destination", ["set", "--providers", "alpha"], "--destination"],
      [
        "an unknown channel to list",
        ["list", "--channel", "fax"],
        "--channel must be one of sms, voice, whatsapp",
      ],
      [
        "an unknown channel to remove",
        ["remove", "--channel", "fax", "--destination", "DE"],
        "--channel must be one of",
      ],
      ["a malformed destination to remove", ["remove", "--destination", "de"], "--destination must be"],
    ];
    for (const [what, args, mentions] of cases) {
      it(`refuses ${what}`, async () => {
        await refused(args, mentions);
      });
    }

    it("kept the route it had through all of them", async () => {
      expect(await ok(["list"])).to.deep.equal({
        routes: [{ channel: "sms", destination: "DE", providers: ["alpha"], strategy: "failover" }],
      });
    });
  });

  describe("insights", () => {
    const ALPHA = 40_000;
    before(async () => {
      const now = new DeliveryStats(redis, keys, { windowSeconds: 3_600, retentionDays: 8 });
      const at = (provider: string, country: string, route: string): Place => ({
        channel: "sms",
        provider,
        country,
        route,
      });
      now.add(
        at("alpha", "FR", "FR"),
        { sent: 10, accepted: 8, delivered: 6, undelivered: 1, rejected: 1, verified: 4, cost: 6 * ALPHA },
        {},
      );
      now.add(
        at("alpha", "DE", "default"),
        { sent: 5, accepted: 5, delivered: 5, verified: 2, cost: 5 * ALPHA },
        {},
      );
      now.add(
        at("beta", "FR", "FR"),
        { sent: 4, accepted: 3, delivered: 2, undelivered: 1, verified: 1 },
        {},
      );
      now.add(at("beta", "DE", "default"), { sent: 2 }, {});
      now.add({ channel: "voice", provider: "alpha", country: "FR", route: "default" }, { sent: 7 }, {});
      const earlier = new DeliveryStats(redis, keys, {
        windowSeconds: 3_600,
        retentionDays: 8,
        now: () => Date.now() - 5 * HOUR_MS,
      });
      earlier.add(at("alpha", "IT", "default"), { sent: 1, accepted: 1, delivered: 1, cost: ALPHA }, {});
      await Promise.all([now.flush(), earlier.flush()]);
    });

    const counts = (
      sent: number,
      accepted: number,
      delivered: number,
      undelivered: number,
      verified: number,
    ) => ({
      sent,
      accepted,
      delivered,
      undelivered,
      verified,
    });

    it("sums each provider's counts over the range; rejected count as undelivered, rates to 4 decimals, cost in units", async () => {
      const out = await ok(["insights", "--since", "2h"]);
      expect(out).to.include({ channel: "sms", group_by: "provider" });
      expect(Date.parse(String(out.until)) - Date.parse(String(out.since))).to.equal(2 * HOUR_MS);
      expect(Math.abs(Date.parse(String(out.until)) - Date.now())).to.be.below(30_000);
      expect(out.groups).to.deep.equal([
        {
          provider: "alpha",
          ...counts(15, 13, 11, 2, 6),
          delivery_rate: 0.8462,
          conversion_rate: 0.4615,
          cost: 0.44,
        },
        {
          provider: "beta",
          ...counts(6, 3, 2, 1, 1),
          delivery_rate: 0.6667,
          conversion_rate: 0.3333,
          cost: 0,
        },
      ]);
    });

    it("groups by country, 0 rates where nothing was accepted", async () => {
      const out = await ok(["insights", "--since", "2h", "--group-by", "country"]);
      expect(out.group_by).to.equal("country");
      expect(out.groups).to.deep.equal([
        {
          provider: "alpha",
          key: "DE",
          ...counts(5, 5, 5, 0, 2),
          delivery_rate: 1,
          conversion_rate: 0.4,
          cost: 0.2,
        },
        {
          provider: "alpha",
          key: "FR",
          ...counts(10, 8, 6, 2, 4),
          delivery_rate: 0.75,
          conversion_rate: 0.5,
          cost: 0.24,
        },
        {
          provider: "beta",
          key: "DE",
          ...counts(2, 0, 0, 0, 0),
          delivery_rate: 0,
          conversion_rate: 0,
          cost: 0,
        },
        {
          provider: "beta",
          key: "FR",
          ...counts(4, 3, 2, 1, 1),
          delivery_rate: 0.6667,
          conversion_rate: 0.3333,
          cost: 0,
        },
      ]);
    });

    it("groups by route destination", async () => {
      const out = await ok(["insights", "--channel", "sms", "--since", "2h", "--group-by", "destination"]);
      expect(out.group_by).to.equal("destination");
      expect((out.groups as Json[]).map((g) => [g.provider, g.key, g.sent, g.cost])).to.deep.equal([
        ["alpha", "FR", 10, 0.24],
        ["alpha", "default", 5, 0.2],
        ["beta", "FR", 4, 0],
        ["beta", "default", 2, 0],
      ]);
    });

    it("reads one channel only", async () => {
      const out = await ok(["insights", "--channel", "voice", "--since", "2h"]);
      expect(out.groups).to.deep.equal([
        { provider: "alpha", ...counts(7, 0, 0, 0, 0), delivery_rate: 0, conversion_rate: 0, cost: 0 },
      ]);
      expect((await ok(["insights", "--channel", "whatsapp"])).groups).to.deep.equal([]);
    });

    it("covers the last 24 hours by default, and takes --since as a duration or an RFC 3339 time", async () => {
      const alphaSent = async (args: string[]) => {
        const out = await ok(["insights", ...args]);
        return {
          span: Date.parse(String(out.until)) - Date.parse(String(out.since)),
          sent: (out.groups as Json[])[0]?.sent,
        };
      };
      expect(await alphaSent([])).to.deep.equal({ span: 24 * HOUR_MS, sent: 16 });
      expect(await alphaSent(["--since", "30m"])).to.deep.equal({ span: 30 * 60_000, sent: 15 });
      expect(await alphaSent(["--since", "7d"])).to.deep.equal({ span: 7 * 24 * HOUR_MS, sent: 16 });
      const sixHoursAgo = new Date(Date.now() - 6 * HOUR_MS).toISOString();
      const out = await ok(["insights", "--since", sixHoursAgo]);
      expect(out.since).to.equal(sixHoursAgo);
      expect((out.groups as Json[])[0]).to.include({ provider: "alpha", sent: 16 });
      // Years back: the hours past DELIVERY_STATS_RETENTION_DAYS hold nothing and are not read.
      const offset = await ok(["insights", "--since", "2000-01-02T03:04:05+01:00"]);
      expect(offset.since).to.equal("2000-01-02T02:04:05.000Z");
      expect((offset.groups as Json[])[0]).to.include({ provider: "alpha", sent: 16 });
    });

    const bad: [string, string[], string][] = [
      [
        "a --since that is neither a time nor a duration",
        ["--since", "3w"],
        '--since: "3w" is not an RFC 3339 time',
      ],
      ["a --since without its time zone", ["--since", "2026-01-02T00:00:00"], "--since"],
      ["a --since after now", ["--since", new Date(Date.now() + 3_600_000).toISOString()], "--since"],
      [
        "an unknown --group-by",
        ["--group-by", "network"],
        "Allowed choices are provider, country, destination",
      ],
      ["an unknown channel", ["--channel", "fax"], "--channel must be one of"],
    ];
    for (const [what, args, mentions] of bad) {
      it(`refuses ${what}`, async () => {
        await refused(["insights", ...args], mentions);
      });
    }
  });
});

import { expect } from "chai";
import { Redis } from "ioredis";
import { silentLogger, type Logger } from "../../src/log.js";
import { Keys } from "../../src/redis/client.js";
import { DeliveryKeys } from "../../src/delivery/keys.js";
import { Router, type Plan } from "../../src/delivery/router.js";
import { RouteStore } from "../../src/delivery/routes.js";
import { DeliveryStats } from "../../src/delivery/stats.js";
import { openProviders, parseDeliveryProviders } from "../../src/messaging/providers.js";
import { DeliveryError } from "../../src/messaging/provider.js";
import type { Config } from "../../src/config.js";
import { testConfig } from "../support/app.js";
import { commandsDuring, startRedis, type RedisServer } from "../support/redis.js";

/**
 * docs/capacity.md#delivery-counters: a send adds to the delivery counters in the process; the
 * router writes the sums with one script call per hash (before each read of the figures, and when
 * the process stops), so a send writes no counter of its own to Redis.
 */
describe("delivery counters: summed in the process, written once per hash", () => {
  let server: RedisServer;
  let redis: Redis;
  const keys = new DeliveryKeys(new Keys("rf:"));
  let config: Config;
  const HOUR = 3_600_000;
  // The middle of an hour and of a conversion slice, so that every count falls in the same ones.
  const clock = Date.UTC(2031, 4, 6, 10, 32, 30);

  before(async () => {
    config = testConfig();
    server = await startRedis();
    redis = new Redis(server.url);
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });
  beforeEach(async () => {
    await redis.flushall();
  });

  const stats = () =>
    new DeliveryStats(redis, keys, {
      windowSeconds: config.ROUTE_WINDOW_SECONDS,
      retentionDays: config.DELIVERY_STATS_RETENTION_DAYS,
      now: () => clock,
    });

  function router(s: DeliveryStats, log: Logger = silentLogger): Router {
    const specs = parseDeliveryProviders(
      JSON.stringify([
        { name: "alpha", url: "http://127.0.0.1:9/alpha", cost: { default: 0.04 } },
        { name: "beta", url: "http://127.0.0.1:9/beta", cost: { default: 0.03 } },
      ]),
    );
    return new Router(openProviders(specs, { log: silentLogger }), {
      store: new RouteStore(redis, keys),
      stats: s,
      config,
      log,
      now: () => clock,
    });
  }

  const plan = (r: Router): Plan => r.plan("sms", { e164: "+33612345678", country: "FR", network: "" });

  it("writes 200 submits as one script call per hash touched, their sums exact", async () => {
    const s = stats();
    const r = router(s);
    const p = plan(r);
    const [alpha, beta] = p.providers;
    if (alpha === undefined || beta === undefined) throw new Error("two providers expected");
    // Redis knows the script once it was run (a first EVALSHA is answered NOSCRIPT, then EVAL).
    r.submitted(alpha, p, true);
    await r.refresh();
    await redis.flushall();
    const commands = await commandsDuring(server.url, async () => {
      for (let i = 0; i < 150; i++) r.submitted(alpha, p, true);
      for (let i = 0; i < 50; i++) r.submitted(beta, p, new DeliveryError("refused", false));
      // Nothing reaches Redis before the router's read (here asked for; every second in a process).
      expect(await redis.dbsize()).to.equal(0);
      await r.refresh();
    });
    const scripts = commands.filter((c) => ["evalsha", "eval"].includes(c[0]?.toLowerCase() ?? ""));
    // The hour's counters and the conversion slice: one call each.
    expect(scripts.map((c) => c[3])).to.have.members([
      keys.hourly("sms", Math.floor(clock / HOUR)),
      keys.conversion("sms", "default", Math.floor(clock / ((config.ROUTE_WINDOW_SECONDS * 1000) / 12))),
    ]);
    const rows = await s.hourly("sms", clock - HOUR, clock);
    const row = (provider: string) => rows.find((x) => x.provider === provider);
    expect(row("alpha")).to.include({ sent: 150, accepted: 150, cost: 150 * 40_000, country: "FR" });
    expect(row("beta")).to.include({ sent: 50, accepted: 0, cost: 0 });
    expect(Object.fromEntries(await s.figures("sms", "default"))).to.deep.equal({
      alpha: { sent: 150, accepted: 150, verified: 0 },
      beta: { sent: 50, accepted: 0, verified: 0 },
    });
    await r.stop();
  });

  it("writes the counts not yet written when the router stops", async () => {
    const s = stats();
    const r = router(s);
    const p = plan(r);
    const [alpha] = p.providers;
    if (alpha === undefined) throw new Error("a provider expected");
    for (let i = 0; i < 3; i++) r.submitted(alpha, p, true);
    r.verified("sms", "alpha default", "+33612345678");
    expect(await redis.dbsize()).to.equal(0);
    await r.stop();
    expect(Object.fromEntries(await s.figures("sms", "default"))).to.deep.equal({
      alpha: { sent: 3, accepted: 3, verified: 1 },
    });
  });

  it("logs a write that failed, never throws it, and does not write it twice", async () => {
    const warnings: string[] = [];
    const log: Logger = { ...silentLogger, warn: (message: string) => warnings.push(message) };
    const broken = new Redis(server.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    broken.on("error", () => undefined);
    const s = new DeliveryStats(broken, keys, {
      windowSeconds: config.ROUTE_WINDOW_SECONDS,
      retentionDays: config.DELIVERY_STATS_RETENTION_DAYS,
      now: () => clock,
    });
    const r = router(s, log);
    const p = plan(r);
    const [alpha] = p.providers;
    if (alpha === undefined) throw new Error("a provider expected");
    r.submitted(alpha, p, true);
    // Never connected, no offline queue: every write fails at once.
    await r.stop();
    expect(warnings).to.include("delivery counters not written");
    // What failed is not tried again: the next flush has nothing to write.
    await s.flush();
    expect(await redis.dbsize()).to.equal(0);
    broken.disconnect();
  });
});

import { randomUUID } from "node:crypto";
import { expect } from "chai";
import { destinationOf, type Destination } from "../../src/fraud/engine.js";
import type { RedisClient } from "../../src/redis/client.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { FRAUD_DEFAULTS } from "../support/fraud.js";
import { keysUnder } from "../support/redis.js";

const DAY = 86_400_000;
/** The bounds docs/fraud.md#what-redis-keeps promises (the measures there, with some room). */
const DESTINATION_BYTES_FULL = 700;
const DESTINATIONS_10K_BYTES = 8_500_000;
/** A source's day (docs/fraud.md#sources), a returning number, and a destination's two top sources. */
const SOURCE_BYTES = 200;
const NUMBER_BYTES = 200;
const TOP_SOURCES_BYTES = 200;

const bytes = async (redis: RedisClient, key: string) =>
  Number(await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0"));

/** A destination of `country` whose prefix is unique to `i` (the engine never parses it). */
function synthetic(i: number, country = "FR"): Destination {
  const e164 = `+9${String(i).padStart(5, "0")}123456`;
  return destinationOf({ e164, countryCode: country }, { mcc: "", mnc: "", carrier: "" }, 6);
}

describe("fraud engine: what Redis keeps (docs/fraud.md#what-redis-keeps)", () => {
  let app: TestApp;
  before(async function () {
    this.timeout(30_000);
    // The surge bound out of the way: these tests count bytes, not blocks.
    // Nothing blocked: the destinations are what is measured, not decision records.
    app = await startTestApp({
      ...FRAUD_DEFAULTS,
      FRAUD_NEW_DESTINATION_SENDS: "1000000",
      FRAUD_NEW_DESTINATION_BUDGET: "1000000",
    });
  });
  after(async () => app.stop());

  it(`keeps a destination in at most ${DESTINATION_BYTES_FULL} bytes, every slot of its window and baseline filled`, async function () {
    this.timeout(30_000);
    const { fraud, redis } = app.registry;
    const tenant = randomUUID();
    const d = synthetic(1);
    const key = fraud.keys.counters(tenant, `p:${d.prefix}`);
    // A day of traffic: a send every 5 minutes (each slice of the window), each converted.
    const today = Math.floor(Date.now() / DAY) * DAY;
    for (let t = today - DAY; t < today; t += 300_000) {
      await fraud.judge("v1", tenant, d, t);
      await fraud.converted("v1", tenant, d, t);
    }
    const day = await bytes(redis, key);
    // Then the baseline: one send on each day it keeps (FRAUD_BASELINE_DAYS + 1 slots).
    for (let k = 15; k >= 1; k--) {
      await fraud.judge("v1", tenant, d, today - k * DAY + 7 * 3_600_000 + 1);
      await fraud.converted("v1", tenant, d, today - k * DAY + 7 * 3_600_000 + 1);
    }
    await fraud.judge("v1", tenant, d);
    const full = await bytes(redis, key);
    expect(await redis.hlen(key)).to.equal(12 + 15);
    expect(await redis.call("OBJECT", "ENCODING", key)).to.equal("listpack");

    const sent = await bytes(redis, fraud.keys.sent(tenant, d.e164));
    // The index: one member more per destination.
    const index = fraud.keys.index(tenant);
    const one = await bytes(redis, index);
    for (let i = 2; i <= 101; i++) await fraud.judge("v1", tenant, synthetic(i));
    const member = ((await bytes(redis, index)) - one) / 100;
    console.log(
      `      a destination after a day: ${day} bytes, full: ${full}; a sent record: ${sent}; an index member: ${member}`,
    );
    expect(full).to.be.at.most(DESTINATION_BYTES_FULL);
    expect(sent).to.be.at.most(170);
    expect(member).to.be.at.most(40);
  });

  it(`keeps 10,000 destinations of a tenant in at most ${DESTINATIONS_10K_BYTES} bytes, sent records, index and rankings included`, async function () {
    this.timeout(120_000);
    const { fraud, redis } = app.registry;
    const tenant = randomUUID();
    const countries = ["FR", "DE", "GB", "ES", "IT", "PL", "NL", "BE", "PT", "SE"];
    const usedBefore = Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);
    // 10,000 prefixes (and so many sent records), over 10 countries: 10,010 destinations.
    const now = Date.now();
    for (let i = 0; i < 10_000; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, j) =>
          fraud.judge("v1", tenant, synthetic(i + j, countries[(i + j) % 10]), now),
        ),
      );
    }
    const usedAfter = Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);
    const prefix = fraud.keys.index(tenant).replace(/dests$/, "");
    let total = 0;
    const byKind = { counters: 0, sent: 0, index: 0, rankings: 0, other: 0 };
    for (const key of await keysUnder(redis, prefix)) {
      const b = await bytes(redis, key);
      total += b;
      if (key.includes(":d:")) byKind.counters += b;
      else if (key.includes(":sent:")) byKind.sent += b;
      else if (key.endsWith(":dests")) byKind.index += b;
      else if (key.includes(":rank:")) byKind.rankings += b;
      else byKind.other += b;
      expect(await redis.pttl(key), key).to.be.greaterThan(0);
    }
    console.log(
      `      10,000 destinations: ${total} bytes by MEMORY USAGE (${JSON.stringify(byKind)}), used_memory +${usedAfter - usedBefore}`,
    );
    expect(total).to.be.at.most(DESTINATIONS_10K_BYTES);
    // Past 128 members the index is a skip list: about 100 bytes a member.
    expect(byKind.index / 10_010).to.be.at.most(120);
    // Three ranking members a destination sent to today (the day, the two days ending today and
    // tomorrow: docs/fraud.md#insights), skip lists too.
    expect(byKind.rankings / 10_010).to.be.at.most(360);
    expect(byKind.other).to.equal(0);
  });

  it(`keeps a source's day in at most ${SOURCE_BYTES} bytes, a returning number in ${NUMBER_BYTES}, a destination's top sources in ${TOP_SOURCES_BYTES} more`, async function () {
    this.timeout(30_000);
    const { fraud, redis } = app.registry;
    const tenant = randomUUID();
    const countries = ["FR", "DE", "GB", "ES", "IT"];
    const source = { ip: "198.51.100.7", deviceId: "a-device-id-of-forty-characters-0000000" };
    const plain = synthetic(500, "FR");
    await fraud.judge("v2", tenant, plain);
    const before = await bytes(redis, fraud.keys.counters(tenant, `c:FR`));
    for (let i = 0; i < 20; i++)
      await fraud.judge("v2", tenant, synthetic(i, countries[i % 5]), Date.now(), source);
    const keys = fraud.sendKeys(tenant, plain, source);
    expect(keys.sources).to.have.length(3);
    const sources = await Promise.all(keys.sources.map((k) => bytes(redis, k)));
    // The FR destination now also holds the window's two top sources.
    const withTop = await bytes(redis, fraud.keys.counters(tenant, `c:FR`));
    // (The source was refused past its third country: a number of the second converts.)
    const d = synthetic(1, countries[1]);
    await fraud.converted("v2", tenant, d);
    const number = await bytes(redis, fraud.sendKeys(tenant, d).number);
    console.log(
      `      a source's day: ${JSON.stringify(sources)} bytes; a returning number: ${number}; two top sources: +${withTop - before}`,
    );
    for (const b of sources) expect(b).to.be.at.most(SOURCE_BYTES);
    expect(number).to.be.at.most(NUMBER_BYTES);
    expect(withTop - before).to.be.at.most(TOP_SOURCES_BYTES);
    for (const key of [...keys.sources, fraud.sendKeys(tenant, d).number]) {
      expect(await redis.pttl(key), key).to.be.greaterThan(0);
    }
  });
});

import { randomUUID } from "node:crypto";
import { expect } from "chai";
import type { RedisClient } from "../../src/redis/client.js";
import { parseE164 } from "../../src/phone/e164.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { rest, type Json, type RestAnswer } from "../support/rest.js";
import { fundedAccount } from "../support/v1.js";
import { keysUnder, waitFor } from "../support/redis.js";

/** What Redis holds of one key: its bytes (MEMORY USAGE, SAMPLES 0) and when it expires (ms, -1: never). */
interface Held {
  bytes: number;
  expiresAt: number;
}

/** Every key under `prefixes`, with what it holds. */
async function holding(redis: RedisClient, prefixes: string[]): Promise<Map<string, Held>> {
  const keys: string[] = [];
  for (const prefix of prefixes) keys.push(...(await keysUnder(redis, prefix)));
  const out = new Map<string, Held>();
  const pipeline = redis.pipeline();
  for (const key of keys) {
    pipeline.call("MEMORY", "USAGE", key, "SAMPLES", "0");
    pipeline.call("PEXPIRETIME", key);
  }
  const replies = (await pipeline.exec()) ?? [];
  keys.forEach((key, i) => {
    const bytes = replies[2 * i]?.[1];
    const at = Number(replies[2 * i + 1]?.[1]);
    // A key gone between the scan and the reads (expired) answers null and -2.
    if (bytes !== null && bytes !== undefined && at !== -2)
      out.set(key, { bytes: Number(bytes), expiresAt: at });
  });
  return out;
}

/** The keys created, grown or kept longer between two readings. */
function changed(before: Map<string, Held>, after: Map<string, Held>): Map<string, Held> {
  const out = new Map<string, Held>();
  for (const [key, now] of after) {
    const was = before.get(key);
    const later = (at: number) => (at === -1 ? Number.POSITIVE_INFINITY : at);
    if (was === undefined || now.bytes > was.bytes || later(now.expiresAt) > later(was.expiresAt)) {
      out.set(key, now);
    }
  }
  return out;
}

/** Runs `task` for 0..n-1, `width` at a time. */
async function inBatches(n: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  for (let start = 0; start < n; start += width) {
    await Promise.all(Array.from({ length: Math.min(width, n - start) }, (_, j) => task(start + j)));
  }
}

/**
 * German mobile numbers whose fraud prefix destination (`+` and 6 digits) differs from one to the
 * next: 70 prefixes, past the new-destination budget.
 */
const DE_RANGES = ["151", "152", "155", "157", "159", "162", "163"];
function dePrefixNumber(i: number): string {
  return `+49${DE_RANGES[Math.floor(i / 10) % DE_RANGES.length]}${i % 10}2345678`;
}

const RETENTION_MS = 3_600_000;
const DAY = 86_400_000;
/** Between the script's clock (the service's) and the reading: the retention is counted from the send. */
const SLACK_MS = 1_000;

describe("a send refused before anything is sent keeps nothing past REFUSED_RETENTION_SECONDS (decisions 9.6)", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let hooks: Receiver;
  let redis: RedisClient;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    hooks = await Receiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      // The documented budget (the tests of other features turn it off with the surges).
      FRAUD_NEW_DESTINATION_BUDGET: "30",
      WEBHOOK_BACKOFF_BASE_MS: "20",
      WEBHOOK_BACKOFF_MAX_MS: "100",
    });
    redis = app.registry.redis;
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await hooks.close();
  });

  /** Every key of this app: its own prefix and its webhook queue's (src/webhooks/module.ts). */
  const prefixes = () => [app.config.REDIS_KEY_PREFIX, `{${app.config.REDIS_KEY_PREFIX}bull}`];

  async function account(): Promise<{ uuid: string; key: string }> {
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Refused", 1_000_000);
    return { uuid: account.customerUuid, key: apiKey };
  }

  const v1Send = (c: { uuid: string; key: string }, phone: string, extra: Json = {}): Promise<RestAnswer> =>
    rest(app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: c.uuid, phone_number: phone, ...extra },
      { "x-api-key": c.key },
    );

  const v2Create = (c: { key: string }, phone: string, options?: Json): Promise<RestAnswer> =>
    rest(app.baseUrl).call("POST", "/v2/verification", {
      body: { target: { type: "phone_number", value: phone }, ...(options ? { options } : {}) },
      bearer: c.key,
    });

  /** Waits until no webhook of the customer's authentications awaits delivery. */
  async function delivered(customer: string): Promise<void> {
    const pending = app.registry.verify.authKeys(customer, randomUUID()).pending;
    await waitFor(async () => (await redis.scard(pending)) === 0, 60_000);
  }

  it("1,000 sends to one number from a 1.00 EUR account: the 995 refused keep nothing past the retention, nor do V2 blocked ones", async function () {
    this.timeout(300_000);
    const c = await account();
    const phone = "+33655123456";
    // RATE_LIMIT_NUMBER (5/600) lets five through: they are accepted, charged and kept as usual.
    for (let i = 0; i < 5; i++) expect((await v1Send(c, phone)).body.status).to.equal("pending");
    // Their delivery counters are written by the service within a second (docs/capacity.md#delivery-counters).
    const prefix = app.config.REDIS_KEY_PREFIX;
    const written = async (kind: string) => (await redis.keys(`${prefix}${kind}:*`)).length > 0;
    await waitFor(async () => (await written("dstat")) && (await written("rconv")));
    // Germany is blocked for the account: V2 creations there are `blocked` by the fraud engine.
    await redis.hset(app.registry.fraud.keys.policy(c.uuid), "g:DE", "block");
    // The start's background work completes the lookup overrides once, and announces it last by
    // their version: not a send's key.
    const overridesAnnounced = app.registry.keys.key("numovr", "prefixes", "version");
    await waitFor(async () => (await redis.exists(overridesAnnounced)) === 1, 60_000);
    const before = await holding(redis, prefixes());
    const indexed = await redis.zcard(app.registry.fraud.keys.index(c.uuid));

    const refused: { uuid: string; hooked: boolean }[] = [];
    const seen = hooks.received.length;
    const startedAt = Date.now();
    await inBatches(995, 8, async (i) => {
      const hooked = i % 10 === 0;
      const sent = await v1Send(c, phone, hooked ? { callback_url: hooks.url } : {});
      expect(sent.body.status, sent.text).to.equal("rate_limited");
      refused.push({ uuid: String(sent.body.authentication_uuid), hooked });
    });
    await inBatches(20, 8, async (i) => {
      const created = await v2Create(c, phone, i % 2 === 0 ? { callback_url: hooks.url } : undefined);
      expect(created.body, created.text).to.include({ status: "blocked", reason: "repeated_attempts" });
    });
    const destinations = 70;
    await inBatches(destinations, 8, async (i) => {
      const created = await v2Create(c, dePrefixNumber(i));
      expect(created.body, created.text).to.include({ status: "blocked", reason: "suspicious" });
    });
    const endedAt = Date.now();
    const refusedSends = 995 + 20 + destinations;

    // Each refused V1 send with a callback_url still POSTs its `authentication` event.
    const hookedCount = refused.filter((r) => r.hooked).length;
    const received = (await hooks.until((r) => r.length >= seen + hookedCount, 60_000)).slice(seen);
    const events = received.map((r) => JSON.parse(r.body) as { type: string; payload: Json });
    expect(events).to.have.length(hookedCount);
    for (const e of events) expect(e).to.deep.include({ type: "authentication" });
    expect(events.map((e) => e.payload.status)).to.deep.equal(Array(hookedCount).fill("rate_limited"));
    expect(new Set(events.map((e) => e.payload.authentication_uuid))).to.deep.equal(
      new Set(refused.filter((r) => r.hooked).map((r) => r.uuid)),
    );
    await delivered(c.uuid);

    // Nothing was charged or sent for them.
    expect((await app.registry.accounts.get(c.uuid))?.balanceMicros).to.equal(1_000_000 - 5 * 50_000);
    expect(sms.messages.filter((m) => m.to === phone)).to.have.length(5);

    // A refused authentication reads back by its uuid, with its refused attempt.
    for (const r of [refused.find((x) => !x.hooked), refused.find((x) => x.hooked)]) {
      const read = await rest(app.baseUrl).get(`/v1/authentication/${r?.uuid ?? ""}`, { "x-api-key": c.key });
      expect(read.status, read.text).to.equal(200);
      expect(read.body).to.include({ uuid: r?.uuid, phone_number: phone });
      expect((read.body.events as Json[]).map((e) => [e.type, e.status])).to.deep.equal([
        ["attempt", "rate_limited"],
      ]);
    }

    const after = await holding(redis, prefixes());
    const grown = changed(before, after);
    const now = Date.now();
    const ttl = (h: Held) => (h.expiresAt === -1 ? Number.POSITIVE_INFINITY : h.expiresAt - now);
    const tag = `{${c.uuid}}`;
    const fraudKeys = new RegExp(`:fraud:\\{${c.uuid}\\}:`);
    const destinationCounters = new RegExp(`:fraud:\\{${c.uuid}\\}:d:(?!all$)`);
    const decisions = app.registry.fraud.keys.decisions(c.uuid);
    const windowSeconds = Math.max(
      ...[app.config.RATE_LIMIT_NUMBER, app.config.RATE_LIMIT_ACCOUNT, app.config.SPAM_RANGE_BURST].map(
        (w) => w?.windowSeconds ?? 0,
      ),
    );
    const queueKeys: string[] = [];
    const problems: string[] = [];
    const bytes = { kept: 0, counters: 0 };
    for (const [key, h] of grown) {
      if (key.startsWith(`{${app.config.REDIS_KEY_PREFIX}bull}`)) {
        queueKeys.push(key);
        continue;
      }
      // The account (its balance, unchanged) and the index of customers with holds: one entry each.
      const { verify } = app.registry;
      if (key === verify.keys.accounts.account(c.uuid) || key === verify.holdIndexKey()) continue;
      expect(key, "every key of the sends is the customer's").to.include(tag);
      if (key === decisions) {
        // The fraud engine's decision records: 30 days, at most FRAUD_DECISIONS_MAX (docs/fraud.md#decisions).
        bytes.counters += h.bytes;
        if (ttl(h) > 30 * DAY) problems.push(`${key}: decisions kept ${ttl(h)} ms`);
        expect(await redis.xlen(key)).to.be.at.most(app.config.FRAUD_DECISIONS_MAX);
      } else if (fraudKeys.test(key)) {
        // Counters and rankings by day: the baseline, two days more and the day in progress.
        bytes.counters += h.bytes;
        const days = (app.config.FRAUD_BASELINE_DAYS + 3) * DAY;
        if (ttl(h) > days) problems.push(`${key}: fraud counters kept ${ttl(h)} ms`);
      } else if (/:(rl|spam):/.test(key)) {
        bytes.counters += h.bytes;
        if (ttl(h) > windowSeconds * 1000) problems.push(`${key}: a window kept ${ttl(h)} ms`);
      } else {
        bytes.kept += h.bytes;
        if (!(ttl(h) > 0 && ttl(h) <= RETENTION_MS + SLACK_MS)) problems.push(`${key}: kept ${ttl(h)} ms`);
      }
    }
    const perSend = Math.round(bytes.kept / refusedSends);
    console.log(
      `      ${refusedSends} refused sends: ${grown.size} keys created or grown; ${bytes.kept} bytes kept ` +
        `for the retention (${perSend} per refused send), ${bytes.counters} in windows and fraud ` +
        `counters; webhook queue keys touched: ${queueKeys.length}`,
    );
    expect(problems.slice(0, 10), `${problems.length} keys outlive their bound`).to.deep.equal([]);
    // The webhook queue keeps no key per delivery (BullMQ removes a job once it is done).
    expect(queueKeys.length, queueKeys.join(", ")).to.be.at.most(10);
    // Bytes are not the point (they last an hour): the bound only catches a send that keeps far more.
    expect(perSend).to.be.at.most(1_000);

    // Blocked sends added destinations only within the budget (FRAUD_NEW_DESTINATION_BUDGET, 30).
    const windowMs = app.config.FRAUD_WINDOW_SECONDS * 1000;
    const windows = Math.floor(endedAt / windowMs) - Math.floor(startedAt / windowMs) + 1;
    const budget = app.config.FRAUD_NEW_DESTINATION_BUDGET * windows;
    const added = [...grown.keys()].filter((k) => destinationCounters.test(k));
    expect(added.length, added.join(", ")).to.be.at.most(budget);
    expect((await redis.zcard(app.registry.fraud.keys.index(c.uuid))) - indexed).to.be.at.most(budget);
    // Every refused send is still counted for the tenant, and each was recorded.
    expect(await redis.xlen(decisions)).to.equal(destinations);
  });

  it("keeps a refused send's webhook until it is delivered, then no longer than the retention", async function () {
    this.timeout(60_000);
    const c = await account();
    const phone = "+33655123457";
    for (let i = 0; i < 5; i++) expect((await v1Send(c, phone)).body.status).to.equal("pending");
    // Their delivery counters are written by the service within a second (docs/capacity.md#delivery-counters).
    const prefix = app.config.REDIS_KEY_PREFIX;
    const written = async (kind: string) => (await redis.keys(`${prefix}${kind}:*`)).length > 0;
    await waitFor(async () => (await written("dstat")) && (await written("rconv")));
    const seen = hooks.received.length;
    let down = true;
    let refusedPosts = 0;
    hooks.answer = () => {
      if (!down) return 200;
      refusedPosts += 1;
      return 503;
    };
    try {
      const sent = await v1Send(c, phone, { callback_url: hooks.url, correlation_id: "order-7" });
      expect(sent.body.status).to.equal("rate_limited");
      const uuid = String(sent.body.authentication_uuid);
      const keys = app.registry.verify.authKeys(c.uuid, uuid);
      // The receiver fails: the outbox retries, and the stream stays past the retention meanwhile.
      await waitFor(() => Promise.resolve(refusedPosts >= 2));
      expect(await redis.sismember(keys.pending, keys.events)).to.equal(1);
      expect(await redis.pttl(keys.auth)).to.be.within(1, RETENTION_MS);
      expect(await redis.pttl(keys.events)).to.be.above(RETENTION_MS);
      expect(await redis.pttl(keys.hook)).to.be.above(RETENTION_MS);

      down = false;
      const [hook] = (await hooks.until((r) => r.length > seen, 30_000)).slice(seen);
      expect(JSON.parse(hook?.body ?? "{}")).to.deep.include({
        type: "authentication",
        correlation_id: "order-7",
      });
      await delivered(c.uuid);
      for (const key of [keys.auth, keys.events, keys.hook, `${keys.events}:delivered`]) {
        const left = await redis.pttl(key);
        expect(left, key).to.be.within(1, RETENTION_MS);
      }
    } finally {
      hooks.answer = () => 200;
    }
  });

  it("counts blocked sends at new destinations only FRAUD_NEW_DESTINATION_BUDGET times a window", async () => {
    const tenant = randomUUID();
    const fraud = app.registry.fraud;
    await redis.hset(fraud.keys.policy(tenant), "g:DE", "block");
    const windowMs = app.config.FRAUD_WINDOW_SECONDS * 1000;
    const start = (Math.floor(Date.now() / windowMs) + 1) * windowMs;
    const judge = async (i: number, at: number) => {
      const phone = parseE164(dePrefixNumber(i));
      if (phone === undefined) throw new Error(dePrefixNumber(i));
      const d = fraud.destination(phone, { mcc: "262", mnc: "01", carrier: "" });
      expect((await fraud.judge("v2", tenant, d, at)).action).to.equal("block");
    };
    const listed = () => redis.zrange(fraud.keys.index(tenant), "0", "-1");
    const counters = (dest: string) => redis.hgetall(fraud.keys.counters(tenant, dest));
    const blockedOn = (h: Record<string, string>, day: number) =>
      Number((h[`d${day % (app.config.FRAUD_BASELINE_DAYS + 1)}`] ?? "0,0,0,0").split(",")[3]);

    // Country, network and 28 prefixes: the budget; the 40 other prefixes add nothing.
    for (let i = 0; i < 70; i++) await judge(i, start + i);
    const first = await listed();
    expect(first).to.have.length(app.config.FRAUD_NEW_DESTINATION_BUDGET);
    expect(first).to.include.members(["c:DE", "n:262-01", "p:+491510", "p:+491557"]);
    expect(first).not.to.include("p:+491558");
    expect(await redis.exists(fraud.keys.counters(tenant, "p:+491558"))).to.equal(0);
    // A destination already counted keeps counting every block, and so does the tenant.
    const day = Math.floor(start / DAY);
    expect(blockedOn(await counters("c:DE"), day)).to.equal(70);
    expect(blockedOn(await counters("all"), day)).to.equal(70);

    // The next window has a budget of its own: 30 prefixes more.
    for (let i = 0; i < 70; i++) await judge(i, start + windowMs + i);
    const second = await listed();
    expect(second).to.have.length(2 * app.config.FRAUD_NEW_DESTINATION_BUDGET);
    expect(second).to.include("p:+491627");
    expect(second).not.to.include("p:+491628");
  });
});

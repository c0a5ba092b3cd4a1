import { expect } from "chai";
import { Redis } from "ioredis";
import { loadConfig } from "../../src/config.js";
import { Metrics } from "../../src/observability/metrics.js";
import { endpointOf } from "../../src/webhooks/endpoints.js";
import { outboxKeys } from "../../src/webhooks/keys.js";
import type { WebhookOutbox } from "../../src/webhooks/outbox.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { SmsReceiver } from "../support/receivers.js";
import { startRedis, type RedisServer } from "../support/redis.js";
import { fundedAccount, postSend } from "../support/v1.js";
import { eventually, Harness, sleep, startReceiver, type Receiver } from "../support/webhooks.js";

/** WEBHOOK_ENDPOINT_CONCURRENCY's default, which these outboxes keep. */
const PER_ENDPOINT = 2;
const TIMEOUT_MS = 2_000;

describe("webhook deliveries shared fairly between endpoints", function () {
  // 2,000 deliveries to queue, wait for and deliver on a machine shared with other runs.
  this.timeout(300_000);
  let server: RedisServer;
  let plain: Redis;
  let h: Harness;

  before(async () => {
    server = await startRedis();
    plain = new Redis(server.url);
  });
  after(async () => {
    plain.disconnect();
    await server.stop();
  });
  beforeEach(() => {
    h = Harness.forUrl(server.url);
  });
  afterEach(async () => {
    await h.close();
  });

  /**
   * One account's streams of one event each (as its authentications' refused sends make), kicked
   * as the domain does.
   */
  async function queue(
    outbox: WebhookOutbox,
    url: string,
    streams: number,
    account: string,
  ): Promise<Map<string, string[]>> {
    const lists = Array.from({ length: streams }, () => h.stream());
    const ids = new Map<string, string[]>();
    for (let i = 0; i < lists.length; i += 100) {
      await Promise.all(
        lists.slice(i, i + 100).map(async (list) => {
          ids.set(list, await h.append(list, url, 1, account));
          await outbox.kick(list);
        }),
      );
    }
    return ids;
  }

  /**
   * Another account's event to a receiver that answers at once: how long from the moment it is
   * enqueued until its POST arrives.
   */
  async function enqueueToArrival(outbox: WebhookOutbox, rx: Receiver, arrivals: Map<string, number>) {
    const list = h.stream();
    const enqueued = Date.now();
    const [id = ""] = await h.append(list, rx.url);
    await outbox.kick(list);
    await eventually(`another account's event ${id} arrives`, () => arrivals.has(id), 60_000);
    return arrivals.get(id)! - enqueued;
  }

  it("delivers another account's webhook within a second while 2,000 deliveries wait for an endpoint that never answers, and delivers those, in order, once it answers", async () => {
    let hang = true;
    const hanging = await h.receiver(() => (hang ? "hang" : 200));
    const slow = await h.receiver(() => sleep(1_000).then(() => 200));
    const arrivals = new Map<string, number>();
    const healthy = await h.receiver((req) => {
      arrivals.set(req.id, Date.now());
      return 200;
    });
    const outbox = h.outbox({
      timeoutMs: TIMEOUT_MS,
      concurrency: 8,
      backoff: { baseMs: 200, maxDelayMs: 1_000 },
      parkMaxMs: 5_000,
    });
    await outbox.start();

    const stuck = await queue(outbox, hanging.url, 2_000, "acct:hangs");
    // Streams of several events to the same endpoint: their order must hold through it all.
    const ordered = new Map<string, string[]>();
    for (let s = 0; s < 10; s++) {
      const list = h.stream();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(...(await h.append(list, `${hanging.url}/${i}?n=${i}`, 1, "acct:hangs")));
        await outbox.kick(list);
      }
      ordered.set(list, ids);
    }
    await queue(outbox, slow.url, 30, "acct:slow");

    const first = await enqueueToArrival(outbox, healthy, arrivals);
    expect(first, "enqueue to arrival, right behind 2,050 deliveries to an endpoint that hangs").to.be.below(
      1_000,
    );
    // Its POSTs time out, it is paused, its deliveries come back and are parked again: meanwhile
    // other endpoints go on as usual.
    await eventually("the endpoint that hangs paused", () => outbox.pausedEndpoints() === 1, 60_000);
    const whilePaused = await enqueueToArrival(outbox, healthy, arrivals);
    expect(whilePaused, "enqueue to arrival while the endpoint is paused").to.be.below(1_000);
    await eventually("a probe after the pause", () => hanging.requests.length > PER_ENDPOINT, 60_000);
    const afterProbe = await enqueueToArrival(outbox, healthy, arrivals);
    expect(afterProbe, "enqueue to arrival while the endpoint is probed").to.be.below(1_000);

    expect(hanging.peakOpen, "POSTs open at once at the endpoint that hangs").to.equal(PER_ENDPOINT);
    expect(slow.peakOpen, "POSTs open at once at the slow endpoint").to.equal(PER_ENDPOINT);
    expect(healthy.requests.map((r) => r.status)).to.deep.equal([200, 200, 200]);

    // It answers again: every delivery kept for it arrives, none lost, each stream in order.
    hang = false;
    const expected = [...stuck.values(), ...ordered.values()].flat();
    await eventually(
      "every delivery to the endpoint that hung accepted",
      () => new Set(hanging.accepted()).size === expected.length,
      240_000,
    );
    expect(new Set(hanging.accepted())).to.deep.equal(new Set(expected));
    expect(hanging.peakOpen, "never more open at once, recovery included").to.equal(PER_ENDPOINT);
    for (const [list, ids] of ordered) {
      expect(
        hanging.accepted().filter((id) => ids.includes(id)),
        list,
      ).to.deep.equal(ids);
    }
    const lists = [...stuck.keys(), ...ordered.keys()];
    await eventually("every stream out of its pending set", async () => {
      const pending = await Promise.all(
        lists.map((list) => h.redis.sismember(outboxKeys(list, h.keys).pending, list)),
      );
      return pending.every((p) => p === 0);
    });
    const counts = await Promise.all(lists.map((list) => h.redis.get(outboxKeys(list, h.keys).delivered)));
    expect(counts.map(Number)).to.deep.equal(lists.map((list) => (ordered.has(list) ? 5 : 1)));
    expect(outbox.pausedEndpoints()).to.equal(0);
    const paused = h.logs.entries.filter((e) => e.msg === "webhook endpoint paused: it does not answer");
    expect(paused, "each pause logged").to.not.be.empty;
    expect(JSON.stringify(paused), "the endpoint's URL is not logged").to.not.include(hanging.url);
  });

  it("keeps to the endpoint's share in each process: two processes, at most two POSTs open each", async () => {
    const slow = await h.receiver(() => sleep(300).then(() => 200));
    const one = h.outbox({ concurrency: 4 });
    const two = h.outbox({ concurrency: 4 });
    await Promise.all([one.start(), two.start()]);
    const ids = await queue(one, slow.url, 40, "acct:slow");
    await eventually("every delivery accepted", () => new Set(slow.accepted()).size === ids.size, 120_000);
    expect(slow.peakOpen).to.be.at.most(2 * PER_ENDPOINT);
    expect(new Set(slow.accepted())).to.deep.equal(new Set([...ids.values()].flat()));
  });

  it("names an endpoint by its owner and its URL's scheme, host and port", () => {
    const account = (url: string, owner = "acct:a") => endpointOf({ url, secret_ref: owner });
    expect(account("https://Hooks.Example.com:443/a/b?auth=1#x")).to.equal(
      account("https://hooks.example.com/c/d"),
    );
    expect(account("http://127.0.0.1:8080/a")).to.not.equal(account("http://127.0.0.1:8081/a"));
    expect(account("http://127.0.0.1:8080/a")).to.not.equal(account("https://127.0.0.1:8080/a"));
    expect(account("https://hooks.example.com/a")).to.not.equal(
      account("https://hooks.example.com/a", "acct:b"),
    );
    expect(account("file:///etc/passwd")).to.equal(undefined);
    expect(endpointOf({})).to.equal(undefined);
  });

  it("refuses WEBHOOK_ENDPOINT_CONCURRENCY outside 1 to 255 or not below WEBHOOK_CONCURRENCY", () => {
    expect(loadConfig({}).WEBHOOK_ENDPOINT_CONCURRENCY).to.equal(PER_ENDPOINT);
    expect(loadConfig({ WEBHOOK_ENDPOINT_CONCURRENCY: "7" }).WEBHOOK_ENDPOINT_CONCURRENCY).to.equal(7);
    expect(() => loadConfig({ WEBHOOK_ENDPOINT_CONCURRENCY: "0" })).to.throw(
      'invalid WEBHOOK_ENDPOINT_CONCURRENCY: must be a whole number from 1 to 255 (got "0")',
    );
    expect(() => loadConfig({ WEBHOOK_ENDPOINT_CONCURRENCY: "8" })).to.throw(
      'invalid WEBHOOK_ENDPOINT_CONCURRENCY: must be below WEBHOOK_CONCURRENCY (8), or one endpoint that hangs could hold every delivery (got "8")',
    );
    // Unset, it fits under a small WEBHOOK_CONCURRENCY, which started before the setting existed.
    expect(loadConfig({ WEBHOOK_CONCURRENCY: "2" }).WEBHOOK_ENDPOINT_CONCURRENCY).to.equal(1);
    expect(loadConfig({ WEBHOOK_CONCURRENCY: "1" }).WEBHOOK_ENDPOINT_CONCURRENCY).to.equal(1);
    expect(() => loadConfig({ WEBHOOK_CONCURRENCY: "2", WEBHOOK_ENDPOINT_CONCURRENCY: "2" })).to.throw(
      'invalid WEBHOOK_ENDPOINT_CONCURRENCY: must be below WEBHOOK_CONCURRENCY (2), or one endpoint that hangs could hold every delivery (got "2")',
    );
  });

  it("shows the endpoints a process holds paused as a gauge", async () => {
    const metrics = new Metrics();
    metrics.webhookEndpointsPaused = () => 3;
    const { body } = await metrics.exposition();
    expect(body).to.match(/^ringfence_webhook_endpoints_paused 3$/m);
  });
});

describe("webhooks of the running service while one account's receiver hangs", function () {
  this.timeout(300_000);
  let app: TestApp;
  let sms: SmsReceiver;
  let hanging: Receiver;
  let healthy: Receiver;
  const arrivals: number[] = [];

  before(async () => {
    sms = await SmsReceiver.start();
    hanging = await startReceiver(() => "hang");
    healthy = await startReceiver(() => {
      arrivals.push(Date.now());
      return 200;
    });
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      WEBHOOK_BACKOFF_BASE_MS: "200",
      WEBHOOK_BACKOFF_MAX_MS: "1000",
    });
  });
  after(async () => {
    await app.stop();
    await Promise.all([sms.close(), hanging.close(), healthy.close()]);
  });

  it("delivers another account's webhook within a second after 200 refused sends whose callback_url never answers", async () => {
    const accounts = app.registry.accounts;
    const stuck = await fundedAccount(accounts, "Hangs");
    const other = await fundedAccount(accounts, "Other");
    const phone = "+33655123457";
    // RATE_LIMIT_NUMBER (5/600) lets five through; the 200 after them are refused, free.
    for (let i = 0; i < 205; i += 5) {
      const sent = await Promise.all(
        Array.from({ length: 5 }, () =>
          postSend(app.baseUrl, stuck.apiKey, {
            customer_uuid: stuck.account.customerUuid,
            phone_number: phone,
            callback_url: hanging.url,
          }),
        ),
      );
      for (const s of sent) expect(s.status, s.text).to.equal(200);
    }
    await eventually("the receiver that hangs holds its POSTs", () => hanging.open > 0, 60_000);

    const enqueued = Date.now();
    const sent = await postSend(app.baseUrl, other.apiKey, {
      customer_uuid: other.account.customerUuid,
      phone_number: "+33655123458",
      callback_url: healthy.url,
    });
    expect(sent.body.status, sent.text).to.equal("pending");
    await eventually("the other account's first webhook", () => arrivals.length > 0, 60_000);
    expect(arrivals[0]! - enqueued, "send to first webhook, behind 205 streams that hang").to.be.below(1_000);
    expect(hanging.peakOpen, "POSTs open at once at the receiver that hangs").to.equal(PER_ENDPOINT);
  });
});

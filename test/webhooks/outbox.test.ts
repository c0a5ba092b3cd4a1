import { expect } from "chai";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { startRedis, type RedisServer } from "../support/redis.js";
import { verifyWebhook } from "../../src/webhooks/signature.js";
import { WEBHOOK_QUEUE_NAME } from "../../src/webhooks/queue.js";
import { outboxKeys } from "../../src/webhooks/keys.js";
import { eventually, Harness, sleep } from "../support/webhooks.js";

describe("webhook outbox", () => {
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

  async function deliveredCount(list: string): Promise<number> {
    return Number((await h.redis.get(outboxKeys(list, h.keys).delivered)) ?? "0");
  }
  async function isPending(list: string): Promise<boolean> {
    return (await h.redis.sismember(outboxKeys(list, h.keys).pending, list)) === 1;
  }
  async function settled(list: string, n: number): Promise<void> {
    await eventually(
      `${list} delivered ${n} and out of pending`,
      async () => (await deliveredCount(list)) === n && !(await isPending(list)),
    );
  }

  it("delivers a signed envelope that verifyWebhook accepts", async () => {
    const rx = await h.receiver();
    const outbox = h.outbox();
    await outbox.start();
    const list = h.stream();
    const [id] = await h.append(list, rx.url);
    await outbox.kick(list);
    await settled(list, 1);

    expect(rx.requests).to.have.length(1);
    const req = rx.requests[0]!;
    const stored = await h.redis.lindex(list, 0);
    expect(req.method).to.equal("POST");
    expect(req.body).to.equal(stored);
    expect(JSON.parse(req.body)).to.include({ id, type: "attempt" });
    expect(req.headers["content-type"]).to.equal("application/json");
    expect(req.headers["x-webhook-id"]).to.equal(id);
    expect(req.headers["user-agent"]).to.match(/^ringfence-webhooks\//);
    const signature = req.headers["x-webhook-signature"];
    expect(signature).to.match(/^t=\d+,v1=[0-9a-f]{64}$/);
    const now = Math.floor(Date.now() / 1000);
    expect(verifyWebhook(h.secretOf(list), req.body, String(signature), 300, now)).to.equal(true);
    expect(verifyWebhook("whsec_other", req.body, String(signature), 300, now)).to.equal(false);
    expect(verifyWebhook(h.secretOf(list), `${req.body} `, String(signature), 300, now)).to.equal(false);
    expect(verifyWebhook(h.secretOf(list), req.body, String(signature), 300, now + 301)).to.equal(false);
  });

  it("delivers the events of one stream in order while the receiver fails for a while", async () => {
    const failures = 5;
    const rx = await h.receiver((_req, i) => (i < failures ? 503 : 204));
    const outbox = h.outbox();
    await outbox.start();
    const list = h.stream();
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      ids.push(...(await h.append(list, rx.url)));
      await outbox.kick(list);
      if (i % 3 === 0) await sleep(40);
    }
    await settled(list, ids.length);

    expect(rx.accepted()).to.deep.equal(ids);
    expect(rx.requests.filter((r) => r.status === 503)).to.have.length(failures);
    // Order held throughout: a request only ever repeats the event before it (a retry).
    const order = rx.requests.map((r) => ids.indexOf(r.id));
    expect(order).to.not.include(-1);
    for (let i = 1; i < order.length; i++) expect(order[i]).to.be.at.least(order[i - 1]!);
  });

  it("delivers events appended while a delivery is in flight", async () => {
    let release = (): void => undefined;
    const held = new Promise<number>((resolve) => {
      release = () => {
        resolve(200);
      };
    });
    const rx = await h.receiver((_req, i) => (i === 0 ? held : 200));
    const outbox = h.outbox();
    await outbox.start();
    const list = h.stream();
    const ids = await h.append(list, rx.url);
    await outbox.kick(list);
    await eventually("the first POST in flight", () => rx.requests.length === 1);
    for (let i = 0; i < 3; i++) {
      ids.push(...(await h.append(list, rx.url)));
      await outbox.kick(list);
    }
    await sleep(300);
    expect(rx.requests, "nothing overtakes the POST in flight").to.have.length(1);
    release();
    await settled(list, 4);
    await sleep(300);
    expect(rx.requests.map((r) => r.id)).to.deep.equal(ids);
  });

  it("keeps streams independent: a receiver that hangs does not delay another stream", async () => {
    const hanging = await h.receiver(() => "hang");
    const healthy = await h.receiver();
    const outbox = h.outbox({ timeoutMs: 3_000, concurrency: 4 });
    await outbox.start();
    const a = h.stream();
    const b = h.stream();
    await h.append(a, hanging.url, 2);
    await outbox.kick(a);
    await eventually("stream A's POST in flight", () => hanging.requests.length === 1);
    const started = Date.now();
    const ids = await h.append(b, healthy.url, 3);
    await outbox.kick(b);
    await settled(b, 3);
    expect(Date.now() - started).to.be.below(1_000);
    expect(healthy.accepted()).to.deep.equal(ids);
    expect(await deliveredCount(a)).to.equal(0);
    expect(await isPending(a)).to.equal(true);
  });

  it("lets two processes share the streams: each event once, in order per stream", async () => {
    const rx = await h.receiver(() => sleep(Math.random() * 20).then(() => 200));
    const one = h.outbox({ concurrency: 3 });
    const two = h.outbox({ concurrency: 3 });
    await Promise.all([one.start(), two.start()]);
    const streams = Array.from({ length: 8 }, () => h.stream());
    const expected = new Map<string, string[]>();
    await Promise.all(
      streams.map(async (list, s) => {
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) {
          ids.push(...(await h.append(list, rx.url)));
          await (s % 2 === 0 ? one : two).kick(list);
          await (s % 2 === 0 ? two : one).kick(list);
        }
        expected.set(list, ids);
      }),
    );
    await Promise.all(streams.map((list) => settled(list, 5)));

    const all = [...expected.values()].flat();
    expect(rx.requests).to.have.length(all.length);
    for (const ids of expected.values()) {
      expect(rx.accepted().filter((id) => ids.includes(id))).to.deep.equal(ids);
    }
  });

  describe("survives a restart", () => {
    it("delivers what a crash left behind: appended and never kicked, or half delivered", async () => {
      const rx = await h.receiver();
      const never = h.stream();
      const half = h.stream();
      const done = h.stream();
      const neverIds = await h.append(never, rx.url, 3);
      const halfIds = await h.append(half, rx.url, 3);
      await h.append(done, rx.url, 2);
      // A crash after the first of `half` was delivered, and after all of `done` (before the SREM).
      await h.redis.set(outboxKeys(half, h.keys).delivered, "1");
      await h.redis.set(outboxKeys(done, h.keys).delivered, "2");

      await h.outbox().start();
      await settled(never, 3);
      await settled(half, 3);
      await settled(done, 2);
      expect(rx.accepted().filter((id) => neverIds.includes(id))).to.deep.equal(neverIds);
      expect(rx.accepted().filter((id) => halfIds.includes(id))).to.deep.equal(halfIds.slice(1));
      expect(rx.requests).to.have.length(5);
    });

    it("delivers everything after the outbox stopped while the receiver was down", async () => {
      let down = true;
      const rx = await h.receiver(() => (down ? 503 : 200));
      const first = h.outbox();
      await first.start();
      const list = h.stream();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push(...(await h.append(list, rx.url)));
        await first.kick(list);
      }
      await eventually("two failed attempts", () => rx.requests.length >= 2);
      const closing = Date.now();
      await first.close();
      expect(Date.now() - closing).to.be.below(2_000);
      const seen = rx.requests.length;
      await sleep(400);
      expect(rx.requests, "nothing is sent once closed").to.have.length(seen);

      down = false;
      await h.outbox().start();
      await settled(list, 3);
      expect(rx.accepted()).to.deep.equal(ids);
    });
  });

  it("closes after the POST in flight and leaves the rest of the stream to the next process", async () => {
    const rx = await h.receiver(() => sleep(150).then(() => 200));
    const first = h.outbox();
    await first.start();
    const list = h.stream();
    const ids = await h.append(list, rx.url, 6);
    await first.kick(list);
    await eventually("two delivered, the third in flight", () => rx.requests.length === 3);
    const closing = Date.now();
    await first.close();
    expect(Date.now() - closing).to.be.below(1_000);
    expect(rx.requests.map((r) => r.status)).to.deep.equal([200, 200, 200]);
    expect(await deliveredCount(list)).to.equal(3);
    await sleep(300);
    expect(rx.requests).to.have.length(3);

    await h.outbox().start();
    await settled(list, 6);
    expect(rx.requests.map((r) => r.id)).to.deep.equal(ids);
  });

  it("closes after the POST in flight while its blocking connection waits between two reconnection attempts", async () => {
    // Redis just back from an outage: the worker's blocking connection (BullMQ duplicates it from
    // this one, retry strategy included) lost its socket and waits for its next attempt.
    const connection = () =>
      new Redis(server.url, { maxRetriesPerRequest: null, lazyConnect: true, retryStrategy: () => 60_000 });
    const rx = await h.receiver(() => sleep(300).then(() => 200));
    const first = h.outbox({ connection });
    await first.start();
    const list = h.stream();
    const ids = await h.append(list, rx.url, 3);
    const blocking = async () =>
      String(await plain.call("CLIENT", "LIST"))
        .split("\n")
        .filter((line) => line.includes("cmd=bzpopmin"))
        .map((line) => /\bid=(\d+)/.exec(line)?.[1] ?? "");
    await eventually("the worker blocks for jobs", async () => (await blocking()).length === 1);
    await first.kick(list);
    await eventually("the first in flight", () => rx.requests.length === 1);
    const [id = ""] = await blocking();
    expect(await plain.call("CLIENT", "KILL", "ID", id)).to.equal(1);
    const closing = Date.now();
    // Before: BullMQ's graceful close waited for that connection to end, which never came.
    const closed = await Promise.race([
      first.close(false, Date.now() + 3_000),
      sleep(5_000).then(() => "hung"),
    ]);
    expect(closed, "closed in time, nothing cut").to.equal(true);
    expect(Date.now() - closing).to.be.below(2_000);
    expect(rx.requests.map((r) => r.status)).to.deep.equal([200]);
    expect(await deliveredCount(list)).to.equal(1);

    await h.outbox().start();
    await settled(list, 3);
    expect(rx.requests.map((r) => r.id)).to.deep.equal(ids);
  });

  it("gives up on an event giveUpAfterMs after its created_at, logs it, and goes on with the stream", async () => {
    const rx = await h.receiver((req) => (req.id === doomed ? 500 : 200));
    const outbox = h.outbox({ backoff: { baseMs: 50, maxDelayMs: 100, giveUpAfterMs: 600 } });
    await outbox.start();
    const list = h.stream();
    const [doomed = "", next = ""] = await h.append(list, rx.url, 2);
    const appended = Date.now();
    await outbox.kick(list);
    await settled(list, 2);

    expect(Date.now() - appended).to.be.at.least(600);
    expect(rx.requests.filter((r) => r.id === doomed).length).to.be.at.least(3);
    expect(rx.accepted()).to.deep.equal([next]);
    const dropped = h.logs.entries.filter((e) => e.level === "error");
    expect(dropped).to.have.length(1);
    expect(dropped[0]).to.include({ msg: "webhook dropped: not delivered in time", list, id: doomed });
    expect(dropped[0]?.reason).to.equal("receiver answered 500");
  });

  it("does not follow redirects: a 3xx is a failure, retried", async () => {
    const elsewhere = await h.receiver();
    let redirect = true;
    const rx = await h.receiver(() =>
      redirect ? { status: 302, headers: { location: elsewhere.url } } : 200,
    );
    const outbox = h.outbox();
    await outbox.start();
    const list = h.stream();
    const ids = await h.append(list, rx.url);
    await outbox.kick(list);
    await eventually("two attempts", () => rx.requests.length >= 2);
    expect(elsewhere.requests).to.have.length(0);
    expect(await deliveredCount(list)).to.equal(0);
    expect(await isPending(list)).to.equal(true);

    redirect = false;
    await settled(list, 1);
    expect(rx.accepted()).to.deep.equal(ids);
    expect(elsewhere.requests).to.have.length(0);
  });

  it("refuses a hook that is not http(s), retrying until it gives up, and never sends", async () => {
    const outbox = h.outbox({ backoff: { baseMs: 50, maxDelayMs: 100, giveUpAfterMs: 300 } });
    await outbox.start();
    const list = h.stream();
    await h.append(list, "file:///etc/passwd");
    await outbox.kick(list);
    await settled(list, 1);
    const warned = h.logs.entries.filter((e) => e.level === "warn").map((e) => e.reason);
    expect(warned).to.include("the hook's url is not http(s)");
    expect(h.logs.entries.filter((e) => e.level === "error")).to.have.length(1);
  });

  it("never puts the secret or payload in BullMQ job data, and keeps one job per (stream, length)", async () => {
    const rx = await h.receiver(() => 503);
    const outbox = h.outbox();
    const list = h.stream();
    const [id] = await h.append(list, rx.url);
    const envelope = (await h.redis.lindex(list, 0)) ?? "";
    await outbox.kick(list);
    await outbox.kick(list);

    const connection = plain.duplicate();
    const queue = new Queue(WEBHOOK_QUEUE_NAME, { connection, prefix: h.queuePrefix });
    try {
      const jobs = await queue.getJobs(["waiting"]);
      expect(jobs, "a second kick for the same length is the same job").to.have.length(1);
      expect(jobs[0]?.data).to.deep.equal({ list });
      await h.append(list, rx.url);
      await outbox.kick(list);
      expect(await queue.getJobs(["waiting"]), "an append makes a new job").to.have.length(2);

      const secret = h.secretOf(list);
      const forbidden = [secret, `payload-${String(id)}`, envelope];
      expect(await bullmqContents(plain, h.queuePrefix)).to.not.satisfy((s: string) =>
        forbidden.some((f) => s.includes(f)),
      );
      // Failed attempts store their reason and stack: still nothing of the secret or payload.
      await outbox.start();
      await eventually("three failed attempts", () => rx.requests.length >= 3);
      const stored = await bullmqContents(plain, h.queuePrefix);
      expect(stored).to.include("receiver answered 503");
      expect(stored).to.not.satisfy((s: string) => forbidden.some((f) => s.includes(f)));
    } finally {
      await queue.close();
      connection.disconnect();
    }
  });
});

/** Everything BullMQ stored under a prefix, as one string. */
async function bullmqContents(redis: Redis, prefix: string): Promise<string> {
  const keys = await redis.keys(`${prefix.replace(/[[\]*?\\]/g, "\\$&")}:*`);
  expect(keys).to.not.be.empty;
  const parts: string[] = [];
  for (const key of keys) {
    const type = await redis.type(key);
    if (type === "string") parts.push((await redis.get(key)) ?? "");
    else if (type === "hash") parts.push(JSON.stringify(await redis.hgetall(key)));
    else if (type === "list") parts.push(...(await redis.lrange(key, 0, -1)));
    else if (type === "set") parts.push(...(await redis.smembers(key)));
    else if (type === "zset") parts.push(...(await redis.zrange(key, "0", "-1")));
    else if (type === "stream") parts.push(JSON.stringify(await redis.xrange(key, "-", "+")));
    parts.push(key);
  }
  return parts.join("\n");
}

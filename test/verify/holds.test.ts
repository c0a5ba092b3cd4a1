import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { createConnection, createServer as createTcpServer, type Server as TcpServer } from "node:net";
import type { AddressInfo } from "node:net";
import { waitFor } from "../support/redis.js";
import { expect } from "chai";
import { fundedAccount, postSend } from "../support/v1.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { SmsReceiver, type SmsMessage } from "../support/receivers.js";
import { HoldRecovery, STALE_AFTER_MS } from "../../src/verify/holds.js";
import {
  VerifyStore,
  type Hold,
  type SendArgs,
  type SendPlace,
  type SendRules,
} from "../../src/verify/store.js";
import { Redis, type Command } from "ioredis";
import type { WriteableStream } from "ioredis/built/types.js";
import { silentLogger } from "../../src/log.js";
import { createSmsProvider } from "../../src/messaging/sms.js";
import { soleProvider } from "../support/providers.js";
import { testRedisUrl } from "../support/hooks.js";
import { rest } from "../support/rest.js";

const PRICE = 50_000;
/** What the fraud engine reads of a number's network: none, so its country and prefix count. */
const NO_NETWORK = { mcc: "", mnc: "", carrier: "" };

describe("V1 send holds (reserve, commit, release, recovery)", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let customer: string;
  let recovery: HoldRecovery;
  let nextNumber = 622_000_000;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      // Only the recovery made by these tests runs, when they say.
      SMS_HOLD_RECOVERY_INTERVAL_MS: "0",
    });
    const r = app.registry;
    recovery = new HoldRecovery({
      config: app.config,
      store: r.verify,
      sms: soleProvider(createSmsProvider(app.config, silentLogger)),
      secrets: r.secrets,
      log: silentLogger,
    });
  });

  beforeEach(async () => {
    const { account } = await fundedAccount(app.registry.accounts, "Holds");
    customer = account.customerUuid;
    sms.receiver.answer = () => 200;
  });

  after(async () => {
    await recovery.close();
    await app.stop();
    await sms.close();
  });

  const balance = async () => (await app.registry.accounts.get(customer))?.balanceMicros;
  const holdsLeft = () => app.registry.redis.zcard(app.registry.verify.holdsKey(customer));

  /** The scripts' settings here: no window, one retry a second, five retries. */
  const rules = (): SendRules => {
    rulesOnce ??= {
      retryIntervalMs: 1000,
      maxRetries: 5,
      limits: { number: null, ip: null, device: null, account: null },
      spam: { ipNumbers: null, deviceNumbers: null, range: null },
      fraud: app.registry.fraud.rules,
    };
    return rulesOnce;
  };
  let rulesOnce: SendRules | undefined;

  /** Reserves one send the way createAuthentication does, with the given timing of its hold. */
  async function reserve(opts: { issuedAt?: number; deadline?: number; auth?: string; phone?: string } = {}) {
    const store = app.registry.verify;
    const auth = opts.auth ?? randomUUID();
    const phone = opts.phone ?? `+33${(nextNumber += 1000)}`;
    const now = Date.now();
    const place: SendPlace = {
      customer,
      auth,
      phone,
      ip: "-",
      device: "-",
      range: phone.slice(0, -3),
      month: new Date(now).toISOString().slice(0, 7),
    };
    const message: SmsMessage = {
      to: phone,
      from: "Ringfence",
      body: `Your code is ${String(100000 + (nextNumber % 900000))}`,
      locale: "en",
      reference: `${auth}.1`,
    };
    const event = JSON.stringify({ id: randomUUID(), type: "authentication", created_at: "", payload: {} });
    const destination = app.registry.fraud.destination({ e164: phone, countryCode: "FR" }, NO_NETWORK);
    const args: SendArgs = {
      now,
      fraud: app.registry.fraud.sendArgs("v1", destination, now),
      authUuid: auth,
      phone,
      staticSpam: false,
      hasIp: false,
      hasDevice: false,
      price: PRICE,
      codeHash: "h",
      keepUntil: now + 600_000,
      refusedUntil: now + 600_000,
      target: null,
      authentication: {
        api: "v1",
        codeLength: 6,
        customerUuid: customer,
        phoneNumber: phone,
        countryCode: "FR",
        createdAt: new Date(now).toISOString(),
        expiresAt: new Date(now + 600_000).toISOString(),
        expiresAtMs: now + 600_000,
        correlationId: "",
        locale: "fr-FR",
        templateId: "default",
        from: "Ringfence",
        appRealm: "",
        callbackUrl: "",
        priceMicros: PRICE,
        signals: { ip: "", deviceId: "", deviceType: "", appVersion: "", osVersion: "", deviceModel: "" },
      },
      created: { statuses: ["pending", "rate_limited", "spam_detected"], event: [event], compact: null },
      hook: null,
    };
    const held = {
      id: message.reference,
      issuedAt: opts.issuedAt ?? now,
      staleMs: STALE_AFTER_MS,
      deadline: opts.deadline ?? now + 60_000,
      sealed: app.registry.secrets.encrypt(JSON.stringify(message)),
      owner: "test",
      provider: "default",
      route: "default",
    };
    const { status } = await store.send(
      place,
      rules(),
      args,
      held,
      app.registry.fraud.sendKeys(customer, destination),
    );
    return { status, place, message, held, hold: store.holdOf(place, message.reference, "send") };
  }

  /** Reserves retry `attempt` of the send at `place` the way retryAuthentication does, at business time `now`. */
  async function retryReserve(place: SendPlace, attempt: number, now: number, codeHash: string) {
    const store = app.registry.verify;
    const message: SmsMessage = {
      to: place.phone,
      from: "Ringfence",
      body: `Your code is ${codeHash}`,
      locale: "en",
      reference: `${place.auth}.${String(attempt)}`,
    };
    const held = {
      id: message.reference,
      issuedAt: Date.now(),
      staleMs: STALE_AFTER_MS,
      deadline: Date.now() + 60_000,
      sealed: app.registry.secrets.encrypt(JSON.stringify(message)),
      owner: "test",
      provider: "default",
      route: "default",
    };
    const r = await store.retry(
      place,
      rules(),
      {
        now,
        attempt,
        codeHash,
        price: PRICE,
        member: `${place.auth}:${String(attempt)}`,
        fraud: app.registry.fraud.sendArgs("v1", retryDestination(place), now),
      },
      held,
      app.registry.fraud.sendKeys(customer, retryDestination(place)),
    );
    return { ...r, message, hold: store.holdOf(place, message.reference, "retry") };
  }

  const retryDestination = (place: SendPlace) =>
    app.registry.fraud.destination({ e164: place.phone, countryCode: "FR" }, NO_NETWORK);

  /** What a check of `codeHash` answers now (it counts as one check), less the number of a right one. */
  const checkHash = async (auth: string, codeHash: string) => {
    const { status, hooked } = await app.registry.verify.check(customer, auth, {
      now: Date.now(),
      codeHash,
      maxChecks: 10,
      api: "v1",
      events: undefined,
    });
    return { status, hooked };
  };

  /**
   * A store on a connection of its own whose commands pass through `gate` first: when it answers
   * a promise, the command goes to Redis once that promise is settled.
   */
  function gatedStore(gate: (args: string[]) => Promise<unknown> | undefined): VerifyStore {
    const redis = new Redis(testRedisUrl());
    gatedConnections.push(redis);
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = (command: Command, stream?: WriteableStream) => {
      const wait = gate(command.args.map(String));
      if (wait === undefined) return send(command, stream);
      const go = () => send(command, stream);
      void wait.then(go, go);
      return command.promise;
    };
    return new VerifyStore(redis, app.registry.keys);
  }
  const gatedConnections: Redis[] = [];
  after(() => {
    for (const c of gatedConnections.splice(0)) c.disconnect();
  });

  it("keeps a customer in the hold index when a send records a hold while the recovery drops the customer", async () => {
    const store = app.registry.verify;
    // Listed with no hold left: a send Redis ran too late (listed, nothing recorded).
    expect((await reserve({ issuedAt: Date.now() - STALE_AFTER_MS - 1_000 })).status).to.equal("stale");
    expect(await holdsLeft()).to.equal(0);
    // The recovery finds the customer without holds and drops it from the index; a send records
    // a hold after the recovery looked and before it drops, and its owner dies (nothing resolves it).
    let raced: ReturnType<typeof reserve> | undefined;
    const index = store.holdIndexKey();
    const gated = new HoldRecovery({
      config: app.config,
      store: gatedStore((args) =>
        args.includes(index) && args.includes(customer)
          ? (raced ??= reserve({ deadline: Date.now() - 1 }))
          : undefined,
      ),
      sms: soleProvider(createSmsProvider(app.config, silentLogger)),
      secrets: app.registry.secrets,
      log: silentLogger,
    });
    await gated.sweep();
    expect(raced, "the recovery dropped the customer").not.to.equal(undefined);
    const { status, message } = await (raced as ReturnType<typeof reserve>);
    expect(status).to.equal("pending");
    expect(await holdsLeft()).to.equal(1);
    // The next pass still finds the hold: it re-sends the message and settles the charge.
    const before = sms.messages.length;
    await recovery.sweep();
    expect(sms.messages.slice(before)).to.deep.equal([message]);
    expect(await holdsLeft()).to.equal(0);
    expect(await balance()).to.equal(10_000_000 - PRICE);
  });

  it("finds the holds of customers an earlier version listed in its index, and moves them over", async () => {
    const { redis, keys, verify: store } = app.registry;
    const { message } = await reserve({ deadline: Date.now() - 1 });
    // Listed as an earlier version does: in a plain set.
    const earlier = keys.key("holds", "index");
    await redis.zrem(store.holdIndexKey(), customer);
    await redis.sadd(earlier, customer);
    const before = sms.messages.length;
    await recovery.sweep();
    expect(sms.messages.slice(before)).to.deep.equal([message]);
    expect(await holdsLeft()).to.equal(0);
    expect(await redis.exists(earlier)).to.equal(0);
    expect(await redis.zscore(store.holdIndexKey(), customer)).not.to.equal(null);
  });

  it("never reuses a retry's reference when an earlier retry is given back after a later one was charged", async () => {
    const store = app.registry.verify;
    const sent = await reserve();
    expect(await store.resolveHold(sent.hold, "commit")).to.equal(true);
    const t = Date.now();
    // Retry 2: the provider's answer is unknown (held). Retry 3: accepted, the user has its code.
    const second = await retryReserve(sent.place, 2, t + 2_000, "h2");
    expect(second.status).to.equal("approved");
    const third = await retryReserve(sent.place, 3, t + 4_000, "h3");
    expect(third.status).to.equal("approved");
    expect(await store.resolveHold(third.hold, "commit")).to.equal(true);
    // The re-sent retry 2 is refused: it is given back.
    expect(await store.resolveHold(second.hold, "release")).to.equal(true);
    expect(await balance()).to.equal(10_000_000 - 2 * PRICE);
    // Retry 3's code, the one delivered, is still the one to check; the user got a retry back.
    const row = (await store.get(customer, sent.place.auth))?.auth;
    expect(row?.retries).to.equal(1);
    // The next retry takes a reference never used: 4, not retry 3's again (which the provider
    // would take for the message it already accepted, sending nothing).
    expect(row?.attempts).to.equal(3);
    const reused = await retryReserve(sent.place, 3, t + 6_000, "h3bis");
    expect(reused.status, "a stale attempt number charges nothing").to.equal("stale");
    expect(await balance()).to.equal(10_000_000 - 2 * PRICE);
    const fourth = await retryReserve(sent.place, 4, t + 6_000, "h4");
    expect(fourth.status).to.equal("approved");
    expect(await store.resolveHold(fourth.hold, "release")).to.equal(true);
    expect(await checkHash(sent.place.auth, "h3")).to.deep.equal({ status: "valid", hooked: false });
  });

  it("restores the code of the latest retry not given back, whatever order held retries are given back in", async () => {
    const store = app.registry.verify;
    for (const order of [
      [2, 3],
      [3, 2],
    ]) {
      const sent = await reserve();
      expect(await store.resolveHold(sent.hold, "commit")).to.equal(true);
      const t = Date.now();
      const holds = new Map([
        [2, (await retryReserve(sent.place, 2, t + 2_000, "h2")).hold],
        [3, (await retryReserve(sent.place, 3, t + 4_000, "h3")).hold],
      ]);
      for (const n of order) expect(await store.resolveHold(holds.get(n) as Hold, "release")).to.equal(true);
      const row = (await store.get(customer, sent.place.auth))?.auth;
      expect([row?.retries, row?.attempts, row?.nextRetryAtMs], String(order)).to.deep.equal([
        0,
        3,
        sent.held.issuedAt + 1000,
      ]);
      expect(await checkHash(sent.place.auth, "h2"), String(order)).to.deep.equal({
        status: "invalid",
        hooked: false,
      });
      expect(await checkHash(sent.place.auth, "h"), String(order)).to.deep.equal({
        status: "valid",
        hooked: false,
      });
    }
  });

  it("gives back a retry an earlier version recorded, restoring the code it replaced", async () => {
    const store = app.registry.verify;
    const sent = await reserve();
    expect(await store.resolveHold(sent.hold, "commit")).to.equal(true);
    const t = Date.now();
    const second = await retryReserve(sent.place, 2, t + 2_000, "h2");
    // As an earlier version recorded it: the previous code and next_retry_at beside the row's.
    const row = store.authKeys(customer, sent.place.auth).auth;
    await app.registry.redis.hdel(row, "code_attempt", "p2", "ph2");
    await app.registry.redis.hset(row, { prev_code_hash: "h", prev_next_retry_at_ms: String(t + 1_000) });
    expect(await store.resolveHold(second.hold, "release")).to.equal(true);
    const after = (await store.get(customer, sent.place.auth))?.auth;
    expect([after?.retries, after?.attempts, after?.nextRetryAtMs]).to.deep.equal([0, 2, t + 1_000]);
    expect(await checkHash(sent.place.auth, "h")).to.deep.equal({ status: "valid", hooked: false });
  });

  it("charges nothing for a retry whose attempt number another retry took since it read the row", async () => {
    const store = app.registry.verify;
    const sent = await reserve();
    const t = Date.now();
    const first = await retryReserve(sent.place, 2, t + 2_000, "h2");
    expect(first.status).to.equal("approved");
    expect(await store.resolveHold(first.hold, "commit")).to.equal(true);
    // Another call read attempts 1 before retry 2, and runs once the interval has passed.
    const late = await retryReserve(sent.place, 2, t + 4_000, "h2bis");
    expect(late.status).to.equal("stale");
    expect(await balance()).to.equal(10_000_000 - 2 * PRICE);
    expect(await checkHash(sent.place.auth, "h2")).to.deep.equal({ status: "valid", hooked: false });
  });

  it("charges a reserve that ioredis replays after a reconnect only once", async () => {
    const first = await reserve();
    const replay = await reserve({ auth: first.place.auth, phone: first.place.phone });
    expect([first.status, replay.status]).to.deep.equal(["pending", "pending"]);
    expect(await balance()).to.equal(10_000_000 - PRICE);
    expect(await holdsLeft()).to.equal(1);
  });

  it("does nothing and answers stale when Redis runs a reserve later than its caller waits", async () => {
    const { status, place } = await reserve({ issuedAt: Date.now() - STALE_AFTER_MS - 1_000 });
    expect(status).to.equal("stale");
    expect(await balance()).to.equal(10_000_000);
    expect(await holdsLeft()).to.equal(0);
    expect(await app.registry.verify.get(customer, place.auth)).to.equal(undefined);
  });

  it("charges and holds a reserve run in time, and keeps the sealed message free of the code", async () => {
    const { status, message } = await reserve();
    expect(status).to.equal("pending");
    expect(await balance()).to.equal(10_000_000 - PRICE);
    expect(await holdsLeft()).to.equal(1);
    const hold = await app.registry.redis.hgetall(app.registry.verify.holdKey(customer, message.reference));
    expect(hold.price).to.equal(String(PRICE));
    expect(JSON.stringify(hold)).not.to.include(message.body);
  });

  it("resolves each hold once when commit, release and recovery race for it", async function () {
    this.timeout(20_000);
    const holds = await Promise.all(Array.from({ length: 12 }, () => reserve({ deadline: Date.now() - 1 })));
    expect(await balance()).to.equal(10_000_000 - 12 * PRICE);
    const store = app.registry.verify;
    let charged = 0;
    for (const { hold } of holds) {
      const [committed, released, recovered] = await Promise.all([
        store.resolveHold(hold, "commit"),
        store.resolveHold(hold, "release"),
        recovery.recover(customer, hold.id),
      ]);
      expect([committed, released, recovered].filter(Boolean)).to.have.length(1);
      if (committed || recovered) charged++;
      // Late owners change nothing.
      expect(await store.resolveHold(hold, "release")).to.equal(false);
      expect(await store.resolveHold(hold, "commit")).to.equal(false);
    }
    expect(await balance()).to.equal(10_000_000 - charged * PRICE);
    expect(await holdsLeft()).to.equal(0);
  });

  it("gives back a caller's own hold only while no recovery has claimed it", async () => {
    const store = app.registry.verify;
    // Another caller's hold of the same id (another sealed message) is left alone.
    const mine = await reserve();
    const other = { ...mine.held, sealed: app.registry.secrets.encrypt("another message") };
    expect(await store.resolveHold(mine.hold, "release", other)).to.equal(false);
    expect(await holdsLeft()).to.equal(1);
    expect(await store.resolveHold(mine.hold, "release", mine.held)).to.equal(true);
    expect(await balance()).to.equal(10_000_000);
    // Claimed by a recovery (its deadline moved on): the recovery's to resolve, by the provider's answer.
    const due = await reserve({ deadline: Date.now() - 1 });
    const now = Date.now();
    expect(await store.claimHold(customer, due.hold.id, now, now + 60_000)).not.to.equal(undefined);
    expect(await store.resolveHold(due.hold, "release", due.held)).to.equal(false);
    expect(await balance()).to.equal(10_000_000 - PRICE);
    expect(await holdsLeft()).to.equal(1);
    expect(await store.resolveHold(due.hold, "commit")).to.equal(true);
  });

  it("re-sends an overdue hold's message with the same reference and keeps the charge once accepted", async () => {
    const before = sms.messages.length;
    const { message, place } = await reserve({ deadline: Date.now() - 1 });
    const resolved = await recovery.sweep();
    expect(resolved).to.be.at.least(1);
    const sent = sms.messages.slice(before);
    expect(sent).to.deep.equal([message]);
    expect(await balance()).to.equal(10_000_000 - PRICE);
    expect(await holdsLeft()).to.equal(0);
    expect(await app.registry.verify.get(customer, place.auth)).not.to.equal(undefined);
    // Nothing left to do: a second pass sends nothing.
    await recovery.sweep();
    expect(sms.messages.length).to.equal(before + 1);
  });

  it("refunds an overdue hold whose re-sent message the provider refuses, and removes its authentication", async () => {
    sms.receiver.answer = () => 400;
    const { place } = await reserve({ deadline: Date.now() - 1 });
    await recovery.sweep();
    expect(await balance()).to.equal(10_000_000);
    expect(await holdsLeft()).to.equal(0);
    expect(await app.registry.verify.get(customer, place.auth)).to.equal(undefined);
  });

  it("leaves a hold whose deadline has not passed to its owner", async () => {
    const before = sms.messages.length;
    await reserve();
    await recovery.sweep();
    expect(sms.messages.length).to.equal(before);
    expect(await holdsLeft()).to.equal(1);
  });
});

describe("V1 send whose provider does not answer in time", () => {
  let app: TestApp;
  let server: Server;
  let url = "";
  const accepted = new Map<string, number>();
  /** The status of the n-th POST of a reference (0-based); the first is always answered late. */
  let statusOf = (_n: number) => 200;

  before(async function () {
    this.timeout(30_000);
    // Accepts every message, but answers the first POST of a reference too late.
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const { reference } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { reference: string };
        const seen = accepted.get(reference) ?? 0;
        accepted.set(reference, seen + 1);
        res.statusCode = statusOf(seen);
        setTimeout(() => res.end("{}"), seen === 0 ? 1_000 : 0);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/sms`;
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: url,
      SMS_HTTP_TIMEOUT_MS: "300",
      SMS_HOLD_MARGIN_MS: "100",
      SMS_HOLD_RECOVERY_INTERVAL_MS: "300",
    });
  });

  after(async () => {
    await app.stop();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("answers 503 with Retry-After, then recovery re-sends the same reference and keeps the charge", async function () {
    this.timeout(20_000);
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Slow provider");
    const res = await postSend(app.baseUrl, apiKey, {
      customer_uuid: account.customerUuid,
      phone_number: "+33699000111",
    });
    expect(res.status).to.equal(503);
    expect(res.headers.get("retry-after")).to.equal("5");
    const holds = app.registry.verify.holdsKey(account.customerUuid);
    expect(await app.registry.redis.zcard(holds)).to.equal(1);
    await waitFor(async () => (await app.registry.redis.zcard(holds)) === 0, 15_000);
    expect([...accepted.values()]).to.deep.equal([2]);
    expect((await app.registry.accounts.get(account.customerUuid))?.balanceMicros).to.equal(
      10_000_000 - PRICE,
    );
  });
  it("keeps the hold through 503s on re-send, then keeps the charge of the message the provider accepted", async function () {
    this.timeout(30_000);
    // The re-sends meet an overloaded provider twice: that says nothing about the first send.
    statusOf = (n) => (n === 1 || n === 2 ? 503 : 200);
    const seenBefore = new Set(accepted.keys());
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Overloaded provider");
    const res = await postSend(app.baseUrl, apiKey, {
      customer_uuid: account.customerUuid,
      phone_number: "+33699000112",
    });
    expect(res.status).to.equal(503);
    const holds = app.registry.verify.holdsKey(account.customerUuid);
    await waitFor(async () => (await app.registry.redis.zcard(holds)) === 0, 20_000);
    const posts = [...accepted.entries()].filter(([ref]) => !seenBefore.has(ref)).map(([, n]) => n);
    expect(posts).to.deep.equal([4]);
    expect((await app.registry.accounts.get(account.customerUuid))?.balanceMicros).to.equal(
      10_000_000 - 50_000,
    );
  });
});

/**
 * A TCP proxy in front of Redis that, once `arm`ed, holds back every answer of Redis from the
 * first script a client sends on (EVALSHA) for `holdMs`, in order: Redis runs the script at once,
 * the client sees its answer late.
 */
class LateAnswers {
  private armed = false;
  private readonly sockets = new Set<{ destroy(): void }>();
  private constructor(
    private readonly server: TcpServer,
    readonly url: string,
  ) {}

  static async start(target: { host: string; port: number }, holdMs: number): Promise<LateAnswers> {
    const ref: { self?: LateAnswers } = {};
    const server = createTcpServer((client) => {
      const redis = createConnection(target);
      ref.self?.sockets.add(client).add(redis);
      let holdUntil = 0;
      const held: Buffer[] = [];
      client.on("data", (d: Buffer) => {
        if (ref.self?.armed === true && d.includes("evalsha")) {
          ref.self.armed = false;
          holdUntil = Date.now() + holdMs;
          setTimeout(() => {
            for (const b of held.splice(0)) client.write(b);
          }, holdMs);
        }
        redis.write(d);
      });
      redis.on("data", (d: Buffer) => {
        if (Date.now() < holdUntil || held.length > 0) held.push(d);
        else client.write(d);
      });
      const close = () => {
        client.destroy();
        redis.destroy();
      };
      client.on("close", close).on("error", close);
      redis.on("close", close).on("error", close);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new LateAnswers(server, `redis://127.0.0.1:${String(port)}`);
    ref.self = self;
    return self;
  }

  /** The next script sent (on any connection) gets its answer, and all after it, late. */
  arm(): void {
    this.armed = true;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

describe("V1 send whose charge Redis made but answered too late", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let proxy: LateAnswers;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    // The service reaches Redis through a proxy that can hold Redis's answers back, longer than
    // the service waits for them.
    const { port } = new URL(testRedisUrl());
    proxy = await LateAnswers.start({ host: "127.0.0.1", port: Number(port) }, 2_500);
    app = await startTestApp({
      REDIS_URL: proxy.url,
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      // The recovery would re-send the held message only after a minute: what this test sees is
      // the owner giving the charge back.
      SMS_HOLD_MARGIN_MS: "60000",
      SMS_HOLD_RECOVERY_INTERVAL_MS: "0",
      OTP_RETRY_INTERVAL_SECONDS: "1",
    });
  });

  after(async () => {
    await app.stop();
    await proxy.close();
    await sms.close();
  });

  it("answers 503 and gives the charge back as soon as Redis answers again, sending nothing", async function () {
    this.timeout(30_000);
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Late Redis");
    // The start completes the override prefixes in the background; a send reads nothing before its
    // script once they are.
    const complete = app.registry.keys.key("numovr", "prefixes", "complete");
    await waitFor(async () => (await app.registry.redis.get(complete)) === "1");
    const customer = account.customerUuid;
    // A first send, answered in time (and the account known to the service from then on).
    const first = await postSend(app.baseUrl, apiKey, {
      customer_uuid: customer,
      phone_number: "+33699000211",
    });
    expect(first.status).to.equal(200);
    // Redis runs the charging script at once, but its answer arrives after the caller gave up.
    proxy.arm();
    const late = await postSend(app.baseUrl, apiKey, {
      customer_uuid: customer,
      phone_number: "+33699000212",
    });
    expect(late.status).to.equal(503);
    const holds = app.registry.verify.holdsKey(customer);
    await waitFor(async () => (await app.registry.redis.zcard(holds)) === 0, 10_000);
    expect((await app.registry.accounts.get(customer))?.balanceMicros).to.equal(10_000_000 - PRICE);
    expect(sms.messages.map((m) => m.to)).to.deep.equal(["+33699000211"]);
  });

  it("answers a late retry 503 and gives its charge back, the previous code still the one to check", async function () {
    this.timeout(30_000);
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Late Redis retry");
    const customer = account.customerUuid;
    const headers = { "x-api-key": apiKey };
    const retry = (auth: string) =>
      rest(app.baseUrl).post("/v1/retry", { customer_uuid: customer, authentication_uuid: auth }, headers);
    const other = await postSend(app.baseUrl, apiKey, {
      customer_uuid: customer,
      phone_number: "+33699000214",
    });
    const first = await postSend(app.baseUrl, apiKey, {
      customer_uuid: customer,
      phone_number: "+33699000213",
    });
    expect([other.status, first.status]).to.deep.equal([200, 200]);
    const auth = String(first.body.authentication_uuid);
    const code = /\d{6}/.exec(sms.messages.at(-1)?.body ?? "")?.[0] ?? "";
    const stored = await app.registry.verify.get(customer, auth);
    await waitFor(() => Promise.resolve(Date.now() >= (stored?.auth.nextRetryAtMs ?? 0)));
    // A retry answered in time, on the other number: Redis knows the retry script from then on.
    expect((await retry(String(other.body.authentication_uuid))).body.status).to.equal("approved");
    const sent = sms.messages.length;
    proxy.arm();
    const late = await retry(auth);
    expect(late.status).to.equal(503);
    const holds = app.registry.verify.holdsKey(customer);
    await waitFor(async () => (await app.registry.redis.zcard(holds)) === 0, 10_000);
    expect((await app.registry.accounts.get(customer))?.balanceMicros).to.equal(10_000_000 - 3 * PRICE);
    expect(sms.messages.length).to.equal(sent);
    const check = await rest(app.baseUrl).post(
      "/v1/check",
      { customer_uuid: customer, authentication_uuid: auth, check_code: code },
      headers,
    );
    expect(check.body.status).to.equal("valid");
  });
});

import { expect } from "chai";
import type { Awaitable } from "../../src/awaitable.js";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { createLogger, type Logger } from "../../src/log.js";
import { Secrets } from "../../src/crypto/secrets.js";
import { Keys, type RedisClient } from "../../src/redis/client.js";
import { RingfenceError } from "../../src/errors.js";
import { APP_CALLER, AppStore } from "../../src/apps/store.js";
import {
  APP_EVENT_TYPES,
  AppWebhooks,
  appWebhookSecret,
  createAppWebhookHandler,
  isAppWebhookRef,
  type AppWebhook,
} from "../../src/apps/webhooks.js";
import { oauthHandlers } from "../../src/oauth/service.js";
import { TokenFailures } from "../../src/oauth/failures.js";
import { proofChecks } from "../../src/oauth/module.js";
import { CachedKeySet } from "../../src/oauth/keys/key-set.js";
import { OutboundGuard } from "../../src/net/outbound.js";

/** The receivers of these tests live on loopback. */
const LOOPBACK = new OutboundGuard("127.0.0.0/8");
import { HTTP_STATUS_MARKER, type Authenticator, type CallContext } from "../../src/rpc/binding.js";
import type { StoredApp } from "../../src/apps/app.js";
import { WebhookOutbox } from "../../src/webhooks/outbox.js";
import { verifyWebhook } from "../../src/webhooks/signature.js";
import { outboxKeys } from "../../src/webhooks/keys.js";
import type { WebhookEnvelope } from "../../src/webhooks/stream.js";
import { testRedisUrl } from "../support/hooks.js";
import { Receiver, type Received } from "../support/receivers.js";
import { basicAuth, rest } from "../support/rest.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { testCall } from "../support/call.js";

interface LogEntry {
  level: string;
  msg: string;
  [field: string]: unknown;
}

function capturingLogger(): { log: Logger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  return { log: createLogger("debug", (line) => entries.push(JSON.parse(line) as LogEntry)), entries };
}

/** A CallContext as the transports build it: request headers in, response headers recorded. */
const fakeContext = (headers: Record<string, string>) => testCall(headers);

/** A handler called as its service binding calls it: the binding's authenticator first. */
function asBound<Req, Res>(
  handler: (req: Req, ctx: CallContext) => Awaitable<Res>,
  authenticate: Authenticator<StoredApp>,
): (req: Req, ctx: CallContext) => Promise<Res> {
  return async (req, ctx) =>
    handler(req, { ...ctx, caller: { key: APP_CALLER, who: await authenticate(ctx, req) } });
}

async function rejection(p: Promise<unknown>): Promise<RingfenceError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof RingfenceError) return err;
    throw err;
  }
  throw new Error("expected a rejection");
}

function envelopeOf(r: Received): WebhookEnvelope {
  return JSON.parse(r.body) as WebhookEnvelope;
}

function signedBy(secret: string, r: Received): boolean {
  const header = r.headers["x-webhook-signature"];
  return verifyWebhook(secret, r.body, typeof header === "string" ? header : undefined);
}

/** Every key under a prefix with its value as text (strings, hashes, lists, sets). */
async function dumpKeys(redis: RedisClient, prefix: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    for (const key of found) {
      const type = await redis.type(key);
      let value: string;
      if (type === "string") value = (await redis.get(key)) ?? "";
      else if (type === "hash") value = JSON.stringify(await redis.hgetall(key));
      else if (type === "list") value = JSON.stringify(await redis.lrange(key, 0, -1));
      else if (type === "set") value = JSON.stringify(await redis.smembers(key));
      else if (type === "zset") value = JSON.stringify(await redis.zrange(key, "0", "-1"));
      else value = `<${type}>`;
      out.set(key, value);
    }
  } while (cursor !== "0");
  return out;
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 8_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("app webhooks", () => {
  let redis: Redis;
  let prefix: string;
  let keys: Keys;
  let secrets: Secrets;
  let apps: AppStore;
  let outbox: WebhookOutbox;
  let webhooks: AppWebhooks;
  let logs: ReturnType<typeof capturingLogger>;
  let receivers: Receiver[] = [];

  before(async () => {
    redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: 2 });
    prefix = `awh${randomBytes(4).toString("hex")}:`;
    keys = new Keys(prefix);
    secrets = new Secrets(randomBytes(32));
    apps = new AppStore(redis, keys, secrets);
    logs = capturingLogger();
    // As app.ts builds it; the secret of an `appwh:` ref comes from the subscription.
    outbox = new WebhookOutbox({
      outbound: LOOPBACK,
      redis,
      connection: () => new Redis(testRedisUrl(), { maxRetriesPerRequest: null, lazyConnect: true }),
      keys,
      queuePrefix: `{${prefix}bull}`,
      resolveSecret: (ref) => appWebhookSecret(redis, keys, secrets, ref),
      log: logs.log,
      timeoutMs: 2_000,
      backoff: { baseMs: 50, maxDelayMs: 200 },
      sweepIntervalMs: 0,
    });
    await outbox.start();
    webhooks = new AppWebhooks(redis, keys, secrets, outbox, logs.log);
  });
  after(async () => {
    await outbox.close();
    redis.disconnect();
  });
  afterEach(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    receivers = [];
  });

  async function receiver(): Promise<Receiver> {
    const r = await Receiver.start();
    receivers.push(r);
    return r;
  }

  async function newApp(): Promise<{ appId: string; key: string }> {
    const { app, managementApiKey } = await apps.create("Backend");
    return { appId: app.appId, key: managementApiKey };
  }

  async function settled(appId: string, sub: AppWebhook): Promise<void> {
    const list = await webhooks.streamKey(appId, sub.id);
    const k = outboxKeys(list, keys);
    await eventually(`${list} delivered and out of pending`, async () => {
      const [length, delivered, pending] = await Promise.all([
        redis.llen(list),
        redis.get(k.delivered),
        redis.sismember(k.pending, list),
      ]);
      return Number(delivered ?? "0") === length && pending === 0;
    });
    await eventually(`${list} unlocked`, async () => (await redis.exists(k.lock)) === 0);
  }

  describe("register", () => {
    const cases: { name: string; url: string; events: string[]; field: string }[] = [
      { name: "no url", url: "", events: ["client.created"], field: "url" },
      { name: "a url that is not one", url: "not a url", events: ["client.created"], field: "url" },
      {
        name: "a url that is not http(s)",
        url: "ftp://example.com/hook",
        events: ["client.created"],
        field: "url",
      },
      {
        name: "a url over 2048 characters",
        url: `https://example.com/${"a".repeat(2030)}`,
        events: ["client.created"],
        field: "url",
      },
      { name: "no events", url: "https://example.com/hook", events: [], field: "events" },
      {
        name: "an unknown event type",
        url: "https://example.com/hook",
        events: ["client.created", "client.updated"],
        field: "events[1]",
      },
      {
        name: "a duplicate event type",
        url: "https://example.com/hook",
        events: ["client.created", "session.created", "client.created"],
        field: "events[2]",
      },
    ];
    for (const c of cases) {
      it(`refuses ${c.name} with bad_request naming ${c.field}, storing nothing`, async () => {
        const { appId } = await newApp();
        const ofApp = async () =>
          [...(await dumpKeys(redis, prefix)).keys()].filter((key) => key.includes(`{${appId}}`));
        expect(await ofApp()).to.deep.equal([keys.key("app", appId)]);
        const err = await rejection(webhooks.register(appId, { url: c.url, events: c.events }));
        expect(err.code).to.equal("bad_request");
        expect(err.details).to.deep.equal({ field: c.field });
        expect(err.message.startsWith(`${c.field} `) || err.message.startsWith(`${c.field}:`)).to.equal(true);
        expect(await ofApp()).to.deep.equal([keys.key("app", appId)]);
      });
    }

    it("accepts a 2048-character url and every event type, as given", async () => {
      const { appId } = await newApp();
      const url = `https://example.com/${"a".repeat(2048 - "https://example.com/".length)}`;
      const events = [...APP_EVENT_TYPES].reverse();
      const sub = await webhooks.register(appId, { url, events });
      expect(sub.id).to.match(/^wh_[A-Za-z0-9_-]{22}$/);
      expect(sub.url).to.equal(url);
      expect(sub.events).to.deep.equal(events);
      expect(sub.secret).to.match(/^whsec_[A-Za-z0-9_-]{43}$/);
    });

    it("keeps the secret only encrypted, and resolves it from the stream's secret_ref", async () => {
      const rx = await receiver();
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, { url: rx.url, events: ["client.created"] });
      await webhooks.emit(appId, "client.created", { client_id: "rfc_x" });
      await rx.until((r) => r.length === 1);

      const dump = await dumpKeys(redis, prefix);
      const random = sub.secret.slice("whsec_".length);
      for (const [key, value] of dump) {
        expect(value, key).to.not.include(random);
        expect(value, key).to.not.include(Buffer.from(random).toString("base64"));
      }
      const record = JSON.parse((await redis.hget(keys.key("app", appId, "webhooks"), sub.id)) ?? "{}") as {
        url: string;
        events: string[];
        secret_sealed: string;
      };
      expect(record.url).to.equal(rx.url);
      expect(record.events).to.deep.equal(["client.created"]);
      expect(secrets.decrypt(record.secret_sealed)).to.equal(sub.secret);

      const list = await webhooks.streamKey(appId, sub.id);
      const ref = `appwh:${appId}:${sub.id}`;
      expect(await redis.hgetall(outboxKeys(list, keys).hook)).to.deep.equal({
        url: rx.url,
        secret_ref: ref,
      });
      expect(isAppWebhookRef(ref)).to.equal(true);
      expect(isAppWebhookRef("account:6b1c1f7e-6d2e-4b7e-9c39-2a0a8f1c1d11")).to.equal(false);
      expect(await webhooks.resolveSecret(ref)).to.equal(sub.secret);
      for (const other of [
        `appwh:${appId}:wh_${"A".repeat(22)}`,
        `appwh:${appId}:${sub.id}:x`,
        `appwh:app_{bad}:${sub.id}`,
        `account:${appId}`,
        "appwh",
      ]) {
        expect(await webhooks.resolveSecret(other), other).to.equal(undefined);
      }
    });
  });

  describe("createAppWebhook handler", () => {
    it("answers 201 with the subscription after checking the app's management key", async () => {
      const owner = await newApp();
      const other = await newApp();
      const handler = asBound(createAppWebhookHandler(webhooks, LOOPBACK), apps.managementKey);
      // A public address: registration resolves names, and the test machines have no DNS.
      const req = { appId: owner.appId, url: "https://93.184.215.14/hook", events: ["client.deleted"] };

      const refused: Record<string, string>[] = [
        {},
        { authorization: `Bearer ${other.key}` },
        { authorization: owner.key },
      ];
      for (const headers of refused) {
        const err = await rejection(handler(req, fakeContext(headers)));
        expect(err.code, JSON.stringify(headers)).to.equal("unauthorized");
      }
      const bad = await rejection(
        handler({ ...req, events: [] }, fakeContext({ authorization: `Bearer ${owner.key}` })),
      );
      expect(bad.details).to.deep.equal({ field: "events" });
      expect(await redis.exists(keys.key("app", owner.appId, "webhooks"))).to.equal(0);

      const ctx = fakeContext({ authorization: `Bearer ${owner.key}` });
      const res = await handler(req, ctx);
      // The 201 is the service binding's (app.ts), not the handler's: test/session/session.test.ts sees it.
      expect(ctx.sent).not.to.have.property(HTTP_STATUS_MARKER);
      expect(ctx.sent["cache-control"]).to.equal("no-store");
      expect(Object.keys(res).sort()).to.deep.equal(["events", "id", "secret", "url"]);
      expect(res).to.include({ url: req.url });
      expect(res.events).to.deep.equal(req.events);
      expect(await webhooks.resolveSecret(`appwh:${owner.appId}:${res.id}`)).to.equal(res.secret);
    });
  });

  describe("emit", () => {
    it("delivers a signed envelope that verifyWebhook accepts with the returned secret", async () => {
      const rx = await receiver();
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, { url: rx.url, events: ["client.created"] });
      await webhooks.emit(
        appId,
        "client.created",
        { client_id: "rfc_1", scopes: ["a"] },
        { correlationId: "corr-1" },
      );
      const [req] = await rx.until((r) => r.length === 1);

      expect(signedBy(sub.secret, req!)).to.equal(true);
      expect(signedBy("whsec_other", req!)).to.equal(false);
      expect(req!.headers["x-webhook-signature"]).to.match(/^t=\d+,v1=[0-9a-f]{64}$/);
      const env = envelopeOf(req!);
      expect(Object.keys(env)).to.deep.equal(["id", "type", "created_at", "correlation_id", "payload"]);
      expect(env).to.include({ type: "client.created", correlation_id: "corr-1" });
      expect(env.payload).to.deep.equal({ client_id: "rfc_1", scopes: ["a"] });
      expect(Date.now() - Date.parse(env.created_at)).to.be.within(0, 10_000);
      expect(req!.headers["x-webhook-id"]).to.equal(env.id);
      await settled(appId, sub);

      await webhooks.emit(appId, "client.created", { client_id: "rfc_2" });
      const second = (await rx.until((r) => r.length === 2))[1]!;
      expect(Object.keys(envelopeOf(second))).to.deep.equal(["id", "type", "created_at", "payload"]);
    });

    it("delivers only the event types a subscription asked for", async () => {
      const rx = await receiver();
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, { url: rx.url, events: ["client.deleted"] });
      for (const type of APP_EVENT_TYPES) {
        if (type !== "client.deleted") await webhooks.emit(appId, type, { t: type });
      }
      await webhooks.emit(appId, "client.deleted", { client_id: "rfc_1" });
      await rx.until((r) => r.length === 1);
      await settled(appId, sub);
      await new Promise((r) => setTimeout(r, 200));

      expect(rx.received.map((r) => envelopeOf(r).type)).to.deep.equal(["client.deleted"]);
      expect(await redis.llen(await webhooks.streamKey(appId, sub.id))).to.equal(1);
    });

    it("gives each subscription of the app its own signed copy, and other apps none", async () => {
      const [rxA, rxB, rxOther] = await Promise.all([receiver(), receiver(), receiver()]);
      const { appId } = await newApp();
      const other = await newApp();
      const a = await webhooks.register(appId, { url: rxA.url, events: ["client.created"] });
      const b = await webhooks.register(appId, {
        url: rxB.url,
        events: ["session.created", "client.created"],
      });
      await webhooks.register(other.appId, { url: rxOther.url, events: ["client.created"] });
      expect(a.secret).to.not.equal(b.secret);

      await webhooks.emit(appId, "client.created", { client_id: "rfc_1" });
      const [gotA] = await rxA.until((r) => r.length === 1);
      const [gotB] = await rxB.until((r) => r.length === 1);
      await settled(appId, a);
      await settled(appId, b);

      expect(signedBy(a.secret, gotA!)).to.equal(true);
      expect(signedBy(b.secret, gotB!)).to.equal(true);
      expect(signedBy(a.secret, gotB!)).to.equal(false);
      expect(signedBy(b.secret, gotA!)).to.equal(false);
      expect(envelopeOf(gotA!)).to.deep.equal(envelopeOf(gotB!));
      expect(await webhooks.streamKey(appId, a.id)).to.not.equal(await webhooks.streamKey(appId, b.id));
      expect(rxOther.received).to.have.length(0);
    });

    it("keeps the order of several emits", async () => {
      const rx = await receiver();
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, {
        url: rx.url,
        events: ["client.created", "client.deleted"],
      });
      const n = 25;
      for (let i = 0; i < n; i++) {
        await webhooks.emit(appId, i % 2 === 0 ? "client.created" : "client.deleted", { n: i });
      }
      await rx.until((r) => r.length >= n);
      await settled(appId, sub);

      expect(rx.received.map((r) => (envelopeOf(r).payload as { n: number }).n)).to.deep.equal(
        Array.from({ length: n }, (_, i) => i),
      );
      expect(rx.received.every((r) => signedBy(sub.secret, r))).to.equal(true);
    });

    it("records every one of many concurrent emits while streams are delivered and replaced", async () => {
      const rx = await receiver();
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, { url: rx.url, events: ["scope.granted"] });
      const errorsBefore = logs.entries.filter((e) => e.level === "error").length;
      const n = 40;
      for (let wave = 0; wave < 4; wave++) {
        await Promise.all(
          Array.from({ length: n / 4 }, (_, i) =>
            webhooks.emit(appId, "scope.granted", { n: wave * 10 + i }),
          ),
        );
        await new Promise((r) => setTimeout(r, 30));
      }
      await rx.until((r) => r.length >= n);
      await settled(appId, sub);
      const seen = rx.received.map((r) => (envelopeOf(r).payload as { n: number }).n);
      expect([...new Set(seen)].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: n }, (_, i) => i));
      expect(logs.entries.filter((e) => e.level === "error").length).to.equal(errorsBefore);
    });

    it("delivers everything, in order, to a receiver that was down", async () => {
      const rx = await receiver();
      let down = true;
      let refused = 0;
      rx.answer = () => {
        if (!down) return 200;
        refused++;
        return 503;
      };
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, { url: rx.url, events: ["client.created"] });
      for (let i = 0; i < 5; i++) await webhooks.emit(appId, "client.created", { n: i });
      await eventually("a few refused attempts", () => Promise.resolve(refused >= 3));
      expect(rx.received).to.have.length(0);
      const list = await webhooks.streamKey(appId, sub.id);
      expect(await redis.sismember(outboxKeys(list, keys).pending, list)).to.equal(1);

      down = false;
      await rx.until((r) => r.length >= 5);
      await settled(appId, sub);
      expect(rx.received.map((r) => (envelopeOf(r).payload as { n: number }).n)).to.deep.equal([
        0, 1, 2, 3, 4,
      ]);
    });

    it("keeps a stream 25 h from its last append, and starts a new one once it is delivered", async () => {
      const rx = await receiver();
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, { url: rx.url, events: ["client.created"] });
      await webhooks.emit(appId, "client.created", { n: 0 });
      await webhooks.emit(appId, "client.created", { n: 1 });
      const first = await webhooks.streamKey(appId, sub.id);
      const k = outboxKeys(first, keys);
      const day = 24 * 3_600_000;
      expect(await redis.pttl(first)).to.be.above(day + 3_500_000);
      expect(await redis.pttl(k.hook)).to.be.above(day + 3_500_000);
      await rx.until((r) => r.length === 2);
      await settled(appId, sub);
      expect(await redis.pttl(k.delivered)).to.be.above(day);

      // Fully delivered: the next event starts the next stream, and the delivered one goes.
      await webhooks.emit(appId, "client.created", { n: 2 });
      const second = await webhooks.streamKey(appId, sub.id);
      expect(second).to.not.equal(first);
      expect(await redis.exists(first, k.hook, k.delivered)).to.equal(0);
      expect(await redis.lrange(second, 0, -1)).to.have.length(1);
      expect(await redis.pttl(second)).to.be.above(day + 3_500_000);
      await rx.until((r) => r.length === 3);
      await settled(appId, sub);
      expect(rx.received.map((r) => (envelopeOf(r).payload as { n: number }).n)).to.deep.equal([0, 1, 2]);
      expect(rx.received.every((r) => signedBy(sub.secret, r))).to.equal(true);
    });

    it("never fails the caller: a failed kick is delivered by the sweep, a Redis error is logged", async () => {
      const rx = await receiver();
      const { appId } = await newApp();
      const sub = await webhooks.register(appId, { url: rx.url, events: ["client.deleted"] });
      const failing = capturingLogger();
      const noKick = new AppWebhooks(
        redis,
        keys,
        secrets,
        { kick: () => Promise.reject(new Error("queue down")) },
        failing.log,
      );
      await noKick.emit(appId, "client.deleted", { client_id: "rfc_1" });
      expect(failing.entries.map((e) => e.msg)).to.include("webhook delivery not started; the sweep will");
      const list = await webhooks.streamKey(appId, sub.id);
      expect(await redis.llen(list)).to.equal(1);
      expect(await redis.sismember(outboxKeys(list, keys).pending, list)).to.equal(1);
      expect(await outbox.sweep()).to.be.at.least(1);
      await rx.until((r) => r.length === 1);
      expect(signedBy(sub.secret, rx.received[0]!)).to.equal(true);

      const dead = new Redis(testRedisUrl(), { lazyConnect: true, maxRetriesPerRequest: 0 });
      dead.disconnect();
      const broken = new AppWebhooks(dead, keys, secrets, outbox, failing.log);
      await broken.emit(appId, "client.deleted", { client_id: "rfc_2" });
      expect(failing.entries.filter((e) => e.level === "error").map((e) => e.msg)).to.include(
        "app webhook event not recorded",
      );
      // Nothing leaks a secret into the logs.
      expect(JSON.stringify([...failing.entries, ...logs.entries])).to.not.include(sub.secret);
    });
  });

  describe("with the running service", () => {
    let app: TestApp;
    let own: WebhookOutbox;
    let events: AppWebhooks;

    before(async function () {
      this.timeout(30_000);
      app = await startTestApp({ WEBHOOK_SWEEP_INTERVAL_MS: "0" });
      const r = app.registry;
      own = new WebhookOutbox({
        outbound: LOOPBACK,
        redis: r.redis,
        connection: () => new Redis(app.config.REDIS_URL, { maxRetriesPerRequest: null, lazyConnect: true }),
        keys: r.keys,
        queuePrefix: `{${app.config.REDIS_KEY_PREFIX}appwh-bull}`,
        resolveSecret: (ref) => appWebhookSecret(r.redis, r.keys, r.secrets, ref),
        log: logs.log,
        timeoutMs: 2_000,
        backoff: { baseMs: 50, maxDelayMs: 200 },
        sweepIntervalMs: 0,
      });
      await own.start();
      events = new AppWebhooks(r.redis, r.keys, r.secrets, own, r.log);
    });
    after(async () => {
      await own.close();
      await app.stop();
    });

    it("sends client.created, client.secret_rotated and client.deleted, without secrets, for clients that work over REST", async () => {
      const r = app.registry;
      const rx = await receiver();
      const { app: made, managementApiKey } = await r.apps.create("Backend");
      const appId = made.appId;
      const auth = { authorization: `Bearer ${managementApiKey}` };
      const sub = await asBound(createAppWebhookHandler(events, LOOPBACK), r.apps.managementKey)(
        { appId, url: rx.url, events: ["client.created", "client.deleted", "client.secret_rotated"] },
        fakeContext(auth),
      );
      const unbound = oauthHandlers({
        apps: r.apps,
        clients: r.clients,
        failures: new TokenFailures(r.redis, r.keys, { perClient: null, perAddress: null }),
        keys: r.signingKeys,
        issuer: app.config.ISSUER_URL,
        lifetimeSeconds: app.config.ACCESS_TOKEN_TTL_SECONDS,
        events,
        ...proofChecks(r),
        outbound: r.outbound,
        keySet: new CachedKeySet(r.signingKeys),
        sessions: r.sessions,
      });
      const handlers = {
        createClient: asBound(unbound.createClient, r.apps.managementKey),
        deleteClient: asBound(unbound.deleteClient, r.apps.managementKey),
        rotateClientSecret: asBound(unbound.rotateClientSecret, r.apps.managementKey),
      };
      const token = (clientId: string, secret: string) =>
        rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
          form: { grant_type: "client_credentials" },
          headers: basicAuth(clientId, secret),
        });

      const created = await handlers.createClient(
        {
          appId,
          clientName: "Billing backend",
          providerUrl: "https://billing.example.com",
          redirectUris: [],
          scopes: ["billing:read", "billing:write"],
          grantTypes: ["client_credentials"],
          tokenEndpointAuthMethod: "",
          jwks: undefined,
          jwksUri: "",
        },
        fakeContext(auth),
      );
      expect((await token(created.clientId, created.clientSecret)).status).to.equal(200);
      const rotated = await handlers.rotateClientSecret(
        { appId, clientId: created.clientId, graceSeconds: 0 },
        fakeContext(auth),
      );
      expect((await token(created.clientId, rotated.clientSecret)).status).to.equal(200);

      const overRest = await rest(app.baseUrl).post(
        `/v2/session/apps/${appId}/oauth/clients`,
        {
          client_name: "Reports",
          provider_url: "https://reports.example.com",
          redirect_uris: [],
          scopes: [],
          grant_types: ["client_credentials"],
        },
        auth,
      );
      expect(overRest.status).to.equal(201);
      const restClient = overRest.body as { client_id: string; client_secret: string };

      for (const clientId of [restClient.client_id, created.clientId]) {
        const ctx = fakeContext(auth);
        await handlers.deleteClient({ appId, clientId }, ctx);
        // The 204 is the service binding's (app.ts): test/oauth/oauth.test.ts sees it over REST.
        expect(ctx.sent).not.to.have.property(HTTP_STATUS_MARKER);
      }
      expect((await token(created.clientId, rotated.clientSecret)).status).to.equal(401);
      const gone = await rejection(
        handlers.deleteClient({ appId, clientId: created.clientId }, fakeContext(auth)),
      );
      expect(gone.code).to.equal("not_found");

      // Other clients' events may come too once app.ts emits for REST calls: look at these ones.
      const about = (id: string) => (got: Received[]) =>
        got.filter((g) => (envelopeOf(g).payload as { client_id?: string }).client_id === id);
      await rx.until(
        (got) => about(created.clientId)(got).length === 3 && about(restClient.client_id)(got).length >= 1,
      );
      const mine = about(created.clientId)(rx.received);
      expect(mine.map((g) => envelopeOf(g).type)).to.deep.equal([
        "client.created",
        "client.secret_rotated",
        "client.deleted",
      ]);
      expect(envelopeOf(mine[0]!).payload).to.deep.equal({
        client_id: created.clientId,
        client_name: "Billing backend",
        scopes: ["billing:read", "billing:write"],
        grant_types: ["client_credentials"],
      });
      expect(envelopeOf(mine[1]!).payload).to.deep.equal({ client_id: created.clientId, grace_seconds: 0 });
      expect(envelopeOf(mine[2]!).payload).to.deep.equal({ client_id: created.clientId });
      expect(about(restClient.client_id)(rx.received).map((g) => envelopeOf(g).type)).to.include(
        "client.deleted",
      );
      for (const got of rx.received) {
        expect(signedBy(sub.secret, got)).to.equal(true);
        expect(got.body).to.not.include(created.clientSecret);
        expect(got.body).to.not.include(rotated.clientSecret);
        expect(got.body).to.not.include(restClient.client_secret);
        expect(got.body).to.not.include(sub.secret);
      }
    });
  });
});

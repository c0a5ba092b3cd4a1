import { randomUUID } from "node:crypto";
import { expect } from "chai";
import { Keys, type RedisClient } from "../../src/redis/client.js";
import { VerifyKeys } from "../../src/verify/keys.js";
import { hashCode } from "../../src/otp/code.js";
import { VerifyStore } from "../../src/verify/store.js";
import { compactEvent, expandEvent } from "../../src/verify/row.js";
import type { Envelope } from "../../src/verify/model.js";
import { ConfigError } from "../../src/config.js";
import { startTestApp, testConfig, type TestApp } from "../support/app.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { rest, type Json } from "../support/rest.js";
import { keysUnder } from "../support/redis.js";

/** Bytes Redis holds for each key under `prefix`, by MEMORY USAGE (the whole value: SAMPLES 0). */
async function usage(redis: RedisClient, prefix: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const key of await keysUnder(redis, prefix)) {
    out.set(key, Number(await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")));
  }
  return out;
}

/** The keys `during` created or grew, with the bytes each gained, less those `excluded` names. */
async function grown(
  redis: RedisClient,
  prefix: string,
  excluded: RegExp[],
  during: () => Promise<void>,
): Promise<Map<string, number>> {
  const before = await usage(redis, prefix);
  await during();
  const after = await usage(redis, prefix);
  const out = new Map<string, number>();
  for (const [key, bytes] of after) {
    const gained = bytes - (before.get(key) ?? 0);
    if (gained > 0 && !excluded.some((e) => e.test(key))) out.set(key, gained);
  }
  return out;
}

const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/**
 * Structures of one account or app that a send or login changes in place without growing per
 * send: the account hash (its balance), the month's spend counter, the customer's holds (a hold
 * lives only until the provider answers), the index of customers with holds, and an app's count
 * of messages sent. Excluded from the per-send bytes; everything else a send creates or grows
 * counts.
 */
const SHARED = [
  /:acct:\{[^}]+\}$/,
  /:acct:\{[^}]+\}:spend:/,
  /:holds:\{/,
  /:hold:\{/,
  /:app:\{[^}]+\}:messages$/,
];

/** The per-send budget of docs/capacity.md: every key one V1 send and one check create or grow. */
const BYTES_PER_SEND = 1_500;

describe("capacity: what Redis keeps per send, session and client", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let mail: Receiver;
  let customer: { uuid: string; key: string };
  let next = 640_000_000;
  /** A French mobile number in a range of its own: its range window counts as new too. */
  const fresh = () => `+33${(next += 1_000)}`;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    mail = await Receiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: mail.url,
    });
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Capacity",
      balanceMicros: 100_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: [],
      regions: [],
    });
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await mail.close();
  });

  const post = (path: string, body: Json) =>
    rest(app.baseUrl).call("POST", path, { body, headers: { "x-api-key": customer.key } });

  /** One V1 send and one right check; the authentication's uuid. */
  async function sendAndCheck(extra: Json = {}): Promise<string> {
    const before = sms.messages.length;
    const sent = await post("/v1/authentication", {
      customer_uuid: customer.uuid,
      phone_number: fresh(),
      ...extra,
    });
    expect(sent.body.status, JSON.stringify(sent.body)).to.equal("pending");
    const auth = String(sent.body.authentication_uuid);
    const code = SmsReceiver.code(await sms.message(before));
    const checked = await post("/v1/check", {
      customer_uuid: customer.uuid,
      authentication_uuid: auth,
      check_code: code,
    });
    expect(checked.body.status).to.equal("valid");
    return auth;
  }

  it(`keeps at most ${BYTES_PER_SEND} bytes for one V1 send and its check, every key counted`, async () => {
    // The account's shared keys exist once it has sent.
    await sendAndCheck();
    let auth = "";
    const bytes = await grown(app.registry.redis, app.config.REDIS_KEY_PREFIX, SHARED, async () => {
      auth = await sendAndCheck();
    });
    const keys = [...bytes.keys()];
    // The row (its events inside), the message id for receipts, and the windows of the send.
    expect(keys.some((k) => k.endsWith(`}:${auth}`))).to.equal(true);
    expect(keys.some((k) => k.includes(":smsref:"))).to.equal(true);
    expect(keys.some((k) => k.includes(":rl:"))).to.equal(true);
    expect(sum(bytes), JSON.stringify(Object.fromEntries(bytes))).to.be.at.most(BYTES_PER_SEND);
    // A validated row compares no code again, so it keeps no code hash.
    const row = app.registry.verify.authKeys(customer.uuid, auth).auth;
    expect(await app.registry.redis.hget(row, "code_hash")).to.equal(null);

    // What is kept reads back whole.
    const read = await rest(app.baseUrl).get(`/v1/authentication/${auth}`, { "x-api-key": customer.key });
    expect(read.status).to.equal(200);
    expect((read.body.events as { type: string }[]).map((e) => e.type)).to.deep.equal([
      "attempt",
      "balance_update",
      "check",
    ]);
  });

  it("keeps a send with every signal in a small listpack row; its windows go within the hour", async () => {
    let auth = "";
    const bytes = await grown(app.registry.redis, app.config.REDIS_KEY_PREFIX, SHARED, async () => {
      auth = await sendAndCheck({
        ip: "203.0.113.7",
        device_id: "4f1c2a9e-1b2c-4d3e-8f90-123456789abc",
        device_type: "ANDROID",
        app_version: "5.12.3",
        os_version: "14",
        device_model: "Pixel 8",
        is_returning_user: true,
        correlation_id: "order-123456",
      });
    });
    const row = app.registry.verify.authKeys(customer.uuid, auth).auth;
    expect(await app.registry.redis.object("ENCODING", row)).to.equal("listpack");
    // Each signal adds its send windows (docs/capacity.md): they expire with their window.
    const windows = [...bytes.keys()].filter((k) => /:(rl|spam):/.test(k));
    for (const k of windows) expect(await app.registry.redis.ttl(k)).to.be.within(1, 3_600);
    // The fraud engine's day of each new source (the address, its /24, the device), for two days,
    // and the converted number, a returning user for FRAUD_RETURNING_DAYS (docs/fraud.md).
    const sources = [...bytes.keys()].filter((k) => /:fraud:\{[^}]+\}:src:/.test(k));
    expect(sources).to.have.length(3);
    for (const k of sources) expect(await app.registry.redis.ttl(k)).to.be.within(1, 2 * 86_400);
    const numbers = [...bytes.keys()].filter((k) => /:fraud:\{[^}]+\}:num:/.test(k));
    expect(numbers).to.have.length(1);
    for (const k of numbers) expect(await app.registry.redis.ttl(k)).to.be.within(1, 90 * 86_400);
    const part = (keys: string[]) => keys.reduce((a, k) => a + (bytes.get(k) ?? 0), 0);
    expect(part(sources)).to.be.at.most(600);
    expect(part(numbers)).to.be.at.most(200);
    const kept = sum(bytes) - part(windows) - part(sources) - part(numbers);
    expect(kept, JSON.stringify(Object.fromEntries(bytes))).to.be.at.most(1_000);
  });

  it("measures a session login and an OAuth client (docs/capacity.md)", async () => {
    const { app: made, managementApiKey } = await app.registry.apps.create("Capacity");
    const prefix = app.config.REDIS_KEY_PREFIX;
    const email = `capacity-${randomUUID()}@example.com`;
    const session = await grown(app.registry.redis, prefix, SHARED, async () => {
      const before = mail.received.length;
      const started = await rest(app.baseUrl).post("/v1/session/login/otp", {
        app_id: made.appId,
        identifier: { type: "email_address", value: email },
      });
      expect(started.status).to.equal(200);
      await mail.until((r) => r.length > before);
      const body = (JSON.parse(mail.received[before]?.body ?? "{}") as { body: string }).body;
      const code = /\b(\d{6})\b/.exec(body)?.[1] ?? "";
      const checked = await rest(app.baseUrl).post("/v1/session/login/otp/check", {
        challenge_token: started.body.challenge_token,
        code,
      });
      expect(checked.status, JSON.stringify(checked.body)).to.equal(200);
    });
    const client = await grown(app.registry.redis, prefix, SHARED, async () => {
      const r = await rest(app.baseUrl).call("POST", `/v2/session/apps/${made.appId}/oauth/clients`, {
        bearer: managementApiKey,
        body: {
          client_name: "Billing backend",
          provider_url: "https://billing.example.com",
          redirect_uris: [],
          scopes: [],
          grant_types: ["client_credentials"],
        },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
    });
    // The figures of docs/capacity.md, with room for a longer e-mail address or name.
    expect([...session.keys()].some((k) => k.includes(":sess:{"))).to.equal(true);
    expect([...session.keys()].some((k) => k.includes(":known:{"))).to.equal(true);
    expect(sum(session), JSON.stringify(Object.fromEntries(session))).to.be.within(1, 1_400);
    expect(sum(client), JSON.stringify(Object.fromEntries(client))).to.be.within(1, 600);
  });
});

describe("capacity: retention settings", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let hooks: Receiver;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    hooks = await Receiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      OTP_TTL_SECONDS: "600",
      AUTHENTICATION_RETENTION_SECONDS: "3600",
      SMS_RECEIPT_RETENTION_SECONDS: "120",
      WEBHOOK_GIVE_UP_MS: "3600000",
    });
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await hooks.close();
  });

  it("keeps an authentication AUTHENTICATION_RETENTION_SECONDS past its expiry, its message id SMS_RECEIPT_RETENTION_SECONDS", async () => {
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Retention",
      balanceMicros: 10_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: [],
      regions: [],
    });
    const sent = await rest(app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: account.customerUuid, phone_number: "+33655000111", callback_url: hooks.url },
      { "x-api-key": apiKey },
    );
    expect(sent.body.status).to.equal("pending");
    const auth = String(sent.body.authentication_uuid);
    const expiresAt = Date.parse(String(sent.body.expires_at));
    const keys = app.registry.verify.authKeys(account.customerUuid, auth);
    const redis = app.registry.redis;
    for (const key of [keys.auth, keys.events, keys.hook]) {
      expect(Number(await redis.call("PEXPIRETIME", key)), key).to.equal(expiresAt + 3_600_000);
    }
    const ttl = await redis.ttl(
      new VerifyKeys(new Keys(app.config.REDIS_KEY_PREFIX)).messageRef("default", `${auth}.1`),
    );
    expect(ttl).to.be.within(110, 120);
  });

  it("refuses a retention shorter than OTP_TTL_SECONDS, or out of bounds, naming the variable", () => {
    expect(() => testConfig({ OTP_TTL_SECONDS: "900", AUTHENTICATION_RETENTION_SECONDS: "600" })).to.throw(
      ConfigError,
      'invalid AUTHENTICATION_RETENTION_SECONDS: must be at least OTP_TTL_SECONDS (900) (got "600")',
    );
    expect(() => testConfig({ AUTHENTICATION_RETENTION_SECONDS: "86399" })).to.throw(
      ConfigError,
      'invalid AUTHENTICATION_RETENTION_SECONDS: must cover WEBHOOK_GIVE_UP_MS (86400 s), or undelivered webhooks would be dropped (got "86399")',
    );
    expect(
      testConfig({ AUTHENTICATION_RETENTION_SECONDS: "3600", WEBHOOK_GIVE_UP_MS: "3600000" }),
    ).to.include({
      AUTHENTICATION_RETENTION_SECONDS: 3600,
    });
    expect(() => testConfig({ AUTHENTICATION_RETENTION_SECONDS: "7776001" })).to.throw(
      ConfigError,
      "invalid AUTHENTICATION_RETENTION_SECONDS: must be a whole number from 30 to 7776000",
    );
    expect(() => testConfig({ SMS_RECEIPT_RETENTION_SECONDS: "10" })).to.throw(
      ConfigError,
      "invalid SMS_RECEIPT_RETENTION_SECONDS: must be a whole number from 60 to 7776000",
    );
    const defaults = testConfig();
    expect(defaults.AUTHENTICATION_RETENTION_SECONDS).to.equal(7 * 86_400);
    expect(defaults.SMS_RECEIPT_RETENTION_SECONDS).to.equal(3 * 86_400);
  });
});

describe("capacity: rows stored before the compact format", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let customer: { uuid: string; key: string };

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    app = await startTestApp({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url });
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Upgrade",
      balanceMicros: 10_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: [],
      regions: [],
    });
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  /** An authentication as the previous version's send-code.lua wrote it, its first event included. */
  async function writeOldRow(code: string) {
    const auth = randomUUID();
    const now = Date.now();
    const createdAt = new Date(now).toISOString();
    const expiresMs = now + 600_000;
    const expiresAt = new Date(expiresMs).toISOString();
    const keys = app.registry.verify.authKeys(customer.uuid, auth);
    const redis = app.registry.redis;
    await redis.hset(keys.auth, {
      api: "v1",
      customer_uuid: customer.uuid,
      phone_number: "+33655000222",
      country_code: "FR",
      created_at: createdAt,
      expires_at: expiresAt,
      expires_at_ms: String(expiresMs),
      checks: "0",
      retries: "0",
      attempts: "1",
      validated: "0",
      correlation_id: "order-42",
      locale: "fr-FR",
      template_id: "default",
      from: "Ringfence",
      app_realm: "",
      callback_url: "",
      price_micros: "50000",
      code_length: "6",
      ip: "203.0.113.9",
      device_id: "",
      device_type: "IOS",
      app_version: "",
      os_version: "",
      device_model: "",
      is_returning_user: "0",
      status: "pending",
      code_hash: hashCode(app.registry.secrets, auth, code),
      next_retry_at_ms: String(now + 30_000),
    });
    const created = {
      id: randomUUID(),
      type: "authentication",
      created_at: createdAt,
      correlation_id: "order-42",
      payload: {
        authentication_uuid: auth,
        status: "pending",
        phone_number: "+33655000222",
        created_at: createdAt,
        expires_at: expiresAt,
      },
    };
    const attempt = {
      id: randomUUID(),
      type: "attempt",
      created_at: new Date(now + 40).toISOString(),
      correlation_id: "order-42",
      payload: { authentication_uuid: auth, attempt: 1, action: "send", status: "sent" },
    };
    await redis.rpush(keys.events, JSON.stringify(created), JSON.stringify(attempt));
    for (const key of [keys.auth, keys.events]) await redis.pexpireat(key, expiresMs + 7 * 86_400_000);
    return { auth, createdAt, attempt, keys };
  }

  it("reads back and checks a row written in the previous format, and keeps adding to its list", async () => {
    const { auth, createdAt, attempt, keys } = await writeOldRow("123456");
    const readBack = () => rest(app.baseUrl).get(`/v1/authentication/${auth}`, { "x-api-key": customer.key });
    const first = await readBack();
    expect(first.status).to.equal(200);
    expect(first.body).to.deep.include({
      uuid: auth,
      phone_number: "+33655000222",
      created_at: createdAt,
      correlation_id: "order-42",
      template_id: "default",
    });
    expect(first.body.signals).to.deep.equal({
      ip: "203.0.113.9",
      device_type: "IOS",
      is_returning_user: false,
    });
    expect(first.body.events).to.deep.equal([
      {
        type: "attempt",
        created_at: attempt.created_at,
        id: attempt.id,
        attempt_number: 1,
        capability: "text",
        sender_id: "Ringfence",
        status: "pending",
      },
      {
        type: "balance_update",
        created_at: attempt.created_at,
        amount: -0.05,
        balance_update_type: "attempt",
      },
    ]);

    const checked = await rest(app.baseUrl).call("POST", "/v1/check", {
      body: { customer_uuid: customer.uuid, authentication_uuid: auth, check_code: "123456" },
      headers: { "x-api-key": customer.key },
    });
    expect(checked.body.status).to.equal("valid");
    // The old row's events stay in its list, in order; none is split into the row.
    expect(await app.registry.redis.llen(keys.events)).to.equal(3);
    expect(await app.registry.redis.hget(keys.auth, "en")).to.equal(null);
    const second = await readBack();
    expect((second.body.events as { type: string; status?: string }[]).at(-1)).to.include({
      type: "check",
      status: "valid",
    });
  });

  it("finds the authentication of a message id remembered in the previous format", async () => {
    const store = new VerifyStore(app.registry.redis, new Keys(app.config.REDIS_KEY_PREFIX));
    const ref = { customer: customer.uuid, auth: randomUUID(), attempt: 2 };
    await app.registry.redis.set(
      new Keys(app.config.REDIS_KEY_PREFIX).key("smsref", "smsc-77"),
      JSON.stringify(ref),
    );
    expect(await store.messageOwner("smpp", "smsc-77")).to.deep.equal(ref);
    await store.rememberMessage("smpp", "smsc-78", ref, 60);
    expect(await store.messageOwner("smpp", "smsc-78")).to.deep.equal(ref);
    // Kept per provider: another provider's message of the same id is not this one.
    expect(await store.messageOwner("http", "smsc-78")).to.equal(undefined);
  });
});

describe("capacity: compact event records", () => {
  const auth = randomUUID();
  const ctx = {
    authUuid: auth,
    phone: "+33612345678",
    correlationId: "c-1",
    expiresAt: "2030-01-01T00:10:00.000Z",
  };
  const envelope = (type: string, payload: Record<string, unknown>, at = "2030-01-01T00:00:01.234Z") =>
    ({ id: randomUUID(), type, created_at: at, correlation_id: "c-1", payload }) as Envelope;

  it("reads every V1 event back exactly as its envelope", () => {
    const events = [
      envelope("authentication", {
        authentication_uuid: auth,
        status: "rate_limited",
        phone_number: ctx.phone,
        created_at: "2030-01-01T00:00:01.234Z",
        expires_at: ctx.expiresAt,
      }),
      envelope("attempt", { authentication_uuid: auth, attempt: 2, action: "retry", status: "sent" }),
      envelope("attempt", { authentication_uuid: auth, action: "check", status: "invalid" }),
      envelope("delivery_status", {
        authentication_uuid: auth,
        attempt: 1,
        status: "failed",
        provider_status: "UNDELIV",
        error_code: "0x0b",
      }),
    ];
    for (const e of events) {
      const compact = compactEvent(e, ctx);
      expect(compact, e.type).to.match(/^\[/);
      expect(compact.length).to.be.at.most(64);
      expect(expandEvent(compact, ctx)).to.deep.equal(e);
    }
  });

  it("keeps as JSON what it could not read back exactly or would not fit a listpack value", () => {
    const long = envelope("delivery_status", {
      authentication_uuid: auth,
      attempt: 1,
      status: "failed",
      provider_status: "x".repeat(40),
    });
    const odd = envelope(
      "attempt",
      { authentication_uuid: auth, action: "check", status: "valid" },
      "2030-01-01",
    );
    const other = envelope("attempt", {
      authentication_uuid: randomUUID(),
      action: "check",
      status: "valid",
    });
    const v2 = envelope("verify.attempt", { id: "att_1" });
    for (const e of [long, odd, other, v2]) expect(compactEvent(e, ctx), e.type).to.equal("");
  });
});

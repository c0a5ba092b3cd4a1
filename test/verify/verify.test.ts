import { expect } from "chai";
import { VerifyServiceClient } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { verifyWebhook } from "../../src/webhooks/signature.js";
import { V1_DEPRECATION } from "../../src/v1/deprecation.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { sendRequest } from "../support/v1.js";
import { rest, type Json } from "../support/rest.js";
import { keysAddedSince, keysUnder, waitFor } from "../support/redis.js";
import { createLogger } from "../../src/log.js";

const FR_MOBILE = "+33612345678";
const FR_PREMIUM = "+33891234567";

interface Customer {
  uuid: string;
  key: string;
  webhookSecret: string;
}

describe("V1 verification", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let hooks: Receiver;
  let c: Customer;
  const logLines: string[] = [];
  let nextNumber = 612_000_100;

  /**
   * A fresh French mobile number in a range of its own, so per-number limits and the SMS-pumping
   * range rule of one test do not touch another.
   */
  const freshNumber = () => `+33${(nextNumber += 1000)}`;

  async function newCustomer(opts: { balance?: number; limit?: number; senderIds?: string[] } = {}) {
    const { account, apiKey, webhookSecret } = await app.registry.accounts.create({
      name: "Verify",
      balanceMicros: opts.balance ?? 100_000_000,
      spendingLimitMicros: opts.limit ?? 1_000_000_000,
      features: [],
      regions: [],
      senderIds: opts.senderIds ?? [],
    });
    return { uuid: account.customerUuid, key: apiKey, webhookSecret };
  }

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    hooks = await Receiver.start();
    app = await startTestApp(
      {
        SMS_PROVIDER: "http",
        SMS_HTTP_URL: sms.url,
        OTP_RETRY_INTERVAL_SECONDS: "1",
        WEBHOOK_BACKOFF_BASE_MS: "50",
      },
      createLogger("debug", (line) => logLines.push(line)),
    );
    c = await newCustomer();
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await hooks.close();
  });

  const post = (path: string, body: unknown, who: Customer = c, raw?: string) =>
    rest(app.baseUrl).call("POST", path, { body, raw, headers: { "x-api-key": who.key } });

  /** GET /v1/authentication/{uuid} with an account's key. */
  const readBack = (auth: unknown, key = c.key) =>
    rest(app.baseUrl).get(`/v1/authentication/${String(auth)}`, { "x-api-key": key });

  async function send(extra: Json = {}, who: Customer = c) {
    return post(
      "/v1/authentication",
      { customer_uuid: who.uuid, phone_number: freshNumber(), ...extra },
      who,
    );
  }

  async function check(auth: unknown, code: string, who: Customer = c) {
    return post("/v1/check", { customer_uuid: who.uuid, authentication_uuid: auth, check_code: code }, who);
  }

  async function retry(auth: unknown, who: Customer = c) {
    return post("/v1/retry", { customer_uuid: who.uuid, authentication_uuid: auth }, who);
  }

  async function balance(who: Customer): Promise<number> {
    return (await app.registry.accounts.get(who.uuid))?.balanceMicros ?? Number.NaN;
  }

  describe("sending and checking over REST", () => {
    it("sends a code that the check finds valid, then already_validated", async () => {
      const phone = freshNumber();
      const before = sms.messages.length;
      const sent = await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: phone });
      expect(sent.status).to.equal(200);
      expect(sent.headers.get("deprecation")).to.equal(V1_DEPRECATION);
      expect(Object.keys(sent.body).sort()).to.deep.equal([
        "authentication_uuid",
        "created_at",
        "expires_at",
        "status",
      ]);
      expect(sent.body.status).to.equal("pending");
      const created = Date.parse(String(sent.body.created_at));
      expect(Date.parse(String(sent.body.expires_at)) - created).to.equal(600_000);

      const message = await sms.message(before);
      expect(message).to.include({ to: phone, from: "Ringfence", locale: "fr-FR" });
      expect(message.reference).to.be.a("string").and.not.empty;
      const code = SmsReceiver.code(message);
      expect(code).to.match(/^\d{6}$/);

      expect((await check(sent.body.authentication_uuid, code)).body).to.deep.equal({
        authentication_uuid: sent.body.authentication_uuid,
        status: "valid",
      });
      expect((await check(sent.body.authentication_uuid, code)).body.status).to.equal("already_validated");
    });

    it("finds a wrong code invalid, and refuses the sixth check with rate_limited even when right", async () => {
      const before = sms.messages.length;
      const sent = await send();
      const code = SmsReceiver.code(await sms.message(before));
      const wrong = code === "000000" ? "111111" : "000000";
      for (let i = 0; i < 5; i++)
        expect((await check(sent.body.authentication_uuid, wrong)).body.status).to.equal("invalid");
      expect((await check(sent.body.authentication_uuid, code)).body.status).to.equal("rate_limited");
    });

    it("lets exactly one of many concurrent right checks succeed", async () => {
      const before = sms.messages.length;
      const sent = await send();
      const code = SmsReceiver.code(await sms.message(before));
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => check(sent.body.authentication_uuid, code)),
      );
      const statuses = answers.map((a) => a.body.status);
      expect(statuses.filter((s) => s === "valid")).to.have.length(1);
      expect(statuses.filter((s) => s !== "valid").every((s) => s === "already_validated")).to.equal(true);
    });

    it("never lets concurrent wrong checks pass the attempt limit", async () => {
      const sent = await send();
      const answers = await Promise.all(
        Array.from({ length: 30 }, () => check(sent.body.authentication_uuid, "99999999")),
      );
      const statuses = answers.map((a) => a.body.status);
      expect(statuses.filter((s) => s === "invalid")).to.have.length(5);
      expect(statuses.filter((s) => s === "rate_limited")).to.have.length(25);
      const read = await readBack(sent.body.authentication_uuid);
      const { events } = read.body as { events: Json[] };
      expect(events.filter((e) => e.type === "check").map((e) => e.status)).to.deep.equal(
        Array(5).fill("invalid"),
      );
    });

    it("answers expired_auth after expires_at", async () => {
      const short = await startTestApp({
        SMS_PROVIDER: "http",
        SMS_HTTP_URL: sms.url,
        OTP_TTL_SECONDS: "30",
      });
      try {
        const { account, apiKey } = await short.registry.accounts.create({
          name: "Short",
          balanceMicros: 10_000_000,
          spendingLimitMicros: 10_000_000,
          features: [],
          regions: [],
        });
        const who = { uuid: account.customerUuid, key: apiKey, webhookSecret: "" };
        const api = (path: string, body: Json) =>
          rest(short.baseUrl).post(path, body, { "x-api-key": apiKey });
        const { body: sent } = await api("/v1/authentication", {
          customer_uuid: who.uuid,
          phone_number: freshNumber(),
        });
        // Move the expiry into the past, as 30 s of waiting would.
        const key = short.registry.keys.key("auth", who.uuid, String(sent.authentication_uuid));
        await short.registry.redis.hset(key, "expires_at_ms", String(Date.now() - 1));
        const answer = await api("/v1/check", {
          customer_uuid: who.uuid,
          authentication_uuid: sent.authentication_uuid,
          check_code: "123456",
        });
        expect(answer.body.status).to.equal("expired_auth");
        const again = await api("/v1/retry", {
          customer_uuid: who.uuid,
          authentication_uuid: sent.authentication_uuid,
        });
        expect(again.body.status).to.equal("expired_auth");
      } finally {
        await short.stop();
      }
    });
  });

  describe("retries", () => {
    it("denies a retry before next_retry_at, then sends a different code that replaces the first", async function () {
      this.timeout(10_000);
      const before = sms.messages.length;
      const sent = await send();
      const first = SmsReceiver.code(await sms.message(before));

      const early = await retry(sent.body.authentication_uuid);
      expect(early.body).to.include({
        authentication_uuid: sent.body.authentication_uuid,
        status: "denied",
        remaining_retry: 3,
      });
      expect(Date.parse(String(early.body.next_retry_at))).to.be.greaterThan(Date.now() - 1000);
      expect(sms.messages.length, "a denied retry sends nothing").to.equal(before + 1);

      await new Promise((r) => setTimeout(r, 1100));
      const approved = await retry(sent.body.authentication_uuid);
      expect(approved.body).to.include({ status: "approved", remaining_retry: 2 });
      expect(Object.keys(approved.body).sort()).to.deep.equal([
        "authentication_uuid",
        "created_at",
        "next_retry_at",
        "remaining_retry",
        "status",
      ]);
      const second = SmsReceiver.code(await sms.message(before + 1));
      expect(second).not.to.equal(first);
      expect((await check(sent.body.authentication_uuid, first)).body.status).to.equal("invalid");
      expect((await check(sent.body.authentication_uuid, second)).body.status).to.equal("valid");
      expect((await retry(sent.body.authentication_uuid)).body.status).to.equal("already_validated");
    });

    it("allows three retries, then answers rate_limited", async function () {
      this.timeout(15_000);
      const sent = await send();
      for (const remaining of [2, 1, 0]) {
        await new Promise((r) => setTimeout(r, 1050));
        const r = await retry(sent.body.authentication_uuid);
        expect(r.body).to.include({ status: "approved", remaining_retry: remaining });
      }
      await new Promise((r) => setTimeout(r, 1050));
      const last = (await retry(sent.body.authentication_uuid)).body;
      expect(last).to.include({ status: "rate_limited", remaining_retry: 0 });
      expect(last).not.to.have.property("next_retry_at");
    });

    it("answers no_attempt and without_attempt for an authentication that sent nothing", async () => {
      const spam = await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: FR_PREMIUM });
      expect(spam.body.status).to.equal("spam_detected");
      expect((await retry(spam.body.authentication_uuid)).body.status).to.equal("no_attempt");
      expect((await check(spam.body.authentication_uuid, "123456")).body.status).to.equal("without_attempt");
    });
  });

  describe("abuse protection", () => {
    it("answers the sixth send to one number within 10 minutes with rate_limited, sending and charging nothing", async () => {
      const phone = freshNumber();
      for (let i = 0; i < 5; i++) {
        expect(
          (await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: phone })).body.status,
        ).to.equal("pending");
      }
      const messages = sms.messages.length;
      const money = await balance(c);
      const sixth = await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: phone });
      expect(sixth.status).to.equal(200);
      expect(sixth.body.status).to.equal("rate_limited");
      expect(sixth.body.authentication_uuid).to.be.a("string");
      expect(sms.messages.length).to.equal(messages);
      expect(await balance(c)).to.equal(money);
    });

    it("flags a premium-rate number as spam_detected, sending and charging nothing", async () => {
      const messages = sms.messages.length;
      const money = await balance(c);
      const r = await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: FR_PREMIUM });
      expect(r.body.status).to.equal("spam_detected");
      expect(sms.messages.length).to.equal(messages);
      expect(await balance(c)).to.equal(money);
    });

    it("flags a disposable number, and a number an operator marked shared-cost", async () => {
      const disposable = freshNumber();
      const shared = freshNumber();
      await app.registry.lookupData.put(
        new Map([
          [disposable, { temporaryPhoneNumber: true }],
          [shared, { lineType: "SharedCost" as const }],
        ]),
      );
      expect(
        (await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: disposable })).body.status,
      ).to.equal("spam_detected");
      expect(
        (await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: shared })).body.status,
      ).to.equal("spam_detected");
    });

    it("flags one IP reaching a sixth number within the hour", async () => {
      const who = await newCustomer();
      const ip = "203.0.113.9";
      for (let i = 0; i < 5; i++) expect((await send({ ip }, who)).body.status).to.equal("pending");
      expect((await send({ ip }, who)).body.status).to.equal("spam_detected");
      expect((await send({ ip: "203.0.113.10" }, who)).body.status).to.equal("pending");
    });

    it("flags one device reaching a fourth number within the hour", async () => {
      const who = await newCustomer();
      for (let i = 0; i < 3; i++)
        expect((await send({ device_id: "dev-1" }, who)).body.status).to.equal("pending");
      expect((await send({ device_id: "dev-1" }, who)).body.status).to.equal("spam_detected");
    });

    it("flags a burst of sends into one number range (SMS pumping)", async () => {
      const who = await newCustomer();
      const base = 612_777_000;
      const statuses: unknown[] = [];
      for (let i = 0; i < 11; i++) {
        statuses.push(
          (await post("/v1/authentication", { customer_uuid: who.uuid, phone_number: `+33${base + i}` }, who))
            .body.status,
        );
      }
      expect(statuses.slice(0, 10).every((s) => s === "pending")).to.equal(true);
      expect(statuses[10]).to.equal("spam_detected");
    });
  });

  describe("billing", () => {
    it("charges the destination country's price for each message", async () => {
      const who = await newCustomer({ balance: 1_000_000 });
      await send({}, who);
      expect(await balance(who)).to.equal(950_000);
    });

    it("refuses with 400 negative_balance (the SDKs' status) before anything is sent", async () => {
      const who = await newCustomer({ balance: 40_000 });
      const messages = sms.messages.length;
      const r = await send({}, who);
      expect(r.status).to.equal(400);
      expect(r.body).to.include({ code: "negative_balance" });
      expect(sms.messages.length).to.equal(messages);
      expect(await balance(who)).to.equal(40_000);
    });

    it("refuses with 402 spending_limit_exceeded once this month's spend would pass the limit", async () => {
      const who = await newCustomer({ balance: 10_000_000, limit: 100_000 });
      expect((await send({}, who)).status).to.equal(200);
      expect((await send({}, who)).status).to.equal(200);
      const third = await send({}, who);
      expect(third.status).to.equal(402);
      expect(third.body).to.include({ code: "spending_limit_exceeded" });
      expect(await balance(who)).to.equal(9_900_000);
    });

    it("refunds and frees the window when the provider does not accept the message", async () => {
      const who = await newCustomer({ balance: 1_000_000 });
      const phone = freshNumber();
      sms.receiver.answer = () => 503;
      try {
        const r = await post("/v1/authentication", { customer_uuid: who.uuid, phone_number: phone }, who);
        expect(r.status).to.equal(500);
        expect(r.body).to.include({ code: "internal_server_error" });
        expect(await balance(who)).to.equal(1_000_000);
      } finally {
        sms.receiver.answer = () => 200;
      }
      for (let i = 0; i < 5; i++) {
        expect(
          (await post("/v1/authentication", { customer_uuid: who.uuid, phone_number: phone }, who)).body
            .status,
        ).to.equal("pending");
      }
    });
  });

  describe("messages", () => {
    it("writes the message in the requested locale, the number's language when unset, en-US when unsupported", async () => {
      const cases: [Json, string][] = [
        [{ locale: "de-DE" }, "de-DE"],
        [{ locale: "es" }, "es"],
        [{}, "fr-FR"],
        [{ locale: "sv-SE" }, "en-US"],
      ];
      for (const [extra, locale] of cases) {
        const before = sms.messages.length;
        await send(extra);
        expect((await sms.message(before)).locale, JSON.stringify(extra)).to.equal(locale);
      }
    });

    it("uses a sender_id the account may use, the default without one, and refuses another with unauthorized_sender_id", async () => {
      const who = await newCustomer({ senderIds: ["Acme"] });
      let before = sms.messages.length;
      await send({ sender_id: "Acme" }, who);
      expect((await sms.message(before)).from).to.equal("Acme");
      before = sms.messages.length;
      await send({}, who);
      expect((await sms.message(before)).from).to.equal("Ringfence");
      const keysBefore = await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
      before = sms.messages.length;
      const other = await send({ sender_id: "Other" }, who);
      expect([other.status, other.body.code]).to.deep.equal([400, "unauthorized_sender_id"]);
      expect(String(other.body.message)).to.include('"Other"');
      expect(sms.messages.length).to.equal(before);
      expect(await keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, keysBefore)).to.deep.equal(
        [],
      );
    });

    it("picks a template variant, including one registered for the account", async () => {
      const who = await newCustomer();
      await app.registry.accounts.setTemplate(who.uuid, "brand", "fr", "Acme : votre code est {code}");
      const before = sms.messages.length;
      await send({ template_id: "brand" }, who);
      const m = await sms.message(before);
      expect(m.body).to.match(/^Acme : votre code est \d{6}$/);
      const unknown = await send({ template_id: "nope" }, who);
      expect([unknown.status, unknown.body.code]).to.deep.equal([400, "invalid_template_id"]);
      expect(String(unknown.body.message)).to.include("nope");
    });

    it("appends the Android SMS Retriever hash for app_realm", async () => {
      const before = sms.messages.length;
      await send({ device_type: "ANDROID", app_realm: "FA+9qCX9VSu" });
      const m = await sms.message(before);
      expect(m.body.startsWith("<#> ")).to.equal(true);
      expect(m.body.endsWith("\nFA+9qCX9VSu")).to.equal(true);
    });
  });

  describe("bad input", () => {
    const long = (n: number) => "x".repeat(n + 1);
    const cases: [string, Json, string, string][] = [
      ["ip", { ip: "999.1.1.1" }, "ip", "bad_request"],
      ["device_type", { device_type: "PHONE" }, "device_type", "bad_request"],
      ["callback_url", { callback_url: "ftp://example.com/x" }, "callback_url", "bad_request"],
      ["locale", { locale: "not a tag!" }, "locale", "bad_request"],
      ["correlation_id", { correlation_id: long(256) }, "correlation_id", "bad_request"],
      ["device_id", { device_id: long(256) }, "device_id", "invalid_device_id"],
      ["app_version", { app_version: long(64) }, "app_version", "invalid_app_version"],
      ["os_version", { os_version: long(64) }, "os_version", "invalid_os_version"],
      ["device_model", { device_model: long(128) }, "device_model", "invalid_device_model"],
      ["template_id", { template_id: long(64) }, "template_id", "invalid_template_id"],
      [
        "app_realm with IOS",
        { app_realm: "FA+9qCX9VSu", device_type: "IOS" },
        "app_realm",
        "unsupported_app_realm_device_type",
      ],
      [
        "app_realm without device_type",
        { app_realm: "FA+9qCX9VSu" },
        "app_realm",
        "app_realm_require_device_type",
      ],
      ["app_realm shape", { app_realm: "short", device_type: "ANDROID" }, "app_realm", "invalid_app_realm"],
      ["sender_id", { sender_id: "Much-Too-Long-Sender" }, "sender_id", "invalid_sender_id"],
      ["unknown field", { colour: "blue" }, "colour", "bad_request"],
      ["wrong type", { is_returning_user: "yes" }, "is_returning_user", "bad_request"],
    ];
    for (const [name, extra, field, code] of cases) {
      it(`refuses a bad ${name} with 400 ${code} naming ${field}, storing and sending nothing`, async () => {
        const keysBefore = await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
        const messages = sms.messages.length;
        const r = await send(extra);
        expect(r.status).to.equal(400);
        expect(r.body.code).to.equal(code);
        expect(String(r.body.message)).to.include(field);
        expect(
          await keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, keysBefore),
        ).to.deep.equal([]);
        expect(sms.messages.length).to.equal(messages);
      });
    }

    it("refuses malformed JSON and an invalid number, and an unknown customer or key", async () => {
      expect((await post("/v1/authentication", undefined, c, "{not json")).body.code).to.equal("bad_request");
      const bad = await post("/v1/authentication", { customer_uuid: c.uuid, phone_number: "+1555" });
      expect([bad.status, bad.body.code]).to.deep.equal([400, "invalid_phone_number"]);
      const stranger = await post(
        "/v1/authentication",
        { customer_uuid: c.uuid, phone_number: FR_MOBILE },
        { ...c, key: "rfk_wrong" },
      );
      expect([stranger.status, stranger.body.code]).to.deep.equal([400, "account_invalid"]);
    });

    it("refuses a malformed check_code or authentication_uuid, and an authentication of another customer", async () => {
      const sent = await send();
      const badCode = await check(sent.body.authentication_uuid, "12ab");
      expect([badCode.status, badCode.body.code]).to.deep.equal([400, "bad_request"]);
      const badUuid = await check("not-a-uuid", "123456");
      expect([badUuid.status, badUuid.body.code]).to.deep.equal([400, "invalid_auth_uuid"]);
      const badRetry = await retry("not-a-uuid");
      expect([badRetry.status, badRetry.body.code]).to.deep.equal([400, "invalid_auth_uuid"]);
      const other = await newCustomer();
      const r = await check(sent.body.authentication_uuid, "123456", other);
      expect([r.status, r.body.code]).to.deep.equal([400, "no_associated_auth_found"]);
      const r2 = await retry(sent.body.authentication_uuid, other);
      expect([r2.status, r2.body.code]).to.deep.equal([400, "no_associated_auth_found"]);
    });
  });

  describe("feedback", () => {
    it("records onboarded and not_onboarded, refusing a repeat of the recorded status with duplicated_feedback_status", async () => {
      const body = { customer_uuid: c.uuid, phone_number: FR_MOBILE, status: "onboarded" };
      const a = await post("/v1/authentication/feedback", body);
      expect(a.status).to.equal(200);
      expect(Object.keys(a.body)).to.deep.equal(["uuid"]);
      expect(a.body.uuid).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const b = await post("/v1/authentication/feedback", body);
      expect([b.status, b.body.code]).to.deep.equal([400, "duplicated_feedback_status"]);
      expect(String(b.body.message)).to.include(String(a.body.uuid));
      const not = await post("/v1/authentication/feedback", { ...body, status: "not_onboarded" });
      expect(not.status).to.equal(200);
      expect(not.body.uuid).not.to.equal(a.body.uuid);
      const again = await post("/v1/authentication/feedback", body);
      expect([again.status, again.body.uuid]).to.deep.equal([200, a.body.uuid]);
      const bad = await post("/v1/authentication/feedback", { ...body, status: "maybe" });
      expect([bad.status, bad.body.code]).to.deep.equal([400, "invalid_feedback_status"]);
      expect(String(bad.body.message)).to.include("status");
    });
  });

  describe("events and webhooks", () => {
    it("reads an authentication back with its events, and delivers them signed and in order to callback_url", async () => {
      const before = sms.messages.length;
      const sent = await send({ callback_url: hooks.url, correlation_id: "order-42" });
      const code = SmsReceiver.code(await sms.message(before));
      await check(sent.body.authentication_uuid, code === "000000" ? "111111" : "000000");
      await check(sent.body.authentication_uuid, code);

      // The original API reads back with the key alone.
      const read = await readBack(sent.body.authentication_uuid);
      expect(read.status).to.equal(200);
      const body = read.body as Json & { events: Json[] };
      expect(body).to.deep.include({
        uuid: sent.body.authentication_uuid,
        phone_number: body.phone_number,
        created_at: sent.body.created_at,
        correlation_id: "order-42",
        template_id: "default",
        signals: {},
      });
      expect(Object.keys(body).sort()).to.deep.equal([
        "correlation_id",
        "created_at",
        "events",
        "phone_number",
        "signals",
        "template_id",
        "uuid",
      ]);
      expect(body.events.map((e) => [e.type, e.status ?? null])).to.deep.equal([
        ["attempt", "pending"],
        ["balance_update", null],
        ["check", "invalid"],
        ["check", "valid"],
      ]);
      expect(body.events[0]).to.include({ attempt_number: 1, capability: "text", sender_id: "Ringfence" });
      expect(body.events[1]).to.include({ amount: -0.05, balance_update_type: "attempt" });
      expect(JSON.stringify(body)).not.to.include(code);
      const delivered = await hooks.until(
        (r) => r.filter((x) => x.body.includes(String(sent.body.authentication_uuid))).length >= 4,
      );
      const mine = delivered.filter((x) => x.body.includes(String(sent.body.authentication_uuid)));
      // The same events, by the same ids: the read-back leaves out the `authentication` event.
      expect(mine.map((x) => (JSON.parse(x.body) as Json).id).slice(1)).to.deep.equal(
        body.events.filter((e) => e.id !== undefined).map((e) => e.id),
      );
      for (const d of mine) {
        const envelope = JSON.parse(d.body) as Json;
        expect(envelope).to.include({ correlation_id: "order-42" });
        expect(Object.keys(envelope).sort()).to.deep.equal([
          "correlation_id",
          "created_at",
          "id",
          "payload",
          "type",
        ]);
        const header = String(d.headers["x-webhook-signature"]);
        expect(verifyWebhook(c.webhookSecret, d.body, header, 300, Math.floor(Date.now() / 1000))).to.equal(
          true,
        );
        expect(d.body).not.to.include(code);
      }
    });
    it("puts any correlation_id into the events a check records, byte for byte as JSON", async () => {
      const correlationId = 'quote " slash / back \\ tab\t é ☃';
      // With a callback the events are the webhook stream: the JSON bytes it POSTs.
      const sent = await send({ correlation_id: correlationId, callback_url: hooks.url });
      await check(sent.body.authentication_uuid, "000000");
      await check(sent.body.authentication_uuid, "111111");
      const list = app.registry.verify.authKeys(c.uuid, String(sent.body.authentication_uuid)).events;
      const stored = (await app.registry.redis.lrange(list, 0, -1)).map((e) => JSON.parse(e) as Json);
      expect(stored.map((e) => [e.type, (e.payload as Json).action ?? null])).to.deep.include.members([
        ["attempt", "check"],
      ]);
      for (const envelope of stored) expect(envelope.correlation_id).to.equal(correlationId);
      const plain = await send({ callback_url: hooks.url });
      await check(plain.body.authentication_uuid, "000000");
      const events = app.registry.verify.authKeys(c.uuid, String(plain.body.authentication_uuid)).events;
      for (const raw of await app.registry.redis.lrange(events, 0, -1)) {
        expect(JSON.parse(raw) as Json).not.to.have.property("correlation_id");
      }
    });
  });

  describe("read-back by key", () => {
    it("finds an account stored before the key index once a start indexes it, and never by another key", async () => {
      const who = await newCustomer();
      const sent = await send({}, who);
      const read = (key: string) => readBack(sent.body.authentication_uuid, key);
      // As an account written before the index existed (and never read by its key since: the
      // service keeps the owner of a key it has seen, as an index entry never changes).
      const stored = await app.registry.accounts.get(who.uuid);
      await app.registry.redis.del(app.registry.keys.key("apikey", stored?.apiKeyHash ?? ""));
      const lost = await read(who.key);
      expect([lost.status, lost.body.code]).to.deep.equal([400, "account_invalid"]);
      const next = await startTestApp({
        REDIS_KEY_PREFIX: app.config.REDIS_KEY_PREFIX,
        SMS_PROVIDER: "http",
        SMS_HTTP_URL: sms.url,
      });
      try {
        // The start indexes in the background.
        await waitFor(async () => (await read(who.key)).status === 200, 5_000);
      } finally {
        await next.stop();
      }
      // A key's hash is looked up, never the key: a near key finds nothing.
      const near = await read(`${who.key.slice(0, -1)}${who.key.endsWith("a") ? "b" : "a"}`);
      expect([near.status, near.body.code]).to.deep.equal([400, "account_invalid"]);
      const keys = await app.registry.redis.keys(`${app.config.REDIS_KEY_PREFIX}apikey:*`);
      expect(keys.join(" ")).not.to.include(who.key);
    });
  });

  describe("over gRPC", () => {
    it("sends a code and checks it with a generated client, with the deprecation headers", async () => {
      const client = new VerifyServiceClient(app.grpcAddress, insecure);
      const md = metadata({ "x-api-key": c.key });
      const phone = freshNumber();
      const before = sms.messages.length;
      const sent = await unary(
        client.createAuthentication.bind(client),
        sendRequest({ customerUuid: c.uuid, phoneNumber: phone }),
        md,
      );
      expect(sent.err).to.equal(null);
      expect(sent.res?.status).to.equal("pending");
      expect(sent.headers?.get("deprecation")).to.deep.equal([V1_DEPRECATION]);
      const code = SmsReceiver.code(await sms.message(before));
      const wrong = await unary(
        client.checkAuthentication.bind(client),
        {
          customerUuid: c.uuid,
          authenticationUuid: sent.res?.authenticationUuid ?? "",
          checkCode: code === "000000" ? "111111" : "000000",
        },
        md,
      );
      expect(wrong.res?.status).to.equal("invalid");
      const right = await unary(
        client.checkAuthentication.bind(client),
        {
          customerUuid: c.uuid,
          authenticationUuid: sent.res?.authenticationUuid ?? "",
          checkCode: code,
        },
        md,
      );
      expect(right.res?.status).to.equal("valid");
      client.close();
    });
  });

  describe("with an account made by the CLI", () => {
    it("sends and checks a code", async () => {
      const r = await runCli(
        ["accounts", "create", "--name", "Cli", "--balance", "1.00"],
        cliEnv(app.config),
      );
      const made = JSON.parse(r.stdout) as { customer_uuid: string; api_key: string; webhook_secret: string };
      const who = { uuid: made.customer_uuid, key: made.api_key, webhookSecret: made.webhook_secret };
      const before = sms.messages.length;
      const sent = await send({}, who);
      expect(sent.body.status).to.equal("pending");
      const code = SmsReceiver.code(await sms.message(before));
      expect((await check(sent.body.authentication_uuid, code, who)).body.status).to.equal("valid");

      const client = new VerifyServiceClient(app.grpcAddress, insecure);
      const overGrpc = await unary(
        client.checkAuthentication.bind(client),
        {
          customerUuid: who.uuid,
          authenticationUuid: String(sent.body.authentication_uuid),
          checkCode: code,
        },
        metadata({ "x-api-key": who.key }),
      );
      client.close();
      expect(overGrpc.res?.status).to.equal("already_validated");
    });
  });

  describe("privacy", () => {
    it("keeps no code in clear text in any Redis key, nor in the log", async () => {
      const codes = new Set(sms.messages.map((m) => SmsReceiver.code(m)));
      expect(codes.size).to.be.greaterThan(10);
      const { redis } = app.registry;
      // This service's keys (its prefix, and its webhook queue's): the run's other apps share the
      // Redis, and their random ids and digests hold six-digit runs by chance.
      const prefix = app.config.REDIS_KEY_PREFIX;
      const keys = [...(await keysUnder(redis, prefix)), ...(await keysUnder(redis, `{${prefix}bull}`))];
      const dump: string[] = [];
      for (const key of keys) {
        const type = await redis.type(key);
        if (type === "string") dump.push(key, (await redis.get(key)) ?? "");
        if (type === "hash") dump.push(key, ...Object.entries(await redis.hgetall(key)).flat());
        if (type === "list") dump.push(key, ...(await redis.lrange(key, 0, -1)));
        if (type === "set") dump.push(key, ...(await redis.smembers(key)));
        if (type === "zset") dump.push(key, ...(await redis.zrange(key, "0", "-1", "WITHSCORES")));
        if (type === "stream") dump.push(key, ...(await redis.xrange(key, "-", "+")).flat(2));
      }
      const text = dump.join("\n");
      const logs = logLines.join("");
      expect(logs, "the service logged something during these tests").not.to.equal("");
      for (const code of codes) {
        // Not right after a `+`: an E.164 prefix (the fraud engine's `p:+336123`) is not a code; nor
        // inside a longer word (a base64url id or digest): a code kept in clear stands alone.
        const pattern = new RegExp(`(?<![\\w+-])${code}(?![\\w-])`);
        expect(pattern.test(text), `code ${code} in Redis`).to.equal(false);
        expect(pattern.test(logs), `code ${code} in the log`).to.equal(false);
      }
    });
  });
});

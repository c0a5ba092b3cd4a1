import { expect } from "chai";
import Prelude from "@prelude.so/sdk";
import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import { VerificationServiceClient } from "../../src/gen/ringfence/verify/v2/verification_service.js";
import type {
  CreateVerificationRequest,
  CheckVerificationRequest,
} from "../../src/gen/ringfence/verify/v2/verification_service.js";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v2/lookup_service.js";
import {
  V2_ERROR_CODES,
  V2_ERROR_TYPES,
  ERRORS,
  toWire,
  RingfenceError,
  type ErrorCode,
} from "../../src/errors.js";
import { V2_BLOCK_REASONS, V2_CHANNELS, V2_CHECK_STATUSES, V2_CREATE_STATUSES } from "../../src/verify/v2.js";
import { V2_LINE_TYPES, V2_LOOKUP_FLAGS } from "../../src/lookup/v2.js";
import { LINE_TYPES } from "../../src/phone/line-types.js";
import { V2_EVENT_TYPES } from "../../src/verify/model.js";
import { authUuidOfVerification, verificationId } from "../../src/verify/events.js";
import { verifyWebhook } from "../../src/webhooks/signature.js";
import { insecure, metadata, unary, type TestApp, startTestApp } from "../support/app.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { rest, type Json } from "../support/rest.js";
import { sendRequest } from "../support/v1.js";
import { VerifyServiceClient } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { checkPreludeModels, PRELUDE_ENUMS, type PreludeSample } from "../support/prelude-contract.js";

/**
 * The V2 verify and lookup APIs, judged by the original V2 API's own SDK (@prelude.so/sdk): every
 * answer it receives is checked against the SDK's declared types, and every status, reason, line
 * type and flag the service can produce must be one the SDK knows. The same calls run over gRPC,
 * and V1 and V2 share one engine: one window per number, one balance.
 */
describe("V2 verify and lookup APIs", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let hooks: Receiver;
  let customer: { uuid: string; key: string; webhookSecret: string };
  let sdk: Prelude;
  /** Every answer the SDK received, checked against its types at the end (and in each test). */
  const samples: PreludeSample[] = [];
  const seen = { createStatus: new Set<string>(), reason: new Set<string>(), checkStatus: new Set<string>() };
  let nextNumber = 612_400_000;
  /** A French mobile number in a range of its own, so per-number and per-range windows stay apart. */
  const freshNumber = () => `+33${(nextNumber += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    hooks = await Receiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      OTP_RETRY_INTERVAL_SECONDS: "0",
      WEBHOOK_BACKOFF_BASE_MS: "50",
      SPAM_LINE_TYPES: "PremiumRate",
    });
    const made = await app.registry.accounts.create({
      name: "V2",
      balanceMicros: 100_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: ["cnam"],
      regions: [],
      senderIds: ["Acme"],
    });
    customer = { uuid: made.account.customerUuid, key: made.apiKey, webhookSecret: made.webhookSecret };
    sdk = new Prelude({ apiToken: customer.key, baseURL: app.baseUrl, maxRetries: 0 });
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await hooks.close();
  });

  /** Records an SDK answer for the type check, and checks it now. */
  function judged<T>(model: PreludeSample["model"], label: string, value: T): T {
    const sample = { model, label, value: JSON.parse(JSON.stringify(value)) as unknown };
    samples.push(sample);
    expect(checkPreludeModels([sample])).to.deep.equal([]);
    return value;
  }

  async function create(phone: string, extra: Partial<Prelude.VerificationCreateParams> = {}) {
    const answer = await sdk.verification.create({
      target: { type: "phone_number", value: phone },
      ...extra,
    });
    judged("VerificationCreateResponse", `create ${answer.status}`, answer);
    seen.createStatus.add(answer.status);
    if (answer.reason !== undefined) seen.reason.add(answer.reason);
    return answer;
  }

  async function check(phone: string, code: string) {
    const answer = await sdk.verification.check({ target: { type: "phone_number", value: phone }, code });
    judged("VerificationCheckResponse", `check ${answer.status}`, answer);
    seen.checkStatus.add(answer.status);
    return answer;
  }

  /** The code of the nth message (0-based) sent to `phone`. */
  async function codeFor(phone: string, n = 0): Promise<string> {
    await sms.receiver.until(
      (r) => r.filter((m) => (JSON.parse(m.body) as { to: string }).to === phone).length > n,
    );
    const message = sms.messages.filter((m) => m.to === phone)[n];
    if (message === undefined) throw new Error(`no message ${n} to ${phone}`);
    return SmsReceiver.code(message);
  }

  const wrongCode = (code: string) => (code === "000000" ? "111111" : "000000");

  describe("through the original SDK over REST", () => {
    it("creates a verification, finds a wrong code a failure and the right one a success, once", async () => {
      const phone = freshNumber();
      const created = await create(phone, { metadata: { correlation_id: "order-42" } });
      expect(created).to.deep.include({
        status: "success",
        method: "message",
        channels: ["sms"],
        metadata: { correlation_id: "order-42" },
      });
      expect(created.id).to.match(/^vrf_[0-9a-f]{32}$/);
      expect(created.request_id).to.be.a("string").and.not.empty;
      expect(created).not.to.have.property("reason");
      const code = await codeFor(phone);
      expect(code).to.match(/^\d{6}$/);

      const wrong = await check(phone, wrongCode(code));
      expect(wrong).to.deep.include({
        id: created.id,
        status: "failure",
        metadata: { correlation_id: "order-42" },
      });
      const right = await check(phone, code);
      expect(right).to.deep.include({ id: created.id, status: "success" });
      // A verification checked right is over: its code works no more.
      expect((await check(phone, code)).status).to.equal("expired_or_not_found");
    });

    it("stops a guesser after OTP_MAX_CHECKS wrong codes: the right one then finds nothing", async () => {
      const phone = freshNumber();
      await create(phone);
      const code = await codeFor(phone);
      for (let i = 0; i < app.config.OTP_MAX_CHECKS; i++) {
        expect((await check(phone, wrongCode(code))).status).to.equal("failure");
      }
      expect((await check(phone, code)).status).to.equal("expired_or_not_found");
    });

    it("answers expired_or_not_found for a number without a verification, and for an expired one", async () => {
      const never = await check(freshNumber(), "123456");
      expect(never).to.deep.equal({ status: "expired_or_not_found", request_id: never.request_id });

      const phone = freshNumber();
      const created = await create(phone);
      const code = await codeFor(phone);
      // Its expiry moved into the past, as time would.
      const auth = authUuidOfVerification(created.id);
      if (auth === undefined) throw new Error("not a verification id");
      await app.registry.redis.hset(
        app.registry.verify.authKeys(customer.uuid, auth).auth,
        "expires_at_ms",
        String(Date.now() - 1),
      );
      const expired = await check(phone, code);
      expect(expired).to.deep.include({ id: created.id, status: "expired_or_not_found" });
    });

    it("retries a running verification with a new code that replaces the old one", async () => {
      const phone = freshNumber();
      const first = await create(phone);
      const oldCode = await codeFor(phone, 0);
      const again = await create(phone);
      expect(again).to.deep.include({ id: first.id, status: "retry", channels: ["sms"] });
      const newCode = await codeFor(phone, 1);
      if (oldCode !== newCode) expect((await check(phone, oldCode)).status).to.equal("failure");
      expect((await check(phone, newCode)).status).to.equal("success");
      // Checked right: the next creation starts a new verification.
      const next = await create(phone);
      expect(next.status).to.equal("success");
      expect(next.id).not.to.equal(first.id);
    });

    it("lets one of two concurrent creations start the verification and the other retry it", async () => {
      const phone = freshNumber();
      const answers = await Promise.all([create(phone), create(phone)]);
      expect(answers.map((a) => a.status).sort()).to.deep.equal(["retry", "success"]);
      expect(answers[0].id).to.equal(answers[1].id);
      const codes = [await codeFor(phone, 0), await codeFor(phone, 1)];
      expect(sms.messages.filter((m) => m.to === phone)).to.have.length(2);
      // One verification, whose code is the retry's: exactly one of the two codes is right.
      const results = [];
      for (const code of codes) results.push((await check(phone, code)).status);
      expect(results.filter((r) => r === "success")).to.have.length(1);
    });

    it("sends codes of options.code_size digits, with the account's sender ID", async () => {
      const phone = freshNumber();
      await create(phone, { options: { code_size: 4, sender_id: "Acme", locale: "en-GB" } });
      const message = sms.messages.filter((m) => m.to === phone)[0];
      expect(message).to.include({ from: "Acme", locale: "en-GB" });
      expect(await codeFor(phone)).to.match(/^\d{4}$/);
      expect((await check(phone, await codeFor(phone))).status).to.equal("success");
    });

    it("blocks a premium-rate number as invalid_phone_line, sending nothing", async () => {
      const before = sms.messages.length;
      const blocked = await create("+33891234567");
      expect(blocked).to.deep.include({ status: "blocked", reason: "invalid_phone_line", channels: [] });
      expect(sms.messages.length).to.equal(before);
    });

    it("looks a number up, with and without the caller name", async () => {
      const phone = "+33612345678";
      await app.registry.lookupData.put([[phone, { callerName: "ACME SAS", numberPorted: true }]]);
      const plain = judged("LookupLookupResponse", "lookup", await sdk.lookup.lookup(phone));
      expect(plain).to.deep.equal({
        phone_number: phone,
        country_code: "FR",
        flags: ["ported"],
        line_type: "mobile",
        original_network_info: { carrier_name: "SFR", mcc: "208", mnc: "09" },
      });
      // The SDK joins a query array with commas (qs arrayFormat "comma").
      const named = judged(
        "LookupLookupResponse",
        "lookup cnam",
        await sdk.lookup.lookup(phone, { type: ["cnam"] }),
      );
      expect(named).to.deep.equal({ ...plain, caller_name: "ACME SAS" });

      const fresh = judged(
        "LookupLookupResponse",
        "lookup not ported",
        await sdk.lookup.lookup("+33612340001"),
      );
      expect(fresh.network_info).to.deep.equal(fresh.original_network_info);
      expect(fresh.flags).to.deep.equal([]);
    });

    it("answers errors in the V2 shape, which the SDK raises as typed errors", async () => {
      const failures: [() => Promise<unknown>, number, string, string | undefined][] = [
        [
          () => sdk.verification.create({ target: { type: "phone_number", value: "+1555" } }),
          400,
          "invalid_phone_number",
          "target.value",
        ],
        [
          () => sdk.verification.create({ target: { type: "email_address", value: "a@example.com" } }),
          403,
          "email_verification_not_allowed",
          "target.type",
        ],
        [
          () => create(freshNumber(), { options: { code_size: 12 } }),
          400,
          "invalid_code_size",
          "options.code_size",
        ],
        [
          () => create(freshNumber(), { options: { custom_code: "1234" } }),
          403,
          "custom_code_not_allowed",
          "options.custom_code",
        ],
        [
          () => create(freshNumber(), { options: { method: "voice" } }),
          400,
          "channel_not_enabled_in_region",
          "options.method",
        ],
        [
          () => create(freshNumber(), { options: { preferred_channel: "whatsapp" } }),
          400,
          "channel_not_enabled_in_region",
          "options.preferred_channel",
        ],
        [
          () => create(freshNumber(), { options: { sender_id: "Other" } }),
          400,
          "invalid_sender_id",
          "options.sender_id",
        ],
        [
          () => create(freshNumber(), { options: { template_id: "nope" } }),
          400,
          "invalid_template_id",
          "options.template_id",
        ],
        [
          () => create(freshNumber(), { options: { locale: "not a locale" } }),
          400,
          "invalid_locale",
          "options.locale",
        ],
        [
          () => create(freshNumber(), { options: { callback_url: "ftp://example.com" } }),
          400,
          "invalid_callback_url",
          "options.callback_url",
        ],
        [
          () => create(freshNumber(), { options: { callback_url: "http://10.0.0.1/hook" } }),
          400,
          "invalid_callback_url",
          "options.callback_url",
        ],
        [
          () => create(freshNumber(), { options: { variables: { name: "x" } } }),
          400,
          "invalid_template_variables",
          "options.variables",
        ],
        [
          () => create(freshNumber(), { options: { app_realm: { platform: "android", value: "short" } } }),
          400,
          "invalid_app_realm_value",
          "options.app_realm.value",
        ],
        [
          () => create(freshNumber(), { metadata: { correlation_id: "x".repeat(65) } }),
          400,
          "invalid_correlation_id",
          "metadata.correlation_id",
        ],
        [
          () => create(freshNumber(), { signals: { ip: "not an address" } }),
          400,
          "invalid_request",
          "signals.ip",
        ],
        [
          () => sdk.verification.check({ target: { type: "phone_number", value: freshNumber() }, code: "" }),
          400,
          "invalid_request",
          "code",
        ],
        [() => sdk.lookup.lookup("+1555"), 400, "invalid_phone_number", undefined],
        [
          () =>
            new Prelude({ apiToken: "rfk_wrong", baseURL: app.baseUrl, maxRetries: 0 }).lookup.lookup(
              "+33612345678",
            ),
          401,
          "invalid_api_key",
          undefined,
        ],
      ];
      const before = sms.messages.length;
      for (const [call, status, code, param] of failures) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, code).to.be.instanceOf(Prelude.APIError);
        const apiError = err as InstanceType<typeof Prelude.APIError>;
        expect(apiError.status, code).to.equal(status);
        const body = apiError.error as Json;
        expect(Object.keys(body).sort(), code).to.deep.equal(
          ["code", "message", "type", "request_id", ...(param === undefined ? [] : ["param"])].sort(),
        );
        expect(body, code).to.include({ code, type: V2_ERROR_TYPES[status] });
        if (param !== undefined) expect(body.param, code).to.equal(param);
        expect(body.request_id, code).to.equal(apiError.headers?.["x-request-id"]);
      }
      expect(sms.messages.length, "no message for a refused call").to.equal(before);
    });

    it("answers a suspended account's create, check and lookup with 403 forbidden suspended_account (V1 keeps 400)", async () => {
      const made = await app.registry.accounts.create({
        name: "V2 suspended",
        balanceMicros: 100_000_000,
        spendingLimitMicros: 1_000_000_000,
        features: [],
        regions: [],
        senderIds: [],
      });
      const uuid = made.account.customerUuid;
      expect(await app.registry.accounts.setStatus(uuid, "suspended")).to.equal(true);
      const api = rest(app.baseUrl);
      const bearer = { authorization: `Bearer ${made.apiKey}` };
      const phone = freshNumber();
      const before = sms.messages.length;
      const answers = {
        create: await api.post(
          "/v2/verification",
          { target: { type: "phone_number", value: phone } },
          bearer,
        ),
        check: await api.post(
          "/v2/verification/check",
          { target: { type: "phone_number", value: phone }, code: "123456" },
          bearer,
        ),
        lookup: await api.get("/v2/lookup/+33612345678", bearer),
      };
      for (const [call, answer] of Object.entries(answers)) {
        expect(answer.status, call).to.equal(403);
        expect(answer.body, call).to.deep.equal({
          code: "suspended_account",
          message: "this account is suspended",
          type: "forbidden",
          request_id: answer.headers.get("x-request-id"),
        });
      }
      expect(sms.messages.length, "nothing sent for a suspended account").to.equal(before);

      const lookups = new LookupServiceClient(app.grpcAddress, insecure);
      try {
        const { err } = await unary(
          lookups.lookupPhoneNumber.bind(lookups),
          { phoneNumber: "+33612345678", type: [] },
          metadata(bearer),
        );
        expect((err as ServiceError).code).to.equal(GrpcStatus.PERMISSION_DENIED);
        const md = (err as ServiceError).metadata;
        expect(md.get("x-http-status")).to.deep.equal(["403"]);
        expect(JSON.parse(String(md.get("x-http-body")[0]))).to.include({
          code: "suspended_account",
          type: "forbidden",
        });
      } finally {
        lookups.close();
      }

      const v1 = await api.get("/v1/lookup/+33612345678", {
        "customer-uuid": uuid,
        "x-api-key": made.apiKey,
      });
      expect(v1.status).to.equal(400);
      expect(v1.body).to.include({ code: "suspended_account" });
    });
  });

  describe("over gRPC", () => {
    const auth = () => metadata({ authorization: `Bearer ${customer.key}` });
    const target = (value: string) => ({ type: "phone_number", value });
    const createRequest = (phone: string): CreateVerificationRequest => ({
      target: target(phone),
      signals: undefined,
      options: undefined,
      metadata: { correlationId: "grpc" },
      dispatchId: "",
    });
    const checkRequest = (phone: string, code: string): CheckVerificationRequest => ({
      target: target(phone),
      code,
    });

    it("creates, retries and checks a verification, and looks a number up", async () => {
      const client = new VerificationServiceClient(app.grpcAddress, insecure);
      const lookups = new LookupServiceClient(app.grpcAddress, insecure);
      try {
        const phone = freshNumber();
        const created = await unary(client.createVerification.bind(client), createRequest(phone), auth());
        expect(created.err).to.equal(null);
        expect(created.res).to.deep.include({ status: "success", method: "message", channels: ["sms"] });
        expect(created.res?.metadata).to.deep.equal({ correlationId: "grpc" });
        const retried = await unary(client.createVerification.bind(client), createRequest(phone), auth());
        expect(retried.res).to.deep.include({ id: created.res?.id, status: "retry" });
        const code = await codeFor(phone, 1);
        const wrong = await unary(
          client.checkVerification.bind(client),
          checkRequest(phone, wrongCode(code)),
          auth(),
        );
        expect(wrong.res?.status).to.equal("failure");
        const right = await unary(client.checkVerification.bind(client), checkRequest(phone, code), auth());
        expect(right.res).to.deep.include({ id: created.res?.id, status: "success" });

        const none = await unary(client.checkVerification.bind(client), checkRequest(phone, code), auth());
        expect(none.res).to.deep.include({ id: created.res?.id, status: "expired_or_not_found" });

        const plain = await unary(
          lookups.lookupPhoneNumber.bind(lookups),
          { phoneNumber: "+33612340001", type: [] },
          auth(),
        );
        expect(plain.res).to.deep.include({ lineType: "mobile", flags: [], callerName: undefined });
        const found = await unary(
          lookups.lookupPhoneNumber.bind(lookups),
          { phoneNumber: "+33612345678", type: ["cnam"] },
          auth(),
        );
        expect(found.res).to.deep.include({
          phoneNumber: "+33612345678",
          lineType: "mobile",
          countryCode: "FR",
        });
      } finally {
        client.close();
        lookups.close();
      }
    });

    it("refuses a wrong key with UNAUTHENTICATED, the V2 body in its markers", async () => {
      const client = new VerificationServiceClient(app.grpcAddress, insecure);
      try {
        const { err } = await unary(
          client.createVerification.bind(client),
          createRequest(freshNumber()),
          metadata({ authorization: "Bearer rfk_wrong" }),
        );
        expect((err as ServiceError).code).to.equal(GrpcStatus.UNAUTHENTICATED);
        const md = (err as ServiceError).metadata;
        expect(md.get("x-http-status")).to.deep.equal(["401"]);
        expect(JSON.parse(String(md.get("x-http-body")[0]))).to.include({
          code: "invalid_api_key",
          type: "unauthorized",
        });
      } finally {
        client.close();
      }
    });
  });

  describe("one engine under V1 and V2", () => {
    it("counts V1 and V2 sends to one number in the one window (RATE_LIMIT_NUMBER)", async () => {
      const v1 = new VerifyServiceClient(app.grpcAddress, insecure);
      const key = metadata({ "x-api-key": customer.key });
      const v1Send = async (phone: string) =>
        (
          await unary(
            v1.createAuthentication.bind(v1),
            sendRequest({ customerUuid: customer.uuid, phoneNumber: phone }),
            key,
          )
        ).res?.status;
      try {
        // V2 first, then V1 fills the window: the sixth send, through V1, is refused.
        const a = freshNumber();
        expect((await create(a)).status).to.equal("success");
        for (let i = 0; i < 4; i++) expect(await v1Send(a)).to.equal("pending");
        expect(await v1Send(a)).to.equal("rate_limited");

        // V1 fills the window, then V2 is blocked for repeated attempts and sends nothing.
        const b = freshNumber();
        for (let i = 0; i < 5; i++) expect(await v1Send(b)).to.equal("pending");
        const before = sms.messages.length;
        const blocked = await create(b);
        expect(blocked).to.deep.include({ status: "blocked", reason: "repeated_attempts", channels: [] });
        expect(sms.messages.length).to.equal(before);
      } finally {
        v1.close();
      }
    });

    it("charges V2 messages to the same balance as V1's", async () => {
      const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? NaN;
      const start = await balance();
      const phone = freshNumber();
      await create(phone);
      await create(phone);
      expect(start - (await balance())).to.equal(2 * 50_000);
    });

    it("keeps V2 verifications out of V1's read-back, check and retry", async () => {
      const phone = freshNumber();
      const created = await create(phone);
      const uuid = authUuidOfVerification(created.id);
      expect(verificationId(uuid ?? "")).to.equal(created.id);
      const readBack = await rest(app.baseUrl).get(`/v1/authentication/${String(uuid)}`, {
        "x-api-key": customer.key,
      });
      expect([readBack.status, readBack.body.code]).to.deep.equal([400, "no_associated_auth_found"]);
      const v1 = (path: string, body: Json) =>
        rest(app.baseUrl).post(
          path,
          { customer_uuid: customer.uuid, authentication_uuid: uuid, ...body },
          {
            "x-api-key": customer.key,
          },
        );
      const code = await codeFor(phone);
      for (const refused of [await v1("/v1/check", { check_code: code }), await v1("/v1/retry", {})]) {
        expect([refused.status, refused.body.code]).to.deep.equal([400, "no_associated_auth_found"]);
      }
      // Untouched by V1: its code still works through V2.
      expect((await check(phone, code)).status).to.equal("success");
    });
  });

  describe("webhooks", () => {
    it("sends verify.authentication and verify.attempt events, signed, to options.callback_url", async () => {
      const phone = freshNumber();
      const before = hooks.received.length;
      const created = await create(phone, {
        options: { callback_url: hooks.url },
        metadata: { correlation_id: "hooked" },
      });
      await hooks.until((r) => r.length >= before + 2);
      const events = hooks.received.slice(before).map((r) => {
        expect(
          verifyWebhook(customer.webhookSecret, r.body, String(r.headers["x-webhook-signature"])),
        ).to.equal(true);
        return JSON.parse(r.body) as Json & { payload: Json };
      });
      expect(events.map((e) => e.type)).to.deep.equal(["verify.authentication", "verify.attempt"]);
      for (const e of events) {
        expect(Object.keys(e).sort()).to.deep.equal(["created_at", "id", "payload", "type"]);
        expect(e.id).to.match(/^evt_/);
        expect(e.payload).to.deep.include({
          verification_id: created.id,
          target: { type: "phone_number", value: phone },
          price: { amount: 0.05, currency: "EUR" },
          metadata: { correlation_id: "hooked" },
        });
      }
      expect(events[1]?.payload).to.include({ delivery_status: "submitted" });
      expect(events[1]?.payload.id).to.match(/^att_/);
    });
  });

  describe("the lists of the V2 API", () => {
    it("produces only statuses, reasons and channels the SDK knows, and saw each status", () => {
      expect([...V2_CREATE_STATUSES].filter((s) => !PRELUDE_ENUMS.createStatus.includes(s))).to.deep.equal(
        [],
      );
      expect([...V2_BLOCK_REASONS].filter((s) => !PRELUDE_ENUMS.createReason.includes(s))).to.deep.equal([]);
      expect([...V2_CHECK_STATUSES].filter((s) => !PRELUDE_ENUMS.checkStatus.includes(s))).to.deep.equal([]);
      expect([...V2_CHANNELS].filter((s) => !PRELUDE_ENUMS.channels.includes(s))).to.deep.equal([]);
      expect(PRELUDE_ENUMS.createMethod).to.include("message");
      expect([...seen.createStatus].sort()).to.deep.equal([...V2_CREATE_STATUSES].sort());
      expect([...seen.checkStatus].sort()).to.deep.equal([...V2_CHECK_STATUSES].sort());
      expect([...seen.reason].sort()).to.deep.equal(["invalid_phone_line", "repeated_attempts"]);
      expect(checkPreludeModels(samples)).to.deep.equal([]);
    });

    it("names every line type and flag as the SDK does", () => {
      expect(Object.keys(V2_LINE_TYPES).sort()).to.deep.equal([...LINE_TYPES].sort());
      expect(Object.values(V2_LINE_TYPES).sort()).to.deep.equal([...PRELUDE_ENUMS.lookupLineType].sort());
      expect([...V2_LOOKUP_FLAGS].sort()).to.deep.equal([...PRELUDE_ENUMS.lookupFlag].sort());
    });

    it("answers every error of the table with a code of V2_ERROR_CODES and the type of its status", () => {
      for (const code of Object.keys(ERRORS) as ErrorCode[]) {
        const wire = toWire(new RingfenceError(code, "m"), "v2", "https://docs", "req-1");
        expect(V2_ERROR_CODES, code).to.include(wire.body.code);
        expect(wire.body, code).to.include({ type: V2_ERROR_TYPES[wire.httpStatus], request_id: "req-1" });
      }
      expect(V2_EVENT_TYPES).to.deep.equal([
        "verify.authentication",
        "verify.attempt",
        "verify.delivery_status",
      ]);
    });
  });
});

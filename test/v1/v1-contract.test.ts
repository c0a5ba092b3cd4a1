import { expect } from "chai";
import { Client, Metadata, type ServiceError } from "@grpc/grpc-js";
import { fromBinary, fromJson, toBinary, toJson, type JsonValue } from "@bufbuild/protobuf";
import { loadContract } from "../../src/rpc/contract.js";
import { insecure, startTestApp, type TestApp } from "../support/app.js";
import {
  answerViolations,
  CODES_ANSWERED_400,
  enumOf,
  model,
  MODELS,
  recordAnswer,
  validate,
  type OperationName,
  type V1Answer,
} from "../support/ding-contract.js";
import { FakeSmsc, eventually, messageText } from "../support/fake-smsc.js";
import { Receiver } from "../support/receivers.js";
import { rest, type Json } from "../support/rest.js";

type Via = "rest" | "grpc";

/** The gRPC method of each SDK operation. */
const GRPC_METHOD: Record<OperationName, string> = {
  lookup: "/ringfence.lookup.v1.LookupService/LookupPhoneNumber",
  createAuthentication: "/ringfence.verify.v1.VerifyService/CreateAuthentication",
  check: "/ringfence.verify.v1.VerifyService/CheckAuthentication",
  retry: "/ringfence.verify.v1.VerifyService/RetryAuthentication",
  getAuthenticationStatus: "/ringfence.verify.v1.VerifyService/GetAuthentication",
  feedback: "/ringfence.verify.v1.VerifyService/CreateFeedback",
};

/** An Android SMS Retriever hash (11 characters). */
const APP_REALM = "FA+9qCX9VSu";
/** Premium-rate: the spam rules refuse it, so its authentication never sends a code. */
const FR_PREMIUM = "+33891234567";

/**
 * Every operation of the original SDKs, in every status and error case this service has, over
 * REST (built-in gateway) and over gRPC (printed as Envoy's transcoder prints it), checked
 * against the models written from the SDKs' sources (test/fixtures/ding-sdk/models.json).
 */
describe("V1 contract: the original SDKs' models", () => {
  let app: TestApp;
  let smsc: FakeSmsc;
  let hooks: Receiver;
  let grpc: Client;
  const contract = loadContract();
  const answers: (V1Answer & { op: OperationName })[] = [];
  let customer: { uuid: string; key: string };
  let cnam: { uuid: string; key: string };
  let nextNumber = 645_000_000;
  const freshNumber = () => `+33${String((nextNumber += 1000))}`;

  before(async function () {
    this.timeout(30_000);
    smsc = await FakeSmsc.start();
    hooks = await Receiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "smpp",
      SMPP_URL: smsc.url(),
      OTP_RETRY_INTERVAL_SECONDS: "1",
      SMS_PRICES: "default:0.05,FR:0.07",
    });
    grpc = new Client(app.grpcAddress, insecure);
    customer = await newCustomer({ senderIds: ["Acme"] });
    cnam = await newCustomer({ features: ["cnam"] });
    await app.registry.lookupData.put(new Map([["+33612345678", { callerName: "Jeanne Martin" }]]));
  });
  after(async () => {
    grpc.close();
    await app.stop();
    await smsc.close();
    await hooks.close();
  });

  async function newCustomer(
    opts: { senderIds?: string[]; features?: "cnam"[]; balance?: number; regions?: string[] } = {},
  ) {
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Contract",
      balanceMicros: opts.balance ?? 100_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: opts.features ?? [],
      regions: opts.regions ?? [],
      senderIds: opts.senderIds ?? [],
    });
    return { uuid: account.customerUuid, key: apiKey };
  }

  /** One SDK operation as the SDK sends it: body fields, path variable, query, headers. */
  interface Call {
    body?: Json;
    pathVar?: string;
    query?: Record<string, string[]>;
    headers: Record<string, string>;
  }

  async function call(via: Via, op: OperationName, c: Call): Promise<V1Answer> {
    const spec = MODELS.operations.find((o) => o.name === op);
    if (spec === undefined) throw new Error(op);
    const path = spec.path.replace(/\{[^}]+\}/, encodeURIComponent(c.pathVar ?? ""));
    let answer: V1Answer;
    if (via === "rest") {
      const query = new URLSearchParams();
      for (const [k, vs] of Object.entries(c.query ?? {})) for (const v of vs) query.append(k, v);
      const res = await rest(app.baseUrl).call(
        spec.method,
        `${path}${query.size > 0 ? `?${query.toString()}` : ""}`,
        { body: c.body, headers: c.headers },
      );
      answer = {
        via,
        method: spec.method,
        path,
        status: res.status,
        headers: Object.fromEntries(res.headers),
        body: res.body,
      };
    } else {
      answer = await callGrpc(op, spec.method, path, c);
      recordAnswer(answer);
    }
    answers.push({ ...answer, op });
    return answer;
  }

  /** The same call over gRPC; the answer printed with Envoy's print options, errors from their markers. */
  async function callGrpc(op: OperationName, method: string, path: string, c: Call): Promise<V1Answer> {
    const rpc = contract.methods.get(GRPC_METHOD[op]);
    if (rpc === undefined) throw new Error(op);
    const fields: Json = { ...(c.body ?? {}) };
    if (op === "lookup") Object.assign(fields, { phone_number: c.pathVar, type: c.query?.type ?? [] });
    if (op === "getAuthenticationStatus") fields.authentication_uuid = c.pathVar;
    const request = Buffer.from(toBinary(rpc.input, fromJson(rpc.input, fields as JsonValue)));
    const md = new Metadata();
    for (const [k, v] of Object.entries(c.headers)) md.set(k, v);
    const { err, res } = await new Promise<{ err: ServiceError | null; res: Buffer | undefined }>(
      (resolve) => {
        grpc.makeUnaryRequest(
          rpc.path,
          (b: Buffer) => b,
          (b: Buffer) => b,
          request,
          md,
          (e, r) => {
            resolve({ err: e, res: r });
          },
        );
      },
    );
    if (err !== null) {
      const marker = (name: string) => String(err.metadata.get(name)[0] ?? "");
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(err.metadata.getMap())) headers[k] = String(v);
      return {
        via: "grpc",
        method,
        path,
        status: Number(marker("x-http-status")),
        headers,
        body: JSON.parse(marker("x-http-body")) as unknown,
      };
    }
    const message = fromBinary(rpc.output, res ?? Buffer.alloc(0));
    const body = toJson(rpc.output, message, { useProtoFieldName: true, alwaysEmitImplicit: true });
    return { via: "grpc", method, path, status: 200, headers: {}, body };
  }

  const auth = (who: { key: string }) => ({ "x-api-key": who.key });
  const send = (via: Via, fields: Json = {}, who = customer) =>
    call(via, "createAuthentication", {
      body: { customer_uuid: who.uuid, phone_number: freshNumber(), ...fields },
      headers: auth(who),
    });
  const check = (via: Via, authUuid: unknown, code: string, who = customer) =>
    call(via, "check", {
      body: { customer_uuid: who.uuid, authentication_uuid: authUuid, check_code: code },
      headers: auth(who),
    });
  const retry = (via: Via, authUuid: unknown, who = customer) =>
    call(via, "retry", {
      body: { customer_uuid: who.uuid, authentication_uuid: authUuid },
      headers: auth(who),
    });
  const readBack = (via: Via, authUuid: unknown, headers: Record<string, string> = auth(customer)) =>
    call(via, "getAuthenticationStatus", { pathVar: String(authUuid), headers });

  /** The code of the n-th message the SMSC received (1-based). */
  async function codeOf(n: number): Promise<string> {
    await eventually(() => smsc.submits.length >= n);
    return /\d{6}/.exec(messageText(smsc.submits[n - 1]?.short_message))?.[0] ?? "";
  }

  function expectConforms(a: V1Answer, status: number): Json {
    expect(answerViolations(a), `${a.via} ${a.path}`).to.deep.equal([]);
    expect(a.status, JSON.stringify(a.body)).to.equal(status);
    return a.body as Json;
  }

  const wrong = (code: string) => (code === "000000" ? "111111" : "000000");

  for (const via of ["rest", "grpc"] as const) {
    describe(`over ${via === "rest" ? "REST" : "gRPC"}`, () => {
      it("lookup: without type, and with type=cnam (caller_name only then), unknown fields left out", async () => {
        const plain = expectConforms(
          await call(via, "lookup", {
            pathVar: "+33612345678",
            headers: { "customer-uuid": cnam.uuid, ...auth(cnam) },
          }),
          200,
        );
        expect(plain).not.to.have.property("caller_name");
        const named = expectConforms(
          await call(via, "lookup", {
            pathVar: "+33612345678",
            query: { type: ["cnam"] },
            headers: { "customer-uuid": cnam.uuid, ...auth(cnam) },
          }),
          200,
        );
        expect(named).to.include({ caller_name: "Jeanne Martin", line_type: "Mobile", country_code: "FR" });
        // A non-geographic number (Inmarsat): no country, carrier or network codes, none sent as "".
        const global = expectConforms(
          await call(via, "lookup", {
            pathVar: "+870773111632",
            headers: { "customer-uuid": cnam.uuid, ...auth(cnam) },
          }),
          200,
        );
        for (const field of ["country_code", "mcc", "mnc", "carrier"])
          expect(global).not.to.have.property(field);
      });

      it("lookup errors: account_invalid, invalid_phone_number, unsupported_region, bad_request", async () => {
        const frOnly = await newCustomer({ regions: ["FR"] });
        const us = await call(via, "lookup", {
          pathVar: "+14155552671",
          headers: { "customer-uuid": frOnly.uuid, ...auth(frOnly) },
        });
        expect(expectConforms(us, 400).code).to.equal("unsupported_region");
        const noKey = await call(via, "lookup", {
          pathVar: "+33612345678",
          headers: { "customer-uuid": cnam.uuid },
        });
        expect(expectConforms(noKey, 400).code).to.equal("account_invalid");
        const badNumber = await call(via, "lookup", {
          pathVar: "+1555",
          headers: { "customer-uuid": cnam.uuid, ...auth(cnam) },
        });
        expect(expectConforms(badNumber, 400).code).to.equal("invalid_phone_number");
        const badType = await call(via, "lookup", {
          pathVar: "+33612345678",
          query: { type: ["carrier"] },
          headers: { "customer-uuid": cnam.uuid, ...auth(cnam) },
        });
        expect(expectConforms(badType, 400).code).to.equal("bad_request");
      });

      it("create with every option of the SDK's request, read back with every signal", async () => {
        const request = model("CreateAuthenticationRequest");
        const body: Json = {
          customer_uuid: customer.uuid,
          phone_number: freshNumber(),
          app_realm: APP_REALM,
          app_version: "1.4.2",
          callback_url: hooks.url,
          correlation_id: `order-${via}`,
          device_id: "a1b2c3d4e5f60718",
          device_model: "Pixel 9",
          device_type: "ANDROID",
          ip: "203.0.113.7",
          is_returning_user: true,
          locale: "fr-FR",
          os_version: "15",
          sender_id: "Acme",
          template_id: "default",
        };
        expect(Object.keys(body).sort(), "every field of the SDK's request").to.deep.equal(
          Object.keys(request.properties ?? {}).sort(),
        );
        expect(validate(request, body)).to.deep.equal([]);
        const created = expectConforms(
          await call(via, "createAuthentication", { body, headers: auth(customer) }),
          200,
        );
        expect(created.status).to.equal("pending");

        const read = expectConforms(await readBack(via, created.authentication_uuid), 200);
        expect(read).to.deep.include({
          uuid: created.authentication_uuid,
          phone_number: body.phone_number,
          correlation_id: body.correlation_id,
          template_id: "default",
          created_at: created.created_at,
        });
        expect(read.signals).to.deep.equal({
          ip: "203.0.113.7",
          device_id: "a1b2c3d4e5f60718",
          device_type: "ANDROID",
          app_version: "1.4.2",
          app_realm: APP_REALM,
          os_version: "15",
          device_model: "Pixel 9",
          is_returning_user: true,
        });
        const events = read.events as Json[];
        expect(events.map((e) => e.type)).to.deep.equal(["attempt", "balance_update"]);
        expect(events[0]).to.include({
          attempt_number: 1,
          capability: "text",
          sender_id: "Acme",
          status: "pending",
        });
        expect(events[1]).to.deep.equal({
          type: "balance_update",
          created_at: events[0]?.created_at,
          amount: -0.07,
          balance_update_type: "attempt",
        });
      });

      it("create in each status: pending, rate_limited (sixth send to a number), spam_detected", async () => {
        const number = freshNumber();
        const statuses: unknown[] = [];
        for (let i = 0; i < 6; i += 1) {
          const r = await send(via, { phone_number: number });
          statuses.push(expectConforms(r, 200).status);
        }
        expect(statuses).to.deep.equal([
          "pending",
          "pending",
          "pending",
          "pending",
          "pending",
          "rate_limited",
        ]);
        const spam = await send(via, { phone_number: FR_PREMIUM });
        expect(expectConforms(spam, 200).status).to.equal("spam_detected");
        // The refused creation reads back as a rate-limited attempt.
        const limited = await send(via, { phone_number: number });
        const read = expectConforms(await readBack(via, (limited.body as Json).authentication_uuid), 200);
        expect((read.events as Json[]).map((e) => [e.type, e.status])).to.deep.equal([
          ["attempt", "rate_limited"],
        ]);
        expect(read).not.to.have.property("correlation_id");
        expect(read.signals).to.deep.equal({});
      });

      it("create errors: each field's code, unauthorized_sender_id, negative_balance, spending_limit_exceeded", async () => {
        const cases: [Json, string][] = [
          [{ phone_number: "+1555" }, "invalid_phone_number"],
          [{ device_id: "x".repeat(257) }, "invalid_device_id"],
          [{ device_model: "x".repeat(129) }, "invalid_device_model"],
          [{ os_version: "x".repeat(65) }, "invalid_os_version"],
          [{ app_version: "x".repeat(65) }, "invalid_app_version"],
          [{ sender_id: "Much-Too-Long-Sender" }, "invalid_sender_id"],
          [{ sender_id: "Other" }, "unauthorized_sender_id"],
          [{ template_id: "promo" }, "invalid_template_id"],
          [{ app_realm: "short", device_type: "ANDROID" }, "invalid_app_realm"],
          [{ app_realm: APP_REALM }, "app_realm_require_device_type"],
          [{ app_realm: APP_REALM, device_type: "IOS" }, "unsupported_app_realm_device_type"],
          [{ ip: "999.0.0.1" }, "bad_request"],
          [{ customer_uuid: "not-a-uuid" }, "account_invalid"],
        ];
        for (const [fields, code] of cases) {
          const r = await send(via, fields);
          expect(expectConforms(r, 400).code, JSON.stringify(fields)).to.equal(code);
        }
        const broke = await newCustomer({ balance: 0 });
        expect(expectConforms(await send(via, {}, broke), 400).code).to.equal("negative_balance");
        const suspended = await newCustomer();
        await app.registry.accounts.setStatus(suspended.uuid, "suspended");
        expect(expectConforms(await send(via, {}, suspended), 400).code).to.equal("suspended_account");
        const { account, apiKey } = await app.registry.accounts.create({
          name: "Limited",
          balanceMicros: 10_000_000,
          spendingLimitMicros: 0,
          features: [],
          regions: [],
        });
        const limited = await send(via, {}, { uuid: account.customerUuid, key: apiKey });
        expect(expectConforms(limited, 402).code).to.equal("spending_limit_exceeded");
      });

      it("check in each status", async () => {
        const before = smsc.submits.length;
        const sent = expectConforms(await send(via), 200);
        const code = await codeOf(before + 1);
        const statuses: unknown[] = [];
        statuses.push(expectConforms(await check(via, sent.authentication_uuid, wrong(code)), 200).status);
        statuses.push(expectConforms(await check(via, sent.authentication_uuid, code), 200).status);
        statuses.push(expectConforms(await check(via, sent.authentication_uuid, code), 200).status);
        expect(statuses).to.deep.equal(["invalid", "valid", "already_validated"]);

        const spam = expectConforms(await send(via, { phone_number: FR_PREMIUM }), 200);
        expect(expectConforms(await check(via, spam.authentication_uuid, "123456"), 200).status).to.equal(
          "without_attempt",
        );

        const limited = expectConforms(await send(via), 200);
        const tries: unknown[] = [];
        for (let i = 0; i < 6; i += 1) {
          tries.push(expectConforms(await check(via, limited.authentication_uuid, "99999999"), 200).status);
        }
        expect(tries).to.deep.equal(["invalid", "invalid", "invalid", "invalid", "invalid", "rate_limited"]);

        const old = expectConforms(await send(via), 200);
        await expire(old.authentication_uuid);
        expect(expectConforms(await check(via, old.authentication_uuid, "123456"), 200).status).to.equal(
          "expired_auth",
        );
      });

      it("check and retry errors: invalid_auth_uuid, no_associated_auth_found, bad_request", async () => {
        expect(expectConforms(await check(via, "not-a-uuid", "123456"), 400).code).to.equal(
          "invalid_auth_uuid",
        );
        expect(expectConforms(await retry(via, "not-a-uuid"), 400).code).to.equal("invalid_auth_uuid");
        const unknown = "0b6c6d1e-6a5f-4d7e-9c1a-7c1b2d3e4f50";
        expect(expectConforms(await check(via, unknown, "123456"), 400).code).to.equal(
          "no_associated_auth_found",
        );
        expect(expectConforms(await retry(via, unknown), 400).code).to.equal("no_associated_auth_found");
        expect(expectConforms(await readBack(via, unknown), 400).code).to.equal("no_associated_auth_found");
        const sent = expectConforms(await send(via), 200);
        expect(expectConforms(await check(via, sent.authentication_uuid, "12ab"), 400).code).to.equal(
          "bad_request",
        );
      });

      it("retry in each status, next_retry_at only while a retry is left", async function () {
        this.timeout(20_000);
        const sent = expectConforms(await send(via), 200);
        const denied = expectConforms(await retry(via, sent.authentication_uuid), 200);
        expect(denied).to.include({ status: "denied", remaining_retry: 3 });
        expect(denied).to.have.property("next_retry_at");
        const approved: Json[] = [];
        for (let i = 0; i < 3; i += 1) {
          await new Promise((r) => setTimeout(r, 1_050));
          approved.push(expectConforms(await retry(via, sent.authentication_uuid), 200));
        }
        expect(approved.map((a) => [a.status, a.remaining_retry, "next_retry_at" in a])).to.deep.equal([
          ["approved", 2, true],
          ["approved", 1, true],
          ["approved", 0, false],
        ]);
        await new Promise((r) => setTimeout(r, 1_050));
        const limited = expectConforms(await retry(via, sent.authentication_uuid), 200);
        expect(limited).to.include({ status: "rate_limited", remaining_retry: 0 });
        expect(limited).not.to.have.property("next_retry_at");

        const spam = expectConforms(await send(via, { phone_number: FR_PREMIUM }), 200);
        expect(expectConforms(await retry(via, spam.authentication_uuid), 200).status).to.equal("no_attempt");

        const before = smsc.submits.length;
        const done = expectConforms(await send(via), 200);
        await check(via, done.authentication_uuid, await codeOf(before + 1));
        const validated = expectConforms(await retry(via, done.authentication_uuid), 200);
        expect(validated.status).to.equal("already_validated");
        expect(validated).not.to.have.property("next_retry_at");

        const old = expectConforms(await send(via), 200);
        await expire(old.authentication_uuid);
        const expired = expectConforms(await retry(via, old.authentication_uuid), 200);
        expect(expired.status).to.equal("expired_auth");
        expect(expired).not.to.have.property("next_retry_at");
      });

      it("read-back with every event type, by the key alone; account_invalid for another key or customer", async function () {
        this.timeout(10_000);
        const before = smsc.submits.length;
        const sent = expectConforms(await send(via), 200);
        const code = await codeOf(before + 1);
        await check(via, sent.authentication_uuid, wrong(code));
        await check(via, sent.authentication_uuid, code);
        await smsc.deliver({
          source_addr: "33600000000",
          destination_addr: "Ringfence",
          esm_class: 0x04,
          short_message: `id:msg-${String(before + 1)} sub:001 dlvrd:001 submit date:2611211200 done date:2611211201 stat:DELIVRD err:000 text:`,
          receipted_message_id: `msg-${String(before + 1)}`,
          message_state: 2,
        });
        let read: Json = {};
        for (let i = 0; i < 100; i += 1) {
          read = expectConforms(await readBack(via, sent.authentication_uuid), 200);
          if ((read.events as Json[]).some((e) => e.type === "delivery_status")) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        const events = read.events as Json[];
        expect(events.map((e) => [e.type, e.status ?? null])).to.deep.equal([
          ["attempt", "delivered"],
          ["balance_update", null],
          ["check", "invalid"],
          ["check", "valid"],
          ["delivery_status", "delivered"],
        ]);
        expect(events[4]).to.include({ attempt_id: events[0]?.id, attempt_number: 1 });
        expect(JSON.stringify(read)).not.to.include(code);

        // The customer-uuid header, when sent, must name the key's account.
        const same = await readBack(via, sent.authentication_uuid, {
          "customer-uuid": customer.uuid,
          ...auth(customer),
        });
        expectConforms(same, 200);
        const other = await newCustomer();
        const mismatch = await readBack(via, sent.authentication_uuid, {
          "customer-uuid": other.uuid,
          ...auth(customer),
        });
        expect(expectConforms(mismatch, 400).code).to.equal("account_invalid");
        expect(
          expectConforms(await readBack(via, sent.authentication_uuid, { "x-api-key": "rfk_nope" }), 400)
            .code,
        ).to.equal("account_invalid");
        expect(expectConforms(await readBack(via, sent.authentication_uuid, {}), 400).code).to.equal(
          "account_invalid",
        );
        // Another customer's key finds nothing of this customer's.
        expect(expectConforms(await readBack(via, sent.authentication_uuid, auth(other)), 400).code).to.equal(
          "no_associated_auth_found",
        );
      });

      it("feedback: recorded, then invalid_feedback_status and duplicated_feedback_status", async () => {
        const body = { customer_uuid: customer.uuid, phone_number: freshNumber(), status: "onboarded" };
        expect(validate(model("FeedbackRequest"), body)).to.deep.equal([]);
        const first = expectConforms(await call(via, "feedback", { body, headers: auth(customer) }), 200);
        expect(Object.keys(first)).to.deep.equal(["uuid"]);
        const again = await call(via, "feedback", { body, headers: auth(customer) });
        expect(expectConforms(again, 400).code).to.equal("duplicated_feedback_status");
        const not = await call(via, "feedback", {
          body: { ...body, status: "not_onboarded" },
          headers: auth(customer),
        });
        expectConforms(not, 200);
        const bad = await call(via, "feedback", {
          body: { ...body, status: "maybe" },
          headers: auth(customer),
        });
        expect(expectConforms(bad, 400).code).to.equal("invalid_feedback_status");
      });
    });
  }

  describe("afterwards", () => {
    it("covered every status and enum value of the SDKs' answers, over both transports", () => {
      for (const via of ["rest", "grpc"] as const) {
        const mine = answers.filter((a) => a.via === via);
        const values = (op: OperationName, field: string) =>
          new Set(mine.filter((a) => a.op === op && a.status === 200).map((a) => (a.body as Json)[field]));
        expect([...values("createAuthentication", "status")].sort(), via).to.deep.equal(
          enumOf("CreateAuthenticationResponse", "status").sort(),
        );
        // `unknown` is in the SDKs' check enum; no check answers it.
        expect([...values("check", "status")].sort(), via).to.deep.equal(
          enumOf("CheckStatus")
            .filter((s) => s !== "unknown")
            .sort(),
        );
        expect([...values("retry", "status")].sort(), via).to.deep.equal(
          enumOf("RetryAuthenticationResponse", "status").sort(),
        );
        const eventTypes = new Set(
          mine
            .filter((a) => a.op === "getAuthenticationStatus" && a.status === 200)
            .flatMap((a) => ((a.body as Json).events as Json[]).map((e) => e.type)),
        );
        expect([...eventTypes].sort(), via).to.deep.equal(enumOf("Attempt", "type").sort());
        const codes = new Set(mine.filter((a) => a.status === 400).map((a) => (a.body as Json).code));
        // No rule of this service refuses with blocked_number or invalid_line.
        expect([...codes].sort(), via).to.deep.equal(
          CODES_ANSWERED_400.filter((c) => c !== "blocked_number" && c !== "invalid_line").sort(),
        );
        expect(mine.every((a) => answerViolations(a).length === 0)).to.equal(true);
      }
    });

    it("refuses what the SDKs would refuse (the checker itself)", () => {
      const at = (status: number, body: unknown, path = "/v1/retry", method = "POST"): string[] =>
        answerViolations({ via: "rest", method, path, status, headers: {}, body });
      expect(at(200, { authentication_uuid: "a", status: "approved", next_retry_at: "" })).not.to.deep.equal(
        [],
      );
      expect(at(200, { status: "maybe" })).not.to.deep.equal([]);
      expect(at(200, { remaining_retry: 1.5 })).not.to.deep.equal([]);
      expect(at(200, { extra: 1 })).not.to.deep.equal([]);
      expect(at(200, { created_at: null })).not.to.deep.equal([]);
      expect(at(200, { created_at: "2026-11-23T10:00:00.000Z", remaining_retry: 0 })).to.deep.equal([]);
      expect(at(401, { code: "account_invalid", message: "m", doc_url: "d" })).not.to.deep.equal([]);
      expect(at(400, { code: "not_found", message: "m", doc_url: "d" })).not.to.deep.equal([]);
      expect(at(400, { code: "internal_server_error", message: "m", doc_url: "d" })).not.to.deep.equal([]);
      expect(at(402, { code: "spending_limit_exceeded", message: "m", doc_url: "d" })).to.deep.equal([]);
      expect(at(503, { code: "internal_server_error", message: "m", doc_url: "d" })).not.to.deep.equal([]);
      expect(
        at(
          200,
          { events: [{ type: "check", status: "valid", attempt_number: 1 }] },
          "/v1/authentication/x",
          "GET",
        ),
      ).not.to.deep.equal([]);
      expect(at(200, { events: [{ type: "login" }] }, "/v1/authentication/x", "GET")).not.to.deep.equal([]);
    });
  });

  /** Moves an authentication's expiry into the past, as its lifetime of waiting would. */
  async function expire(authUuid: unknown): Promise<void> {
    const key = app.registry.keys.key("auth", customer.uuid, String(authUuid));
    await app.registry.redis.hset(key, "expires_at_ms", String(Date.now() - 1));
  }
});

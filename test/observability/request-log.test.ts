import { expect } from "chai";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { addLogFields, createLogger, redact, REDACTED, routeProcessOutput } from "../../src/log.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { fundedAccount } from "../support/v1.js";
import { SmsReceiver } from "../support/receivers.js";
import { rest } from "../support/rest.js";

type Line = Record<string, unknown>;

describe("request log: one line per call, request ids on every line, no secrets", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  const raw: string[] = [];
  const lines = () => raw.map((l) => JSON.parse(l) as Line);
  let customer: { uuid: string; key: string; webhookSecret: string };

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    app = await startTestApp(
      { SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url },
      createLogger("debug", (line) => raw.push(line)),
    );
    const made = await fundedAccount(app.registry.accounts, "Logs", 100_000_000);
    customer = { uuid: made.account.customerUuid, key: made.apiKey, webhookSecret: made.webhookSecret };
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    rest(app.baseUrl).post(path, body, { "x-api-key": customer.key, ...headers });

  it("writes one line per REST call with its method, transport, code, statuses, duration, request id and caller", async () => {
    const sent = await post("/v1/authentication", {
      customer_uuid: customer.uuid,
      phone_number: "+33612000301",
    });
    expect(sent.status).to.equal(200);
    const id = sent.headers.get("x-request-id") ?? "";
    expect(id).to.match(/^[0-9a-f-]{36}$/);
    const mine = lines().filter((l) => l.msg === "call" && l.request_id === id);
    expect(mine).to.have.length(1);
    expect(mine[0]).to.include({
      level: "info",
      method: "ringfence.verify.v1.VerifyService/CreateAuthentication",
      transport: "http",
      code: "ok",
      grpc_status: 0,
      http_status: 200,
      caller: `customer:${customer.uuid}`,
    });
    expect(mine[0]?.duration_ms).to.be.a("number").greaterThan(0);
    expect(mine[0]?.time).to.match(/^\d{4}-\d\d-\d\dT/);
  });

  it("keeps the caller's x-request-id, on the answer and in the line", async () => {
    const refused = await post(
      "/v1/authentication",
      { customer_uuid: customer.uuid, phone_number: "+33612000302" },
      { "x-api-key": "rfk_wrong", "x-request-id": "trace-me-42" },
    );
    expect(refused.status).to.equal(400);
    expect(refused.headers.get("x-request-id")).to.equal("trace-me-42");
    const line = lines().find((l) => l.msg === "call" && l.request_id === "trace-me-42");
    expect(line).to.include({ code: "account_invalid", http_status: 400, transport: "http" });
  });

  it("writes the line of a gRPC call, with the request id it answered in its metadata", async () => {
    const client = new LookupServiceClient(app.grpcAddress, insecure);
    try {
      const { err, headers } = await unary(
        client.lookupPhoneNumber.bind(client),
        { phoneNumber: "+33612345678", type: [] },
        metadata({ "customer-uuid": customer.uuid, "x-api-key": customer.key }),
      );
      expect(err).to.equal(null);
      const id = String(headers?.get("x-request-id")[0]);
      const line = lines().find((l) => l.msg === "call" && l.request_id === id);
      expect(line).to.include({
        method: "ringfence.lookup.v1.LookupService/LookupPhoneNumber",
        transport: "grpc",
        code: "ok",
        grpc_status: 0,
      });
    } finally {
      client.close();
    }
  });

  it("names the call on lines written while it runs (a provider's refusal)", async () => {
    sms.receiver.answer = () => 400;
    try {
      const failed = await post(
        "/v1/authentication",
        { customer_uuid: customer.uuid, phone_number: "+33612000303" },
        { "x-request-id": "provider-down-1" },
      );
      expect(failed.status).to.equal(500);
    } finally {
      sms.receiver.answer = () => 200;
    }
    const during = lines().filter((l) => l.request_id === "provider-down-1" && l.msg !== "call");
    expect(during.map((l) => l.msg)).to.include("sms not accepted");
    expect(
      during.every((l) => l.method === "ringfence.verify.v1.VerifyService/CreateAuthentication"),
    ).to.equal(true);
  });

  it("never writes the code sent, the API key, the webhook secret or the SECRETS_KEY", async () => {
    const sent = await post("/v1/authentication", {
      customer_uuid: customer.uuid,
      phone_number: "+33612000304",
    });
    const message = await sms.message(sms.messages.length - 1);
    const code = SmsReceiver.code(message);
    const checked = await post("/v1/check", {
      customer_uuid: customer.uuid,
      authentication_uuid: sent.body.authentication_uuid,
      check_code: code,
    });
    expect(checked.body.status).to.equal("valid");
    const text = raw.join("");
    expect(raw.length).to.be.greaterThan(5);
    for (const secret of [
      code,
      customer.key,
      customer.webhookSecret,
      app.config.SECRETS_KEY.toString("base64"),
    ]) {
      expect(text.includes(secret), `a log line holds ${secret.slice(0, 4)}…`).to.equal(false);
    }
    // Every line written during a call carries its request id.
    expect(
      lines()
        .filter((l) => l.msg === "call")
        .every((l) => typeof l.request_id === "string"),
    ).to.equal(true);
  });
});

/** Fields a provider adds to every line while a test sets them (providers stay for the process). */
let providing: Record<string, unknown> | undefined;
addLogFields(() => providing);

describe("log redaction", () => {
  it("replaces secret fields at any depth and masks URL passwords", () => {
    expect(
      redact({
        api_key: "rfk_1",
        client_secret: "s",
        password: "p",
        new_password: "p2",
        access_token: "t",
        authorization: "Bearer t",
        check_code: "123456",
        code: "invalid_code",
        nested: { refresh_token: "r", webhook_secret: "w", list: [{ management_api_key: "m" }] },
        url: "smtp://user:hunter2@mail.example:587",
        error: new Error("connect redis://:pw@10.0.0.1:6379 failed"),
      }),
    ).to.deep.equal({
      api_key: REDACTED,
      client_secret: REDACTED,
      password: REDACTED,
      new_password: REDACTED,
      access_token: REDACTED,
      authorization: REDACTED,
      check_code: REDACTED,
      code: "invalid_code",
      nested: { refresh_token: REDACTED, webhook_secret: REDACTED, list: [{ management_api_key: REDACTED }] },
      url: "smtp://user:***@mail.example:587",
      error: "Error: connect redis://:***@10.0.0.1:6379 failed",
    });
  });

  it("writes pino lines: time, level by name, msg, the logger's context and the fields", () => {
    const raw: string[] = [];
    const log = createLogger("info", (l) => raw.push(l), { worker: 2 });
    log.debug("not written");
    log.warn("written", { reason: "x", token: "abc" });
    expect(raw).to.have.length(1);
    const line = JSON.parse(raw[0] ?? "{}") as Line;
    expect(line).to.include({ level: "warn", msg: "written", worker: 2, reason: "x", token: REDACTED });
    expect(line.time).to.match(/Z$/);
  });

  it("writes the request log's lines (infoPlain) as pino writes an info line: same members, same order", () => {
    const raw: string[] = [];
    const log = createLogger("info", (l) => raw.push(l), { worker: 2, pid: 42 });
    const fields = {
      method: "a.B/C",
      transport: "http",
      code: "ok",
      http_status: 200,
      duration_ms: 1.5,
      note: 'q"\n',
    };
    // A provider's fields (the trace's, while tracing runs) come first; the line's own method wins.
    providing = { request_id: "rid-1", method: "x.Y/Z" };
    try {
      log.info("call", fields);
      log.infoPlain?.("call", fields);
    } finally {
      providing = undefined;
    }
    expect(raw).to.have.length(2);
    const [pinoLine, plainLine] = raw.map((l) => {
      expect(l.endsWith("\n")).to.equal(true);
      const parsed = JSON.parse(l) as Line;
      expect(parsed.time).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      return { ...parsed, time: "t" };
    });
    expect(Object.keys(plainLine ?? {})).to.deep.equal(Object.keys(pinoLine ?? {}));
    expect(plainLine).to.deep.equal(pinoLine);
    expect(plainLine).to.include({ request_id: "rid-1", method: "a.B/C", worker: 2 });
    const silent = createLogger("warn", (l) => raw.push(l));
    silent.infoPlain?.("call", fields);
    expect(raw).to.have.length(2);
  });
});

describe("routeProcessOutput: what a serving process prints is JSON lines of its log", () => {
  it("writes process warnings and the console's output (where libraries print) as log lines", async () => {
    const raw: string[] = [];
    const log = createLogger("debug", (line) => raw.push(line));
    const saved = { ...console };
    const warningListeners = process.listeners("warning");
    try {
      routeProcessOutput(log);
      console.error("[ioredis] Unhandled error event:", new Error("connect ECONNREFUSED").stack);
      console.warn("It is highly recommended to use a minimum Redis version of %s", "6.2.0");
      console.log("redis://user:hunter2@host:6379");
      process.emitWarning("too many listeners", "MaxListenersExceededWarning");
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      Object.assign(console, saved);
      process.removeAllListeners("warning");
      for (const listener of warningListeners) process.on("warning", listener);
    }
    const lines = raw.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.level, l.msg])).to.deep.equal([
      ["error", "console"],
      ["warn", "console"],
      ["info", "console"],
      ["warn", "process warning"],
    ]);
    expect(lines[0]?.text).to.match(/^\[ioredis\] Unhandled error event: Error: connect ECONNREFUSED\n/);
    expect(lines[1]?.text).to.equal("It is highly recommended to use a minimum Redis version of 6.2.0");
    expect(lines[2]?.text).to.equal("redis://user:***@host:6379");
    expect(lines[3]).to.include({ name: "MaxListenersExceededWarning", warning: "too many listeners" });
  });
});

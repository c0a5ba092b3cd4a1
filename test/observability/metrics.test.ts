import { AggregatorRegistry } from "prom-client";
import { sample } from "../support/metrics.js";
import { connect, type IncomingHttpHeaders } from "node:http2";
import { expect } from "chai";
import { status } from "@grpc/grpc-js";
import { VerifyServiceService } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { Metrics } from "../../src/observability/metrics.js";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { fundedAccount } from "../support/v1.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { rest } from "../support/rest.js";
import { testPort } from "../support/ports.js";
import { startRedis, waitFor } from "../support/redis.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { testRedisUrl } from "../support/hooks.js";
import { TEST_SECRETS_KEY } from "../support/app.js";

/** A gRPC call over a bare HTTP/2 stream, for what grpc-js clients never send (an expired `grpc-timeout`). */
async function rawGrpc(
  address: string,
  path: string,
  message: Uint8Array,
  headers: Record<string, string>,
): Promise<{ status: number; trailers: Record<string, unknown> }> {
  const session = connect(`http://${address}`);
  try {
    return await new Promise((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc",
        te: "trailers",
        ...headers,
      });
      const frame = Buffer.alloc(5 + message.length);
      frame.writeUInt32BE(message.length, 1);
      frame.set(message, 5);
      let answer: Record<string, unknown> = {};
      // A trailers-only answer carries grpc-status in its headers.
      stream.on("response", (h: IncomingHttpHeaders) => {
        answer = { ...h };
      });
      stream.on("trailers", (t: IncomingHttpHeaders) => {
        answer = { ...answer, ...t };
      });
      stream.on("error", reject);
      stream.on("close", () => {
        resolve({ status: Number(answer["grpc-status"]), trailers: answer });
      });
      stream.resume();
      stream.end(frame);
    });
  } finally {
    session.close();
  }
}

async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).to.equal(200);
  expect(res.headers.get("content-type")).to.match(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

describe("ADMIN_PORT: /metrics, /healthz and /readyz", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let hooks: Receiver;
  let mail: Receiver;
  let adminPort: number;
  let customer: { uuid: string; key: string };
  let nextNumber = 612_900_100;
  const freshNumber = () => `+33${(nextNumber += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    hooks = await Receiver.start();
    mail = await Receiver.start();
    adminPort = await testPort();
    app = await startTestApp({
      ADMIN_PORT: String(adminPort),
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      SMS_PRICES: "default:0.05,FR:0.07",
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: mail.url,
      RATE_LIMIT_NUMBER: "1/600",
      WEBHOOK_BACKOFF_BASE_MS: "50",
    });
    const made = await fundedAccount(app.registry.accounts, "Metrics", 100_000_000);
    customer = { uuid: made.account.customerUuid, key: made.apiKey };
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await hooks.close();
    await mail.close();
  });

  const send = (phone: string, extra: Record<string, unknown> = {}) =>
    rest(app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: customer.uuid, phone_number: phone, ...extra },
      { "x-api-key": customer.key },
    );

  it("answers /healthz and /readyz with 200 while Redis answers, and 404 elsewhere", async () => {
    const health = await fetch(`http://127.0.0.1:${adminPort}/healthz`);
    expect(health.status).to.equal(200);
    expect(await health.json()).to.deep.equal({ status: "ok" });
    const ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
    expect(ready.status).to.equal(200);
    expect(await ready.json()).to.deep.equal({ status: "ready" });
    expect((await fetch(`http://127.0.0.1:${adminPort}/v1/authentication`)).status).to.equal(404);
    const post = await fetch(`http://127.0.0.1:${adminPort}/metrics`, { method: "POST" });
    expect(post.status).to.equal(405);
    expect(post.headers.get("allow")).to.equal("GET, HEAD");
  });

  it("counts calls by transport, method and code, and times them", async () => {
    const before = await scrape(adminPort);
    const ok = {
      transport: "http",
      service: "ringfence.verify.v1.VerifyService",
      method: "CreateAuthentication",
    };
    const okBefore = sample(before, "ringfence_requests_total", { ...ok, code: "ok" });
    const sent = await send(freshNumber());
    expect(sent.status).to.equal(200);
    const refused = await rest(app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: customer.uuid, phone_number: freshNumber() },
      { "x-api-key": "not-the-key" },
    );
    expect(refused.status).to.equal(400);
    const client = new LookupServiceClient(app.grpcAddress, insecure);
    try {
      const { err } = await unary(
        client.lookupPhoneNumber.bind(client),
        { phoneNumber: "+33612345678", type: [] },
        metadata({ "customer-uuid": customer.uuid, "x-api-key": customer.key }),
      );
      expect(err).to.equal(null);
    } finally {
      client.close();
    }

    const after = await scrape(adminPort);
    expect(sample(after, "ringfence_requests_total", { ...ok, code: "ok" })).to.equal(okBefore + 1);
    expect(sample(after, "ringfence_requests_total", { ...ok, code: "account_invalid" })).to.be.at.least(1);
    const grpc = {
      transport: "grpc",
      service: "ringfence.lookup.v1.LookupService",
      method: "LookupPhoneNumber",
    };
    expect(sample(after, "ringfence_requests_total", { ...grpc, code: "ok" })).to.be.at.least(1);
    expect(sample(after, "ringfence_request_duration_seconds_count", ok)).to.equal(
      sample(before, "ringfence_request_duration_seconds_count", ok) + 2,
    );
    expect(sample(after, "ringfence_request_duration_seconds_bucket", { ...ok, le: "+Inf" })).to.be.at.least(
      2,
    );
  });

  it('tells server errors from the caller\'s: outcome="server_error" selects only the former', async () => {
    const metrics = new Metrics();
    const call = {
      transport: "grpc",
      service: "s",
      method: "M",
      grpcStatus: 4,
      durationMs: 1,
      requestId: "r",
    } as const;
    metrics.observe({ ...call, code: "deadline_exceeded", httpStatus: 504 });
    metrics.observe({ ...call, code: "deadline_exceeded", httpStatus: 504, deadlineExpiredOnArrival: true });
    metrics.observe({ ...call, code: "unavailable", httpStatus: 503 });
    metrics.observe({ ...call, code: "bad_request", httpStatus: 400 });
    metrics.observe({ ...call, code: "ok", httpStatus: 200 });
    const text = (await metrics.exposition()).body;
    const count = (labels: Record<string, string>) => sample(text, "ringfence_requests_total", labels);
    expect(count({ outcome: "server_error" })).to.equal(2);
    expect(count({ outcome: "server_error", code: "deadline_exceeded" })).to.equal(1);
    expect(count({ outcome: "client_error" })).to.equal(2);
    expect(count({ outcome: "client_error", code: "deadline_exceeded" })).to.equal(1);
    expect(count({ outcome: "ok" })).to.equal(1);
  });

  describe("a caller's deadline already past on arrival", () => {
    const expired = { code: "deadline_exceeded", outcome: "client_error" };
    const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros;
    /** Waits for the SMS of a send made after `phone`'s refusal, then says whether `phone` got one. */
    async function smsTo(phone: string): Promise<boolean> {
      const later = freshNumber();
      expect((await send(later)).status).to.equal(200);
      await waitFor(() => Promise.resolve(sms.messages.some((m) => m.to === later)));
      return sms.messages.some((m) => m.to === phone);
    }

    it("REST V1: 504 internal_server_error, nothing charged or sent, counted as a client error", async () => {
      const before = await scrape(adminPort);
      for (const timeout of ["0S", "0m", "1n"]) {
        const phone = freshNumber();
        const funds = await balance();
        const res = await rest(app.baseUrl).post(
          "/v1/authentication",
          { customer_uuid: customer.uuid, phone_number: phone },
          { "x-api-key": customer.key, "grpc-timeout": timeout },
        );
        expect(res.status, timeout).to.equal(504);
        expect(res.body, timeout).to.deep.equal({
          code: "internal_server_error",
          message: "the call's deadline passed before the call started",
          doc_url: `${app.config.DOCS_URL}/errors#internal_server_error`,
        });
        expect(res.headers.get("deprecation"), timeout).to.not.equal(null);
        expect(await balance(), timeout).to.equal(funds);
        expect(await smsTo(phone), timeout).to.equal(false);
      }
      const after = await scrape(adminPort);
      const v1 = { transport: "http", method: "CreateAuthentication" };
      expect(sample(after, "ringfence_requests_total", { ...v1, ...expired })).to.equal(
        sample(before, "ringfence_requests_total", { ...v1, ...expired }) + 3,
      );
      expect(sample(after, "ringfence_requests_total", { outcome: "server_error" })).to.equal(
        sample(before, "ringfence_requests_total", { outcome: "server_error" }),
      );
    });

    it("REST V2: 504 deadline_exceeded in the V2 body, nothing sent, counted as a client error", async () => {
      const before = await scrape(adminPort);
      const phone = freshNumber();
      const res = await rest(app.baseUrl).post(
        "/v2/verification",
        { target: { type: "phone_number", value: phone } },
        { authorization: `Bearer ${customer.key}`, "grpc-timeout": "0S" },
      );
      expect(res.status).to.equal(504);
      expect(res.body).to.deep.include({ code: "deadline_exceeded", type: "deadline_exceeded" });
      expect(await smsTo(phone)).to.equal(false);
      const after = await scrape(adminPort);
      const v2 = { transport: "http", service: "ringfence.verify.v2.VerificationService" };
      expect(sample(after, "ringfence_requests_total", { ...v2, ...expired })).to.equal(
        sample(before, "ringfence_requests_total", { ...v2, ...expired }) + 1,
      );
      expect(sample(after, "ringfence_requests_total", { outcome: "server_error" })).to.equal(
        sample(before, "ringfence_requests_total", { outcome: "server_error" }),
      );
    });

    it("gRPC: DEADLINE_EXCEEDED, nothing charged or sent, counted as a client error", async () => {
      const before = await scrape(adminPort);
      const funds = await balance();
      const phone = freshNumber();
      const message = VerifyServiceService.createAuthentication.requestSerialize({
        ...VerifyServiceService.createAuthentication.requestDeserialize(Buffer.alloc(0)),
        customerUuid: customer.uuid,
        phoneNumber: phone,
      });
      const answer = await rawGrpc(
        app.grpcAddress,
        "/ringfence.verify.v1.VerifyService/CreateAuthentication",
        message,
        { "x-api-key": customer.key, "grpc-timeout": "0m" },
      );
      expect(answer.status).to.equal(status.DEADLINE_EXCEEDED);
      expect(await balance()).to.equal(funds);
      expect(await smsTo(phone)).to.equal(false);
      const grpc = { transport: "grpc", method: "CreateAuthentication", ...expired };
      await waitFor(async () => {
        const after = await scrape(adminPort);
        return (
          sample(after, "ringfence_requests_total", grpc) ===
          sample(before, "ringfence_requests_total", grpc) + 1
        );
      });
      expect(
        sample(await scrape(adminPort), "ringfence_requests_total", { outcome: "server_error" }),
      ).to.equal(sample(before, "ringfence_requests_total", { outcome: "server_error" }));
    });
  });

  it("counts SMS sent and failed by provider and country, and the spend", async () => {
    const before = await scrape(adminPort);
    // SMS_PROVIDER alone is one provider named `default` (docs/routing.md#providers).
    const fr = { channel: "sms", provider: "default", country: "FR" };
    expect((await send(freshNumber())).body.status).to.equal("pending");
    await sms.message(sms.messages.length - 1);
    sms.receiver.answer = () => 503;
    try {
      const failed = await send(freshNumber());
      expect(failed.status).to.be.oneOf([200, 500, 503]);
    } finally {
      sms.receiver.answer = () => 200;
    }
    const after = await scrape(adminPort);
    expect(sample(after, "ringfence_messages_sent_total", fr)).to.equal(
      sample(before, "ringfence_messages_sent_total", fr) + 1,
    );
    expect(sample(after, "ringfence_messages_failed_total", fr)).to.be.greaterThan(
      sample(before, "ringfence_messages_failed_total", fr),
    );
    // The accepted message cost 0.07 (FR); the refused one was given back.
    expect(sample(after, "ringfence_sms_spend_total", { country: "FR" })).to.be.closeTo(
      sample(before, "ringfence_sms_spend_total", { country: "FR" }) + 0.07,
      1e-9,
    );
  });

  it("counts emails sent and failed by provider, and the reason of a failure", async () => {
    const made = await runCli(["apps", "create", "--name", "Mail metrics"], cliEnv(app.config));
    const { app_id: appId } = JSON.parse(made.stdout) as { app_id: string };
    let n = 0;
    const login = () =>
      rest(app.baseUrl).post("/v1/session/login/otp", {
        app_id: appId,
        identifier: { type: "email_address", value: `metrics${++n}@example.com` },
      });
    const before = await scrape(adminPort);
    // The provider's series are there before its first email, at 0.
    for (const reason of ["refused", "unavailable"])
      expect(before).to.match(
        new RegExp(`^ringfence_email_failed_total\\{provider="http",reason="${reason}"\\} `, "m"),
      );
    expect(before).to.match(/^ringfence_email_sent_total\{provider="http"\} /m);

    const received = mail.received.length;
    expect((await login()).status).to.equal(200);
    await mail.until((r) => r.length > received);
    try {
      mail.answer = () => 500;
      expect((await login()).status).to.be.at.least(500);
      mail.answer = () => 422;
      expect((await login()).status).to.be.at.least(400);
    } finally {
      mail.answer = () => 200;
    }
    const after = await scrape(adminPort);
    const http = { provider: "http" };
    expect(sample(after, "ringfence_email_sent_total", http)).to.equal(
      sample(before, "ringfence_email_sent_total", http) + 1,
    );
    for (const reason of ["unavailable", "refused"]) {
      expect(sample(after, "ringfence_email_failed_total", { ...http, reason }), reason).to.equal(
        sample(before, "ringfence_email_failed_total", { ...http, reason }) + 1,
      );
    }
  });

  it("counts a refusal by the rule that made it: RATE_LIMIT_NUMBER, SPAM_LINE_TYPES", async () => {
    const before = await scrape(adminPort);
    const phone = freshNumber();
    expect((await send(phone)).body.status).to.equal("pending");
    expect((await send(phone)).body.status).to.equal("rate_limited");
    expect((await send("+33891234567")).body.status).to.equal("spam_detected");
    const after = await scrape(adminPort);
    for (const rule of ["RATE_LIMIT_NUMBER", "SPAM_LINE_TYPES"]) {
      expect(sample(after, "ringfence_abuse_refusals_total", { rule }), rule).to.equal(
        sample(before, "ringfence_abuse_refusals_total", { rule }) + 1,
      );
    }
  });

  it("counts webhook deliveries and retries, and shows the backlog", async () => {
    const before = await scrape(adminPort);
    let failures = 1;
    hooks.answer = () => (failures-- > 0 ? 503 : 200);
    const sent = await send(freshNumber(), { callback_url: hooks.url });
    expect(sent.status).to.equal(200);
    await hooks.until((r) => r.length >= 1);
    await waitFor(async () => {
      const text = await scrape(adminPort);
      return (
        sample(text, "ringfence_webhook_deliveries_total", { outcome: "delivered" }) >
        sample(before, "ringfence_webhook_deliveries_total", { outcome: "delivered" })
      );
    });
    const after = await scrape(adminPort);
    expect(sample(after, "ringfence_webhook_deliveries_total", { outcome: "retry" })).to.be.greaterThan(
      sample(before, "ringfence_webhook_deliveries_total", { outcome: "retry" }),
    );
    expect(after).to.match(/^ringfence_webhook_backlog \d+$/m);
  });

  it("times Redis PINGs and shows the process's own metrics", async () => {
    await waitFor(
      async () => sample(await scrape(adminPort), "ringfence_redis_ping_duration_seconds_count") > 0,
    );
    const text = await scrape(adminPort);
    expect(text).to.match(/^process_cpu_seconds_total \S+$/m);
    expect(text).to.match(/^# TYPE ringfence_redis_errors_total counter$/m);
  });

  it("is closed once the app has stopped", async () => {
    const other = await startTestApp({ ADMIN_PORT: String(await testPort()) });
    const port = other.adminPort ?? 0;
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200);
    await other.stop();
    let refused = false;
    await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => (refused = true));
    expect(refused).to.equal(true);
  });
});

describe("ringfence_redis_up", function () {
  this.timeout(60_000);

  it("is 1 while Redis answers, 0 while it is frozen, and 1 again once it thaws", async () => {
    const redis = await startRedis();
    const adminPort = await testPort();
    const app = await startTestApp({ REDIS_URL: redis.url, ADMIN_PORT: String(adminPort) });
    const up = async () => sample(await scrape(adminPort), "ringfence_redis_up");
    try {
      expect(await scrape(adminPort)).to.match(/^# TYPE ringfence_redis_up gauge$/m);
      expect(await up()).to.equal(1);
      redis.pause();
      await waitFor(async () => (await up()) === 0, 20_000);
      redis.resume();
      await waitFor(async () => (await up()) === 1, 20_000);
    } finally {
      redis.resume();
      await app.stop();
      await redis.stop();
    }
  });
});

describe("ADMIN_PORT with WORKERS=2: one /metrics for the instance", function () {
  this.timeout(60_000);
  let service: ServiceProcess | undefined;
  after(async () => {
    await service?.kill();
  });

  it("sums every worker's calls and answers /readyz from the primary", async () => {
    const adminPort = await testPort();
    service = await startServiceProcess({
      REDIS_URL: testRedisUrl(),
      SECRETS_KEY: TEST_SECRETS_KEY,
      REDIS_KEY_PREFIX: `metrics-workers-${Date.now()}:`,
      WORKERS: "2",
      ADMIN_PORT: String(adminPort),
      // Forty wrong keys from one address would fill API_KEY_FAILURES_IP; this counts calls.
      API_KEY_FAILURES_IP: "off",
    });
    const calls = 40;
    // Each call on a connection of its own, so the primary spreads them over both workers.
    for (let i = 0; i < calls; i++) {
      const res = await fetch(`${service.baseUrl}/v1/authentication`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": "nobody", connection: "close" },
        body: JSON.stringify({
          customer_uuid: "00000000-0000-4000-8000-000000000000",
          phone_number: "+33612345678",
        }),
      });
      expect(res.status).to.equal(400);
    }
    const text = await scrape(adminPort);
    const labels = {
      transport: "http",
      service: "ringfence.verify.v1.VerifyService",
      method: "CreateAuthentication",
      code: "account_invalid",
    };
    expect(sample(text, "ringfence_requests_total", labels)).to.equal(calls);
    // Not the sum of the workers' values: up while every worker reaches Redis.
    expect(sample(text, "ringfence_redis_up")).to.equal(1);
    expect((await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status).to.equal(200);
  });
});

describe("delivery providers: the sent, reports, verified and available families", () => {
  const text = async (metrics: Metrics) => (await metrics.exposition()).body;

  it("ringfence_delivery_sent_total counts every submit tried, by channel, provider and country", async () => {
    const metrics = new Metrics();
    metrics.deliverySent("sms", "alpha", "FR");
    metrics.deliverySent("sms", "alpha", "FR");
    metrics.deliverySent("sms", "beta", "FR");
    metrics.deliverySent("voice", "call", "GB");
    const body = await text(metrics);
    expect(body).to.match(/^# TYPE ringfence_delivery_sent_total counter$/m);
    expect(
      sample(body, "ringfence_delivery_sent_total", { channel: "sms", provider: "alpha", country: "FR" }),
    ).to.equal(2);
    expect(
      sample(body, "ringfence_delivery_sent_total", { channel: "sms", provider: "beta", country: "FR" }),
    ).to.equal(1);
    expect(
      sample(body, "ringfence_delivery_sent_total", { channel: "voice", provider: "call", country: "GB" }),
    ).to.equal(1);
    expect(sample(body, "ringfence_delivery_sent_total")).to.equal(4);
  });

  it("ringfence_delivery_reports_total counts reports by status: delivered, undelivered, rejected", async () => {
    const metrics = new Metrics();
    const alpha = ["sms", "alpha", "FR"] as const;
    metrics.deliveryReport(...alpha, "delivered");
    metrics.deliveryReport(...alpha, "delivered");
    metrics.deliveryReport(...alpha, "undelivered");
    metrics.deliveryReport(...alpha, "rejected");
    metrics.deliveryReport("sms", "beta", "DE", "delivered");
    const body = await text(metrics);
    expect(body).to.match(/^# TYPE ringfence_delivery_reports_total counter$/m);
    const fr = { channel: "sms", provider: "alpha", country: "FR" };
    expect(sample(body, "ringfence_delivery_reports_total", { ...fr, status: "delivered" })).to.equal(2);
    expect(sample(body, "ringfence_delivery_reports_total", { ...fr, status: "undelivered" })).to.equal(1);
    expect(sample(body, "ringfence_delivery_reports_total", { ...fr, status: "rejected" })).to.equal(1);
    expect(
      sample(body, "ringfence_delivery_reports_total", {
        provider: "beta",
        country: "DE",
        status: "delivered",
      }),
    ).to.equal(1);
    expect(
      sample(body, "ringfence_delivery_reports_total", { provider: "beta", status: "undelivered" }),
    ).to.equal(0);
  });

  it("ringfence_delivery_verified_total counts right codes to the provider whose message carried them", async () => {
    const metrics = new Metrics();
    metrics.deliveryVerified("sms", "alpha", "FR");
    metrics.deliveryVerified("whatsapp", "meta", "FR");
    metrics.deliveryVerified("whatsapp", "meta", "FR");
    const body = await text(metrics);
    expect(body).to.match(/^# TYPE ringfence_delivery_verified_total counter$/m);
    expect(
      sample(body, "ringfence_delivery_verified_total", { channel: "sms", provider: "alpha", country: "FR" }),
    ).to.equal(1);
    expect(
      sample(body, "ringfence_delivery_verified_total", {
        channel: "whatsapp",
        provider: "meta",
        country: "FR",
      }),
    ).to.equal(2);
  });

  it("ringfence_provider_available is 1 or 0 per channel and provider, as last set", async () => {
    const metrics = new Metrics();
    metrics.providerAvailable("sms", "alpha", true);
    metrics.providerAvailable("sms", "beta", true);
    metrics.providerAvailable("sms", "beta", false);
    metrics.providerAvailable("voice", "call", false);
    metrics.providerAvailable("voice", "call", true);
    const body = await text(metrics);
    expect(body).to.match(/^# TYPE ringfence_provider_available gauge$/m);
    expect(body).to.match(/^ringfence_provider_available\{channel="sms",provider="alpha"\} 1$/m);
    expect(body).to.match(/^ringfence_provider_available\{channel="sms",provider="beta"\} 0$/m);
    expect(body).to.match(/^ringfence_provider_available\{channel="voice",provider="call"\} 1$/m);
  });

  it("with WORKERS > 1, ringfence_provider_available is the lowest worker's; the delivery counters are summed", async () => {
    const [one, two] = [new Metrics(), new Metrics()];
    one.providerAvailable("sms", "alpha", true);
    two.providerAvailable("sms", "alpha", false);
    one.providerAvailable("sms", "beta", true);
    two.providerAvailable("sms", "beta", true);
    one.deliverySent("sms", "alpha", "FR");
    two.deliverySent("sms", "alpha", "FR");
    one.deliveryReport("sms", "alpha", "FR", "delivered");
    two.deliveryReport("sms", "alpha", "FR", "delivered");
    two.deliveryVerified("sms", "alpha", "FR");
    const instance = AggregatorRegistry.aggregate([
      await one.registry.getMetricsAsJSON(),
      await two.registry.getMetricsAsJSON(),
    ]);
    const body = await instance.metrics();
    expect(sample(body, "ringfence_provider_available", { provider: "alpha" })).to.equal(0);
    expect(sample(body, "ringfence_provider_available", { provider: "beta" })).to.equal(1);
    expect(sample(body, "ringfence_delivery_sent_total", { provider: "alpha" })).to.equal(2);
    expect(
      sample(body, "ringfence_delivery_reports_total", { provider: "alpha", status: "delivered" }),
    ).to.equal(2);
    expect(sample(body, "ringfence_delivery_verified_total", { provider: "alpha" })).to.equal(1);
  });
});

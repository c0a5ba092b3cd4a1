import { expect } from "chai";
import { fundedAccount } from "../support/v1.js";
import type { Metadata, ServiceError } from "@grpc/grpc-js";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { VerifyServiceClient } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { SessionServiceClient } from "../../src/gen/ringfence/session/v1/session_service.js";
import { HealthClient } from "../support/health.js";
import { startRedis, waitFor, type RedisServer } from "../support/redis.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, TEST_SECRETS_KEY, unary } from "../support/app.js";
import { startServiceProcess } from "../support/service-process.js";
import { createLogger } from "../../src/log.js";
import { RedisErrorReport } from "../../src/redis/client.js";
import { SmsReceiver } from "../support/receivers.js";
import { basicAuth, rest, type Json, type RestAnswer } from "../support/rest.js";

const FR_MOBILE = "+33612345678";

interface Answer {
  call: string;
  status: number;
  retryAfter: string | null | undefined;
  body: Record<string, unknown>;
}

/** A deployment with one account, one app and one OAuth client, and a mix of calls over REST and gRPC. */
async function setUp(redis: RedisServer) {
  const sms = await SmsReceiver.start();
  const app = await startTestApp({ REDIS_URL: redis.url, SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url });
  const { account, apiKey } = await fundedAccount(app.registry.accounts, "Outage");
  const v1 = { "customer-uuid": account.customerUuid, "x-api-key": apiKey };
  const made = JSON.parse((await runCli(["apps", "create", "--name", "O"], cliEnv(app.config))).stdout) as {
    app_id: string;
    management_api_key: string;
  };
  const api = rest(app.baseUrl);
  const client = await api.post(
    `/v2/session/apps/${made.app_id}/oauth/clients`,
    { client_name: "o", provider_url: "https://o.example.com", grant_types: ["client_credentials"] },
    { authorization: `Bearer ${made.management_api_key}` },
  );
  expect(client.status).to.equal(201);
  const basic = basicAuth(String(client.body.client_id), String(client.body.client_secret));
  const lookup = new LookupServiceClient(app.grpcAddress, insecure);
  const verify = new VerifyServiceClient(app.grpcAddress, insecure);
  const session = new SessionServiceClient(app.grpcAddress, insecure);
  const health = new HealthClient(app.grpcAddress, insecure);
  let n = 0;

  /** One round of every call; `phone` varies so that send limits are not what answers. */
  async function mix(): Promise<Answer[]> {
    n += 1;
    const phone = `+336${String(10_000_000 + n * 7919).slice(-8)}`;
    const viaRest = async (call: string, res: Promise<RestAnswer>): Promise<Answer> => {
      const r = await res;
      // An answer that is not JSON (which none should be) is kept as its text.
      const body = r.text === "" ? {} : ((r.body as Json | undefined) ?? { text: r.text });
      return { call, status: r.status, retryAfter: r.headers.get("retry-after"), body };
    };
    const grpc = async (
      call: string,
      res: Promise<{ err: ServiceError | null; headers: Metadata | undefined }>,
    ): Promise<Answer> => {
      const { err } = await res;
      const code = err?.code ?? GrpcStatus.OK;
      // Read as HTTP would: UNAVAILABLE 503, INTERNAL/UNKNOWN 500, any other refusal a 4xx.
      const status =
        code === GrpcStatus.OK
          ? 200
          : code === GrpcStatus.UNAVAILABLE
            ? 503
            : code === GrpcStatus.INTERNAL || code === GrpcStatus.UNKNOWN
              ? 500
              : 400;
      const retryAfter = err?.metadata.get("retry-after")[0]?.toString();
      return { call, status, retryAfter, body: { grpcCode: code, details: err?.details } };
    };
    return Promise.all([
      viaRest("rest lookup", api.get(`/v1/lookup/${FR_MOBILE}`, v1)),
      viaRest(
        "rest send",
        api.post("/v1/authentication", { customer_uuid: v1["customer-uuid"], phone_number: phone }, v1),
      ),
      viaRest(
        "rest check",
        api.post(
          "/v1/check",
          {
            customer_uuid: v1["customer-uuid"],
            authentication_uuid: "8d3b1c56-3f8e-4c1a-9a4e-1d2c3b4a5f60",
            check_code: "123456",
          },
          v1,
        ),
      ),
      viaRest(
        "rest token",
        api.call("POST", "/v1/session/oauth/token", {
          form: { grant_type: "client_credentials" },
          headers: basic,
        }),
      ),
      viaRest(
        "rest login",
        api.post("/v1/session/login/otp", {
          app_id: made.app_id,
          identifier: { type: "phone_number", value: phone },
        }),
      ),
      grpc(
        "grpc lookup",
        unary(lookup.lookupPhoneNumber.bind(lookup), { phoneNumber: FR_MOBILE, type: [] }, metadata(v1)),
      ),
      grpc(
        "grpc check",
        unary(
          verify.checkAuthentication.bind(verify),
          {
            customerUuid: v1["customer-uuid"],
            authenticationUuid: "8d3b1c56-3f8e-4c1a-9a4e-1d2c3b4a5f60",
            checkCode: "123456",
          },
          metadata(v1),
        ),
      ),
      grpc(
        "grpc login",
        unary(session.startOtpLogin.bind(session), {
          appId: made.app_id,
          identifier: { type: "phone_number", value: phone },
        }),
      ),
    ]);
  }

  async function healthStatus(): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      health.check({ service: "" }, (err, r) => {
        if (err) reject(err);
        else resolve(r?.status);
      });
    });
  }

  async function close() {
    for (const c of [lookup, verify, session, health]) c.close();
    await app.stop();
    await sms.close();
  }
  return { app, mix, healthStatus, close };
}

/**
 * Every answer is a 503 (gRPC UNAVAILABLE) with Retry-After, in the body dialect of its family.
 * `justFrozen`: Redis froze a moment ago, so a token may still be answered from a reading of its
 * client younger than CLIENT_READING_MS (src/oauth/clients.ts), which vouches for it without Redis.
 */
function expectUnavailable(answers: Answer[], justFrozen = false) {
  if (justFrozen) answers = answers.filter((a) => a.call !== "rest token" || a.status !== 200);
  for (const a of answers) {
    expect(a.status, `${a.call}: ${JSON.stringify(a.body)}`).to.equal(503);
    expect(a.retryAfter, `${a.call} Retry-After`).to.match(/^\d+$/);
  }
  const by = (call: string) => answers.find((a) => a.call === call)?.body;
  expect(by("rest lookup")).to.include({ code: "internal_server_error" });
  expect(by("rest send")).to.include({ code: "internal_server_error" });
  expect(by("rest login")).to.include({ code: "unavailable" });
  if (by("rest token") !== undefined)
    expect(by("rest token")).to.include({ error: "temporarily_unavailable" });
}

/** What a working service answers to the mix (the check is of an unknown authentication). */
function expectNormal(answers: Answer[]) {
  const by = (call: string) => answers.find((a) => a.call === call);
  for (const call of ["rest lookup", "rest send", "rest token", "rest login", "grpc lookup", "grpc login"]) {
    expect(by(call)?.status, `${call}: ${JSON.stringify(by(call)?.body)}`).to.equal(200);
  }
  for (const call of ["rest check", "grpc check"]) {
    expect(by(call)?.status, call).to.not.be.oneOf([500, 503]);
  }
}

async function recovered(mix: () => Promise<Answer[]>, healthStatus: () => Promise<string | undefined>) {
  await waitFor(async () => (await healthStatus()) === "SERVING", 15_000);
  let last: Answer[] = [];
  await waitFor(async () => {
    last = await mix();
    return last.every((a) => a.status !== 503);
  }, 15_000).catch(() => undefined);
  expectNormal(last);
}

describe("when Redis stops answering", function () {
  this.timeout(90_000);

  it("answers every call with 503 and Retry-After while Redis is frozen, reports not serving, and recovers when it thaws", async () => {
    const redis = await startRedis();
    const s = await setUp(redis);
    try {
      expectNormal(await s.mix());
      redis.pause();
      // Load while frozen: several rounds at once, none may be a 500.
      const rounds = await Promise.all([s.mix(), s.mix(), s.mix()]);
      for (const r of rounds) expectUnavailable(r, true);
      await waitFor(async () => (await s.healthStatus()) === "NOT_SERVING", 5_000);
      // By now every reading of the client is too old to vouch: the token is refused too.
      expect((await fetch(`${s.app.baseUrl}/readyz`)).status).to.equal(503);
      expectUnavailable(await s.mix());
      redis.resume();
      await recovered(s.mix, s.healthStatus);
      expect((await fetch(`${s.app.baseUrl}/readyz`)).status).to.equal(200);
    } finally {
      redis.resume();
      await s.close();
      await redis.stop();
    }
  });

  it("answers only 503s with Retry-After while Redis restarts, then recovers with its data kept", async () => {
    const redis = await startRedis({ persistent: true });
    const s = await setUp(redis);
    try {
      expectNormal(await s.mix());
      const answers: Answer[] = [];
      const state = { loading: true };
      const load = (async () => {
        while (state.loading) answers.push(...(await s.mix()));
      })();
      await new Promise((r) => setTimeout(r, 300));
      await redis.restart();
      await recovered(s.mix, s.healthStatus);
      state.loading = false;
      await load;
      const failed = answers.filter((a) => a.status >= 500);
      for (const a of failed) {
        expect(a.status, `${a.call}: ${JSON.stringify(a.body)}`).to.equal(503);
        expect(a.retryAfter, `${a.call} Retry-After`).to.match(/^\d+$/);
      }
      // The account, app and client written before the restart still work (expectNormal above).
    } finally {
      await s.close();
      await redis.stop();
    }
  });

  it("shuts down cleanly, webhook outbox included, while Redis is down", async () => {
    const redis = await startRedis();
    const app = await startTestApp({ REDIS_URL: redis.url, SHUTDOWN_GRACE_MS: "3000" });
    await redis.stop();
    await waitFor(async () => (await fetch(`${app.baseUrl}/readyz`)).status === 503, 5_000);
    // Before: the outbox's blocking connection retried for ever and the close ran out of time.
    expect(await app.stop(), "everything closed before the deadline").to.equal(true);
  });
});

/** Whether `line` is one JSON object, as every line of the service's output must be. */
function isJsonObject(line: string): boolean {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

describe("the service's output while Redis is out of reach", function () {
  this.timeout(90_000);

  it("is JSON lines only, Redis client errors included: a few per connection, then one when it is back", async () => {
    const redis = await startRedis();
    const service = await startServiceProcess({
      REDIS_URL: redis.url,
      SECRETS_KEY: TEST_SECRETS_KEY,
      SHUTDOWN_GRACE_MS: "5000",
    });
    try {
      const calls = () =>
        Promise.all(
          [
            fetch(`${service.baseUrl}/v1/lookup/${FR_MOBILE}`, {
              headers: { "customer-uuid": "0b6e5f2a-8a39-4c39-9d3c-3f0f8f0c2a11", "x-api-key": "wrong" },
            }),
            fetch(`${service.baseUrl}/v2/lookup/${FR_MOBILE}`, {
              headers: { authorization: "Bearer rfk_wrong" },
            }),
            fetch(`${service.baseUrl}/readyz`),
          ].map((answer) => answer.then((r) => r.status)),
        );
      expect(await calls()).to.deep.equal([400, 401, 200]);
      await redis.down();
      // The outage lasts a few seconds (this test is about what an outage writes): every
      // connection retries several times meanwhile, and calls keep coming.
      const outageEndsMs = Date.now() + 4_000;
      const during: number[] = [];
      for (let round = 0; round < 200 && Date.now() < outageEndsMs; round++) during.push(...(await calls()));
      expect(during).to.include(503);
      await redis.up();
      await waitFor(async () => (await calls()).join() === "400,401,200", 20_000);
      // Every connection that said it failed says it is back before the stop (the webhook
      // worker's blocking connection reconnects last).
      const saidBack = () => {
        const said = (msg: string) =>
          new Set(
            service
              .logs()
              .filter((l) => l.msg === msg)
              .map((l) => l.client),
          );
        const back = said("redis connection restored");
        return [...said("redis connection error")].every((c) => back.has(c));
      };
      await waitFor(() => Promise.resolve(saidBack()), 20_000);
      service.signal("SIGTERM");
      // Its last lines too: what the stop writes, and everything queued before the exit.
      await service.exited;
    } finally {
      await service.kill();
      await redis.stop();
    }
    const { stderr, stdout } = service.lines();
    expect(
      [...stderr, ...stdout].filter((line) => !isJsonObject(line)),
      "lines that are not a JSON object",
    ).to.deep.equal([]);
    // Each connection says it lost Redis and that it is back, not a line per reconnection attempt.
    const logs = service.logs();
    const lost = logs.filter((l) => l.msg === "redis connection error");
    const back = logs.filter((l) => l.msg === "redis connection restored");
    expect(lost.map((l) => l.client)).to.include.members(["main", "subscriber", "webhook-worker"]);
    expect(new Set(lost.map((l) => l.client)).size, "one line per connection").to.equal(lost.length);
    expect(back.map((l) => l.client).sort()).to.deep.equal(lost.map((l) => l.client).sort());
    for (const l of lost)
      expect(l).to.include({ level: "warn" }).and.have.property("error").that.is.a("string");
    const connectionLines = logs.filter(
      (l) => typeof l.msg === "string" && l.msg.startsWith("redis connection"),
    );
    expect(connectionLines.length, "Redis connection lines in a few seconds' outage").to.equal(
      2 * lost.length,
    );
  });
});

describe("RedisErrorReport", () => {
  it("says a connection failed once, again after each interval with the errors between, and once that it is back", () => {
    const raw: string[] = [];
    const lines = () => raw.map((l) => JSON.parse(l) as Record<string, unknown>);
    const quiet = new RedisErrorReport(
      createLogger("info", (l) => raw.push(l)),
      "main",
      60_000,
    );
    quiet.ready();
    for (let i = 0; i < 50; i++) quiet.error(new Error("connect ECONNREFUSED 127.0.0.1:6379"));
    quiet.ready();
    quiet.ready();
    expect(lines().map((l) => [l.msg, l.client, l.errors])).to.deep.equal([
      ["redis connection error", "main", undefined],
      ["redis connection restored", "main", 49],
    ]);
    raw.length = 0;
    // An interval of 0: every error after the first is past it.
    const eager = new RedisErrorReport(
      createLogger("info", (l) => raw.push(l)),
      "subscriber",
      0,
    );
    eager.error(new Error("a"));
    eager.error("b");
    expect(lines().map((l) => [l.level, l.msg, l.error, l.errors])).to.deep.equal([
      ["warn", "redis connection error", "a", undefined],
      ["warn", "redis connection still failing", "b", 1],
    ]);
  });
});

import { expect } from "chai";
import { request, Agent } from "node:http";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { VerifyServiceClient } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { startRedis, startRedisRelay, waitFor, type RedisServer } from "../support/redis.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, TEST_SECRETS_KEY, unary } from "../support/app.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { sendRequest } from "../support/v1.js";
import { rest } from "../support/rest.js";
import { slowProvider } from "../support/receivers.js";

interface Outcome {
  startedMs: number;
  endedMs: number;
  status?: number;
  connection?: string | undefined;
  authenticationUuid?: string | undefined;
  refused?: string;
}

/** One POST over the keep-alive agent; a connection refused or reset before an answer is a refusal. */
function postKeepAlive(
  agent: Agent,
  port: number,
  path: string,
  body: unknown,
  headers: Record<string, string>,
) {
  const startedMs = Date.now();
  return new Promise<Outcome>((resolve) => {
    const data = JSON.stringify(body);
    const req = request(
      {
        agent,
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(data),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let uuid: string | undefined;
          try {
            uuid = (JSON.parse(text) as { authentication_uuid?: string }).authentication_uuid;
          } catch {
            uuid = undefined;
          }
          resolve({
            startedMs,
            endedMs: Date.now(),
            status: res.statusCode,
            connection: res.headers.connection,
            authenticationUuid: uuid,
          });
        });
      },
    );
    req.on("error", (err: NodeJS.ErrnoException) => {
      resolve({ startedMs, endedMs: Date.now(), refused: err.code ?? err.message });
    });
    req.end(data);
  });
}

describe("graceful shutdown of ringfence serve", function () {
  this.timeout(60_000);
  const GRACE_MS = 2_000;
  // Process exit after the last step: event loop teardown and the test's own observation.
  const EXIT_SLACK_MS = 400;
  let redis: RedisServer;
  let provider: Awaited<ReturnType<typeof slowProvider>>;
  let service: ServiceProcess | undefined;

  beforeEach(async () => {
    redis = await startRedis();
    provider = await slowProvider(500);
  });
  afterEach(async () => {
    await service?.kill();
    await provider.close();
    await redis.stop();
  });

  async function start() {
    const env = {
      REDIS_URL: redis.url,
      SECRETS_KEY: TEST_SECRETS_KEY,
      NODE_ENV: "test",
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: provider.url,
      SMS_HTTP_TIMEOUT_MS: "800",
      SHUTDOWN_GRACE_MS: String(GRACE_MS),
      RATE_LIMIT_IP: "off",
      RATE_LIMIT_DEVICE: "off",
      RATE_LIMIT_NUMBER: "off",
      RATE_LIMIT_ACCOUNT: "off",
      SPAM_IP_NUMBERS: "off",
      SPAM_DEVICE_NUMBERS: "off",
      SPAM_RANGE_BURST: "off",
    };
    const made = await runCli(["accounts", "create", "--name", "Drain", "--balance", "1000"], env);
    expect(made.code, made.stderr).to.equal(0);
    const account = JSON.parse(made.stdout) as { customer_uuid: string; api_key: string };
    service = await startServiceProcess(env);
    return { service, account };
  }

  it("exits 0 within the grace period under keep-alive load, closes every connection, and cuts no call after its SMS went out", async () => {
    const { service: s, account } = await start();
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const headers = { "x-api-key": account.api_key };
    const outcomes: Outcome[] = [];
    let n = 0;
    const loop = async () => {
      for (;;) {
        n += 1;
        const phone = `+336${String(10_000_000 + n * 7919).slice(-8)}`;
        const o = await postKeepAlive(
          agent,
          s.httpPort,
          "/v1/authentication",
          { customer_uuid: account.customer_uuid, phone_number: phone },
          headers,
        );
        outcomes.push(o);
        if (o.refused !== undefined) return;
      }
    };
    const loops = Array.from({ length: 6 }, loop);
    // Under way: the load's first sends answered, and a message at the provider whose send has no
    // answer yet (on a loaded machine the first answers may come slowly: wait for them).
    const answeredSends = () => outcomes.filter((o) => o.status === 200).length;
    await waitFor(
      () => Promise.resolve(answeredSends() > 3 && provider.references.length > answeredSends()),
      30_000,
    );
    const signalMs = Date.now();
    s.signal("SIGTERM");
    await Promise.all(loops);
    const exit = await s.exited;
    agent.destroy();

    expect(exit.code, JSON.stringify(s.logs().slice(-5))).to.equal(0);
    expect(exit.atMs - signalMs).to.be.at.most(GRACE_MS + EXIT_SLACK_MS);
    const before = outcomes.filter((o) => o.endedMs < signalMs);
    expect(before.filter((o) => o.status === 200).length, "load before the signal").to.be.greaterThan(3);
    // The signal handler runs within a few milliseconds; an answer sent just before it may arrive after.
    const after = outcomes.filter((o) => o.endedMs > signalMs + 100);
    for (const o of after) {
      if (o.refused !== undefined) {
        expect(o.refused).to.be.oneOf(["ECONNREFUSED", "ECONNRESET"]);
        continue;
      }
      expect(o.connection, `answer ${String(o.status)} after the signal`).to.equal("close");
      // A message refused because the grace left is shorter than the provider's timeout: 503.
      expect(o.status).to.be.oneOf([200, 503]);
    }
    // Sends were waiting on the provider when the signal came: they finish, their connection closed.
    const finished = outcomes.filter(
      (o) => o.startedMs < signalMs && o.endedMs > signalMs && o.status === 200,
    );
    expect(finished.length, "calls in flight at the signal finished").to.be.greaterThan(0);
    for (const o of finished) expect(o.connection).to.equal("close");
    // Every message the provider received belongs to a send whose caller got its 200.
    const answered = new Set(outcomes.filter((o) => o.status === 200).map((o) => o.authenticationUuid));
    expect(provider.references.length).to.be.greaterThan(0);
    for (const ref of provider.references) {
      expect(answered.has(ref.split(".")[0]), `message ${ref} without a 200`).to.equal(true);
    }
    const logs = s.logs();
    expect(logs.some((l) => l.msg === "ringfence stopped" || l.message === "ringfence stopped")).to.equal(
      true,
    );
  });

  it("lets a gRPC call in flight finish and refuses new calls once SIGTERM arrived", async () => {
    const { service: s, account } = await start();
    const client = new VerifyServiceClient(s.grpcAddress, insecure);
    const md = () => metadata({ "x-api-key": account.api_key });
    const request = (phone: string) =>
      sendRequest({ customerUuid: account.customer_uuid, phoneNumber: phone, locale: "en" });
    // Warm the channel so the in-flight call is on an established connection.
    expect(
      (await unary(client.createAuthentication.bind(client), request("+33612340001"), md())).err,
    ).to.equal(null);
    const inFlight = unary(client.createAuthentication.bind(client), request("+33612340002"), md());
    // In flight: its message waits at the provider (which holds each for 500 ms).
    await waitFor(() => Promise.resolve(provider.references.length === 2));
    s.signal("SIGTERM");
    await waitFor(() => Promise.resolve(s.logs().some((l) => l.msg === "SIGTERM received: draining")));
    const late = await unary(client.createAuthentication.bind(client), request("+33612340003"), md());
    const first = await inFlight;
    client.close();
    expect(first.err, "the call in flight finished").to.equal(null);
    expect(late.err?.code, "a new call is refused").to.equal(GrpcStatus.UNAVAILABLE);
    expect(provider.references.length).to.equal(2);
    expect((await s.exited).code).to.equal(0);
  });

  it("refuses a message not yet handed to the provider when the grace left is shorter than its timeout", async () => {
    const relay = await startRedisRelay(redis.url);
    const app = await startTestApp({
      REDIS_URL: relay.url,
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: provider.url,
      SMS_HTTP_TIMEOUT_MS: "5000",
      SHUTDOWN_GRACE_MS: "4000",
    });
    try {
      const made = JSON.parse(
        (await runCli(["apps", "create", "--name", "G"], cliEnv(app.config))).stdout,
      ) as { app_id: string };
      // The relay holds the login's first read of its app; meanwhile shutdown begins with 4 s of
      // grace, less than the provider's 5 s timeout: the login must not reach the provider.
      relay.hold();
      const login = rest(app.baseUrl).post("/v1/session/login/otp", {
        app_id: made.app_id,
        identifier: { type: "phone_number", value: "+33612345670" },
      });
      await relay.heldSeen(made.app_id);
      const stopped = app.stop();
      relay.release();
      const res = await login;
      expect(res.status).to.equal(503);
      expect(res.headers.get("retry-after")).to.match(/^\d+$/);
      expect(res.headers.get("connection")).to.equal("close");
      const body = res.body as { code: string; message: string };
      expect(body.code).to.equal("unavailable");
      expect(body.message).to.include("shutting down");
      expect(provider.references).to.deep.equal([]);
      expect(await stopped).to.equal(true);
    } finally {
      relay.release();
      await app.stop();
      await relay.close();
    }
  });
});

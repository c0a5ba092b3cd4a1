import { expect } from "chai";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { HealthClient } from "./support/health.js";
import { freePort, startRedis, startRedisRelay, waitFor, type RedisServer } from "./support/redis.js";
import { insecure, startTestApp, TEST_SECRETS_KEY, type TestApp } from "./support/app.js";
import { rest } from "./support/rest.js";

const FR_MOBILE = "+33612345678";

async function customerOf(app: TestApp) {
  const { account, apiKey } = await app.registry.accounts.create({
    name: "Life",
    balanceMicros: 0,
    spendingLimitMicros: 0,
    features: [],
    regions: [],
  });
  return { "customer-uuid": account.customerUuid, "x-api-key": apiKey };
}

describe("service lifecycle", () => {
  describe("when Redis goes away", () => {
    let redis: RedisServer;
    let app: TestApp;
    let headers: Record<string, string>;

    before(async () => {
      redis = await startRedis();
      app = await startTestApp({ REDIS_URL: redis.url });
      headers = await customerOf(app);
    });
    after(async () => {
      await app.stop();
    });

    it("answers V1 calls with 503, Retry-After and the V1 body, turns /readyz and gRPC health to not serving", async () => {
      const lookup = () => rest(app.baseUrl).get(`/v1/lookup/${FR_MOBILE}`, headers);
      expect((await lookup()).status).to.equal(200);
      await redis.stop();
      const res = await lookup();
      expect(res.status).to.equal(503);
      expect(res.headers.get("retry-after")).to.match(/^\d+$/);
      expect(res.headers.get("deprecation")).to.equal("@1761955200");
      const body = res.body as Record<string, string>;
      expect(body.code).to.equal("internal_server_error");
      expect(body.message).to.not.include("ECONNREFUSED");
      expect((await fetch(`${app.baseUrl}/readyz`)).status).to.equal(503);
      expect((await fetch(`${app.baseUrl}/healthz`)).status).to.equal(200);
      const health = new HealthClient(app.grpcAddress, insecure);
      const answer = await new Promise<{ status: string } | undefined>((resolve, reject) => {
        health.check({ service: "ringfence.lookup.v1.LookupService" }, (err, r) => {
          if (err) reject(err);
          else resolve(r);
        });
      });
      health.close();
      expect(answer?.status).to.equal("NOT_SERVING");
    });
  });

  describe("with V1_AFTER_SUNSET=gone", () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp({ V1_AFTER_SUNSET: "gone" });
    });
    after(async () => {
      await app.stop();
    });

    it("answers every V1 call with 410 and the V1 error body", async () => {
      const headers = await customerOf(app);
      const res = await rest(app.baseUrl).get(`/v1/lookup/${FR_MOBILE}`, headers);
      expect(res.status).to.equal(410);
      expect(res.headers.get("sunset")).to.equal("Wed, 01 Apr 2026 00:00:00 GMT");
      expect(res.body).to.include({ code: "gone" });
    });
  });

  describe("ringfence serve", () => {
    it("drains an in-flight call on SIGTERM, then exits 0", async function () {
      this.timeout(30_000);
      const redis = await startRedis();
      const relay = await startRedisRelay(redis.url);
      const [grpcPort, httpPort] = [await freePort(), await freePort()];
      const cli = fileURLToPath(new URL("../src/cli.ts", import.meta.url));
      const env = {
        PATH: process.env.PATH ?? "",
        NODE_ENV: "test",
        REDIS_URL: relay.url,
        SECRETS_KEY: TEST_SECRETS_KEY,
        GRPC_PORT: String(grpcPort),
        HTTP_PORT: String(httpPort),
        ADMIN_PORT: "0",
      };
      const child = spawn(process.execPath, ["--import", "tsx", cli, "serve"], {
        env,
        stdio: ["ignore", "ignore", "pipe"],
      });
      let log = "";
      child.stderr.on("data", (d: Buffer) => (log += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      try {
        const base = `http://127.0.0.1:${httpPort}`;
        await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, 20_000);
        // The lookup authenticates against Redis, which the relay holds: once the account's read
        // waits there, the call is in flight, and stays so until the process took the signal.
        const customerUuid = "6f1c1f3e-4f0b-4d8e-9a57-2f1f0c5a9b10";
        relay.hold();
        const inFlight = rest(base).get(`/v1/lookup/${FR_MOBILE}`, {
          "customer-uuid": customerUuid,
          "x-api-key": "k",
        });
        await relay.heldSeen(customerUuid);
        child.kill("SIGTERM");
        await waitFor(() => Promise.resolve(log.includes("SIGTERM received")));
        relay.release();
        const res = await inFlight;
        expect(res.status, "the call in flight is answered, not cut").to.equal(400);
        expect(res.body.code).to.equal("account_invalid");
        expect(res.headers.get("connection"), "answered while draining").to.equal("close");
        expect(await exited).to.equal(0);
        expect(log).to.include("ringfence stopped");
      } finally {
        relay.release();
        child.kill("SIGKILL");
        await relay.close();
        await redis.stop();
      }
    });

    it("refuses to start with one line naming a bad variable", async () => {
      const cli = fileURLToPath(new URL("../src/cli.ts", import.meta.url));
      const child = spawn(process.execPath, ["--import", "tsx", cli, "serve"], {
        env: { PATH: process.env.PATH ?? "", GRPC_PORT: "fifty" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let err = "";
      child.stderr.on("data", (d: Buffer) => (err += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code).to.equal(2);
      expect(err.trim()).to.match(/^ringfence: invalid GRPC_PORT: .+$/);
    });
  });
});

import { expect } from "chai";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { HealthClient } from "./support/health.js";
import { testPort } from "./support/ports.js";
import { GiveUp, startRedis, startRedisRelay, waitFor, type RedisServer } from "./support/redis.js";
import { BUILT_CLI, insecure, runCli, startTestApp, TEST_SECRETS_KEY, type TestApp } from "./support/app.js";
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
      const httpPort = await testPort();
      const cli = fileURLToPath(new URL("../src/cli.ts", import.meta.url));
      const env = {
        PATH: process.env.PATH ?? "",
        NODE_ENV: "test",
        REDIS_URL: relay.url,
        SECRETS_KEY: TEST_SECRETS_KEY,
        GRPC_PORT: "0",
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
        await waitFor(async () => {
          if (child.exitCode !== null) throw new GiveUp(log);
          return (await fetch(`${base}/readyz`)).status === 200;
        }, 20_000);
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

describe("npm start on a machine without a Redis running (node dist/cli.js serve, REDIS_URL unset)", function () {
  this.timeout(90_000);
  let defaultTaken = false;
  let cwd = "";

  before(async () => {
    // A Redis (or anything) on the default address would be used: nothing to start then.
    defaultTaken = !(await refused(6379));
  });
  beforeEach(function () {
    if (defaultTaken) {
      (this.currentTest as Mocha.Test).title += " (skipped: something listens on 127.0.0.1:6379 here)";
      this.skip();
    }
    cwd = mkdtempSync(join(tmpdir(), "ringfence-start-"));
  });
  afterEach(() => {
    if (cwd !== "") rmSync(cwd, { recursive: true, force: true });
    cwd = "";
  });

  /** `npm start` as a newcomer runs it: the built CLI, no REDIS_URL, NODE_ENV unset, in `cwd`. */
  function npmStart(path: string, httpPort: number) {
    const child = spawn(process.execPath, [BUILT_CLI, "serve"], {
      cwd,
      env: {
        PATH: path,
        HOME: process.env.HOME ?? "",
        HTTP_PORT: String(httpPort),
        GRPC_PORT: "0",
        ADMIN_PORT: "0",
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
    const logs = () =>
      stderr
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    return { child, exited, logs, stderr: () => stderr };
  }

  async function started(httpPort: number) {
    const service = npmStart(process.env.PATH ?? "", httpPort);
    const base = `http://127.0.0.1:${httpPort}`;
    // Ready means Redis answers the service's pings.
    await waitFor(async () => {
      if (service.child.exitCode !== null) throw new GiveUp(service.stderr());
      return (await fetch(`${base}/readyz`)).status === 200;
    }, 60_000);
    const said = service.logs().find((l) => String(l.msg).startsWith("started a local redis-server"));
    expect(said, service.stderr()).to.include({ address: "127.0.0.1:6379", dir: ".ringfence/redis" });
    const pid = Number(said?.redisPid);
    expect(commandOf(pid)).to.equal("redis-server");
    return { service, base, pid };
  }

  it("starts a redis-server of its own (data in .ringfence/redis/), serves a lookup, and stops it on SIGTERM", async () => {
    const { service, base, pid } = await started(await testPort());
    try {
      // The README's tour: the CLI finds the same Redis on the default address.
      const made = await runCli(["accounts", "create", "--name", "Newcomer"], {}, true);
      expect(made.code, made.stderr).to.equal(0);
      const account = JSON.parse(made.stdout) as { customer_uuid: string; api_key: string };
      const res = await rest(base).get(`/v1/lookup/${FR_MOBILE}`, {
        "customer-uuid": account.customer_uuid,
        "x-api-key": account.api_key,
      });
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ phone_number: FR_MOBILE, country_code: "FR" });
      expect(readdirSync(join(cwd, ".ringfence", "redis"))).to.include("appendonlydir");

      service.child.kill("SIGTERM");
      expect(await service.exited, service.stderr()).to.equal(0);
      expect(alive(pid), "the redis-server is stopped with the service").to.equal(false);
      expect(service.logs().map((l) => l.msg)).to.include.members([
        "the local redis-server stopped",
        "ringfence stopped",
      ]);
      expect(await refused(6379)).to.equal(true);
    } finally {
      service.child.kill("SIGKILL");
      if (alive(pid)) process.kill(pid, "SIGKILL");
    }
  });

  it("leaves no redis-server behind when the service is killed (SIGKILL)", async () => {
    const { service, pid } = await started(await testPort());
    try {
      service.child.kill("SIGKILL");
      await service.exited;
      await waitFor(() => Promise.resolve(!alive(pid)), 30_000);
      await waitFor(() => refused(6379), 30_000);
    } finally {
      if (alive(pid)) process.kill(pid, "SIGKILL");
    }
  });

  it("says in one line how to install Redis or set REDIS_URL, and exits 1, when redis-server is not on the PATH", async () => {
    const empty = mkdtempSync(join(tmpdir(), "ringfence-path-"));
    try {
      const service = npmStart(empty, await testPort());
      expect(await service.exited).to.equal(1);
      expect(service.stderr()).to.equal(
        "ringfence: no Redis answers on 127.0.0.1:6379 and no redis-server is on the PATH to start one: " +
          "install Redis (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) " +
          "or set REDIS_URL\n",
      );
      expect(existsSync(join(cwd, ".ringfence")), "nothing written").to.equal(false);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

/** Whether a connection to 127.0.0.1:`port` is refused: nothing listens there. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => {
      resolve(true);
    });
  });
}

/** The command name of process `pid` (Linux /proc). */
function commandOf(pid: number): string {
  return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
}

/** Whether process `pid` runs: neither gone nor a zombie waiting for a parent to reap it. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

import { expect } from "chai";
import { request, type IncomingHttpHeaders } from "node:http";
import { availableParallelism } from "node:os";
import { VerifyServiceClient } from "../src/gen/ringfence/verify/v1/verify_service.js";
import { loadConfig } from "../src/config.js";
import { insecure, metadata, runCli, TEST_SECRETS_KEY, unary } from "./support/app.js";
import { testPort } from "./support/ports.js";
import { startRedis, waitFor, watchCommands, type RedisServer } from "./support/redis.js";
import { startServiceProcess, type ServiceProcess } from "./support/service-process.js";
import { sendRequest } from "./support/v1.js";
import { slowProvider } from "./support/receivers.js";

type LogLine = Record<string, unknown>;

/** One POST on a connection of its own, so that the primary hands each to the next worker. */
function postOnNewConnection(port: number, path: string, body: unknown, headers: Record<string, string>) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: unknown }>((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request(
      {
        agent: false,
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
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown,
          });
        });
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

/** One gRPC send on a channel and connection of its own. */
async function grpcSend(address: string, customerUuid: string, apiKey: string, phone: string) {
  const client = new VerifyServiceClient(address, insecure, { "grpc.use_local_subchannel_pool": 1 });
  try {
    return await unary(
      client.createAuthentication.bind(client),
      sendRequest({ customerUuid, phoneNumber: phone, locale: "en" }),
      metadata({ "x-api-key": apiKey }),
    );
  } finally {
    client.close();
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pid of each slot as the primary last reported it. */
function workerPids(s: ServiceProcess): Map<number, number> {
  const pids = new Map<number, number>();
  for (const l of s.logs()) {
    if (l.msg === "worker started") pids.set(Number(l.slot), Number(l.workerPid));
  }
  return pids;
}

describe("WORKERS: several processes serving the same ports", function () {
  this.timeout(90_000);
  let redis: RedisServer;
  let service: ServiceProcess | undefined;
  let prefix = "";
  let n = 0;

  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis.stop();
  });
  afterEach(async () => {
    await service?.kill();
    // A worker outlives its primary only until it notices the primary is gone; do not wait for that.
    service = undefined;
  });

  function env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: prefix,
      SECRETS_KEY: TEST_SECRETS_KEY,
      NODE_ENV: "test",
      WORKERS: "2",
      ADMIN_PORT: "0",
      RATE_LIMIT_IP: "off",
      RATE_LIMIT_DEVICE: "off",
      RATE_LIMIT_NUMBER: "off",
      RATE_LIMIT_ACCOUNT: "off",
      SPAM_IP_NUMBERS: "off",
      SPAM_DEVICE_NUMBERS: "off",
      SPAM_RANGE_BURST: "off",
      ...extra,
    };
  }

  beforeEach(() => {
    n += 1;
    prefix = `wk${n}:`;
  });

  async function startWorkers(extra: Record<string, string> = {}): Promise<ServiceProcess> {
    service = await startServiceProcess(env(extra));
    const s = service;
    await waitFor(() => Promise.resolve(s.logs().some((l) => l.msg === "all workers started")), 60_000);
    return s;
  }

  async function account(extra: Record<string, string> = {}) {
    const made = await runCli(["accounts", "create", "--name", "Workers", "--balance", "1000"], env(extra));
    expect(made.code, made.stderr).to.equal(0);
    return JSON.parse(made.stdout) as { customer_uuid: string; api_key: string };
  }

  it("answers gRPC and REST on the shared ports from both workers", async () => {
    const acct = await account();
    const s = await startWorkers();
    const pids = [...workerPids(s).values()];
    expect(pids).to.have.length(2);
    expect(pids).to.not.include(s.pid);

    const restPhones = Array.from({ length: 6 }, (_, i) => `+3361234${String(1000 + i)}`);
    for (const phone of restPhones) {
      const res = await postOnNewConnection(
        s.httpPort,
        "/v1/authentication",
        { customer_uuid: acct.customer_uuid, phone_number: phone },
        { "x-api-key": acct.api_key },
      );
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.include({ status: "pending" });
    }
    const grpcPhones = Array.from({ length: 6 }, (_, i) => `+3361235${String(1000 + i)}`);
    for (const phone of grpcPhones) {
      const { err, res } = await grpcSend(s.grpcAddress, acct.customer_uuid, acct.api_key, phone);
      expect(err).to.equal(null);
      expect(res?.status).to.equal("pending");
    }

    // The log provider writes each message in the log of the worker that sent it.
    const senders = (phones: string[]) =>
      new Set(
        s
          .logs()
          .filter((l) => l.msg === "sms (log provider)" && phones.includes(String(l.to)))
          .map((l) => Number(l.pid)),
      );
    const restSenders = senders(restPhones);
    const grpcSenders = senders(grpcPhones);
    expect([...restSenders].sort(), "REST calls served by").to.deep.equal([...pids].sort());
    expect([...grpcSenders].sort(), "gRPC calls served by").to.deep.equal([...pids].sort());
  });

  it("runs the scans of the instance in worker 1 only, and in the worker that replaces it", async () => {
    const passes = { apiKeyIndex: 0, webhookSweep: 0, holdRecovery: 0 };
    const stopWatching = await watchCommands(redis.url, (args) => {
      const [command = "", ...rest] = args;
      const cmd = command.toLowerCase();
      // A pass starts with a SCAN at cursor 0, or reads the hold index (its script's ZRANGE).
      if (cmd === "scan" && rest[0] === "0" && rest[2] === `${prefix}acct:{*}`) passes.apiKeyIndex += 1;
      if (cmd === "scan" && rest[0] === "0" && rest[2] === `${prefix}whpending:{*}`) passes.webhookSweep += 1;
      if (cmd === "zrange" && rest[0] === `${prefix}holds:{index}:listed`) passes.holdRecovery += 1;
    });
    try {
      const quiet = { SMS_HOLD_RECOVERY_INTERVAL_MS: "0", WEBHOOK_SWEEP_INTERVAL_MS: "0" };
      const s = await startWorkers(quiet);
      const once = { apiKeyIndex: 1, webhookSweep: 1, holdRecovery: 1 };
      await waitFor(() => Promise.resolve(Object.values(passes).every((p) => p >= 1)), 10_000);
      // Room for a second pass to show up, were another worker running one.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(passes).to.deep.equal(once);
      const started = s.logs().filter((l) => l.msg === "worker started");
      expect(started.map((l) => [l.slot, l.singletonDuties])).to.have.deep.members([
        [1, true],
        [2, false],
      ]);

      // Worker 2 is replaced without taking any duty.
      const before = workerPids(s);
      process.kill(before.get(2) ?? 0, "SIGKILL");
      await waitFor(() => Promise.resolve(workerPids(s).get(2) !== before.get(2)), 30_000);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(passes).to.deep.equal(once);

      // Worker 1's replacement takes them over.
      process.kill(before.get(1) ?? 0, "SIGKILL");
      await waitFor(() => Promise.resolve(workerPids(s).get(1) !== before.get(1)), 30_000);
      await waitFor(() => Promise.resolve(Object.values(passes).every((p) => p >= 2)), 10_000);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(passes).to.deep.equal({ apiKeyIndex: 2, webhookSweep: 2, holdRecovery: 2 });
    } finally {
      stopWatching();
    }
  });

  it("replaces a killed worker and keeps serving on both ports", async () => {
    const acct = await account();
    const s = await startWorkers();
    const before = workerPids(s);
    const victim = before.get(2) ?? 0;
    process.kill(victim, "SIGKILL");
    await waitFor(() => Promise.resolve(workerPids(s).get(2) !== victim), 30_000);
    const replacement = workerPids(s).get(2) ?? 0;

    const exit = s.logs().find((l) => l.msg === "worker exited unexpectedly: replacing it");
    expect(exit).to.include({ slot: 2, workerPid: victim, code: null, signal: "SIGKILL" });
    expect(alive(victim)).to.equal(false);
    expect(alive(replacement)).to.equal(true);
    expect(alive(before.get(1) ?? 0)).to.equal(true);

    // Calls on new connections reach both the survivor and the replacement.
    const phones = Array.from({ length: 6 }, (_, i) => `+3361236${String(1000 + i)}`);
    for (const [i, phone] of phones.entries()) {
      if (i % 2 === 0) {
        const res = await postOnNewConnection(
          s.httpPort,
          "/v1/authentication",
          { customer_uuid: acct.customer_uuid, phone_number: phone },
          { "x-api-key": acct.api_key },
        );
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
      } else {
        const { err } = await grpcSend(s.grpcAddress, acct.customer_uuid, acct.api_key, phone);
        expect(err).to.equal(null);
      }
    }
    const senders = new Set(
      s
        .logs()
        .filter((l) => l.msg === "sms (log provider)" && phones.includes(String(l.to)))
        .map((l) => Number(l.pid)),
    );
    expect(senders.has(replacement), "the replacement serves").to.equal(true);
  });

  it("on SIGTERM lets the calls in flight in every worker finish, stops every worker and exits 0", async () => {
    const provider = await slowProvider(1_000);
    try {
      const providerEnv = {
        SMS_PROVIDER: "http",
        SMS_HTTP_URL: provider.url,
        SMS_HTTP_TIMEOUT_MS: "3000",
        SHUTDOWN_GRACE_MS: "8000",
      };
      const acct = await account(providerEnv);
      const s = await startWorkers(providerEnv);
      const pids = [...workerPids(s).values()];
      const rest = ["+33612370001", "+33612370002", "+33612370003", "+33612370004"].map((phone) =>
        postOnNewConnection(
          s.httpPort,
          "/v1/authentication",
          { customer_uuid: acct.customer_uuid, phone_number: phone },
          { "x-api-key": acct.api_key },
        ),
      );
      const grpc = ["+33612370005", "+33612370006"].map((phone) =>
        grpcSend(s.grpcAddress, acct.customer_uuid, acct.api_key, phone),
      );
      // Every call is waiting on the provider when the signal comes.
      await waitFor(() => Promise.resolve(provider.references.length === 6), 20_000);
      s.signal("SIGTERM");

      for (const res of await Promise.all(rest)) {
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        expect(res.body).to.include({ status: "pending" });
      }
      for (const { err, res } of await Promise.all(grpc)) {
        expect(err).to.equal(null);
        expect(res?.status).to.equal("pending");
      }
      const exit = await s.exited;
      expect(exit.code, JSON.stringify(s.logs().slice(-6))).to.equal(0);
      for (const pid of pids) expect(alive(pid), `worker ${pid}`).to.equal(false);
      const logs = s.logs();
      const stopped = logs.filter((l) => l.msg === "ringfence stopped");
      expect(stopped.filter((l) => l.worker !== undefined).map((l) => [l.pid, l.clean])).to.have.deep.members(
        pids.map((pid) => [pid, true]),
      );
      expect(stopped.find((l) => l.worker === undefined)).to.include({ pid: s.pid, clean: true });
      expect(logs.some((l) => l.msg === "worker exited unexpectedly: replacing it")).to.equal(false);
    } finally {
      await provider.close();
    }
  });

  it("exits 1 when a worker cannot start, as a single process would", async () => {
    const down = await testPort();
    const res = await runCli(["serve"], env({ REDIS_URL: `redis://127.0.0.1:${down}` }));
    expect(res.code).to.equal(1);
    const lines = res.stderr
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as LogLine);
    expect(lines.find((l) => l.msg === "worker did not start: stopping")).to.include({ code: 1 });
    expect(lines.at(-1)).to.include({ msg: "ringfence stopped", clean: false });
  });

  it("WORKERS=1 runs one process, as before", async () => {
    service = await startServiceProcess(env({ WORKERS: "1" }));
    const logs = service.logs();
    const started = logs.find((l) => l.msg === "ringfence started");
    expect(started).to.include({ httpPort: service.httpPort, grpcPort: service.grpcPort });
    expect(started).to.not.have.property("worker");
    expect(logs.some((l) => l.msg === "ringfence primary started")).to.equal(false);
    service.signal("SIGTERM");
    expect((await service.exited).code).to.equal(0);
  });

  for (const bad of ["0", "1025", "two", "1.5", "-1"]) {
    it(`refuses WORKERS=${bad} at start with exit 2, naming WORKERS`, async () => {
      const res = await runCli(["serve"], env({ WORKERS: bad }));
      expect(res.code).to.equal(2);
      expect(res.stderr).to.equal(
        `ringfence: invalid WORKERS: must be a whole number from 1 to 1024, or auto (one per CPU) (got "${bad}")\n`,
      );
    });
  }
});

describe("WORKERS default", () => {
  const production = {
    NODE_ENV: "production",
    SECRETS_KEY: TEST_SECRETS_KEY,
    SMS_PROVIDER: "http",
    SMS_HTTP_URL: "https://sms.example.com/send",
    EMAIL_PROVIDER: "http",
    EMAIL_HTTP_URL: "https://mail.example.com/send",
    ISSUER_URL: "https://auth.example.com",
  };

  it("is 1 outside production", () => {
    expect(loadConfig({}).WORKERS).to.equal(1);
    expect(loadConfig({ NODE_ENV: "test" }).WORKERS).to.equal(1);
    expect(loadConfig({ NODE_ENV: "development", WORKERS: "" }).WORKERS).to.equal(1);
  });

  it("is the number of CPUs in production", () => {
    expect(loadConfig(production).WORKERS).to.equal(availableParallelism());
  });

  it("takes a number, or auto for the number of CPUs", () => {
    expect(loadConfig({ WORKERS: "3" }).WORKERS).to.equal(3);
    expect(loadConfig({ ...production, WORKERS: "1" }).WORKERS).to.equal(1);
    expect(loadConfig({ WORKERS: "auto" }).WORKERS).to.equal(availableParallelism());
  });
});

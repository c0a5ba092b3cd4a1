import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { cliEnv, testConfig } from "../support/app.js";
import { startRedis, waitFor, type RedisServer } from "../support/redis.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { rest } from "../support/rest.js";
import { openRegistry, type Registry } from "../../src/app.js";
import { silentLogger } from "../../src/log.js";

const START_BALANCE = 1_000_000_000;
const REFUSAL = "the message could not be sent; nothing was charged";

/**
 * An HTTP SMS provider that treats `reference` as an idempotency key: the first accepted
 * message of a reference counts, a repeat is answered 2xx and not counted again. It refuses
 * some references for good (4xx) or as an outage (5xx), the same way on every repeat.
 */
class Provider {
  readonly accepted = new Set<string>();
  readonly seen = new Set<string>();
  refusals = 0;
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<Provider> {
    const ref: { self?: Provider } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const { reference } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { reference: string };
        const h = createHash("sha256").update(reference).digest()[0] ?? 0;
        // A little latency, so kills and pauses land between the charge and the answer.
        setTimeout(
          () => {
            // 503 is a passing outage: the same reference sent again (a recovery's re-send) gets
            // through, as with a real provider; a reference answered 503 for ever would keep its
            // hold waiting for a lasting answer for ever.
            const seen = ref.self?.seen.has(reference) === true;
            ref.self?.seen.add(reference);
            const status = h < 26 ? 400 : h < 52 && !seen ? 503 : 200;
            if (status === 200) ref.self?.accepted.add(reference);
            else if (ref.self) ref.self.refusals++;
            res.statusCode = status;
            res.setHeader("content-type", "application/json");
            res.end(status === 200 ? JSON.stringify({ id: `p-${reference}` }) : '{"error":"refused"}');
          },
          200 + (h % 300),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new Provider(server, `http://127.0.0.1:${port}/sms`);
    ref.self = self;
    return self;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("V1 send billing under Redis faults and crashes", function () {
  this.timeout(180_000);
  // Set as they start, for the cleanup.
  let redis: RedisServer | undefined;
  let provider: Provider | undefined;
  let registry: Registry | undefined;
  let svc: ServiceProcess | undefined;

  after(async () => {
    await svc?.kill();
    await registry?.redis.quit().catch(() => undefined);
    await provider?.close();
    await redis?.stop();
  });

  it("charges exactly the messages the provider accepted, with no hold left, across a pause, a restart and a SIGKILL", async () => {
    const server = (redis = await startRedis({ persistent: true }));
    const sms = (provider = await Provider.start());
    const config = testConfig({ REDIS_URL: server.url, SMS_PRICES: "default:0.05,FR:0.07" });
    const data = (registry = await openRegistry(config, silentLogger));
    const { account, apiKey } = await data.accounts.create({
      name: "Faults",
      balanceMicros: START_BALANCE,
      spendingLimitMicros: START_BALANCE,
      features: [],
      regions: [],
      senderIds: [],
    });
    const env = {
      ...cliEnv(config),
      LOG_LEVEL: "warn",
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      SMS_HTTP_TIMEOUT_MS: "2000",
      SMS_PRICES: "default:0.05,FR:0.07",
      SMS_HOLD_MARGIN_MS: "500",
      SMS_HOLD_RECOVERY_INTERVAL_MS: "1000",
      OTP_RETRY_INTERVAL_SECONDS: "1",
      RATE_LIMIT_NUMBER: "off",
      RATE_LIMIT_IP: "off",
      RATE_LIMIT_DEVICE: "off",
      RATE_LIMIT_ACCOUNT: "off",
      SPAM_IP_NUMBERS: "off",
      SPAM_DEVICE_NUMBERS: "off",
      SPAM_RANGE_BURST: "off",
    };
    const current = (svc = await startServiceProcess(env));
    const ports = { http: current.httpPort, grpc: current.grpcPort };
    const { baseUrl } = current;

    let dead = false;
    let running = true;
    const seen: string[] = [];
    const bad: string[] = [];
    let n = 0;
    const post = async (path: string, body: unknown) => {
      const res = await rest(baseUrl).call("POST", path, {
        body,
        headers: { "x-api-key": apiKey },
        signal: AbortSignal.timeout(20_000),
      });
      const json = res.body;
      const ok =
        res.status === 200 ||
        (res.status === 503 && res.headers.get("retry-after") !== null) ||
        (res.status === 500 && json.message === REFUSAL);
      seen.push(String(res.status));
      if (!ok) bad.push(`${path} ${res.status} ${JSON.stringify(json)}`);
      return { status: res.status, json };
    };
    const loop = async (w: number) => {
      while (running) {
        const deadAtStart = dead;
        try {
          const phone = `+3361${String(w)}${String((n += 1) % 1_000_000).padStart(6, "0")}`;
          const r = await post("/v1/authentication", {
            customer_uuid: account.customerUuid,
            phone_number: phone,
          });
          const auth = r.json.authentication_uuid;
          if (r.status === 200 && r.json.status === "pending" && typeof auth === "string" && n % 3 === 0) {
            await sleep(1_050);
            await post("/v1/retry", { customer_uuid: account.customerUuid, authentication_uuid: auth });
          }
        } catch (err) {
          if (!dead && !deadAtStart) bad.push(`connection error while alive: ${String(err)}`);
          else seen.push("conn");
          await sleep(100);
        }
      }
    };
    const loops = Promise.all([0, 1, 2, 3, 4, 5].map(loop));

    await sleep(1_500);
    server.pause();
    await sleep(3_000);
    server.resume();
    await sleep(1_500);
    await server.restart();
    await sleep(1_500);
    dead = true;
    current.signal("SIGKILL");
    await current.exited;
    svc = await startServiceProcess(env, ports);
    dead = false;
    await sleep(1_500);
    running = false;
    await loops;

    // Recovery settles every hold: past its deadline (about 4 s), each instance re-sends it.
    const holdsLeft = async () => {
      let left = 0;
      for (const { customer } of await data.verify.holdCustomers()) {
        left += await data.redis.zcard(data.verify.holdsKey(customer));
      }
      return left;
    };
    await waitFor(async () => (await holdsLeft()) === 0, 30_000);

    expect(bad).to.deep.equal([]);
    expect(seen.filter((s) => s === "200").length).to.be.greaterThan(10);
    expect(sms.refusals).to.be.greaterThan(0);
    const price = config.SMS_PRICES.FR ?? Number.NaN;
    const balance = (await data.accounts.get(account.customerUuid))?.balanceMicros;
    expect(balance).to.equal(START_BALANCE - sms.accepted.size * price);
    expect(await holdsLeft()).to.equal(0);
  });
});

describe("V1 send billing across repeated Redis pauses and AOF restarts", function () {
  this.timeout(180_000);
  let redis: RedisServer | undefined;
  let provider: Provider | undefined;
  let registry: Registry | undefined;
  let svc: ServiceProcess | undefined;

  after(async () => {
    await svc?.kill();
    await registry?.redis.quit().catch(() => undefined);
    await provider?.close();
    await redis?.stop();
  });

  it("never charges more than the provider accepted plus the messages still held, and exactly that once they settle", async () => {
    const server = (redis = await startRedis({ persistent: true }));
    const sms = (provider = await Provider.start());
    const config = testConfig({ REDIS_URL: server.url, SMS_PRICES: "default:0.05,FR:0.07" });
    const data = (registry = await openRegistry(config, silentLogger));
    const { account, apiKey } = await data.accounts.create({
      name: "Pauses",
      balanceMicros: START_BALANCE,
      spendingLimitMicros: START_BALANCE,
      features: [],
      regions: [],
      senderIds: [],
    });
    const customer = account.customerUuid;
    const env = {
      ...cliEnv(config),
      LOG_LEVEL: "warn",
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      SMS_HTTP_TIMEOUT_MS: "2000",
      SMS_PRICES: "default:0.05,FR:0.07",
      SMS_HOLD_MARGIN_MS: "500",
      SMS_HOLD_RECOVERY_INTERVAL_MS: "1000",
      OTP_RETRY_INTERVAL_SECONDS: "1",
      RATE_LIMIT_NUMBER: "off",
      RATE_LIMIT_IP: "off",
      RATE_LIMIT_DEVICE: "off",
      RATE_LIMIT_ACCOUNT: "off",
      SPAM_IP_NUMBERS: "off",
      SPAM_DEVICE_NUMBERS: "off",
      SPAM_RANGE_BURST: "off",
    };
    const { baseUrl } = (svc = await startServiceProcess(env));
    const price = config.SMS_PRICES.FR ?? Number.NaN;
    const holdsKey = data.verify.holdsKey(customer);
    const accountKey = data.keys.key("acct", customer);

    let running = true;
    let n = 0;
    let answered = 0;
    const post = (path: string, body: unknown) =>
      rest(baseUrl).call("POST", path, {
        body,
        headers: { "x-api-key": apiKey },
        signal: AbortSignal.timeout(20_000),
      });
    const loop = async () => {
      while (running) {
        const phone = `+3362${String((n += 1) % 10_000_000).padStart(7, "0")}`;
        const r = await post("/v1/authentication", { customer_uuid: customer, phone_number: phone });
        if (r.status === 200) answered++;
        const auth = r.body.authentication_uuid;
        if (r.status === 200 && typeof auth === "string" && n % 3 === 0) {
          await sleep(1_050);
          await post("/v1/retry", { customer_uuid: customer, authentication_uuid: auth });
        }
      }
    };
    const loops = Promise.all(Array.from({ length: 6 }, loop));

    // The bound, read whenever Redis answers: the charges are the messages the provider accepted
    // plus the held ones (charged, answer not recorded yet), never more. The balance and the
    // holds are read together, and what the provider accepted after, which can only have grown.
    const ahead: string[] = [];
    let samples = 0;
    const sample = async () => {
      while (running) {
        try {
          const [[, balance], [, held]] = (await data.redis
            .multi()
            .hget(accountKey, "balance_micros")
            .zcard(holdsKey)
            .exec()) as [[null, string], [null, number]];
          const charged = (START_BALANCE - Number(balance)) / price;
          samples++;
          if (charged > sms.accepted.size + held) {
            ahead.push(
              `${String(charged)} charged, ${String(sms.accepted.size)} accepted, ${String(held)} held`,
            );
          }
        } catch {
          // Redis paused or restarting: nothing to read.
        }
        await sleep(100);
      }
    };
    const sampling = sample();

    for (let cycle = 0; cycle < 3; cycle++) {
      await sleep(1_500);
      server.pause();
      await sleep(4_000);
      server.resume();
      await sleep(1_500);
      await server.restart();
    }
    await sleep(1_500);
    running = false;
    await Promise.all([loops, sampling]);

    // Every hold settles: by its owner once Redis answers, else by the recovery past its deadline.
    await waitFor(async () => (await data.redis.zcard(holdsKey)) === 0, 30_000);
    expect(ahead).to.deep.equal([]);
    expect(samples).to.be.greaterThan(20);
    expect(answered).to.be.greaterThan(10);
    expect(sms.refusals).to.be.greaterThan(0);
    const balance = (await data.accounts.get(customer))?.balanceMicros;
    expect(balance).to.equal(START_BALANCE - sms.accepted.size * price);
  });
});

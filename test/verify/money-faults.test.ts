import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { cliEnv, testConfig } from "../support/app.js";
import { startRedis, waitFor, type RedisServer } from "../support/redis.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { rest, type RestAnswer } from "../support/rest.js";
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

/** One account sending V1 codes through a service process, over a persistent Redis and a Provider. */
interface FaultRig {
  server: RedisServer;
  sms: Provider;
  data: Registry;
  customer: string;
  /** The price of a message to the test numbers (FR). */
  price: number;
  /** The first service process, on free ports. */
  service: ServiceProcess;
  /** Starts the service again on `ports` (after a kill); it is the one stopped after the suite. */
  restartService(ports: { http: number; grpc: number }): Promise<ServiceProcess>;
  /** POSTs `body` with the account's key to the service at `baseUrl`. */
  post(baseUrl: string, path: string, body: unknown): Promise<RestAnswer>;
}

/**
 * The suite's rig, started by the returned function: a persistent Redis, the Provider, an account
 * with START_BALANCE named `name`, and the service with no send limits or spam rules, quick hold
 * recovery and a one-second retry interval. Everything it started is stopped after the suite.
 */
function faultRig(name: string): () => Promise<FaultRig> {
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

  return async () => {
    const server = (redis = await startRedis({ persistent: true }));
    const sms = (provider = await Provider.start());
    const config = testConfig({ REDIS_URL: server.url, SMS_PRICES: "default:0.05,FR:0.07" });
    const data = (registry = await openRegistry(config, silentLogger));
    const { account, apiKey } = await data.accounts.create({
      name,
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
    const service = (svc = await startServiceProcess(env));
    return {
      server,
      sms,
      data,
      customer: account.customerUuid,
      price: config.SMS_PRICES.FR ?? Number.NaN,
      service,
      restartService: async (ports) => (svc = await startServiceProcess(env, ports)),
      post: (baseUrl, path, body) =>
        rest(baseUrl).call("POST", path, {
          body,
          headers: { "x-api-key": apiKey },
          signal: AbortSignal.timeout(20_000),
        }),
    };
  };
}

/** Traffic that `sendLoops` keeps up until stopped. */
interface Traffic {
  readonly running: boolean;
  /** Sends answered 200. */
  readonly answered: number;
  /** Lets each loop end its round, then settles. */
  stop(): Promise<void>;
}

/**
 * `workers` loops, each sending a code to a new number (`phone`, from a shared count) while
 * running; a send whose answer `retryable` accepts is retried, one in three, once the retry
 * interval passed. `round` runs each send with its retry (by default as it is, a failure failing
 * the loops).
 */
function sendLoops(options: {
  workers: number;
  customer: string;
  post: (path: string, body: unknown) => Promise<{ status: number; body: Record<string, unknown> }>;
  phone: (worker: number, count: number) => string;
  retryable: (answer: { status: number; body: Record<string, unknown> }) => boolean;
  round?: (send: () => Promise<void>) => Promise<void>;
}): Traffic {
  const { customer, post } = options;
  const round = options.round ?? ((send) => send());
  let running = true;
  let n = 0;
  let answered = 0;
  const loop = async (w: number) => {
    while (running) {
      await round(async () => {
        const phone = options.phone(w, (n += 1));
        const r = await post("/v1/authentication", { customer_uuid: customer, phone_number: phone });
        if (r.status === 200) answered++;
        const auth = r.body.authentication_uuid;
        if (options.retryable(r) && typeof auth === "string" && n % 3 === 0) {
          await sleep(1_050);
          await post("/v1/retry", { customer_uuid: customer, authentication_uuid: auth });
        }
      });
    }
  };
  const loops = Promise.all(Array.from({ length: options.workers }, (_, w) => loop(w)));
  return {
    get running() {
      return running;
    },
    get answered() {
      return answered;
    },
    stop: async () => {
      running = false;
      await loops;
    },
  };
}

describe("V1 send billing under Redis faults and crashes", function () {
  this.timeout(180_000);
  const startRig = faultRig("Faults");

  it("charges exactly the messages the provider accepted, with no hold left, across a pause, a restart and a SIGKILL", async () => {
    const { server, sms, data, customer, price, service: current, ...rig } = await startRig();
    const ports = { http: current.httpPort, grpc: current.grpcPort };
    const { baseUrl } = current;

    let dead = false;
    const seen: string[] = [];
    const bad: string[] = [];
    const post = async (path: string, body: unknown) => {
      const res = await rig.post(baseUrl, path, body);
      const json = res.body;
      const ok =
        res.status === 200 ||
        (res.status === 503 && res.headers.get("retry-after") !== null) ||
        (res.status === 500 && json.message === REFUSAL);
      seen.push(String(res.status));
      if (!ok) bad.push(`${path} ${res.status} ${JSON.stringify(json)}`);
      return res;
    };
    const traffic = sendLoops({
      workers: 6,
      customer,
      post,
      phone: (w, n) => `+3361${String(w)}${String(n % 1_000_000).padStart(6, "0")}`,
      retryable: (r) => r.status === 200 && r.body.status === "pending",
      round: async (send) => {
        const deadAtStart = dead;
        try {
          await send();
        } catch (err) {
          if (!dead && !deadAtStart) bad.push(`connection error while alive: ${String(err)}`);
          else seen.push("conn");
          await sleep(100);
        }
      },
    });

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
    await rig.restartService(ports);
    dead = false;
    await sleep(1_500);
    await traffic.stop();

    // Recovery settles every hold: past its deadline (about 4 s), each instance re-sends it.
    const holdsLeft = async () => {
      let left = 0;
      for (const holder of await data.verify.holdCustomers()) {
        left += await data.redis.zcard(data.verify.holdsKey(holder.customer));
      }
      return left;
    };
    await waitFor(async () => (await holdsLeft()) === 0, 30_000);

    expect(bad).to.deep.equal([]);
    expect(seen.filter((s) => s === "200").length).to.be.greaterThan(10);
    expect(sms.refusals).to.be.greaterThan(0);
    const balance = (await data.accounts.get(customer))?.balanceMicros;
    expect(balance).to.equal(START_BALANCE - sms.accepted.size * price);
    expect(await holdsLeft()).to.equal(0);
  });
});

describe("V1 send billing across repeated Redis pauses and AOF restarts", function () {
  this.timeout(180_000);
  const startRig = faultRig("Pauses");

  it("never charges more than the provider accepted plus the messages still held, and exactly that once they settle", async () => {
    const { server, sms, data, customer, price, service, ...rig } = await startRig();
    const holdsKey = data.verify.holdsKey(customer);
    const accountKey = data.keys.key("acct", customer);

    const traffic = sendLoops({
      workers: 6,
      customer,
      post: (path, body) => rig.post(service.baseUrl, path, body),
      phone: (_w, n) => `+3362${String(n % 10_000_000).padStart(7, "0")}`,
      retryable: (r) => r.status === 200,
    });

    // The bound, read whenever Redis answers: the charges are the messages the provider accepted
    // plus the held ones (charged, answer not recorded yet), never more. The balance and the
    // holds are read together, and what the provider accepted after, which can only have grown.
    const ahead: string[] = [];
    let samples = 0;
    const sample = async () => {
      while (traffic.running) {
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
    await Promise.all([traffic.stop(), sampling]);

    // Every hold settles: by its owner once Redis answers, else by the recovery past its deadline.
    await waitFor(async () => (await data.redis.zcard(holdsKey)) === 0, 30_000);
    expect(ahead).to.deep.equal([]);
    expect(samples).to.be.greaterThan(20);
    expect(traffic.answered).to.be.greaterThan(10);
    expect(sms.refusals).to.be.greaterThan(0);
    const balance = (await data.accounts.get(customer))?.balanceMicros;
    expect(balance).to.equal(START_BALANCE - sms.accepted.size * price);
  });
});

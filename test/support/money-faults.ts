import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { cliEnv, testConfig } from "./app.js";
import { startRedis, waitFor, type RedisServer } from "./redis.js";
import { startServiceProcess, type ServiceProcess } from "./service-process.js";
import { rest, type RestAnswer } from "./rest.js";
import { openRegistry, type Registry } from "../../src/app.js";
import { silentLogger } from "../../src/log.js";

/**
 * What the billing tests under faults share (test/verify/money-faults*.test.ts): an idempotent
 * HTTP provider, a rig of a persistent Redis and a service process, send loops, and the faults.
 */

export const START_BALANCE = 1_000_000_000;
export const REFUSAL = "the message could not be sent; nothing was charged";

/**
 * Which references a Provider refuses, out of 256 by a hash of `salt` and the reference: the
 * first `lasting` for good (400), the next `passing` as an outage (503 the first time only).
 */
export interface Refusals {
  lasting: number;
  passing: number;
  salt?: string;
}

/** About one reference in ten refused for good, one in ten once. */
export const SOME_REFUSALS: Refusals = { lasting: 26, passing: 26 };

/**
 * An HTTP SMS provider that treats `reference` as an idempotency key: the first accepted
 * message of a reference counts, a repeat is answered 2xx and not counted again. It refuses
 * some references for good (4xx) or as an outage (5xx), the same way on every repeat.
 */
export class Provider {
  readonly accepted = new Set<string>();
  readonly seen = new Set<string>();
  refusals = 0;
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(refusals: Refusals = SOME_REFUSALS): Promise<Provider> {
    const ref: { self?: Provider } = {};
    const { lasting, passing, salt = "" } = refusals;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const { reference } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { reference: string };
        const h =
          createHash("sha256")
            .update(salt + reference)
            .digest()[0] ?? 0;
        // A little latency, so kills and pauses land between the charge and the answer.
        setTimeout(
          () => {
            // 503 is a passing outage: the same reference sent again (a recovery's re-send) gets
            // through, as with a real provider; a reference answered 503 for ever would keep its
            // hold waiting for a lasting answer for ever.
            const seen = ref.self?.seen.has(reference) === true;
            ref.self?.seen.add(reference);
            const status = h < lasting ? 400 : h < lasting + passing && !seen ? 503 : 200;
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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One account sending V1 codes through a service process, over a persistent Redis and Providers. */
export interface FaultRig {
  server: RedisServer;
  /** The providers, in the order the rig's options gave their refusals. */
  providers: Provider[];
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

export interface RigOptions {
  /** One Provider started per entry, refusing those references. Default: one, SOME_REFUSALS. */
  refusals?: Refusals[];
  /** The service's provider settings. Default: the first provider as SMS_PROVIDER=http. */
  delivery?: (providers: Provider[]) => Record<string, string>;
}

/**
 * The suite's rig, started by the returned function: a persistent Redis, the Providers, an account
 * with START_BALANCE named `name`, and the service with no send limits or spam rules, quick hold
 * recovery and a one-second retry interval. Everything it started is stopped after the suite.
 */
export function faultRig(name: string, options: RigOptions = {}): () => Promise<FaultRig> {
  // Set as they start, for the cleanup.
  let redis: RedisServer | undefined;
  const started: Provider[] = [];
  let registry: Registry | undefined;
  let svc: ServiceProcess | undefined;

  after(async () => {
    await svc?.kill();
    await registry?.redis.quit().catch(() => undefined);
    for (const p of started) await p.close();
    await redis?.stop();
  });

  const delivery =
    options.delivery ??
    (([first]: Provider[]) => ({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: first?.url ?? "",
      SMS_HTTP_TIMEOUT_MS: "2000",
    }));

  return async () => {
    const server = (redis = await startRedis({ persistent: true }));
    for (const r of options.refusals ?? [SOME_REFUSALS]) started.push(await Provider.start(r));
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
      ...delivery(started),
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
      providers: started,
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
export interface Traffic {
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
export function sendLoops(options: {
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

/** How many holds are left, over every customer listed in the hold index. */
export async function holdsLeft(data: Registry): Promise<number> {
  let left = 0;
  for (const holder of await data.verify.holdCustomers()) {
    left += await data.redis.zcard(data.verify.holdsKey(holder.customer));
  }
  return left;
}

/** What callers saw while `sendThroughFaults` ran. */
export interface FaultRun {
  /** Answers no caller should get (anything but 200, a 503 with Retry-After, or the refusal). */
  bad: string[];
  /** Sends and retries answered 200. */
  ok: number;
  /** Where the service answers now (the same ports after its restart). */
  baseUrl: string;
}

/**
 * Six loops send V1 codes to numbers `phone` gives (a retry now and then) while Redis is paused,
 * restarted from its append-only file, and the service SIGKILLed and started again on its ports;
 * once the traffic stopped, waits until the recovery settled every hold (past its deadline, about
 * 4 s, each instance re-sends it).
 */
export async function sendThroughFaults(
  rig: FaultRig,
  phone: (worker: number, count: number) => string,
): Promise<FaultRun> {
  const { server, data, customer, service: current } = rig;
  const ports = { http: current.httpPort, grpc: current.grpcPort };
  const { baseUrl } = current;

  let dead = false;
  let ok = 0;
  const bad: string[] = [];
  const post = async (path: string, body: unknown) => {
    const res = await rig.post(baseUrl, path, body);
    const json = res.body;
    const fine =
      res.status === 200 ||
      (res.status === 503 && res.headers.get("retry-after") !== null) ||
      (res.status === 500 && json.message === REFUSAL);
    if (res.status === 200) ok++;
    if (!fine) bad.push(`${path} ${res.status} ${JSON.stringify(json)}`);
    return res;
  };
  const traffic = sendLoops({
    workers: 6,
    customer,
    post,
    phone,
    retryable: (r) => r.status === 200 && r.body.status === "pending",
    round: async (send) => {
      const deadAtStart = dead;
      try {
        await send();
      } catch (err) {
        if (!dead && !deadAtStart) bad.push(`connection error while alive: ${String(err)}`);
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

  await waitFor(async () => (await holdsLeft(data)) === 0, 30_000);
  return { bad, ok, baseUrl };
}

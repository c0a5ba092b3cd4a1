import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";
import { expect } from "chai";
import { openRegistry, type Registry } from "../../src/app.js";
import { silentLogger } from "../../src/log.js";
import { cliEnv, testConfig } from "../support/app.js";
import { FRAUD_DEFAULTS } from "../support/fraud.js";
import { judgeAll, syntheticDestination } from "../support/fraud-reports.js";
import { commandsDuring, startRedis, waitFor, type RedisServer } from "../support/redis.js";
import { rest, type Json } from "../support/rest.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";

const HEAVY = 35_000;
/** The readers' process. */
const READERS = new URL("../support/page-readers.ts", import.meta.url).pathname;
/** The engine's defaults, surges off: the destinations below are written as sent. */
const FRAUD_ENV = { ...FRAUD_DEFAULTS, FRAUD_NEW_DESTINATION_SENDS: "1000000" };
const LIGHT = 100;
/** The neighbour's lookups per measure: its p99 is the 10th slowest. */
const SAMPLES = 1000;

/** The `q`-quantile of `values` (nearest rank), in ms with one decimal. */
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const v = sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
  return Math.round(v * 10) / 10;
}

/**
 * Issue 30, measured (docs/fraud.md#pages): an account with 35,000 prefix destinations reading its
 * reports must cost each call what an account with 100 does, and leave its neighbours' calls
 * alone. The service runs as its own process; the destinations are written through the engine's
 * own script. The work per call is counted in Redis commands (MONITOR), and a neighbour's lookup
 * latency is printed idle and under four concurrent page readers, running as a process of their
 * own, with its ratio (printed, not asserted: the machine is shared).
 */
describe("fraud reports: one account's reads and its neighbours", function () {
  this.timeout(600_000);
  let data: Registry | undefined;
  let service: ServiceProcess | undefined;
  // A Redis of its own: the run's shared one would keep 35,000 destinations for every later test
  // that reads all of its keys.
  let redis: RedisServer | undefined;
  /** The registry and the service process before() started. */
  const started = (): { data: Registry; service: ServiceProcess } => {
    if (data === undefined || service === undefined) throw new Error("the service did not start");
    return { data, service };
  };
  const accounts: Record<"heavy" | "light" | "neighbour", { uuid: string; key: string }> = {
    heavy: { uuid: "", key: "" },
    light: { uuid: "", key: "" },
    neighbour: { uuid: "", key: "" },
  };

  before(async () => {
    // Reads are not limited here: the point is what each read costs.
    redis = await startRedis();
    const env = { ...FRAUD_ENV, REPORTS_LIMIT_ACCOUNT: "off", REDIS_URL: redis.url };
    const config = testConfig(env);
    const opened = await openRegistry(config, silentLogger);
    data = opened;
    for (const name of ["heavy", "light", "neighbour"] as const) {
      const { account, apiKey } = await opened.accounts.create({
        name,
        balanceMicros: 1_000_000,
        spendingLimitMicros: 1_000_000_000,
        features: [],
        regions: [],
        senderIds: [],
      });
      accounts[name] = { uuid: account.customerUuid, key: apiKey };
    }
    const fill = async (tenant: string, count: number) => {
      await opened.redis.hset(opened.fraud.keys.policy(tenant), "g:FR", "trust");
      const sends = Array.from({ length: count }, (_, i) => ({
        d: syntheticDestination(i),
        times: 1 + (i % 3),
      }));
      expect(new Set(await judgeAll(opened.fraud, tenant, sends))).to.deep.equal(new Set(["allow"]));
    };
    await fill(accounts.light.uuid, LIGHT);
    await fill(accounts.heavy.uuid, HEAVY);
    service = await startServiceProcess({ ...cliEnv(config), ...env });
  });
  after(async () => {
    await service?.kill();
    await data?.redis.quit().catch(() => undefined);
    await redis?.stop();
  });

  const get = (who: keyof typeof accounts, path: string) =>
    rest(started().service.baseUrl).call("GET", path, { bearer: accounts[who].key });

  /** The Redis commands naming the account's keys while `path` is answered, and the answer. */
  async function measured(who: "heavy" | "light", path: string): Promise<{ commands: number; body: Json }> {
    let body: Json = {};
    const seen = await commandsDuring(started().data.config.REDIS_URL, async () => {
      const res = await get(who, path);
      expect(res.status, res.text).to.equal(200);
      body = res.body;
    });
    const tag = `{${accounts[who].uuid}}`;
    return { commands: seen.filter((args) => args.some((a) => a.includes(tag))).length, body };
  }

  it(`answers a page of ${HEAVY.toLocaleString("en")} destinations with the Redis work of a page of ${LIGHT}`, async () => {
    const path = "/v2/insights/verifications?group_by=prefix&limit=40";
    const counts: Record<"heavy" | "light", number[]> = { heavy: [], light: [] };
    for (const who of ["light", "heavy"] as const) {
      // The first page, then the one after it (found from the page token, not by walking).
      const first = await measured(who, path);
      const token = encodeURIComponent(String(first.body.next_page_token));
      const second = await measured(who, `${path}&page_token=${token}`);
      for (const page of [first, second]) expect(page.body.groups).to.have.length(40);
      counts[who] = [first.commands, second.commands];
    }
    console.log(
      `      Redis commands per page of 40: ${LIGHT} destinations ${JSON.stringify(counts.light)}, ` +
        `${HEAVY} destinations ${JSON.stringify(counts.heavy)}`,
    );
    // A page reads its 40 counters and the ranking it pages through; at most a binary search among
    // equal scores more (2 commands a step) when the last group answered moved.
    const search = 2 * Math.ceil(Math.log2(HEAVY));
    for (let i = 0; i < 2; i++) {
      expect(counts.heavy[i]).to.be.at.most((counts.light[i] ?? 0) + search);
      expect(counts.heavy[i]).to.be.at.most(80);
    }

    // A longer range would add up 3 days of 35,000 rankings in one call: refused, at the same cost.
    const since = new Date(Date.now() - 2 * 86_400_000).toISOString();
    let refused: Json = {};
    const seen = await commandsDuring(started().data.config.REDIS_URL, async () => {
      const res = await get("heavy", `${path}&since=${since}`);
      expect(res.status, res.text).to.equal(400);
      refused = res.body;
    });
    expect(refused).to.include({ code: "invalid_request", param: "since" });
    expect(
      seen.filter((args) => args.some((a) => a.includes(`{${accounts.heavy.uuid}}`))),
    ).to.have.length.below(20);
    const light = await get("light", `/v2/insights/verifications?group_by=prefix&since=${since}&limit=1000`);
    expect(light.status, light.text).to.equal(200);
    expect(light.body.groups).to.have.length(LIGHT);
  });

  it("prints a neighbour's lookup latency idle and under four concurrent page readers", async () => {
    const lookups = async (base: string, n: number): Promise<number[]> => {
      const ms: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const res = await rest(base).call(
          "GET",
          `/v2/lookup/%2B336123456${String(i % 100).padStart(2, "0")}`,
          {
            bearer: accounts.neighbour.key,
          },
        );
        ms.push(performance.now() - t0);
        expect(res.status, res.text).to.equal(200);
      }
      return ms;
    };
    const figures = (ms: number[]) =>
      `p50 ${quantile(ms, 0.5)} ms, p99 ${quantile(ms, 0.99)} ms, max ${quantile(ms, 1)} ms`;

    /**
     * The neighbour's lookups idle, then while 4 readers walk the heavy account's pages of 1000 from
     * a process of their own (page-readers.ts), as an attacker's load would come.
     */
    const run = async (base: string, label: string) => {
      await lookups(base, 50); // warm-up
      const idle = await lookups(base, SAMPLES);
      const readers = spawn(process.execPath, ["--import", "tsx", READERS, base, accounts.heavy.key, "4"], {
        stdio: ["pipe", "pipe", "inherit"],
      });
      let out = "";
      const ended = new Promise<void>((resolve) => {
        readers.once("close", () => {
          resolve();
        });
      });
      readers.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        out += chunk;
      });
      let busy: number[];
      try {
        await waitFor(() => Promise.resolve(out.includes('"started"')), 20_000);
        busy = await lookups(base, SAMPLES);
      } finally {
        readers.stdin.end("stop\n");
        await ended;
      }
      const last = out.split("\n").find((l) => l.includes('"pageMs"')) ?? "{}";
      const {
        pageMs = [],
        refused = 0,
        failures = [],
      } = JSON.parse(last) as {
        pageMs?: number[];
        refused?: number;
        failures?: string[];
      };
      console.log(`      ${label}`);
      console.log(`        neighbour's V2 lookups, idle: ${figures(idle)}`);
      console.log(
        `        the same under 4 readers of ${HEAVY.toLocaleString("en")} prefixes: ${figures(busy)} ` +
          `(p99 ${(quantile(busy, 0.99) / quantile(idle, 0.99)).toFixed(2)}x idle)`,
      );
      console.log(
        `        the readers' pages of 1000 (${pageMs.length}, and ${refused} answered 429): ${figures(pageMs)}`,
      );
      expect(failures).to.deep.equal([]);
      expect(pageMs.length).to.be.above(0);
    };

    // As shipped (REPORTS_LIMIT_ACCOUNT 60/60), then without the limit: each read's own cost.
    const limited = await startServiceProcess({ ...cliEnv(started().data.config), ...FRAUD_ENV });
    try {
      await run(limited.baseUrl, "REPORTS_LIMIT_ACCOUNT=60/60 (the default):");
    } finally {
      await limited.kill();
    }
    await run(started().service.baseUrl, "REPORTS_LIMIT_ACCOUNT=off:");
  });
});

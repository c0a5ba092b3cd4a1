/**
 * `npm run bench`: the service in production mode from dist/, with its own Redis, against
 * node-oidc-provider and two floors (node:http + jose, grpc-js + jose), each in its own process;
 * prints a markdown table (docs/benchmark.md says how to read it).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { cpus, platform, release, tmpdir } from "node:os";
import { join } from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { Redis } from "ioredis";
import { startRedis } from "../test/support/redis.js";
import { answerStatus, authUuidOf, isSend, restRequest, type Fixture, type RestPlan } from "./calls.js";
import type { Ready, SendFloorArgs } from "./child.js";
import { grpcChannel } from "./grpc-calls.js";
import {
  drive,
  forkModule,
  killChildrenOnExit,
  nextMessage,
  stop,
  trackPid,
  type Logged,
} from "./processes.js";
import { cpuSecondsOf } from "./cpu.js";
import { countRedisWork, WARMUP_CALLS } from "./redis-count.js";
import { RedisRoundTrips } from "./redis-proxy.js";
import {
  CELLS,
  isService,
  markdown,
  redisKey,
  targetLabel,
  type Cell,
  type Report,
  type Target,
} from "./report.js";
import {
  benchEnv,
  CHANGED_SETTINGS,
  serverToken,
  setConversionRoute,
  setUp,
  startProviderStub,
  startService,
  THREE_PROVIDERS,
  THREE_PROVIDERS_KEY_PREFIX,
  THREE_PROVIDERS_ROUTE,
  threeProvidersEnv,
  type Service,
} from "./service.js";
import type { LoadResult } from "./stats.js";
import type { HttpLoad } from "./drive-http.js";
import type { GrpcLoad } from "./drive-grpc.js";

const positive = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
  return n;
};

const program = new Command("bench")
  .description(
    "Benchmarks the service (from dist/, NODE_ENV=production, its own Redis) against node-oidc-provider and bare floors; prints a markdown table",
  )
  .option(
    "--smoke",
    "a quick run that only proves the bench works: 1 s per cell, 1 round, 20 sequential calls",
  )
  .option("--duration <seconds>", "seconds of load per cell and round", positive("--duration"), 10)
  .option(
    "--connections <n>",
    "concurrent connections (gRPC: calls in flight)",
    positive("--connections"),
    32,
  )
  .option(
    "--rounds <n>",
    "rounds, alternating the targets' order; the median round is shown",
    positive("--rounds"),
    3,
  )
  .option(
    "--only <cells>",
    `comma list of cells to run: ${CELLS.map((c) => c.id).join(", ")} (rest-check and rest-read-back use the authentications rest-send made)`,
  )
  .option("--workers <n>", "WORKERS for the service (default: unset, the service's default)")
  .option("--calls <n>", "sequential calls per cell for the Redis columns", positive("--calls"), 200)
  .option("--json <file>", "also write every raw result to this file")
  .addHelpText(
    "after",
    "\nExample: npm run bench -- --only rest-token,grpc-token --duration 5\nSee docs/benchmark.md for how to read the table.",
  );

interface Options {
  smoke?: boolean;
  duration: number;
  connections: number;
  rounds: number;
  only?: string;
  workers?: string;
  calls: number;
  json?: string;
}

program.parse();
const opts = program.opts<Options>();
const seconds = opts.smoke === true ? 1 : opts.duration;
const rounds = opts.smoke === true ? 1 : Math.round(opts.rounds);
const calls = opts.smoke === true ? 20 : Math.round(opts.calls);
const connections = Math.round(opts.connections);
const warmupSeconds = opts.smoke === true ? 0.25 : Math.min(3, seconds);
const only = opts.only?.split(",").map((s) => s.trim());
const unknown = only?.find((id) => !CELLS.some((c) => c.id === id));
if (unknown !== undefined) program.error(`--only: no cell "${unknown}"`, { exitCode: 2 });
const cells = CELLS.filter((c) => only === undefined || only.includes(c.id));

async function main(): Promise<void> {
  const workDir = mkdtempSync(join(tmpdir(), "ringfence-bench-"));
  const say = (line: string) => process.stderr.write(`bench: ${line}\n`);
  say(`logs in ${workDir}`);

  const redis = await startRedis();
  trackPid(redis.pid());
  const stats = new Redis(redis.url);
  const stub = await startProviderStub();
  const { proxy, url: proxiedUrl } = await RedisRoundTrips.start({ host: "127.0.0.1", port: redis.port });

  const env = benchEnv({ redisUrl: redis.url, providerUrl: stub.url, workers: opts.workers });

  // Phase 1: Redis work per call, the service's connections through the counting proxy.
  say("set-up, and Redis commands and round trips per call");
  const counted = await startService({ ...env, REDIS_URL: proxiedUrl }, join(workDir, "service-count.log"));
  const fixture = await setUp(env, counted, workDir);
  const pool = new CheckPool();
  const report: Report = { meta: meta(counted, redis.url), runs: [], redis: {} };
  // Authentications to check and read back even when rest-send is not run.
  const seed = cells.some((c) => c.call === "check") ? Math.ceil((2 * calls + WARMUP_CALLS) / 4) + 8 : 16;
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let i = w; i < seed; i += 8) pool.add([await restSend(counted, fixture, 1_000_000 + i)]);
    }),
  );
  let sendFrom = 0;
  for (const cell of cells) {
    const count = await countRedisWork(
      stats,
      proxy,
      calls,
      await sequentialCall(cell, counted, fixture, pool, sendFrom),
    );
    if (isSend(cell.call)) sendFrom += 2 * calls + WARMUP_CALLS;
    report.redis[cell.id] = count;
    say(
      `${cell.label}: ${count.commands} commands, ${count.answerPathRoundTrips} / ${count.roundTrips} round trips, ${count.bytesWritten} bytes written per call`,
    );
  }
  await counted.stop();

  // The three-provider service (the REST send's `three-providers` target): the same service, CLI,
  // settings, Redis and stub, but DELIVERY_PROVIDERS naming three providers and a `conversion`
  // route for French numbers, its keys under a prefix of its own (bench/service.ts says why).
  const threeCells = cells.filter((c) => c.refs.includes("three-providers"));
  const three = threeCells.length === 0 ? undefined : { env: threeProvidersEnv(env, stub.url), fixture };
  if (three !== undefined) {
    say("three providers: set-up, route, and Redis commands and round trips per call");
    const counted3 = await startService(
      { ...three.env, REDIS_URL: proxiedUrl },
      join(workDir, "three-providers-count.log"),
    );
    three.fixture = await setUp(three.env, counted3, workDir);
    await setConversionRoute(three.env);
    report.meta.threeProviders = `the service as above, started the same way beside it on the same Redis and stub, but DELIVERY_PROVIDERS naming ${THREE_PROVIDERS.map(
      (p) => `${p.name} (${p.path})`,
    ).join(
      ", ",
    )} in place of SMS_PROVIDER and SMS_HTTP_URL, REDIS_KEY_PREFIX=${THREE_PROVIDERS_KEY_PREFIX} (its own account and route table, set up the same way), and the route \`routes set --destination ${THREE_PROVIDERS_ROUTE} --providers ${THREE_PROVIDERS.map((p) => p.name).join(",")} --strategy conversion\` set with the CLI before any call counted or measured`;
    for (const cell of threeCells) {
      // Its authentications are under its own prefix: the checks of the service cannot use them.
      const count = await countRedisWork(
        stats,
        proxy,
        calls,
        await sequentialCall(cell, counted3, three.fixture, new CheckPool(), sendFrom),
      );
      if (isSend(cell.call)) sendFrom += 2 * calls + WARMUP_CALLS;
      report.redis[redisKey(cell, "three-providers")] = count;
      say(
        `${cell.label}, three providers: ${count.commands} commands, ${count.answerPathRoundTrips} / ${count.roundTrips} round trips, ${count.bytesWritten} bytes written per call`,
      );
    }
    await counted3.stop();
  }
  await proxy.close();

  // Phase 2: load, the service connected straight to Redis, beside the references.
  const service = await startService(env, join(workDir, "service.log"));
  if (cells.some((c) => c.call === "introspect")) {
    fixture.accessToken = await serverToken(service, fixture.clientId, fixture.clientSecret);
  }
  report.meta.serviceProcesses = service.processes();
  const threeService =
    three === undefined ? undefined : await startService(three.env, join(workDir, "three-providers.log"));
  const refs = await startReferences(cells, fixture, workDir, { redisUrl: redis.url, providerUrl: stub.url });
  /** The service a target of ours is. */
  const serviceOf = (t: Target): Service | undefined =>
    t === "ringfence" ? service : t === "three-providers" ? threeService : undefined;
  const address = (cell: Cell, t: Target) => {
    const ours = serviceOf(t);
    return ours !== undefined
      ? cell.transport === "rest"
        ? ours.baseUrl
        : ours.grpcAddress
      : `${cell.transport === "rest" ? "http://" : ""}127.0.0.1:${refs.get(refKey(cell, t)) ?? 0}`;
  };

  const rates = { send: 300, check: 5_000 };
  /** Sends (not reported) until the pool can take the checks of a run of `s` seconds. */
  const fillPool = async (s: number) => {
    const sendCell = CELLS.find((c) => c.call === "send");
    for (let tries = 0; tries < 5 && sendCell !== undefined; tries++) {
      const wanted = Math.ceil(rates.check * s * 1.5);
      const missing = wanted - pool.capacity();
      if (missing <= 0) return;
      const fillSeconds = Math.max(0.5, missing / 4 / rates.send);
      say(`sending ${Math.ceil(missing / 4)} more authentications to check (${fillSeconds.toFixed(1)} s)`);
      await load(sendCell, "ringfence", fillSeconds);
    }
  };

  const load = async (cell: Cell, t: Target, s: number): Promise<LoadResult> => {
    if (cell.transport === "grpc") {
      const spec: GrpcLoad = {
        address: address(cell, t),
        call: cell.call === "token" ? "token" : "lookup",
        fixture,
        connections,
        channels: Math.min(4, connections),
        seconds: s,
      };
      return drive("drive-grpc.ts", spec, s, workDir);
    }
    if (cell.call === "check") await fillPool(s);
    const plan: RestPlan = {
      call: cell.call,
      // The three-provider service has its own account (its keys are under a prefix of their own).
      fixture: t === "three-providers" ? (three?.fixture ?? fixture) : fixture,
      tokenPath: isService(t) ? "/v1/session/oauth/token" : "/token",
      sendFrom,
      authUuids: cell.call === "check" ? pool.forChecks() : pool.all(),
    };
    const spec: HttpLoad = { baseUrl: address(cell, t), plan, connections, seconds: s };
    const result = await drive("drive-http.ts", spec, s, workDir);
    if (isSend(cell.call)) sendFrom += result.issued;
    // Only our authentications can be checked: a reference's are its own.
    if (cell.call === "send" && t === "ringfence") pool.add(result.authUuids ?? []);
    if (cell.call === "check") pool.used(plan.authUuids, result.issued);
    if (cell.call === "send" || cell.call === "check")
      rates[cell.call] = Math.max(1, result.issued / result.seconds);
    return result;
  };

  say(`each measured run follows ${warmupSeconds} s of the same calls to the same target, not measured`);
  for (let round = 0; round < rounds; round++) {
    for (const cell of cells) {
      const targets = ["ringfence", ...cell.refs] as Target[];
      // Each round starts with another target, so that none always runs first (or last).
      const order = targets.map((_, i) => targets[(i + round) % targets.length] ?? "ringfence");
      for (const t of order) {
        // Warm, every time: a process that sat idle while other cells ran (the three-provider
        // service, every reference) would otherwise be measured against one the other cells kept warm.
        await load(cell, t, warmupSeconds);
        const pid = serviceOf(t)?.pid ?? refs.pids.get(refKey(cell, t));
        const before = pid === undefined ? undefined : cpuSecondsOf(pid);
        const redisBefore = cpuSecondsOf(redis.pid());
        const result = await load(cell, t, seconds);
        const after = pid === undefined ? undefined : cpuSecondsOf(pid);
        const redisAfter = cpuSecondsOf(redis.pid());
        const answered = result.ok + result.failed;
        if (before !== undefined && after !== undefined && answered > 0)
          result.serverCpuUs = ((after - before) * 1e6) / answered;
        if (redisBefore !== undefined && redisAfter !== undefined && answered > 0)
          result.redisCpuUs = ((redisAfter - redisBefore) * 1e6) / answered;
        report.runs.push({ round: round + 1, cell: cell.id, target: t, result });
        say(
          `round ${round + 1}/${rounds} ${cell.label}, ${targetLabel(cell, t)}: ${result.rps.toFixed(0)} req/s, p99 ${result.p99.toFixed(2)} ms${result.failed > 0 ? `, ${result.failed} failed` : ""}`,
        );
      }
    }
  }

  if (three !== undefined) {
    report.providerMessages = Object.fromEntries(
      THREE_PROVIDERS.map((p) => [p.name, stub.acceptedAt(p.path)]),
    );
  }
  process.stdout.write(markdown(report, cells));
  if (opts.json !== undefined) writeFileSync(opts.json, JSON.stringify(report, null, 2) + "\n");

  await Promise.all([...refs.procs].map((p) => stop(p.child)));
  await threeService?.stop();
  await service.stop();
  stats.disconnect();
  await stub.close();
  await redis.stop();
}

/** One send through REST, for the authentications the checks and read-backs use. */
async function restSend(service: Service, f: Fixture, k: number): Promise<string> {
  const req = restRequest({ call: "send", fixture: f, tokenPath: "", sendFrom: k, authUuids: [] }, 0);
  const res = await fetch(service.baseUrl + req.path, {
    method: req.method,
    headers: req.headers,
    body: req.body,
  });
  const text = await res.text();
  const uuid = authUuidOf(text);
  if (!res.ok || uuid === undefined) throw new Error(`a send answered ${res.status}: ${text}`);
  return uuid;
}

/** The `i`-th call of a cell, made once, failing on anything but a success. */
async function sequentialCall(
  cell: Cell,
  service: Service,
  f: Fixture,
  pool: CheckPool,
  sendFrom: number,
): Promise<(i: number) => Promise<void>> {
  if (cell.transport === "grpc") {
    const channel = grpcChannel(service.grpcAddress, cell.call === "token" ? "token" : "lookup", f);
    await channel.ready();
    return (i) => channel.call(i);
  }
  const plan: RestPlan = {
    call: cell.call,
    fixture: f,
    tokenPath: "/v1/session/oauth/token",
    sendFrom,
    authUuids: cell.call === "check" ? pool.forChecks() : pool.all(),
  };
  return async (i) => {
    const req = restRequest(plan, i);
    const res = await fetch(service.baseUrl + req.path, {
      method: req.method,
      headers: req.headers,
      body: req.body,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${cell.label} answered ${res.status}: ${text}`);
    // An inactive answer is a 200 too, and far cheaper: only an active one is the call measured.
    if (cell.call === "introspect" && answerStatus(res.status, text) !== "active")
      throw new Error(`${cell.label} answered ${text}`);
    if (isSend(cell.call)) {
      const uuid = authUuidOf(text);
      if (uuid !== undefined) pool.add([uuid]);
    }
    if (cell.call === "check") pool.usedOne(plan.authUuids[i % plan.authUuids.length] ?? "");
  };
}

/**
 * Authentications to check, each with the wrong checks it may still take: OTP_MAX_CHECKS (5)
 * less one, so that every check is answered `invalid`, never `rate_limited`.
 */
class CheckPool {
  private readonly left = new Map<string, number>();

  add(uuids: string[]): void {
    for (const u of uuids) this.left.set(u, 4);
  }

  all(): string[] {
    return [...this.left.keys()];
  }

  /** Checks the pool can still take. */
  capacity(): number {
    let n = 0;
    for (const left of this.left.values()) n += left;
    return n;
  }

  /** Those that can still be checked, the least checked first. */
  forChecks(): string[] {
    return [...this.left.entries()]
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([u]) => u);
  }

  usedOne(uuid: string): void {
    this.left.set(uuid, Math.max(0, (this.left.get(uuid) ?? 0) - 1));
  }

  /** `issued` checks were made on `list`, taken in turn (restRequest's `i % length`). */
  used(list: string[], issued: number): void {
    if (list.length === 0) return;
    const each = Math.floor(issued / list.length);
    const extra = issued % list.length;
    list.forEach((u, i) => {
      this.left.set(u, Math.max(0, (this.left.get(u) ?? 0) - each - (i < extra ? 1 : 0)));
    });
  }
}

const refKey = (cell: Cell, t: Target) => `${cell.transport}:${t}`;

/** Starts each reference the cells need, in a process of its own; their ports by refKey. */
async function startReferences(
  cells: Cell[],
  f: Fixture,
  workDir: string,
  sendFloor: SendFloorArgs,
): Promise<Map<string, number> & { procs: Set<Logged>; pids: Map<string, number> }> {
  const modules: Record<string, string> = {
    "rest:oidc-provider": "ref-oidc-provider.ts",
    "rest:floor": "ref-http-floor.ts",
    "grpc:floor": "ref-grpc-floor.ts",
    "rest:send-floor": "ref-send-floor.ts",
  };
  const ports = Object.assign(new Map<string, number>(), {
    procs: new Set<Logged>(),
    pids: new Map<string, number>(),
  });
  for (const cell of cells) {
    for (const t of cell.refs) {
      if (isService(t)) continue;
      const key = refKey(cell, t);
      const module = modules[key];
      if (module === undefined || ports.has(key)) continue;
      const args = JSON.stringify(
        t === "send-floor"
          ? sendFloor
          : { clientId: f.clientId, clientSecret: f.clientSecret, scope: f.scope },
      );
      const ref = forkModule(module, [args], join(workDir, `${module.replace(/\.ts$/, "")}.log`));
      ports.procs.add(ref);
      if (ref.child.pid !== undefined) ports.pids.set(key, ref.child.pid);
      try {
        const ready = await nextMessage(ref.child, (m) =>
          (m as Partial<Ready>).ready === true ? (m as Ready) : undefined,
        );
        ports.set(key, ready.port);
      } catch (err) {
        throw new Error(`${module}: ${err instanceof Error ? err.message : String(err)}\n${ref.tail()}`, {
          cause: err,
        });
      }
    }
  }
  return ports;
}

function meta(service: Service, redisUrl: string): Report["meta"] {
  const list = cpus();
  const version = spawnSync("redis-server", ["--version"], { encoding: "utf8" }).stdout;
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    cpus: `${list.length} × ${list[0]?.model.trim() ?? "unknown CPU"}`,
    os: `${platform()} ${release()}`,
    node: process.version,
    redis: /v=(\S+)/.exec(version)?.[1] ?? redisUrl,
    workers: opts.workers ?? "unset (the service's default)",
    changedSettings: CHANGED_SETTINGS,
    serviceProcesses: service.processes(),
    connections,
    seconds,
    warmupSeconds,
    rounds,
    sequentialCalls: calls,
  };
}

killChildrenOnExit();
try {
  await main();
  process.exit(0);
} catch (err) {
  process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
}

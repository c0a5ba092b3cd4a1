/**
 * `npm run bench:compare -- --base REV`: the service built from REV and this checkout's dist/,
 * side by side on one Redis, one cell's load alternating between them (A B, then B A, ...). Each
 * pair's ratio is kept and the medians printed: a shared machine whose speed drifts from one
 * minute to the next moves both sides of a pair alike, where two bench runs would each catch
 * another phase of it. docs/benchmark.md#comparing-two-builds says when to use it.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import { startRedis } from "../test/support/redis.js";
import { cpuSecondsOf } from "./cpu.js";
import type { GrpcLoad } from "./drive-grpc.js";
import type { HttpLoad } from "./drive-http.js";
import { drive, killChildrenOnExit, trackPid } from "./processes.js";
import { benchEnv, setUp, startProviderStub, startService, type Service } from "./service.js";
import { medianBy } from "./stats.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CELLS = [
  "rest-token",
  "grpc-token",
  "rest-lookup",
  "grpc-lookup",
  "rest-send",
  "rest-send-intl",
] as const;
type CompareCell = (typeof CELLS)[number];

const whole = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new InvalidArgumentError(`${name} must be a whole number above 0`);
  return n;
};

const program = new Command("bench:compare")
  .description(
    "Serves the build of a git revision and this checkout's dist/ side by side and alternates one cell's load between them; prints each pair and the median ratios (this build / base)",
  )
  .option("--base <rev>", "the git revision to compare dist/ with", "HEAD")
  .option("--cell <cell>", `the load: ${CELLS.join(", ")}`, "grpc-token")
  .option("--pairs <n>", "pairs of loads, each side once a pair", whole("--pairs"), 10)
  .option("--duration <seconds>", "seconds of each load", whole("--duration"), 4)
  .option("--workers <n>", "WORKERS for both services (default: unset, the service's default)")
  .option("--smoke", "proves the comparison runs: 2 pairs of 1 s")
  .addHelpText(
    "after",
    "\nExample: npm run bench:compare -- --base main~3 --cell rest-token\nSee docs/benchmark.md#comparing-two-builds.",
  );

interface Options {
  base: string;
  cell: string;
  pairs: number;
  duration: number;
  workers?: string;
  smoke?: boolean;
}

program.parse();
const opts = program.opts<Options>();
// A revision is given to git as one argument; one that starts with "-" would be read as an option.
if (opts.base.startsWith("-")) program.error(`--base: "${opts.base}" is not a revision`, { exitCode: 2 });
if (!(CELLS as readonly string[]).includes(opts.cell)) {
  program.error(`--cell: no cell "${opts.cell}" (one of ${CELLS.join(", ")})`, { exitCode: 2 });
}
const cell = opts.cell as CompareCell;
const pairs = opts.smoke === true ? 2 : opts.pairs;
const seconds = opts.smoke === true ? 1 : opts.duration;

/** REV built in a worktree of its own beside node_modules; its CLI, and how to remove it. */
function buildRevision(rev: string): { cli: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "ringfence-base-"));
  const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT, stdio: "pipe" });
  git("worktree", "add", "--detach", dir, rev);
  const remove = () => {
    git("worktree", "remove", "--force", dir);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
    // The build script of that revision: what `npm install` makes there.
    execFileSync("npm", ["run", "--silent", "build"], { cwd: dir, stdio: "pipe" });
  } catch (err) {
    remove();
    throw err;
  }
  return { cli: join(dir, "dist", "cli.js"), remove };
}

async function main(): Promise<void> {
  const say = (line: string) => process.stderr.write(`bench:compare: ${line}\n`);
  const workDir = mkdtempSync(join(tmpdir(), "ringfence-compare-"));
  say(`building ${opts.base}; logs in ${workDir}`);
  const base = buildRevision(opts.base);
  try {
    const redis = await startRedis();
    trackPid(redis.pid());
    const stub = await startProviderStub();
    const env = benchEnv({ redisUrl: redis.url, providerUrl: stub.url, workers: opts.workers });
    const before = await startService(env, join(workDir, "base.log"), base.cli);
    const after = await startService(env, join(workDir, "dist.log"));
    const sides = [before, after];
    // Both read the same Redis: the set-up made through one serves both.
    const fixture = await setUp(env, before, workDir);
    // Each send goes to numbers no send of either side used before.
    let sendFrom = 0;
    const load = async (service: Service, s: number) => {
      const grpc = cell.startsWith("grpc");
      const call = cell.endsWith("token")
        ? "token"
        : cell === "rest-send"
          ? "send"
          : cell === "rest-send-intl"
            ? "intlsend"
            : "lookup";
      const spec: GrpcLoad | HttpLoad = grpc
        ? {
            address: service.grpcAddress,
            call: call === "token" ? "token" : "lookup",
            fixture,
            connections: 32,
            channels: 4,
            seconds: s,
          }
        : {
            baseUrl: service.baseUrl,
            plan: { call, fixture, tokenPath: "/v1/session/oauth/token", sendFrom, authUuids: [] },
            connections: 32,
            seconds: s,
          };
      const before = cpuSecondsOf(service.pid) ?? 0;
      const result = await drive(grpc ? "drive-grpc.ts" : "drive-http.ts", spec, s, workDir);
      sendFrom += result.issued;
      const cpu = ((cpuSecondsOf(service.pid) ?? 0) - before) / Math.max(1, result.ok + result.failed);
      if (result.failed > 0)
        throw new Error(`${cell} failed ${result.failed} times: ${result.errors.join("; ")}`);
      return { rps: result.rps, cpuUs: cpu * 1e6 };
    };
    for (const service of sides) await load(service, Math.min(3, seconds));

    const rps: number[] = [];
    const cpu: number[] = [];
    for (let i = 0; i < pairs; i++) {
      // A B, then B A: neither side always goes first.
      let a: { rps: number; cpuUs: number };
      let b: { rps: number; cpuUs: number };
      if (i % 2 === 0) {
        a = await load(before, seconds);
        b = await load(after, seconds);
      } else {
        b = await load(after, seconds);
        a = await load(before, seconds);
      }
      rps.push(b.rps / a.rps);
      cpu.push(b.cpuUs / a.cpuUs);
      say(
        `pair ${i + 1}/${pairs}: ${opts.base} ${a.rps.toFixed(0)}/s ${a.cpuUs.toFixed(0)} µs, dist/ ${b.rps.toFixed(0)}/s ${b.cpuUs.toFixed(0)} µs`,
      );
    }
    process.stdout.write(
      `${cell}, dist/ against ${opts.base}, ${pairs} pairs of ${seconds} s: ` +
        `req/s ×${(medianBy(rps, (r) => r) ?? NaN).toFixed(3)}, server CPU per call ×${(medianBy(cpu, (c) => c) ?? NaN).toFixed(3)} (medians of the pairs' ratios)\n`,
    );
    for (const service of sides) await service.stop();
    await stub.close();
    await redis.stop();
  } finally {
    base.remove();
  }
}

killChildrenOnExit();
try {
  await main();
  process.exit(0);
} catch (err) {
  process.stderr.write(`bench:compare: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
}

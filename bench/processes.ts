import { fork, spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { GrpcLoad } from "./drive-grpc.js";
import type { HttpLoad } from "./drive-http.js";
import type { LoadResult } from "./stats.js";

/** Every process the bench started, killed on any exit: normal, Ctrl-C, SIGTERM or a failure. */
const started = new Set<ChildProcess>();
/** Processes started elsewhere (redis-server of test/support/redis.ts), by pid. */
const pids = new Set<number>();

export function killAll(): void {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  started.clear();
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  pids.clear();
}

let installed = false;
/** Kills every child on exit; Ctrl-C and SIGTERM exit with 130 and 143 after it. */
export function killChildrenOnExit(): void {
  if (installed) return;
  installed = true;
  process.on("exit", killAll);
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
    ["SIGHUP", 129],
  ] as const) {
    process.once(signal, () => {
      process.stderr.write(`bench: ${signal}: stopping every process it started\n`);
      process.exit(code);
    });
  }
}

export function trackPid(pid: number): void {
  pids.add(pid);
}

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/**
 * Forks a TypeScript module of bench/ (through tsx) as its own process with an IPC channel; it
 * exits when that channel closes, so it cannot outlive the bench even when the bench is killed.
 */
export function forkModule(file: string, args: string[], logFile: string): Logged {
  const fd = openSync(logFile, "a");
  const child = fork(here(file), args, {
    execArgv: ["--import", import.meta.resolve("tsx")],
    stdio: ["ignore", fd, fd, "ipc"],
  });
  closeSync(fd);
  return track(child, logFile);
}

/** The first IPC message of `child` that `accept` returns a value for; rejects if it exits first. */
export function nextMessage<T>(
  child: ChildProcess,
  accept: (m: unknown) => T | undefined,
  timeoutMs = 60_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no answer from ${String(child.spawnargs[1] ?? child.pid)} in ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (m: unknown) => {
      const value = accept(m);
      if (value === undefined) return;
      done();
      resolve(value);
    };
    const onExit = (code: number | null, signal: string | null) => {
      done();
      reject(new Error(`${child.spawnargs.join(" ")} exited (${signal ?? String(code)})`));
    };
    const done = () => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
    };
    child.on("message", onMessage);
    child.once("exit", onExit);
  });
}

export interface Logged {
  child: ChildProcess;
  /** The last lines it wrote, for an error message. */
  tail(): string;
}

/**
 * Spawns a command whose stdout and stderr go straight to `logFile` (the file is the child's own
 * output: nothing is piped through this process, whose CPU the load shares); `tail` reads its end.
 */
export function spawnLogged(
  command: string,
  args: string[],
  env: Record<string, string>,
  logFile: string,
): Logged {
  const fd = openSync(logFile, "a");
  const child = spawn(command, args, { env, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  return track(child, logFile);
}

function track(child: ChildProcess, logFile: string): Logged {
  started.add(child);
  child.once("exit", () => started.delete(child));
  return { child, tail: () => tailOf(logFile) };
}

/** The last lines of a file, for an error message. */
function tailOf(file: string): string {
  try {
    const text = readFileSync(file, "utf8");
    return text.slice(-4000).trim().split("\n").slice(-8).join("\n");
  } catch {
    return "";
  }
}

/** Runs a command to completion; resolves its stdout, rejects with its stderr on a non-zero exit. */
export function run(command: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    started.add(child);
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.once("exit", (code) => {
      started.delete(child);
      if (code === 0) resolve(out);
      else reject(new Error(`${command} ${args.join(" ")} exited ${String(code)}: ${err.trim()}`));
    });
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when it exited. */
export async function stop(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => {
      resolve();
    });
  });
  child.kill("SIGTERM");
  const timer = setTimeout(() => {
    child.kill("SIGKILL");
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

/** Runs one load in a driver process of its own and returns what it measured. */
export async function drive(
  module: string,
  spec: HttpLoad | GrpcLoad,
  s: number,
  workDir: string,
): Promise<LoadResult> {
  const driver = forkModule(module, [], join(workDir, "drivers.log"));
  try {
    await nextMessage(driver.child, (m) => ((m as { ready?: boolean }).ready === true ? true : undefined));
    driver.child.send(spec);
    return await nextMessage(driver.child, (m) => (m as { result?: LoadResult }).result, s * 1000 + 60_000);
  } catch (err) {
    throw new Error(`${module}: ${err instanceof Error ? err.message : String(err)}\n${driver.tail()}`, {
      cause: err,
    });
  } finally {
    if (driver.child.connected) driver.child.disconnect();
  }
}

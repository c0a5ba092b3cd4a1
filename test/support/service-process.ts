import { FRAUD_SURGES_OFF } from "./app.js";
import { watchV1Answers } from "./ding-contract.js";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { onFreshPorts, testPort } from "./ports.js";
import { GiveUp, waitFor } from "./redis.js";

const CLI = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

export interface ServiceExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** When the process was seen to exit (Date.now()). */
  atMs: number;
}

/** `ringfence serve` as a real child process, for tests that signal, kill or restart it. */
export interface ServiceProcess {
  pid: number;
  baseUrl: string;
  grpcAddress: string;
  httpPort: number;
  grpcPort: number;
  /** The JSON log lines it wrote on stderr so far (a line that is not JSON as `{raw}`). */
  logs(): Record<string, unknown>[];
  /** Every whole line it wrote so far, exactly as written, on stderr and on stdout. */
  lines(): { stderr: string[]; stdout: string[] };
  /** Sends a signal (SIGTERM, SIGKILL, ...). */
  signal(sig: NodeJS.Signals): void;
  /** Settles when the process exits. */
  exited: Promise<ServiceExit>;
  /** Kills it (SIGKILL) if it still runs and waits for the exit. */
  kill(): Promise<ServiceExit>;
}

/**
 * Starts the service from source (`node --import tsx src/cli.ts serve`) with the given environment,
 * and waits until `GET /healthz` answers: on `ports` (a restart on the ports of a process gone), or
 * else on ports of test/support/ports.ts, fresh ones when another process took one meanwhile.
 * Not on GRPC_PORT=0: a restart must find its gRPC port free again.
 */
export async function startServiceProcess(
  env: Record<string, string>,
  ports: { http?: number; grpc?: number } = {},
): Promise<ServiceProcess> {
  if (ports.http !== undefined && ports.grpc !== undefined) return launchService(env, ports.http, ports.grpc);
  return onFreshPorts(async () =>
    launchService(env, ports.http ?? (await testPort()), ports.grpc ?? (await testPort())),
  );
}

async function launchService(
  env: Record<string, string>,
  httpPort: number,
  grpcPort: number,
): Promise<ServiceProcess> {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", CLI, "serve"], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      NODE_ENV: "test",
      HOST: "127.0.0.1",
      HTTP_PORT: String(httpPort),
      GRPC_PORT: String(grpcPort),
      ADMIN_PORT: "0",
      ISSUER_URL: `http://127.0.0.1:${httpPort}`,
      ...FRAUD_SURGES_OFF,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Record<string, unknown>[] = [];
  const raw = { stderr: [] as string[], stdout: [] as string[] };
  const split = (stream: "stderr" | "stdout", onLine: (line: string) => void) => {
    let partial = "";
    child[stream]?.on("data", (d: Buffer) => {
      partial += d.toString();
      const parts = partial.split("\n");
      partial = parts.pop() ?? "";
      for (const p of parts) {
        raw[stream].push(p);
        onLine(p);
      }
    });
  };
  split("stdout", () => undefined);
  split("stderr", (p) => {
    try {
      lines.push(JSON.parse(p) as Record<string, unknown>);
    } catch {
      lines.push({ raw: p });
    }
  });
  const exited = new Promise<ServiceExit>((resolve) => {
    child.once("exit", (code, signal) => {
      resolve({ code, signal, atMs: Date.now() });
    });
  });
  // Its last lines are read once its output is closed, which may come after the exit.
  const closed = new Promise((resolve) => child.once("close", resolve));
  const baseUrl = watchV1Answers(`http://127.0.0.1:${httpPort}`);
  let gone = false;
  void exited.then(() => (gone = true));
  try {
    await waitFor(async () => {
      if (gone) throw new GiveUp("exited");
      return (await fetch(`${baseUrl}/healthz`)).ok;
    }, 30_000);
  } catch {
    child.kill("SIGKILL");
    await closed;
    throw new Error(`the service did not start: ${JSON.stringify(lines.slice(-5))}`);
  }
  return {
    pid: child.pid ?? 0,
    baseUrl,
    grpcAddress: `127.0.0.1:${grpcPort}`,
    httpPort,
    grpcPort,
    logs: () => lines,
    lines: () => raw,
    signal: (sig) => {
      child.kill(sig);
    },
    exited,
    kill: async () => {
      if (!gone) child.kill("SIGKILL");
      return exited;
    },
  };
}

/**
 * Runs `ringfence serve` (from source) for a start that is meant to fail, and resolves with its exit
 * code and stderr lines once it has exited (the caller's timeout bounds a start that does not fail).
 */
export function serveExpectingExit(
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CLI, "serve"], {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        NODE_ENV: "test",
        HOST: "127.0.0.1",
        HTTP_PORT: "0",
        GRPC_PORT: "0",
        ADMIN_PORT: "0",
        ...env,
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => {
      resolve({ code, stderr: stderr.split("\n").filter((l) => l !== "") });
    });
  });
}

import { watchV1Answers } from "./ding-contract.js";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import {
  credentials,
  Metadata,
  type CallOptions,
  type ClientUnaryCall,
  type ServiceError,
} from "@grpc/grpc-js";
import { loadConfig, type Config } from "../../src/config.js";
import { silentLogger, type Logger } from "../../src/log.js";
import { startApp, type RunningApp } from "../../src/app.js";
import { testPort } from "./ports.js";
import { testRedisUrl } from "./hooks.js";

export const TEST_SECRETS_KEY = randomBytes(32).toString("base64");

/**
 * With GATEWAY_URL set, REST calls go to that gateway (Envoy in compose), so test data must be
 * written where that deployment reads it: its REDIS_URL, SECRETS_KEY and key prefix.
 */
function dataEnv(): Record<string, string> {
  const { GATEWAY_URL, REDIS_URL, SECRETS_KEY, REDIS_KEY_PREFIX } = process.env;
  if (GATEWAY_URL !== undefined && GATEWAY_URL !== "") {
    if (REDIS_URL === undefined || SECRETS_KEY === undefined) {
      throw new Error("GATEWAY_URL needs the REDIS_URL and SECRETS_KEY of the deployment behind it");
    }
    return { REDIS_URL, SECRETS_KEY, REDIS_KEY_PREFIX: REDIS_KEY_PREFIX ?? "rf:" };
  }
  return {
    REDIS_URL: testRedisUrl(),
    SECRETS_KEY: TEST_SECRETS_KEY,
    REDIS_KEY_PREFIX: `t${randomBytes(4).toString("hex")}:`,
  };
}

/**
 * Tests of other features send many codes to one country that nobody enters: the fraud engine
 * still judges and counts each send, but never finds a surge (test/fraud/ sets it back).
 */
export const FRAUD_SURGES_OFF = {
  FRAUD_NEW_DESTINATION_SENDS: "1000000",
  FRAUD_NEW_DESTINATION_BUDGET: "1000000",
  FRAUD_SOURCE_SENDS: "1000000",
  FRAUD_SOURCE_COUNTRIES: "300",
};

/**
 * Every test client calls from 127.0.0.1, so the per-address and per-app abuse limits are off
 * unless a test sets them (test/session/abuse-limits.test.ts does); and test peers are on loopback.
 */
const ABUSE_LIMITS_OFF = {
  LOGIN_LIMIT_APP: "off",
  LOGIN_LIMIT_IP: "off",
  STEPUP_LIMIT_USER: "off",
  STEPUP_LIMIT_SESSION: "off",
  OTP_CHECK_LIMIT: "off",
  TOKEN_FAILURES_CLIENT: "off",
  TOKEN_FAILURES_IP: "off",
  API_KEY_FAILURES_IP: "off",
  STATUS_TOKEN_FAILURES_IP: "off",
  PASSWORD_FAILURES_IDENTIFIER: "off",
  PASSWORD_FAILURES_IP: "off",
  ...FRAUD_SURGES_OFF,
  // Test receivers, hooks and key sets live on loopback (test/net/outbound.test.ts sets it empty).
  OUTBOUND_ALLOWED_CIDRS: "127.0.0.0/8,::1/128",
};

export function testConfig(env: Record<string, string> = {}): Config {
  // No admin listener unless a test asks for one: apps of one run would all want port 9464.
  return loadConfig({
    NODE_ENV: "test",
    HOST: "127.0.0.1",
    ADMIN_PORT: "0",
    ...ABUSE_LIMITS_OFF,
    ...dataEnv(),
    ...env,
  });
}

export interface TestApp extends RunningApp {
  baseUrl: string;
  grpcAddress: string;
  config: Config;
}

/**
 * The whole service in-process, against the run's Redis, with its own key prefix: gRPC on a port
 * the system picks (GRPC_PORT=0), REST on one of test/support/ports.ts (ISSUER_URL names it).
 */
export async function startTestApp(
  env: Record<string, string> = {},
  log: Logger = silentLogger,
): Promise<TestApp> {
  const httpPort = await testPort();
  const config = testConfig({
    GRPC_PORT: "0",
    HTTP_PORT: String(httpPort),
    ISSUER_URL: process.env.GATEWAY_URL ?? `http://127.0.0.1:${httpPort}`,
    ...env,
  });
  const app = await startApp(config, log);
  // The start's scans write their marks in the background: a test counting keys must not see them land.
  await app.settled();
  return {
    ...app,
    config,
    baseUrl: watchV1Answers(process.env.GATEWAY_URL ?? `http://127.0.0.1:${app.httpPort ?? 0}`),
    grpcAddress: `127.0.0.1:${app.grpcPort}`,
  };
}

export const insecure = credentials.createInsecure();

export function metadata(entries: Record<string, string>): Metadata {
  const md = new Metadata();
  for (const [k, v] of Object.entries(entries)) md.set(k, v);
  return md;
}

/** Calls a unary method of a generated grpc-js client; resolves with the error or the answer and headers. */
export function unary<Req, Res>(
  fn: (
    req: Req,
    md: Metadata,
    options: Partial<CallOptions>,
    cb: (err: ServiceError | null, res: Res) => void,
  ) => ClientUnaryCall,
  req: Req,
  md: Metadata = new Metadata(),
): Promise<{ err: ServiceError | null; res: Res | undefined; headers: Metadata | undefined }> {
  return new Promise((resolve) => {
    let headers: Metadata | undefined;
    const call = fn(req, md, {}, (err, res) => {
      resolve({ err, res: err === null ? res : undefined, headers });
    });
    call.on("metadata", (m: Metadata) => {
      headers = m;
    });
  });
}

const CLI = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));
/** The CLI as `npm install` builds it (`prepare`), as operators run it. */
export const BUILT_CLI = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real `ringfence` CLI in a child process with the given environment: from the sources,
 * or with `built` the compiled one (without the TypeScript loader's time and memory).
 */
export function runCli(args: string[], env: Record<string, string>, built = false): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, built ? [BUILT_CLI, ...args] : ["--import", "tsx", CLI, ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}

/** The environment the CLI needs to reach the same data as a TestApp. */
export function cliEnv(config: Config): Record<string, string> {
  return {
    NODE_ENV: "test",
    REDIS_URL: config.REDIS_URL,
    REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX,
    SECRETS_KEY: config.SECRETS_KEY.toString("base64"),
    ...(config.REDIS_CLUSTER_NODES === undefined
      ? {}
      : { REDIS_CLUSTER_NODES: config.REDIS_CLUSTER_NODES.join(",") }),
  };
}

import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { testPort } from "../test/support/ports.js";
import { GiveUp, waitFor } from "../test/support/redis.js";
import { run, spawnLogged, stop, type Logged } from "./processes.js";
import { basicAuth, TOKEN_FORM, v2Number, type Fixture } from "./calls.js";

const CLI = fileURLToPath(new URL("../dist/cli.js", import.meta.url));

/**
 * The settings the bench changes from their defaults, all production-valid, printed with the table.
 * The same scripts run whatever a window's size; only the verdict changes.
 */
export const CHANGED_SETTINGS: Record<string, string> = {
  // One account makes every send: a customer of this size gets a larger hourly limit.
  RATE_LIMIT_ACCOUNT: "9999999/3600",
  // The sends convert nothing (no code is entered): the fraud engine still reads and counts every
  // destination and source of every send, and its bounds are raised so that it lets them through
  // (the surge, the new-destination budget, a source's unconverted sends and countries).
  FRAUD_NEW_DESTINATION_SENDS: "1000000",
  FRAUD_NEW_DESTINATION_BUDGET: "1000000",
  FRAUD_SOURCE_SENDS: "1000000",
  FRAUD_SOURCE_COUNTRIES: "300",
};

/**
 * The environment of the service as the bench runs it: production, its own Redis and stand-in
 * providers, a fresh SECRETS_KEY, the changed settings; each service started names its own ports.
 */
export function benchEnv(o: {
  redisUrl: string;
  providerUrl: string;
  workers?: string | undefined;
}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    NODE_ENV: "production",
    // Production requires it; each service started below names its own port instead.
    ISSUER_URL: "http://127.0.0.1:8080",
    HOST: "127.0.0.1",
    REDIS_URL: o.redisUrl,
    SECRETS_KEY: randomBytes(32).toString("base64"),
    SMS_PROVIDER: "http",
    SMS_HTTP_URL: `${o.providerUrl}/sms`,
    EMAIL_PROVIDER: "http",
    EMAIL_HTTP_URL: `${o.providerUrl}/email`,
    ...CHANGED_SETTINGS,
    SHUTDOWN_GRACE_MS: "3000",
    ...(o.workers === undefined ? {} : { WORKERS: o.workers }),
  };
}

/** The service as production runs it: `node dist/cli.js serve`. */
export interface Service {
  baseUrl: string;
  grpcAddress: string;
  pid: number;
  /** The service's processes: itself and its children (node:cluster workers, when WORKERS > 1). */
  processes(): number;
  stop(): Promise<void>;
}

/** Starts `node <cli> serve`: dist/'s by default, another build's for `npm run bench:compare`. */
export async function startService(
  env: Record<string, string>,
  logFile: string,
  cli: string = CLI,
): Promise<Service> {
  const httpPort = await testPort();
  const grpcPort = await testPort();
  const proc: Logged = spawnLogged(
    process.execPath,
    [cli, "serve"],
    {
      ...env,
      HTTP_PORT: String(httpPort),
      GRPC_PORT: String(grpcPort),
      ADMIN_PORT: "0",
      ISSUER_URL: `http://127.0.0.1:${httpPort}`,
    },
    logFile,
  );
  const baseUrl = `http://127.0.0.1:${httpPort}`;
  let exited = false;
  proc.child.once("exit", () => (exited = true));
  try {
    await waitFor(async () => {
      if (exited) throw new GiveUp("exited");
      return (await fetch(`${baseUrl}/readyz`)).ok;
    }, 30_000);
  } catch {
    proc.child.kill("SIGKILL");
    throw new Error(`the service did not start:\n${proc.tail()}`);
  }
  const pid = proc.child.pid ?? 0;
  let stopping = false;
  // A service that dies under load must stop the bench, not leave it measuring refused connections.
  proc.child.once("exit", (code, signal) => {
    if (stopping) return;
    process.stderr.write(
      `bench: the service exited (${signal ?? String(code)}) during the run:\n${proc.tail()}\n`,
    );
    process.exit(1);
  });
  return {
    baseUrl,
    grpcAddress: `127.0.0.1:${grpcPort}`,
    pid,
    processes: () => 1 + childrenOf(pid),
    stop: () => {
      stopping = true;
      return stop(proc.child);
    },
  };
}

/** How many processes have `pid` as parent (Linux /proc; 0 elsewhere). */
function childrenOf(pid: number): number {
  try {
    return readdirSync("/proc").filter((d) => {
      if (!/^\d+$/.test(d)) return false;
      try {
        // Field 4 of /proc/<pid>/stat, after the parenthesised command name.
        const stat = readFileSync(`/proc/${d}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid;
      } catch {
        return false;
      }
    }).length;
  } catch {
    return 0;
  }
}

/** The operator CLI (`ringfence …`) from dist/, its JSON answer parsed. */
async function cli(env: Record<string, string>, ...args: string[]): Promise<Record<string, string>> {
  return JSON.parse(await run(process.execPath, [CLI, ...args], env)) as Record<string, string>;
}

const SCOPE = "billing:read";
/** V2 verifications the V2 checks take in turn (each allows OTP_MAX_CHECKS comparisons, then ends). */
const V2_VERIFICATIONS = 64;

/**
 * Makes what the calls need the way an operator and a customer would: an account through the
 * CLI, funded for the sends; operator lookup data imported from a CSV; an app through the CLI;
 * an OAuth client through the REST management API with the app's key.
 */
export async function setUp(
  env: Record<string, string>,
  service: Service,
  workDir: string,
): Promise<Fixture> {
  const account = await cli(
    env,
    ...["accounts", "create", "--name", "Bench customer", "--spending-limit", "100000000.00"],
  );
  const customerUuid = account.customer_uuid ?? "";
  await cli(env, "accounts", "credit", customerUuid, "1000000.00");

  // 16 mobile and 16 fixed French numbers; operator data (ported) for every other one.
  const lookupNumbers = [
    ...Array.from({ length: 16 }, (_, i) => `+336123456${String(i).padStart(2, "0")}`),
    ...Array.from({ length: 16 }, (_, i) => `+331426853${String(i).padStart(2, "0")}`),
  ];
  const csv = join(workDir, "lookup-data.csv");
  writeFileSync(
    csv,
    [
      "phone_number,number_ported",
      ...lookupNumbers.filter((_, i) => i % 2 === 0).map((n) => `${n},true`),
    ].join("\n") + "\n",
  );
  await cli(env, "lookup-data", "import", csv);

  const app = await cli(env, "apps", "create", "--name", "Bench app");
  const res = await fetch(`${service.baseUrl}/v2/session/apps/${app.app_id ?? ""}/oauth/clients`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${app.management_api_key ?? ""}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({
      client_name: "Bench backend",
      provider_url: "https://bench.example.com",
      scopes: [SCOPE],
      grant_types: ["client_credentials"],
    }),
  });
  const client = (await res.json()) as Record<string, string>;
  if (res.status !== 201)
    throw new Error(`creating the OAuth client answered ${res.status}: ${JSON.stringify(client)}`);

  // V2 verifications for the V2 checks, made through the V2 API as a customer would.
  const v2Numbers = Array.from({ length: V2_VERIFICATIONS }, (_, i) => v2Number(i));
  for (const value of v2Numbers) {
    const made = await fetch(`${service.baseUrl}/v2/verification`, {
      method: "POST",
      headers: { authorization: `Bearer ${account.api_key ?? ""}`, "content-type": "application/json" },
      body: JSON.stringify({ target: { type: "phone_number", value } }),
    });
    const answer = (await made.json()) as { status?: string };
    if (answer.status !== "success")
      throw new Error(`a V2 verification answered ${made.status}: ${JSON.stringify(answer)}`);
  }
  return {
    customerUuid,
    apiKey: account.api_key ?? "",
    clientId: client.client_id ?? "",
    clientSecret: client.client_secret ?? "",
    scope: SCOPE,
    accessToken: await serverToken(service, client.client_id ?? "", client.client_secret ?? ""),
    lookupNumbers,
    v2Numbers,
  };
}

/**
 * A server token of the client from `service`, got as a client would, for introspections: each
 * service signs with its own ISSUER_URL, so the load phase's service needs one of its own.
 */
export async function serverToken(service: Service, clientId: string, secret: string): Promise<string> {
  const granted = await fetch(`${service.baseUrl}/v1/session/oauth/token`, {
    method: "POST",
    headers: {
      authorization: basicAuth(clientId, secret),
      "content-type": "application/x-www-form-urlencoded",
    },
    body: TOKEN_FORM(SCOPE),
  });
  const grant = (await granted.json()) as { access_token?: string };
  if (granted.status !== 200 || grant.access_token === undefined)
    throw new Error(`the token for introspections answered ${granted.status}: ${JSON.stringify(grant)}`);
  return grant.access_token;
}

/** A stand-in SMS and email provider over HTTP that accepts everything at once, as a fast provider would. */
export interface ProviderStub {
  url: string;
  accepted(): number;
  /** Messages taken by path (`/sms`, `/email`, each provider's own path of the three-provider service). */
  acceptedAt(path: string): number;
  close(): Promise<void>;
}

/** The stub answers 200 on every path: each provider the bench names is given a path of its own. */
export async function startProviderStub(): Promise<ProviderStub> {
  let accepted = 0;
  const byPath = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      accepted++;
      const path = (req.url ?? "").split("?")[0] ?? "";
      byPath.set(path, (byPath.get(path) ?? 0) + 1);
      res.writeHead(200, { "content-type": "application/json" }).end(`{"id":"stub-${accepted}"}`);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr !== null ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    accepted: () => accepted,
    acceptedAt: (path) => byPath.get(path) ?? 0,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/**
 * The three http providers of the three-provider service (the REST send's `three-providers`
 * target), each at a path of its own on the stub, with a cost each (the counters add it).
 */
export const THREE_PROVIDERS = [
  { name: "sms-a", path: "/sms-a", cost: { default: 0.04, FR: 0.031 } },
  { name: "sms-b", path: "/sms-b", cost: { default: 0.035, FR: 0.033 } },
  { name: "sms-c", path: "/sms-c", cost: { default: 0.045, FR: 0.029 } },
] as const;

/**
 * The three-provider service's key prefix. Routes are kept in Redis and every process on its keys
 * obeys them: a French route naming sms-a, sms-b and sms-c would leave the one-provider service
 * (whose only provider is `default`) none to send its French codes through. So the three-provider
 * service keeps its keys (accounts, routes, counters) under a prefix of its own, on the same Redis.
 */
export const THREE_PROVIDERS_KEY_PREFIX = "rf3:";

/**
 * The environment of the three-provider service: the bench's (`benchEnv`), but DELIVERY_PROVIDERS
 * naming THREE_PROVIDERS at the stub in place of SMS_PROVIDER and SMS_HTTP_URL (the service refuses
 * DELIVERY_PROVIDERS beside SMS_PROVIDER), and its own REDIS_KEY_PREFIX.
 */
export function threeProvidersEnv(env: Record<string, string>, providerUrl: string): Record<string, string> {
  const out: Record<string, string> = {
    ...env,
    REDIS_KEY_PREFIX: THREE_PROVIDERS_KEY_PREFIX,
    DELIVERY_PROVIDERS: JSON.stringify(
      THREE_PROVIDERS.map((p) => ({ name: p.name, url: `${providerUrl}${p.path}`, cost: p.cost })),
    ),
  };
  delete out.SMS_PROVIDER;
  delete out.SMS_HTTP_URL;
  return out;
}

/** The destination of the three-provider service's route: the REST send's numbers are French. */
export const THREE_PROVIDERS_ROUTE = "FR";

/**
 * Sets the three-provider service's route as an operator would (`ringfence routes set`): French
 * numbers through the three providers, `conversion`. The CLI announces the change; every process
 * obeys it within a second (docs/routing.md#routes), so this waits that second and a half more.
 */
export async function setConversionRoute(env: Record<string, string>): Promise<Record<string, string>> {
  const route = await cli(
    env,
    ...["routes", "set", "--destination", THREE_PROVIDERS_ROUTE],
    ...["--providers", THREE_PROVIDERS.map((p) => p.name).join(","), "--strategy", "conversion"],
  );
  if (route.strategy !== "conversion") throw new Error(`routes set answered ${JSON.stringify(route)}`);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  return route;
}

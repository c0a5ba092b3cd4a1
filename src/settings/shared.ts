import { availableParallelism } from "node:os";
import { z } from "zod";
import { ConfigError, defineSettings, setting } from "./define.js";
import { cidrs, httpUrl, port, url } from "./rules.js";

/** Upper bound of WORKERS: far above any CPU count, low enough that a typo cannot fork-bomb the host. */
export const MAX_WORKERS = 1024;
const WORKERS_RULE = `must be a whole number from 1 to ${MAX_WORKERS}, or auto (one per CPU)`;

const DEV_SECRETS_KEY = Buffer.alloc(32, "ringfence-development-only-key!!").toString("base64");

const n = () => z.coerce.number().int();

/**
 * The settings of the shared layer: listeners, the gateway, Redis, the secrets key, workers. Every
 * load reads them, whatever slices it asks for.
 */
export const sharedSettings = defineSettings(
  {
    NODE_ENV: setting({
      schema: z.enum(["development", "production", "test"]).default("development"),
      section: "service",
      text: "`production` refuses the development defaults (see the rules above); the image sets it.",
    }),
    GRPC_PORT: setting({ schema: port.default(50051), section: "service", text: "gRPC port." }),
    HTTP_PORT: setting({
      schema: port.default(8080),
      section: "service",
      text: "Built-in REST gateway; `0` turns it off (Envoy in front instead).",
    }),
    ADMIN_PORT: setting({
      schema: port.default(9464),
      section: "service",
      text:
        "Operators' listener: `GET /metrics` (Prometheus), `/healthz`, `/readyz` " +
        "([operations.md](operations.md#health)); `0` turns it off. Never routed by Envoy; with " +
        "`WORKERS` > 1 the primary serves it for the whole instance.",
    }),
    HOST: setting({
      schema: z.string().min(1).default("127.0.0.1"),
      section: "service",
      text: "Bind address of every listener (containers use `0.0.0.0`).",
    }),
    DOCS_URL: setting({
      schema: httpUrl().default("https://docs.ringfence.dev"),
      section: "service",
      rule: "an http or https URL",
      text: "Base of V1 errors' `doc_url` (`/errors#code`); the successor `Link` names the V2 paths themselves.",
    }),
    MAX_BODY_BYTES: setting({
      schema: n().min(1024).max(10_485_760).default(65_536),
      section: "service",
      text:
        "Largest REST request body (413 above it, or 400 under V1) and largest gRPC request message " +
        "(`RESOURCE_EXHAUSTED` above it).",
    }),
    SHUTDOWN_GRACE_MS: setting({
      schema: n().min(0).max(600_000).default(10_000),
      section: "service",
      text:
        "Everything from SIGTERM/SIGINT to the exit: calls in flight get the grace less up to 1 s kept for " +
        "closing the outbox, providers and Redis; the exit code is 1 when something had to be cut " +
        "([operations.md](operations.md#shutdown)).",
    }),
    LOG_LEVEL: setting({
      schema: z.enum(["debug", "info", "warn", "error"]).default("info"),
      section: "service",
      text: "JSON lines on stderr ([operations.md](operations.md#logs)); `warn` leaves out the line per call.",
    }),
    // gRPC peers (Envoy) whose x-forwarded-for names the client; empty: every caller is its own peer.
    TRUSTED_PROXY_CIDRS: setting({
      schema: cidrs.default([]),
      section: "service",
      default: "empty: no peer names its client",
      rule: "a comma list of CIDRs such as `10.0.0.0/8,::1/128`",
      text:
        "gRPC peers whose last `x-forwarded-for` entry names the client: your proxy's own addresses " +
        "(compose: Envoy's fixed `172.30.0.10/32`). From any other peer `x-forwarded-for` is ignored and " +
        "the peer is the client; never list a range other clients can connect from, or they name their " +
        "own address to the per-address limits.",
    }),
    // Caller-supplied URLs may reach private or reserved addresses only inside these (section 7).
    OUTBOUND_ALLOWED_CIDRS: setting({
      schema: cidrs.default([]),
      section: "service",
      default: "empty",
      rule: "a comma list of CIDRs",
      text:
        "Private or reserved ranges that caller-supplied URLs may reach anyway (local set-ups and tests: " +
        "`127.0.0.0/8`; see [verify.md](verify.md#outbound-addresses)).",
    }),
    // How long the built-in gateway waits for a request's headers, and for the whole request
    // (docs/gateway.md#slow-clients-and-refused-bodies), enforced within a quarter of a second.
    HTTP_HEADERS_TIMEOUT_MS: setting({
      schema: n().min(1_000).max(120_000).default(10_000),
      section: "gateway",
      text:
        "Time a client has, from its first byte (or its connection), to send a request's headers; then 408 " +
        "and the connection is cut.",
    }),
    HTTP_REQUEST_TIMEOUT_MS: setting({
      schema: n().min(1_000).max(600_000).default(30_000),
      section: "gateway",
      text:
        "Time a client has to send a whole request, body included; then 408 and the connection is cut. At " +
        "least `HTTP_HEADERS_TIMEOUT_MS`.",
    }),
    REDIS_URL: setting({
      schema: url(["redis:", "rediss:"]).default("redis://127.0.0.1:6379"),
      section: "redis",
      rule: "a `redis:` or `rediss:` URL",
      text: "One Redis server.",
      url: true,
    }),
    REDIS_CLUSTER_NODES: setting({
      schema: z
        .string()
        .transform((v) => v.split(",").map((s) => s.trim()))
        .pipe(z.array(z.string().regex(/^[^\s:]+:\d{1,5}$/, "must be a comma list of host:port")).min(1))
        .optional(),
      section: "redis",
      rule: "`host:port,host:port,…`",
      text: "Use Redis Cluster, reached through these nodes, instead of `REDIS_URL`.",
    }),
    REDIS_KEY_PREFIX: setting({
      schema: z
        .string()
        .regex(/^[a-z0-9:_-]*$/, "may only hold a-z, 0-9, ':', '_' and '-'")
        .default("rf:"),
      section: "redis",
      rule: "only `a-z`, `0-9`, `:`, `_`, `-`",
      text: "Prefix of every key.",
    }),
    SECRETS_KEY: setting({
      schema: z
        .string()
        .refine((v) => Buffer.from(v, "base64").length === 32, "must be 32 bytes in base64")
        .optional(),
      section: "secrets",
      default: "a fixed development key, with a warning",
      rule: "32 bytes in base64 (`openssl rand -base64 32`)",
      text:
        "Keys the hashes of API keys, management keys, client secrets and codes, and encrypts webhook " +
        "secrets, signing keys and held messages. Required when `NODE_ENV=production`. The first process " +
        "to use a Redis stores a check value of its key beside the data (`<REDIS_KEY_PREFIX>secrets:{check}`, " +
        "an HMAC of a fixed label, never the key); the service and the CLI then refuse to run with another " +
        "key, with one line naming `SECRETS_KEY` (the CLI exits 2).",
      secret: true,
      devOnly: {
        when: (v) => v === undefined,
        why: "unset, so a well-known development key protects secrets",
      },
    }),
    // Processes serving both ports (node:cluster); unset: the CPUs in production, else 1 (finish).
    WORKERS: setting({
      schema: z
        .string()
        .regex(/^(auto|\d{1,4})$/, WORKERS_RULE)
        .transform((v) => (v === "auto" ? availableParallelism() : Number(v)))
        .refine((w) => w >= 1 && w <= MAX_WORKERS, WORKERS_RULE)
        .optional(),
      section: "workers",
      default: "the number of CPUs when `NODE_ENV=production`, else `1`",
      rule: `a whole number from 1 to ${MAX_WORKERS}, or \`auto\` (one per CPU)`,
      text:
        "Processes serving gRPC and REST on the same ports. `auto`, and the production default, count the " +
        "CPUs this process may run on (`os.availableParallelism()`), not a container's CPU quota: under a " +
        "quota, set `WORKERS` to it.",
    }),
  },
  ({ SECRETS_KEY, WORKERS, ...rest }) => {
    if (rest.HTTP_HEADERS_TIMEOUT_MS > rest.HTTP_REQUEST_TIMEOUT_MS) {
      throw new ConfigError(
        `invalid HTTP_HEADERS_TIMEOUT_MS: may not exceed HTTP_REQUEST_TIMEOUT_MS (${rest.HTTP_REQUEST_TIMEOUT_MS})`,
      );
    }
    return {
      ...rest,
      /** Processes that serve (node:cluster); 1 runs everything in this process. */
      WORKERS: WORKERS ?? (rest.NODE_ENV === "production" ? availableParallelism() : 1),
      /** 32 raw bytes that key the hashes of secrets and encrypt keys at rest. */
      SECRETS_KEY: Buffer.from(SECRETS_KEY ?? DEV_SECRETS_KEY, "base64"),
    };
  },
);

/** The shared layer's settings, parsed. */
export type SharedSettings = ReturnType<(typeof sharedSettings)["finish"]>;
/** What a Redis connection is opened from. */
export type RedisSettings = Pick<SharedSettings, "REDIS_URL" | "REDIS_CLUSTER_NODES" | "REDIS_KEY_PREFIX">;

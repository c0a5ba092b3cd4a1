import { availableParallelism } from "node:os";
import { z } from "zod";
import { parseHttpUrl } from "./net/http-url.js";
import { isMailbox } from "./net/email-address.js";
import { LINE_TYPES } from "./phone/line-types.js";
import { parseCidrs } from "./net/cidr.js";

const port = z.coerce.number().int().min(0).max(65535);
/** A setting holding a URL of one of `protocols` (redis:, smtp:, smpp:). */
const url = (protocols: readonly string[]) =>
  z
    .string()
    .refine(
      (v) => URL.canParse(v) && protocols.includes(new URL(v).protocol),
      `must be a URL (${protocols.join(" or ")})`,
    );

/** A setting holding an http(s) URL. */
const httpUrl = () =>
  z.string().refine((v) => parseHttpUrl(v) !== undefined, "must be a URL (http: or https:)");

/** `count/seconds`, e.g. `5/600` (at most 5 in 10 minutes); `off` disables the rule. */
const window = z
  .string()
  .regex(/^(off|\d{1,7}\/\d{1,7})$/, "must be count/seconds such as 5/600, or off")
  .transform((v) => {
    if (v === "off") return null;
    const [count = "0", seconds = "0"] = v.split("/");
    return { limit: Number(count), windowSeconds: Number(seconds) };
  })
  .refine((v) => v === null || v.windowSeconds > 0, "the window must be at least 1 second");

/** `default:0.05,FR:0.07,US:0.0079`: price of one SMS by destination country. */
const prices = z
  .string()
  .transform((v) => v.split(",").map((p) => p.trim().split(":")))
  .pipe(
    z
      .array(z.tuple([z.string().regex(/^(default|[A-Z]{2})$/), z.string().regex(/^\d{1,6}(\.\d{1,6})?$/)]), {
        error: "must be a comma list of COUNTRY:price (or default:price), such as default:0.05,FR:0.07",
      })
      .transform((pairs) => {
        const micros = (s: string) => {
          const [w = "0", f = ""] = s.split(".");
          return Number(w) * 1_000_000 + Number(f.padEnd(6, "0"));
        };
        return Object.fromEntries(pairs.map(([c, p]) => [c, micros(p)]));
      }),
  );

const csv = (allowed: readonly string[]) =>
  z
    .string()
    .transform((v) =>
      v
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== ""),
    )
    .refine((list) => list.every((s) => allowed.includes(s)), {
      message: `must be a comma list of: ${allowed.join(", ")}`,
    });

const LINE_TYPE_NAMES = LINE_TYPES;

/** `10.0.0.0/8,::1/128`: a comma list of IPv4 or IPv6 CIDRs (empty: none). */
const cidrs = z
  .string()
  .refine((v) => {
    try {
      parseCidrs(v);
      return true;
    } catch {
      return false;
    }
  }, "must be a comma list of CIDRs such as 10.0.0.0/8,::1/128")
  .transform(parseCidrs);

/** Upper bound of WORKERS: far above any CPU count, low enough that a typo cannot fork-bomb the host. */
export const MAX_WORKERS = 1024;
const WORKERS_RULE = `must be a whole number from 1 to ${MAX_WORKERS}, or auto (one per CPU)`;

const DEV_SECRETS_KEY = Buffer.alloc(32, "ringfence-development-only-key!!").toString("base64");

const schema = z
  .object({
    NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
    GRPC_PORT: port.default(50051),
    HTTP_PORT: port.default(8080),
    // Operators' listener: /metrics, /healthz, /readyz (docs/settings.md#service-and-network); 0 turns it off.
    ADMIN_PORT: port.default(9464),
    HOST: z.string().min(1).default("127.0.0.1"),
    REDIS_URL: url(["redis:", "rediss:"]).default("redis://127.0.0.1:6379"),
    REDIS_CLUSTER_NODES: z
      .string()
      .transform((v) => v.split(",").map((s) => s.trim()))
      .pipe(z.array(z.string().regex(/^[^\s:]+:\d{1,5}$/, "must be a comma list of host:port")).min(1))
      .optional(),
    REDIS_KEY_PREFIX: z
      .string()
      .regex(/^[a-z0-9:_-]*$/, "may only hold a-z, 0-9, ':', '_' and '-'")
      .default("rf:"),
    // Required in production (loadConfig): tokens and the metadata must not name 127.0.0.1 there.
    ISSUER_URL: httpUrl().default("http://127.0.0.1:8080"),
    DOCS_URL: httpUrl().default("https://docs.ringfence.dev"),
    SECRETS_KEY: z
      .string()
      .refine((v) => Buffer.from(v, "base64").length === 32, "must be 32 bytes in base64")
      .optional(),
    V1_AFTER_SUNSET: z.enum(["serve", "gone"]).default("serve"),
    ACCESS_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).max(86_400).default(3_600),
    DPOP_PROOF_MAX_AGE_SECONDS: z.coerce.number().int().min(5).max(600).default(60),
    SESSION_TOKEN_TTL_SECONDS: z.coerce.number().int().min(30).max(86_400).default(900),
    REFRESH_TOKEN_TTL_SECONDS: z.coerce
      .number()
      .int()
      .min(60)
      .max(365 * 86_400)
      .default(30 * 86_400),
    CHANGE_PASSWORD_GRANT_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
    STEP_UP_TOKEN_TTL_SECONDS: z.coerce.number().int().min(10).max(3_600).default(300),
    EMAIL_PROVIDER: z.enum(["log", "http", "smtp"]).default("log"),
    EMAIL_HTTP_URL: httpUrl().optional(),
    EMAIL_HTTP_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
    SMTP_URL: url(["smtp:", "smtps:"]).optional(),
    SMTP_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
    EMAIL_FROM: z
      .string()
      .refine(isMailbox, "must be an address or Name <address>")
      .default("Ringfence <no-reply@ringfence.dev>"),
    MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(10_485_760).default(65_536),
    // How long the built-in gateway waits for a request's headers, and for the whole request
    // (docs/gateway.md#slow-clients-and-refused-bodies), enforced within a quarter of a second.
    HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(120_000).default(10_000),
    HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(600_000).default(30_000),
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
    LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
    // Processes serving both ports (node:cluster); unset: the CPUs in production, else 1 (below).
    WORKERS: z
      .string()
      .regex(/^(auto|\d{1,4})$/, WORKERS_RULE)
      .transform((v) => (v === "auto" ? availableParallelism() : Number(v)))
      .refine((n) => n >= 1 && n <= MAX_WORKERS, WORKERS_RULE)
      .optional(),

    // Message delivery (docs/settings.md#message-delivery).
    SMS_PROVIDER: z.enum(["log", "http", "smpp"]).default("log"),
    SMS_HTTP_URL: httpUrl().optional(),
    SMS_HTTP_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
    SMPP_URL: url(["smpp:"]).optional(),
    SMS_FROM: z
      .string()
      .regex(
        /^([A-Za-z0-9 ]{1,11}|\+?\d{1,15})$/,
        "must be a sender ID (up to 11 letters or digits) or a number",
      )
      .default("Ringfence"),
    SMS_PRICES: prices.default({ default: 50_000 }),
    // The currency SMS_PRICES and balances are in, as V2 webhook events name it (ISO 4217).
    SMS_CURRENCY: z
      .string()
      .regex(/^[A-Z]{3}$/, "must be an ISO 4217 currency code such as EUR")
      .default("EUR"),

    SMPP_ENQUIRE_LINK_MS: z.coerce.number().int().min(1_000).max(600_000).default(30_000),
    SMPP_SUBMIT_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
    // Holds of charged V1 messages whose provider answer is not recorded yet (docs/verify.md#charges-through-faults).
    SMS_HOLD_MARGIN_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
    SMS_HOLD_RECOVERY_INTERVAL_MS: z.coerce.number().int().min(0).max(86_400_000).default(30_000),

    // Webhook delivery: at least once, retried with exponential backoff for 24 h.
    WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
    WEBHOOK_BACKOFF_BASE_MS: z.coerce.number().int().min(10).max(600_000).default(1_000),
    WEBHOOK_BACKOFF_MAX_MS: z.coerce.number().int().min(10).max(86_400_000).default(3_600_000),
    WEBHOOK_GIVE_UP_MS: z.coerce
      .number()
      .int()
      .min(1_000)
      .max(7 * 86_400_000)
      .default(86_400_000),
    WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
    WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(255).default(2),
    WEBHOOK_SWEEP_INTERVAL_MS: z.coerce.number().int().min(0).max(86_400_000).default(300_000),

    // One-time codes of the V1 verification (docs/settings.md#one-time-codes).
    OTP_LENGTH: z.coerce.number().int().min(4).max(10).default(6),
    OTP_TTL_SECONDS: z.coerce.number().int().min(30).max(86_400).default(600),
    OTP_MAX_CHECKS: z.coerce.number().int().min(1).max(100).default(5),
    OTP_MAX_RETRIES: z.coerce.number().int().min(0).max(20).default(3),
    OTP_RETRY_INTERVAL_SECONDS: z.coerce.number().int().min(0).max(3_600).default(30),
    // How long V1 and V2 authentications, their events and message ids are kept (docs/capacity.md).
    AUTHENTICATION_RETENTION_SECONDS: z.coerce
      .number()
      .int()
      .min(30)
      .max(90 * 86_400)
      .default(7 * 86_400),
    SMS_RECEIPT_RETENTION_SECONDS: z.coerce
      .number()
      .int()
      .min(60)
      .max(90 * 86_400)
      .default(3 * 86_400),
    // How long a send refused before anything was sent keeps its record (docs/capacity.md#refused-sends).
    REFUSED_RETENTION_SECONDS: z.coerce
      .number()
      .int()
      .min(60)
      .max(90 * 86_400)
      .default(3_600),

    // Abuse protection: sends per window, and what counts as spam.
    RATE_LIMIT_NUMBER: window.default({ limit: 5, windowSeconds: 600 }),
    RATE_LIMIT_IP: window.default({ limit: 20, windowSeconds: 600 }),
    RATE_LIMIT_DEVICE: window.default({ limit: 10, windowSeconds: 600 }),
    RATE_LIMIT_ACCOUNT: window.default({ limit: 10_000, windowSeconds: 3_600 }),
    SPAM_LINE_TYPES: csv(LINE_TYPE_NAMES).default(["PremiumRate", "SharedCost"]),
    SPAM_DISPOSABLE: z
      .enum(["true", "false"])
      .transform((v) => v === "true")
      .default(true),
    SPAM_IP_NUMBERS: window.default({ limit: 5, windowSeconds: 3_600 }),
    SPAM_DEVICE_NUMBERS: window.default({ limit: 3, windowSeconds: 3_600 }),
    SPAM_RANGE_BURST: window.default({ limit: 10, windowSeconds: 600 }),
    SPAM_RANGE_DIGITS: z.coerce.number().int().min(1).max(6).default(3),

    // The fraud engine (docs/fraud.md): windows and thresholds of its adaptive rules.
    FRAUD_WINDOW_SECONDS: z.coerce.number().int().min(60).max(86_400).default(3_600),
    FRAUD_NEW_DESTINATION_SENDS: z.coerce.number().int().min(1).max(1_000_000).default(10),
    FRAUD_NEW_DESTINATION_BUDGET: z.coerce.number().int().min(1).max(1_000_000).default(30),
    FRAUD_BASELINE_DAYS: z.coerce.number().int().min(1).max(60).default(14),
    FRAUD_RETURNING_DAYS: z.coerce.number().int().min(1).max(3_650).default(90),
    FRAUD_SOURCE_SENDS: z.coerce.number().int().min(1).max(1_000_000).default(20),
    FRAUD_SOURCE_COUNTRIES: z.coerce.number().int().min(1).max(300).default(3),
    FRAUD_SOURCE_SHARE: z.coerce.number().min(0.5).max(1).default(0.8),
    FRAUD_COUNTRY_SPREAD: z.coerce.number().int().min(1).max(1_000).default(3),
    FRAUD_BASELINE_SHARE: z.coerce.number().min(0).max(10).default(0.1),
    FRAUD_CONVERSION_CREDIT: z.coerce.number().min(0).max(100).default(2),
    FRAUD_GRACE_SECONDS: z.coerce.number().int().min(0).max(86_400).default(300),
    FRAUD_CONVERSION_MIN_SENDS: z.coerce.number().int().min(1).max(1_000_000).default(20),
    FRAUD_CONVERSION_DROP: z.coerce.number().min(0).max(1).default(0.5),
    FRAUD_PREFIX_DIGITS: z.coerce.number().int().min(2).max(12).default(6),
    FRAUD_DECISIONS_MAX: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
    // Reads of the fraud reports per account (docs/fraud.md#pages).
    REPORTS_LIMIT_ACCOUNT: window.default({ limit: 60, windowSeconds: 60 }),

    // Abuse limits of the session service (docs/settings.md#session-abuse-limits): codes sent, codes checked and
    // failed client authentications per window.
    STEPUP_LIMIT_USER: window.default({ limit: 10, windowSeconds: 3_600 }),
    STEPUP_LIMIT_SESSION: window.default({ limit: 5, windowSeconds: 900 }),
    OTP_CHECK_LIMIT: window.default({ limit: 10, windowSeconds: 900 }),
    LOGIN_LIMIT_APP: window.default({ limit: 1_000, windowSeconds: 3_600 }),
    LOGIN_LIMIT_IP: window.default({ limit: 10, windowSeconds: 3_600 }),
    APP_SMS_DAILY_LIMIT: window.default({ limit: 10_000, windowSeconds: 86_400 }),
    TOKEN_FAILURES_CLIENT: window.default({ limit: 10, windowSeconds: 300 }),
    TOKEN_FAILURES_IP: window.default({ limit: 30, windowSeconds: 300 }),
    // Wrong account API keys (V1 x-api-key, V2 bearer) from one client address (docs/settings.md#session-abuse-limits).
    API_KEY_FAILURES_IP: window.default({ limit: 30, windowSeconds: 300 }),
    // Failed password logins per app and identifier, and per client address (docs/session-api.md#password-login).
    PASSWORD_FAILURES_IDENTIFIER: window.default({ limit: 10, windowSeconds: 900 }),
    PASSWORD_FAILURES_IP: window.default({ limit: 30, windowSeconds: 300 }),
    // gRPC peers (Envoy) whose x-forwarded-for names the client; empty: every caller is its own peer.
    TRUSTED_PROXY_CIDRS: cidrs.default([]),
    // Caller-supplied URLs may reach private or reserved addresses only inside these (section 7).
    OUTBOUND_ALLOWED_CIDRS: cidrs.default([]),
  })
  .strip();

/** The name of every setting the schema reads. */
export type SettingName = keyof typeof schema.shape;

/** Every setting the schema reads, in its order. */
export function settingNames(): SettingName[] {
  return Object.keys(schema.shape) as SettingName[];
}

/**
 * The sections of docs/settings.md, in order; their titles are the headings other documents link
 * to (`docs/settings.md#session-abuse-limits`), so keep them. `intro` and `outro` are Markdown.
 */
export const SETTING_SECTIONS = {
  service: { title: "Service and network" },
  gateway: {
    title: "Built-in gateway",
    intro:
      "Timeouts for slow clients of the built-in REST gateway (`HTTP_PORT`), enforced within 250 ms of " +
      "their setting; see [gateway.md](gateway.md#slow-clients-and-refused-bodies). Behind Envoy its own " +
      "timeouts apply.",
  },
  redis: { title: "Redis" },
  secrets: { title: "Secrets and production mode" },
  tokens: { title: "Tokens and sessions" },
  v1: { title: "V1" },
  delivery: {
    title: "Message delivery",
    outro:
      "Provider URLs are set by the operator and are not subject to the outbound-address rules " +
      "([verify.md](verify.md#outbound-addresses)).",
  },
  otp: { title: "One-time codes", intro: "Used by V1 and V2 verification and by login and step-up codes." },
  retention: {
    title: "Retention",
    intro:
      "How long Redis keeps what a send leaves behind; what each costs is in [capacity.md](capacity.md).",
  },
  sends: {
    title: "Send windows and spam",
    intro:
      "V1 and V2 sends and retries (and, where noted in [session-api.md](session-api.md#abuse-limits), " +
      "login and step-up SMS).",
  },
  fraud: {
    title: "Fraud engine",
    intro:
      "The adaptive rules every code-carrying send goes through; how they decide, with the numbers: " +
      "[fraud.md](fraud.md#how-it-decides).",
  },
  session: {
    title: "Session abuse limits",
    intro:
      "What each limit counts, and what a full window answers: " +
      "[session-api.md](session-api.md#abuse-limits).",
  },
  webhooks: {
    title: "Webhooks",
    intro:
      "Delivery is at least once, retried with exponential backoff, and shared fairly between " +
      "endpoints: one that is slow or hangs holds back its own deliveries only.",
  },
  holds: {
    title: "SMS holds",
    intro:
      "A charged V1 message is held until its provider's answer is recorded " +
      "([verify.md](verify.md#charges-through-faults)).",
  },
  workers: {
    title: "Workers",
    intro:
      "What runs in which process, SMPP binds, crashes, shutdown and the log fields of each process: " +
      "[operations.md](operations.md#workers).",
  },
} as const satisfies Record<string, { title: string; intro?: string; outro?: string }>;

export interface SettingDoc {
  section: keyof typeof SETTING_SECTIONS;
  /** What it does, in Markdown. */
  text: string;
  /** The default as an operator reads it, when it is not the schema's own default written back. */
  default?: string;
  /** The values allowed, when the schema cannot say it in words (numbers and choices it can). */
  rule?: string;
}

const WINDOW_RULE = "a window, `count/seconds` or `off`";
const MS = (what: string) => `Time ${what} has to answer, in milliseconds`;

/**
 * What every setting does, for docs/settings.md (`npm run generate`, src/config-docs.ts). The type
 * makes a setting without a description a compile error.
 */
export const SETTING_DOCS: Record<SettingName, SettingDoc> = {
  NODE_ENV: {
    section: "service",
    text: "`production` refuses the development defaults (see the rules above); the image sets it.",
  },
  GRPC_PORT: { section: "service", text: "gRPC port." },
  HTTP_PORT: {
    section: "service",
    text: "Built-in REST gateway; `0` turns it off (Envoy in front instead).",
  },
  ADMIN_PORT: {
    section: "service",
    text:
      "Operators' listener: `GET /metrics` (Prometheus), `/healthz`, `/readyz` " +
      "([operations.md](operations.md#health)); `0` turns it off. Never routed by Envoy; with " +
      "`WORKERS` > 1 the primary serves it for the whole instance.",
  },
  HOST: { section: "service", text: "Bind address of every listener (containers use `0.0.0.0`)." },
  ISSUER_URL: {
    section: "service",
    default: "`http://127.0.0.1:8080` outside production",
    rule: "an http or https URL",
    text:
      "The public address clients reach: token issuer (`iss`) and base of the RFC 8414 metadata and " +
      "`jwks_uri`. Required when `NODE_ENV=production`: unset, the start stops with one line naming it.",
  },
  DOCS_URL: {
    section: "service",
    rule: "an http or https URL",
    text: "Base of V1 errors' `doc_url` (`/errors#code`); the successor `Link` names the V2 paths themselves.",
  },
  MAX_BODY_BYTES: {
    section: "service",
    text:
      "Largest REST request body (413 above it, or 400 under V1) and largest gRPC request message " +
      "(`RESOURCE_EXHAUSTED` above it).",
  },
  SHUTDOWN_GRACE_MS: {
    section: "service",
    text:
      "Everything from SIGTERM/SIGINT to the exit: calls in flight get the grace less up to 1 s kept for " +
      "closing the outbox, providers and Redis; the exit code is 1 when something had to be cut " +
      "([operations.md](operations.md#shutdown)).",
  },
  LOG_LEVEL: {
    section: "service",
    text: "JSON lines on stderr ([operations.md](operations.md#logs)); `warn` leaves out the line per call.",
  },
  TRUSTED_PROXY_CIDRS: {
    section: "service",
    default: "empty: no peer names its client",
    rule: "a comma list of CIDRs such as `10.0.0.0/8,::1/128`",
    text:
      "gRPC peers whose last `x-forwarded-for` entry names the client: your proxy's own addresses " +
      "(compose: Envoy's fixed `172.30.0.10/32`). From any other peer `x-forwarded-for` is ignored and " +
      "the peer is the client; never list a range other clients can connect from, or they name their " +
      "own address to the per-address limits.",
  },
  OUTBOUND_ALLOWED_CIDRS: {
    section: "service",
    default: "empty",
    rule: "a comma list of CIDRs",
    text:
      "Private or reserved ranges that caller-supplied URLs may reach anyway (local set-ups and tests: " +
      "`127.0.0.0/8`; see [verify.md](verify.md#outbound-addresses)).",
  },
  HTTP_HEADERS_TIMEOUT_MS: {
    section: "gateway",
    text:
      "Time a client has, from its first byte (or its connection), to send a request's headers; then 408 " +
      "and the connection is cut.",
  },
  HTTP_REQUEST_TIMEOUT_MS: {
    section: "gateway",
    text:
      "Time a client has to send a whole request, body included; then 408 and the connection is cut. At " +
      "least `HTTP_HEADERS_TIMEOUT_MS`.",
  },
  REDIS_URL: { section: "redis", rule: "a `redis:` or `rediss:` URL", text: "One Redis server." },
  REDIS_CLUSTER_NODES: {
    section: "redis",
    rule: "`host:port,host:port,…`",
    text: "Use Redis Cluster, reached through these nodes, instead of `REDIS_URL`.",
  },
  REDIS_KEY_PREFIX: {
    section: "redis",
    rule: "only `a-z`, `0-9`, `:`, `_`, `-`",
    text: "Prefix of every key.",
  },
  SECRETS_KEY: {
    section: "secrets",
    default: "a fixed development key, with a warning",
    rule: "32 bytes in base64 (`openssl rand -base64 32`)",
    text:
      "Keys the hashes of API keys, management keys, client secrets and codes, and encrypts webhook " +
      "secrets, signing keys and held messages. Required when `NODE_ENV=production`. The first process " +
      "to use a Redis stores a check value of its key beside the data (`<REDIS_KEY_PREFIX>secrets:{check}`, " +
      "an HMAC of a fixed label, never the key); the service and the CLI then refuse to run with another " +
      "key, with one line naming `SECRETS_KEY` (the CLI exits 2).",
  },
  ACCESS_TOKEN_TTL_SECONDS: { section: "tokens", text: "Lifetime of server (client-credentials) tokens." },
  DPOP_PROOF_MAX_AGE_SECONDS: {
    section: "tokens",
    text:
      "How far a DPoP proof's `iat` may be from now, either way, at the token endpoint; its `jti` is " +
      "refused again for twice as long ([session-api.md](session-api.md#dpop)).",
  },
  SESSION_TOKEN_TTL_SECONDS: { section: "tokens", text: "Lifetime of user access tokens." },
  REFRESH_TOKEN_TTL_SECONDS: {
    section: "tokens",
    text: "Lifetime of refresh tokens (the default is 30 days, the most 365 days).",
  },
  CHANGE_PASSWORD_GRANT_SECONDS: {
    section: "tokens",
    text: "How long `svc:pwd:write` lasts after a login with `grant_change_password`.",
  },
  STEP_UP_TOKEN_TTL_SECONDS: { section: "tokens", text: "Lifetime of a step-up token." },
  V1_AFTER_SUNSET: {
    section: "v1",
    text: "`serve` keeps V1; `gone` answers every V1 call 410 `gone`.",
  },
  SMS_PROVIDER: {
    section: "delivery",
    default: "`log` (warns; refused in production)",
    text:
      "`log` prints the message (code included) in the service's log; `http` POSTs to `SMS_HTTP_URL`; " +
      "`smpp` submits through `SMPP_URL`.",
  },
  SMS_HTTP_URL: {
    section: "delivery",
    rule: "an http or https URL",
    text:
      "Required with `SMS_PROVIDER=http`; receives `{to, from, body, locale, reference}`, and any 2xx " +
      "means accepted. A repeated `reference` is the same message ([verify.md](verify.md#charges-through-faults)).",
  },
  SMS_HTTP_TIMEOUT_MS: { section: "delivery", text: `${MS("the HTTP SMS provider")}.` },
  SMPP_URL: {
    section: "delivery",
    rule: "`smpp://system_id:password@host:port`",
    text:
      "Required with `SMS_PROVIDER=smpp`; delivery receipts become `delivery_status` events. Each worker " +
      "holds its own bind ([operations.md](operations.md#workers)).",
  },
  SMPP_ENQUIRE_LINK_MS: { section: "delivery", text: "SMPP keep-alive interval." },
  SMPP_SUBMIT_TIMEOUT_MS: { section: "delivery", text: "Time a `submit_sm` has to be answered." },
  SMS_FROM: {
    section: "delivery",
    rule: "up to 11 letters, digits or spaces, or a number",
    text: "Default sender.",
  },
  SMS_PRICES: {
    section: "delivery",
    default: "`default:0.05`",
    rule: "a comma list of `COUNTRY:price` (or `default:price`), up to 6 decimals",
    text: "Price of one SMS by destination country, e.g. `default:0.05,FR:0.07`.",
  },
  SMS_CURRENCY: {
    section: "delivery",
    rule: "an ISO 4217 code",
    text: "Currency of `SMS_PRICES` and balances, named in V2 webhook events' `price`.",
  },
  EMAIL_PROVIDER: {
    section: "delivery",
    default: "`log` (warns; refused in production)",
    text: "`log` prints the message; `http` POSTs to `EMAIL_HTTP_URL`; `smtp` sends through `SMTP_URL`.",
  },
  EMAIL_HTTP_URL: {
    section: "delivery",
    rule: "an http or https URL",
    text:
      "Required with `EMAIL_PROVIDER=http`; receives `{to, from, subject, body, reference}`, and any 2xx " +
      "means accepted.",
  },
  EMAIL_HTTP_TIMEOUT_MS: { section: "delivery", text: `${MS("the HTTP email provider")}.` },
  SMTP_URL: {
    section: "delivery",
    rule: "an `smtp:` or `smtps:` URL",
    text: "Required with `EMAIL_PROVIDER=smtp`.",
  },
  SMTP_TIMEOUT_MS: { section: "delivery", text: "Time the SMTP server has to accept a message." },
  EMAIL_FROM: { section: "delivery", rule: "an address or `Name <address>`", text: "Sender of emails." },
  OTP_LENGTH: { section: "otp", text: "Digits in a code." },
  OTP_TTL_SECONDS: { section: "otp", text: "Lifetime of a V1 authentication and its code." },
  OTP_MAX_CHECKS: { section: "otp", text: "Checks per authentication or challenge." },
  OTP_MAX_RETRIES: { section: "otp", text: "Retries per V1 authentication." },
  OTP_RETRY_INTERVAL_SECONDS: { section: "otp", text: "Least time between two retries." },
  AUTHENTICATION_RETENTION_SECONDS: {
    section: "retention",
    rule: "a whole number from 30 to 7776000, at least `OTP_TTL_SECONDS` and covering `WEBHOOK_GIVE_UP_MS`",
    text:
      "How long V1 and V2 authentications, their events and webhook streams are kept after they expire " +
      "(read-back answers until then).",
  },
  SMS_RECEIPT_RETENTION_SECONDS: {
    section: "retention",
    text:
      "How long a provider's message id leads to its authentication: a delivery receipt arriving later " +
      "is logged and dropped.",
  },
  REFUSED_RETENTION_SECONDS: {
    section: "retention",
    text:
      "How long a send refused before anything was sent (V1 `rate_limited` and `spam_detected`, V2 " +
      "`blocked`) keeps its authentication, counted from the send (read-back answers until then); its " +
      "webhook, when it has one, is kept past it only until delivered. Windows and fraud counters keep " +
      "their own lifetimes.",
  },
  RATE_LIMIT_NUMBER: {
    section: "sends",
    rule: WINDOW_RULE,
    text: "Sends to one number (login codes to one identifier; a known source of it has a window of its own).",
  },
  RATE_LIMIT_IP: { section: "sends", rule: WINDOW_RULE, text: "Sends from one `ip`." },
  RATE_LIMIT_DEVICE: { section: "sends", rule: WINDOW_RULE, text: "Sends from one `device_id`." },
  RATE_LIMIT_ACCOUNT: { section: "sends", rule: WINDOW_RULE, text: "Sends of one account." },
  SPAM_LINE_TYPES: {
    section: "sends",
    rule: `a comma list of line types (${LINE_TYPE_NAMES.map((t) => `\`${t}\``).join(", ")})`,
    text: "Line types that are `spam_detected` outright.",
  },
  SPAM_DISPOSABLE: { section: "sends", text: "Disposable numbers are `spam_detected`." },
  SPAM_IP_NUMBERS: { section: "sends", rule: WINDOW_RULE, text: "Distinct numbers one IP may reach." },
  SPAM_DEVICE_NUMBERS: {
    section: "sends",
    rule: WINDOW_RULE,
    text: "Distinct numbers one device may reach.",
  },
  SPAM_RANGE_BURST: {
    section: "sends",
    rule: WINDOW_RULE,
    text: "Sends into one number range (the number less its last `SPAM_RANGE_DIGITS` digits).",
  },
  SPAM_RANGE_DIGITS: { section: "sends", text: "Trailing digits dropped to form a range." },
  FRAUD_WINDOW_SECONDS: {
    section: "fraud",
    text: "The recent window the adaptive rules count sends and conversions in (12 slices).",
  },
  FRAUD_NEW_DESTINATION_SENDS: {
    section: "fraud",
    text: "Sends a destination gets per window before its conversions and history must vouch for more.",
  },
  FRAUD_NEW_DESTINATION_BUDGET: {
    section: "fraud",
    text:
      "Unconverted sends a tenant may make per window, all together, to countries without a conversion " +
      "in the baseline days (rule `new_destination_budget`; a conversion there gives its send back), on " +
      "top of each destination's own FRAUD_NEW_DESTINATION_SENDS; blocked sends to destinations not yet " +
      "counted also add them to the tenant's counters and index only this many times per window " +
      "([fraud.md](fraud.md#how-it-decides)).",
  },
  FRAUD_BASELINE_DAYS: {
    section: "fraud",
    text: "Days of history a destination's baseline and the tenant's conversion are read from.",
  },
  FRAUD_RETURNING_DAYS: {
    section: "fraud",
    text:
      "Days a number that converted for a tenant stays a returning user: never refused by the destination " +
      "and budget rules (geo blocks and the hard windows still apply) ([fraud.md](fraud.md#returning-users)).",
  },
  FRAUD_SOURCE_SENDS: {
    section: "fraud",
    text:
      "Unconverted sends one source (an IPv4 address, its /24, an IPv6 /64, a device id) may make in a UTC " +
      "day before it is refused (rule `source_fanout`; a conversion gives its send back and earns " +
      "FRAUD_CONVERSION_CREDIT more) " +
      "([fraud.md](fraud.md#sources)).",
  },
  FRAUD_SOURCE_COUNTRIES: {
    section: "fraud",
    text: "Countries one source may send codes to in a UTC day; one more is refused (rule `source_fanout`).",
  },
  FRAUD_SOURCE_SHARE: {
    section: "fraud",
    text:
      "Share of a surging destination's sends in the window that at most two sources must have made for " +
      "those sources to be refused (rule `source_fanout`) instead of the destination, for everyone.",
  },
  FRAUD_COUNTRY_SPREAD: {
    section: "fraud",
    text:
      "Networks or prefixes of a country refused by the destination rules in the window before the " +
      "country itself may be: below it, a surge or drop in one range refuses that range only " +
      "([fraud.md](fraud.md#narrowest-destination)).",
  },
  FRAUD_BASELINE_SHARE: {
    section: "fraud",
    text: "Share of a destination's busiest day of conversions (over the baseline) it may get per window.",
  },
  FRAUD_CONVERSION_CREDIT: {
    section: "fraud",
    text: "Sends each distinct converting number in the window earns its destination.",
  },
  FRAUD_GRACE_SECONDS: {
    section: "fraud",
    text: "Age after which a send without its code entered counts as unconverted.",
  },
  FRAUD_CONVERSION_MIN_SENDS: {
    section: "fraud",
    text: "Sends past the grace a destination needs in the window before its conversion is judged.",
  },
  FRAUD_CONVERSION_DROP: {
    section: "fraud",
    text:
      "A destination converting below this share of its own best day before today (else the tenant's) " +
      "is blocked (rule `conversion_drop`).",
  },
  FRAUD_PREFIX_DIGITS: {
    section: "fraud",
    text: "Digits after the `+` that form a number's prefix destination.",
  },
  FRAUD_DECISIONS_MAX: {
    section: "fraud",
    text: "Decision records kept per tenant (besides the 30 days each is kept at most).",
  },
  REPORTS_LIMIT_ACCOUNT: {
    section: "fraud",
    rule: WINDOW_RULE,
    text:
      "Reads of one account's fraud reports (`GET /v2/insights/verifications` and `GET /v2/fraud/decisions` " +
      "together, a page a read); past it 429 with `Retry-After` ([fraud.md](fraud.md#pages)).",
  },
  LOGIN_LIMIT_APP: {
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Login codes sent for one app to identifiers no user of the app holds yet; codes to the app's users " +
      "are neither counted nor refused.",
  },
  LOGIN_LIMIT_IP: {
    section: "session",
    rule: WINDOW_RULE,
    text: "Login codes asked from one client address, per app.",
  },
  APP_SMS_DAILY_LIMIT: {
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Login SMS of one app to numbers no user of the app holds yet; codes to the app's users (step-up " +
      "codes among them) are neither counted nor refused.",
  },
  STEPUP_LIMIT_USER: {
    section: "session",
    rule: WINDOW_RULE,
    text: "Step-up challenges opened (codes sent) and delegation hooks called, per user.",
  },
  STEPUP_LIMIT_SESSION: {
    section: "session",
    rule: WINDOW_RULE,
    text: "Step-up challenges and hook calls per session.",
  },
  OTP_CHECK_LIMIT: {
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Code checks per user across its step-up challenges (per identifier for logins; a known source of it " +
      "has a window of its own).",
  },
  TOKEN_FAILURES_CLIENT: {
    section: "session",
    rule: WINDOW_RULE,
    text: "Failed client authentications of one `client_id` at the token, introspection and revocation endpoints.",
  },
  TOKEN_FAILURES_IP: {
    section: "session",
    rule: WINDOW_RULE,
    text: "Failed client authentications from one client address at the token, introspection and revocation endpoints.",
  },
  API_KEY_FAILURES_IP: {
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Wrong account API keys (V1 `x-api-key`, V2 bearer) per client address; while the window is full " +
      "its wrong keys get 429 (V1: 400 `bad_request`) with `Retry-After`, and a right key is still served.",
  },
  PASSWORD_FAILURES_IDENTIFIER: {
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Failed password logins (`POST /v1/session/login/password`) per app and identifier; while the window " +
      "is full every password login of that identifier, right or wrong, gets 429 `too_many_attempts` with `Retry-After`, " +
      "except from a known source (a network that logged in as the identifier within 30 days), which meets a window of its own.",
  },
  PASSWORD_FAILURES_IP: {
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Failed password logins per client address, across apps; while the window is full every password " +
      "login from that address, right or wrong, gets 429 `too_many_attempts` with `Retry-After`.",
  },
  WEBHOOK_TIMEOUT_MS: { section: "webhooks", text: "Time a receiver has to answer one delivery." },
  WEBHOOK_BACKOFF_BASE_MS: {
    section: "webhooks",
    text: "First retry delay, doubled after each failure (less up to 20% jitter).",
  },
  WEBHOOK_BACKOFF_MAX_MS: { section: "webhooks", text: "Longest retry delay." },
  WEBHOOK_GIVE_UP_MS: {
    section: "webhooks",
    text: "Age after which an undelivered event is no longer retried (the default is 24 h).",
  },
  WEBHOOK_CONCURRENCY: { section: "webhooks", text: "Event streams delivered at once, per worker." },
  WEBHOOK_ENDPOINT_CONCURRENCY: {
    section: "webhooks",
    rule: "a whole number from 1 to 255, below `WEBHOOK_CONCURRENCY` (unset: 2, or less under a smaller `WEBHOOK_CONCURRENCY`)",
    text:
      "Event streams delivered at once to one endpoint (an account's or app subscription's receiver: " +
      "the scheme, host and port of its URL), per worker; the endpoint's other deliveries wait in the " +
      "queue without holding a slot. An endpoint that leaves 2 deliveries in a row unanswered is " +
      "paused, from `WEBHOOK_BACKOFF_BASE_MS` doubled at each pause in a row up to " +
      "`WEBHOOK_BACKOFF_MAX_MS`; its events are kept and delivered once it answers " +
      "([decisions.md](decisions.md#15-webhook-delivery)).",
  },
  WEBHOOK_SWEEP_INTERVAL_MS: {
    section: "webhooks",
    text: "How often undelivered streams are looked for after the sweep at start (`0`: only at start).",
  },
  SMS_HOLD_MARGIN_MS: {
    section: "holds",
    text: "A held message whose provider answer was never recorded is re-sent this long after the provider timeout.",
  },
  SMS_HOLD_RECOVERY_INTERVAL_MS: {
    section: "holds",
    text: "How often each instance (its worker 1) looks for such holds (`0`: only at start).",
  },
  WORKERS: {
    section: "workers",
    default: "the number of CPUs when `NODE_ENV=production`, else `1`",
    rule: `a whole number from 1 to ${MAX_WORKERS}, or \`auto\` (one per CPU)`,
    text:
      "Processes serving gRPC and REST on the same ports. `auto`, and the production default, count the " +
      "CPUs this process may run on (`os.availableParallelism()`), not a container's CPU quota: under a " +
      "quota, set `WORKERS` to it.",
  },
};

export interface Config extends Omit<z.infer<typeof schema>, "SECRETS_KEY" | "WORKERS"> {
  /** Processes that serve (node:cluster); 1 runs everything in this process. */
  WORKERS: number;
  /** 32 raw bytes that key the hashes of secrets and encrypt keys at rest. */
  SECRETS_KEY: Buffer;
  /** Settings that fall back to insecure development defaults, for the start-up warning. */
  devDefaults: string[];
}

/** Why each development default is unsafe, for the start-up warning and the production refusal. */
export const DEV_ONLY: Record<string, string> = {
  SECRETS_KEY: "unset, so a well-known development key protects secrets",
  SMS_PROVIDER: "the log provider prints codes instead of sending them",
  EMAIL_PROVIDER: "the log provider prints codes instead of sending them",
};

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** Settings whose value is never shown, not even in the error that refuses it. */
const SECRET_SETTINGS = new Set(["SECRETS_KEY"]);
/** Settings that may hold a URL with a password: shown with the password masked. */
const URL_SETTINGS = new Set(["REDIS_URL", "SMTP_URL", "SMPP_URL", "SMS_HTTP_URL", "EMAIL_HTTP_URL"]);

/** A value as a start-up error may quote it: never a secret, never a URL's password, never long. */
export function shownValue(name: string, value: string | undefined): string {
  if (value === undefined) return "unset";
  if (SECRET_SETTINGS.has(name)) return "a value (not shown: it is a secret)";
  let shown = value;
  if (URL_SETTINGS.has(name) && URL.canParse(value)) {
    const u = new URL(value);
    if (u.password !== "") {
      u.password = "***";
      shown = u.toString();
    }
  } else if (URL_SETTINGS.has(name)) {
    shown = value.replace(/:[^/@:]*@/, ":***@");
  }
  return JSON.stringify(shown.length > 80 ? `${shown.slice(0, 79)}\u2026` : shown);
}

/** A setting's schema without its default, optionality and transforms: what the input must be. */
function inputSchema(name: string): unknown {
  let s: unknown = (schema.shape as Record<string, unknown>)[name];
  for (;;) {
    if (s instanceof z.ZodDefault || s instanceof z.ZodOptional) s = s.unwrap();
    else if (s instanceof z.ZodPipe) s = s.in;
    else break;
  }
  return s;
}

/**
 * The rule of a number or a list of choices, read off the schema (`must be a whole number from 60
 * to 86400`); undefined for the others, whose rule is their schema's own message.
 */
export function schemaRule(name: string): string | undefined {
  const s = inputSchema(name);
  if (s instanceof z.ZodNumber) {
    const kind = s.isInt ? "a whole number" : "a number";
    const { minValue: min, maxValue: max } = s;
    if (min !== null && max !== null && Number.isFinite(min) && Number.isFinite(max))
      return `must be ${kind} from ${min} to ${max}`;
    if (min !== null && Number.isFinite(min)) return `must be ${kind} of at least ${min}`;
    return `must be ${kind}`;
  }
  if (s instanceof z.ZodEnum) return `must be one of: ${(s.options as string[]).join(", ")}`;
  return undefined;
}

/** A setting's default as the environment would spell it (`5/600`, `PremiumRate,SharedCost`), if any. */
export function schemaDefault(name: SettingName): string | undefined {
  const s: unknown = schema.shape[name];
  if (!(s instanceof z.ZodDefault)) return undefined;
  const value: unknown = s.def.defaultValue;
  if (value === null) return "off";
  if (Array.isArray(value)) return value.join(",");
  if (typeof value === "object") {
    const w = value as { limit?: unknown; windowSeconds?: unknown };
    if (typeof w.limit === "number" && typeof w.windowSeconds === "number")
      return `${w.limit}/${w.windowSeconds}`;
    return undefined;
  }
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean"
    ? String(value)
    : undefined;
}

/**
 * Reads and validates the environment; throws a ConfigError with one line naming the variable
 * and the rule it breaks, quoting the value only when it is not a secret.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const given = emptyAsUnset(env);
  const parsed = schema.safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? "environment");
    const rule = schemaRule(name) ?? issue?.message ?? "is not valid";
    throw new ConfigError(`invalid ${name}: ${rule} (got ${shownValue(name, env[name])})`);
  }
  const { SECRETS_KEY, WORKERS, ...rest } = parsed.data;
  const devDefaults = [
    ...(SECRETS_KEY === undefined ? ["SECRETS_KEY"] : []),
    ...(rest.SMS_PROVIDER === "log" ? ["SMS_PROVIDER"] : []),
    ...(rest.EMAIL_PROVIDER === "log" ? ["EMAIL_PROVIDER"] : []),
  ];
  if (rest.SMS_PROVIDER === "http" && rest.SMS_HTTP_URL === undefined) {
    throw new ConfigError("invalid SMS_HTTP_URL: required when SMS_PROVIDER=http");
  }
  if (rest.EMAIL_PROVIDER === "http" && rest.EMAIL_HTTP_URL === undefined) {
    throw new ConfigError("invalid EMAIL_HTTP_URL: required when EMAIL_PROVIDER=http");
  }
  if (rest.EMAIL_PROVIDER === "smtp" && rest.SMTP_URL === undefined) {
    throw new ConfigError("invalid SMTP_URL: required when EMAIL_PROVIDER=smtp");
  }
  if (rest.SMS_PROVIDER === "smpp" && rest.SMPP_URL === undefined) {
    throw new ConfigError("invalid SMPP_URL: required when SMS_PROVIDER=smpp");
  }
  if (rest.HTTP_HEADERS_TIMEOUT_MS > rest.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `invalid HTTP_HEADERS_TIMEOUT_MS: may not exceed HTTP_REQUEST_TIMEOUT_MS (${rest.HTTP_REQUEST_TIMEOUT_MS})`,
    );
  }
  if (rest.AUTHENTICATION_RETENTION_SECONDS < rest.OTP_TTL_SECONDS) {
    throw new ConfigError(
      `invalid AUTHENTICATION_RETENTION_SECONDS: must be at least OTP_TTL_SECONDS (${rest.OTP_TTL_SECONDS}) (got ${shownValue("AUTHENTICATION_RETENTION_SECONDS", env.AUTHENTICATION_RETENTION_SECONDS)})`,
    );
  }
  // One endpoint may not take every delivery slot: others' webhooks go on while it hangs. Unset, it
  // fits under a small WEBHOOK_CONCURRENCY, so a setting that started before still starts.
  if (given.WEBHOOK_ENDPOINT_CONCURRENCY === undefined) {
    rest.WEBHOOK_ENDPOINT_CONCURRENCY = Math.max(
      1,
      Math.min(rest.WEBHOOK_ENDPOINT_CONCURRENCY, rest.WEBHOOK_CONCURRENCY - 1),
    );
  } else if (rest.WEBHOOK_ENDPOINT_CONCURRENCY >= rest.WEBHOOK_CONCURRENCY) {
    throw new ConfigError(
      `invalid WEBHOOK_ENDPOINT_CONCURRENCY: must be below WEBHOOK_CONCURRENCY (${rest.WEBHOOK_CONCURRENCY}), or one endpoint that hangs could hold every delivery (got ${shownValue("WEBHOOK_ENDPOINT_CONCURRENCY", env.WEBHOOK_ENDPOINT_CONCURRENCY)})`,
    );
  }
  // An authentication's events are its webhook stream: they must outlive the delivery's retries.
  if (rest.AUTHENTICATION_RETENTION_SECONDS * 1000 < rest.WEBHOOK_GIVE_UP_MS) {
    throw new ConfigError(
      `invalid AUTHENTICATION_RETENTION_SECONDS: must cover WEBHOOK_GIVE_UP_MS (${rest.WEBHOOK_GIVE_UP_MS / 1000} s), or undelivered webhooks would be dropped (got ${shownValue("AUTHENTICATION_RETENTION_SECONDS", env.AUTHENTICATION_RETENTION_SECONDS)})`,
    );
  }
  const [weak] = devDefaults;
  if (rest.NODE_ENV === "production" && weak !== undefined) {
    throw new ConfigError(
      `invalid ${weak}: ${DEV_ONLY[weak] ?? "development only"}, refused when NODE_ENV=production`,
    );
  }
  if (rest.NODE_ENV === "production" && given.ISSUER_URL === undefined) {
    throw new ConfigError(
      "invalid ISSUER_URL: required when NODE_ENV=production (tokens, jwks_uri and the metadata name it)",
    );
  }
  return {
    ...rest,
    WORKERS: WORKERS ?? (rest.NODE_ENV === "production" ? availableParallelism() : 1),
    SECRETS_KEY: Buffer.from(SECRETS_KEY ?? DEV_SECRETS_KEY, "base64"),
    devDefaults,
  };
}

function emptyAsUnset(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""),
  );
}

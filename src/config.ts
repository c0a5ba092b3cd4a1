import { availableParallelism } from "node:os";
import { z } from "zod";
import { parseHttpUrl } from "./net/http-url.js";
import { isMailbox } from "./messaging/email-provider.js";
import { LINE_TYPES } from "./lookup/line-types.js";
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
    // Holds of charged V1 messages whose provider answer is not recorded yet (README, Verify).
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

    // Abuse limits of the session service (docs/settings.md#session-abuse-limits): codes sent, codes checked and
    // failed client authentications per window.
    STEPUP_LIMIT_USER: window.default({ limit: 10, windowSeconds: 3_600 }),
    STEPUP_LIMIT_SESSION: window.default({ limit: 5, windowSeconds: 900 }),
    OTP_CHECK_LIMIT: window.default({ limit: 10, windowSeconds: 900 }),
    LOGIN_LIMIT_APP: window.default({ limit: 1_000, windowSeconds: 3_600 }),
    LOGIN_LIMIT_IP: window.default({ limit: 10, windowSeconds: 3_600 }),
    TOKEN_FAILURES_CLIENT: window.default({ limit: 10, windowSeconds: 300 }),
    TOKEN_FAILURES_IP: window.default({ limit: 30, windowSeconds: 300 }),
    // Wrong account API keys (V1 x-api-key, V2 bearer) from one client address (docs/settings.md#session-abuse-limits).
    API_KEY_FAILURES_IP: window.default({ limit: 30, windowSeconds: 300 }),
    // gRPC peers (Envoy) whose x-forwarded-for names the client; empty: every caller is its own peer.
    TRUSTED_PROXY_CIDRS: cidrs.default([]),
    // Caller-supplied URLs may reach private or reserved addresses only inside these (section 7).
    OUTBOUND_ALLOWED_CIDRS: cidrs.default([]),
  })
  .strip();

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

/**
 * The rule a setting breaks, in words: for numbers and lists of choices it is read off the schema
 * (`must be a whole number from 60 to 86400`), for the others it is the schema's own message.
 */
function ruleOf(name: string, fallback: string): string {
  let s: unknown = (schema.shape as Record<string, unknown>)[name];
  for (;;) {
    if (s instanceof z.ZodDefault || s instanceof z.ZodOptional) s = s.unwrap();
    else if (s instanceof z.ZodPipe) s = s.in;
    else break;
  }
  if (s instanceof z.ZodNumber) {
    const kind = s.isInt ? "a whole number" : "a number";
    const { minValue: min, maxValue: max } = s;
    if (min !== null && max !== null && Number.isFinite(min) && Number.isFinite(max))
      return `must be ${kind} from ${min} to ${max}`;
    if (min !== null && Number.isFinite(min)) return `must be ${kind} of at least ${min}`;
    return `must be ${kind}`;
  }
  if (s instanceof z.ZodEnum) return `must be one of: ${(s.options as string[]).join(", ")}`;
  return fallback;
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
    const rule = ruleOf(name, issue?.message ?? "is not valid");
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

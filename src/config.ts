import { z } from "zod";

const port = z.coerce.number().int().min(0).max(65535);
const url = (protocols: readonly string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    `must be a URL (${protocols.join(" or ")})`,
  );

const DEV_SECRETS_KEY = Buffer.alloc(32, "ringfence-development-only-key!!").toString("base64");

const schema = z
  .object({
    NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
    GRPC_PORT: port.default(50051),
    HTTP_PORT: port.default(8080),
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
    ISSUER_URL: url(["http:", "https:"]).default("http://127.0.0.1:8080"),
    DOCS_URL: url(["http:", "https:"]).default("https://docs.ringfence.dev"),
    SECRETS_KEY: z
      .string()
      .refine((v) => Buffer.from(v, "base64").length === 32, "must be 32 bytes in base64")
      .optional(),
    V1_AFTER_SUNSET: z.enum(["serve", "gone"]).default("serve"),
    MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(10_485_760).default(65_536),
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
    LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  })
  .strip();

export interface Config extends Omit<z.infer<typeof schema>, "SECRETS_KEY"> {
  /** 32 raw bytes that key the hashes of secrets and encrypt keys at rest. */
  SECRETS_KEY: Buffer;
  /** Settings that fall back to insecure development defaults, for the start-up warning. */
  devDefaults: string[];
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** Reads and validates the environment; throws a ConfigError with one line naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(emptyAsUnset(env));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? "environment");
    throw new ConfigError(
      `invalid ${name}: ${issue?.message ?? "bad value"} (got ${JSON.stringify(env[name])})`,
    );
  }
  const { SECRETS_KEY, ...rest } = parsed.data;
  const devDefaults = SECRETS_KEY === undefined ? ["SECRETS_KEY"] : [];
  if (rest.NODE_ENV === "production" && devDefaults.length > 0) {
    throw new ConfigError(`invalid ${devDefaults.join(", ")}: must be set when NODE_ENV=production`);
  }
  return { ...rest, SECRETS_KEY: Buffer.from(SECRETS_KEY ?? DEV_SECRETS_KEY, "base64"), devDefaults };
}

function emptyAsUnset(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""),
  );
}

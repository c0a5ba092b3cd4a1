import { createHash } from "node:crypto";
import { Cluster, Redis, type RedisOptions } from "ioredis";
import type { RedisSettings } from "../settings/shared.js";
import { errorMessage, type Logger } from "../log.js";
import { tracingStarted } from "../observability/tracing.js";

export type RedisClient = Redis | Cluster;

/**
 * Fails commands fast while Redis is out of reach (callers get 503), instead of queueing them
 * for ever; reconnects in the background.
 */
/** How long a caller waits for a command's answer; scripts that charge refuse to run later. */
export const COMMAND_TIMEOUT_MS = 2_000;

const COMMON: RedisOptions = {
  maxRetriesPerRequest: 2,
  connectTimeout: 2_000,
  commandTimeout: COMMAND_TIMEOUT_MS,
  lazyConnect: true,
  // Commands issued in the same tick by concurrent calls share one socket write.
  enableAutoPipelining: true,
};

/** The prefix of every key (REDIS_KEY_PREFIX): what a key schema or a queue is named under. */
export function keyPrefix(config: Pick<RedisSettings, "REDIS_KEY_PREFIX">): string {
  return config.REDIS_KEY_PREFIX;
}

export function createRedis(config: Pick<RedisSettings, "REDIS_URL" | "REDIS_CLUSTER_NODES">): RedisClient {
  // A command sent in a batch that another call opened would be traced under that call's span:
  // while tracing runs, each command goes out on its own, in its own call's trace.
  const enableAutoPipelining = !tracingStarted();
  if (config.REDIS_CLUSTER_NODES !== undefined) {
    return new Cluster(clusterNodes(config.REDIS_CLUSTER_NODES), {
      redisOptions: { ...COMMON, enableAutoPipelining },
      lazyConnect: true,
      scaleReads: "master",
      enableAutoPipelining,
    });
  }
  return new Redis(config.REDIS_URL, { ...COMMON, enableAutoPipelining });
}

/** A connection for blocking consumers (the BullMQ worker), which must never give up on a command. */
export function createBlockingRedis(
  config: Pick<RedisSettings, "REDIS_URL" | "REDIS_CLUSTER_NODES">,
): RedisClient {
  // No commandTimeout: BullMQ's blocking fetch would hit it. Lazy: BullMQ duplicates it anyway.
  const options: RedisOptions = { maxRetriesPerRequest: null, connectTimeout: 2_000, lazyConnect: true };
  if (config.REDIS_CLUSTER_NODES !== undefined) {
    return new Cluster(clusterNodes(config.REDIS_CLUSTER_NODES), { redisOptions: options });
  }
  return new Redis(config.REDIS_URL, options);
}

/** How often a connection that keeps failing says so again (its first failure is said at once). */
export const REDIS_ERROR_REPEAT_MS = 30_000;

/**
 * A connection's errors as JSON lines of the log, few enough for an outage: one warn line when
 * it starts failing, one more per REDIS_ERROR_REPEAT_MS while it keeps failing (with how many
 * errors it saw since), and one info line when it is ready again. Without an `error` listener
 * ioredis would write each error's stack to stderr as plain text.
 */
export class RedisErrorReport {
  private failing = false;
  private saidAtMs = 0;
  private unsaid = 0;

  constructor(
    private readonly log: Logger,
    /** Which connection, as the lines name it (`client`): "main", "subscriber", ... */
    readonly client: string,
    private readonly repeatMs = REDIS_ERROR_REPEAT_MS,
  ) {}

  error(err: unknown): void {
    const error = errorMessage(err);
    const now = Date.now();
    if (!this.failing) {
      this.failing = true;
      this.saidAtMs = now;
      this.unsaid = 0;
      this.log.warn("redis connection error", { client: this.client, error });
    } else if (now - this.saidAtMs >= this.repeatMs) {
      this.log.warn("redis connection still failing", {
        client: this.client,
        error,
        errors: this.unsaid + 1,
      });
      this.saidAtMs = now;
      this.unsaid = 0;
    } else {
      this.unsaid += 1;
    }
  }

  ready(): void {
    if (!this.failing) return;
    this.failing = false;
    this.log.info("redis connection restored", { client: this.client, errors: this.unsaid });
  }
}

/**
 * Gives `connection` its error listener: errors and the recovery go to the log through a
 * RedisErrorReport named `client`; `onError` is told of every error (a metric).
 */
export function reportRedisErrors(
  connection: RedisClient,
  log: Logger,
  client: string,
  onError?: (err: Error) => void,
): RedisErrorReport {
  const report = new RedisErrorReport(log, client);
  connection.on("error", (err: Error) => {
    onError?.(err);
    report.error(err);
  });
  connection.on("ready", () => {
    report.ready();
  });
  return report;
}

function clusterNodes(nodes: string[]) {
  return nodes.map((n) => {
    const i = n.lastIndexOf(":");
    return { host: n.slice(0, i), port: Number(n.slice(i + 1)) };
  });
}

/**
 * Every key matching `pattern`, by SCAN on every primary of a Cluster (or the one server), in
 * batches as SCAN returns them. A key may come twice (SCAN's guarantee); callers are idempotent.
 */
export async function* scanKeys(redis: RedisClient, pattern: string, count = 1000): AsyncGenerator<string[]> {
  const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", count);
      cursor = next;
      if (keys.length > 0) yield keys;
    } while (cursor !== "0");
  }
}

/** Connects and checks the server answers; throws a one-line error when it does not. */
export async function connectRedis(redis: RedisClient): Promise<void> {
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    throw new Error(`Redis is not reachable: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
}

/**
 * A Lua script run with EVALSHA (EVAL once after a NOSCRIPT). Every key a script touches is
 * passed in KEYS and shares one hash tag, so the script runs on one Redis Cluster slot. Domains
 * define their scripts with `defineScript` (src/redis/script.ts), which names the inputs.
 */
export class LuaScript {
  readonly sha: string;
  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }

  async run(
    redis: RedisClient,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}

/** Key names: `<prefix><kind>:{<tag>}[:<suffix>]`. The braces are the Redis Cluster hash tag. */
export class Keys {
  constructor(private readonly prefix: string) {}

  key(kind: string, tag: string, ...suffix: string[]): string {
    // Concatenated, not joined from an array: a send names a dozen keys.
    let key = `${this.prefix}${kind}:{${tag}}`;
    for (const part of suffix) key += `:${part}`;
    return key;
  }
}

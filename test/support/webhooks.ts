import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { createLogger, type Logger } from "../../src/log.js";
import { Keys, type RedisClient } from "../../src/redis/client.js";
import { WebhookOutbox } from "../../src/webhooks/outbox.js";
import type { WebhookOutboxOptions } from "../../src/webhooks/options.js";
import { OutboundGuard } from "../../src/net/outbound.js";
import { appendWebhookEvent, newEnvelope } from "../../src/webhooks/stream.js";

export interface Received {
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** X-Webhook-Id of the request. */
  id: string;
  /** What the receiver answered; undefined while it holds the request. */
  status?: number;
}

/** A status, a status with headers, or "hang" (never answer). */
export type Answer = number | { status: number; headers?: Record<string, string> } | "hang";

export interface Receiver {
  url: string;
  requests: Received[];
  /** Decides each answer; may be swapped during a test. */
  answer: (req: Received, index: number) => Answer | Promise<Answer>;
  /** Ids of the requests answered 2xx, in the order they arrived. */
  accepted(): string[];
  /** Requests open now: arrived, and neither answered nor given up by the sender. */
  open: number;
  /** The most requests ever open at once. */
  peakOpen: number;
  close(): Promise<void>;
}

/** A real HTTP receiver on 127.0.0.1, recording every request with its exact body. */
export async function startReceiver(
  answer: (req: Received, index: number) => Answer | Promise<Answer> = () => 200,
): Promise<Receiver> {
  const requests: Received[] = [];
  const receiver: Receiver = {
    url: "",
    requests,
    answer,
    accepted: () => requests.filter((r) => r.status !== undefined && r.status < 300).map((r) => r.id),
    open: 0,
    peakOpen: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
  const server = createServer((req, res) => {
    receiver.open++;
    receiver.peakOpen = Math.max(receiver.peakOpen, receiver.open);
    // Answered, or the connection closed by the sender (its timeout): no longer open.
    res.on("close", () => {
      receiver.open--;
    });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const id = req.headers["x-webhook-id"];
      const r: Received = {
        method: req.method ?? "",
        headers: req.headers,
        body,
        id: typeof id === "string" ? id : "",
      };
      const index = requests.push(r) - 1;
      void Promise.resolve(receiver.answer(r, index)).then((a) => {
        if (a === "hang") return;
        const { status, headers } = typeof a === "number" ? { status: a, headers: {} } : a;
        r.status = status;
        res.writeHead(status, headers).end("ok");
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return receiver;
}

export interface LogEntry {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export function capturingLogger(): { log: Logger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  return { log: createLogger("debug", (line) => entries.push(JSON.parse(line) as LogEntry)), entries };
}

let run = 0;

/**
 * One test's world on a Redis: its own key prefix and queue prefix (so sweeps and jobs of other
 * tests stay out), a secret per hook, outboxes closed by `close()`.
 */
export class Harness {
  readonly keys: Keys;
  readonly queuePrefix: string;
  readonly secrets = new Map<string, string>();
  readonly logs = capturingLogger();
  private readonly outboxes: WebhookOutbox[] = [];
  private readonly receivers: Receiver[] = [];
  private readonly owned: RedisClient[] = [];

  constructor(
    readonly redis: RedisClient,
    readonly connection: WebhookOutboxOptions["connection"],
    queuePrefix?: string,
  ) {
    run++;
    this.keys = new Keys(`wh${run}:`);
    this.queuePrefix = queuePrefix ?? `{wh${run}:bull}`;
  }

  static forUrl(redisUrl: string): Harness {
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 2 });
    const h = new Harness(
      redis,
      () => new Redis(redisUrl, { maxRetriesPerRequest: null, lazyConnect: true }),
    );
    h.owned.push(redis);
    return h;
  }

  outbox(options: Partial<WebhookOutboxOptions> = {}): WebhookOutbox {
    const outbox = new WebhookOutbox({
      // The receivers of these tests live on loopback.
      outbound: new OutboundGuard("127.0.0.0/8"),
      redis: this.redis,
      connection: this.connection,
      keys: this.keys,
      queuePrefix: this.queuePrefix,
      resolveSecret: (ref) => Promise.resolve(this.secrets.get(ref)),
      log: this.logs.log,
      timeoutMs: 2_000,
      backoff: { baseMs: 50, maxDelayMs: 200 },
      sweepIntervalMs: 0,
      ...options,
    });
    this.outboxes.push(outbox);
    return outbox;
  }

  async receiver(answer?: (req: Received, index: number) => Answer | Promise<Answer>): Promise<Receiver> {
    const r = await startReceiver(answer);
    this.receivers.push(r);
    return r;
  }

  /** A stream key like the domain's: one hash tag per authentication. */
  stream(tag: string = randomUUID()): string {
    return this.keys.key("auth", tag, "events");
  }

  /**
   * What the domain's script does: append an envelope, set the hook, mark the stream pending. The
   * hook's `secret_ref` names its owner: one of its own unless given (an account's streams share one).
   */
  async append(list: string, url: string, n = 1, secretRef = `acct-${list}`): Promise<string[]> {
    if (!this.secrets.has(secretRef)) this.secrets.set(secretRef, `whsec_${randomUUID()}`);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      const envelope = newEnvelope({ id, type: "attempt", payload: { n: i, marker: `payload-${id}` } });
      await appendWebhookEvent(this.redis, this.keys, list, { url, secretRef }, envelope);
      ids.push(id);
    }
    return ids;
  }

  secretOf(list: string): string {
    const s = this.secrets.get(`acct-${list}`);
    if (s === undefined) throw new Error("no secret");
    return s;
  }

  async close(): Promise<void> {
    await Promise.all(this.outboxes.map((o) => o.close()));
    await Promise.all(this.receivers.map((r) => r.close()));
    for (const c of this.owned) c.disconnect();
  }
}

/** Polls until `check` holds; fails with `what` after `timeoutMs`. */
export async function eventually(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 8_000,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting: ${what}`);
    await sleep(25);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

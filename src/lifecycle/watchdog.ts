import type { Logger } from "../log.js";
import { elapsedMs } from "../observability/calls.js";
import type { RedisClient } from "../redis/client.js";

/**
 * Pings Redis about every second and says whether it answers (within a second), not merely
 * whether the socket is open: a hung (SIGSTOPped, overloaded) server keeps its socket.
 */
export class RedisWatchdog {
  up = true;
  /** Told of each PING's round trip, in seconds (the Redis latency metric). */
  onPing: ((seconds: number) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private pinging = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly log: Logger,
    private readonly onChange: (up: boolean) => void,
    private readonly everyMs = 1_000,
    private readonly timeoutMs = 1_000,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      void this.probe();
    }, this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async probe(): Promise<void> {
    if (this.pinging) return;
    this.pinging = true;
    try {
      const sent = process.hrtime.bigint();
      const answered = await within(
        this.redis.ping().then(
          () => this.onPing?.(elapsedMs(sent) / 1000),
          () => {
            throw new Error("no answer");
          },
        ),
        this.timeoutMs,
      ).catch(() => false);
      this.report(answered);
    } finally {
      this.pinging = false;
    }
  }

  report(up: boolean): void {
    if (up === this.up) return;
    this.up = up;
    if (up) this.log.info("redis answers again");
    else this.log.warn("redis does not answer: not serving");
    this.onChange(up);
  }
}

/** Resolves true when `p` settles within `ms`, false otherwise. */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  void p.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => {
      resolve(false);
    }, ms);
  });
  const done = await Promise.race([p.then(() => true as const), late]);
  clearTimeout(timer);
  return done;
}

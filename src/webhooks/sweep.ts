/**
 * The recovery sweep: kicks every stream left with undelivered envelopes (say by a crash), at start
 * and then periodically, and takes fully delivered ones out of their pending set.
 */
import { errorMessage, type Logger } from "../log.js";
import { scanKeys, type Keys, type RedisClient } from "../redis/client.js";
import { finish, position } from "./cursor.js";
import { allPendingSets, outboxKeys } from "./keys.js";

/** What a sweep needs from the outbox that runs it. */
export interface SweepNeeds {
  redis: RedisClient;
  keys: Keys;
  log: Logger;
  /** Period after the sweep at start; 0: only at start. */
  intervalMs: number;
  /** Asks for delivery of a stream (WebhookOutbox.kick). */
  kick: (list: string) => Promise<void>;
  /** True once the outbox is closing: no further sweep is scheduled. */
  closing: () => boolean;
}

export class RecoverySweep {
  private timer: NodeJS.Timeout | undefined;
  /** The sweep running now, if any; never rejects. */
  running: Promise<unknown> = Promise.resolve();

  constructor(private readonly needs: SweepNeeds) {}

  /**
   * Kicks every stream of a pending set whose cursor is behind its length, and takes fully delivered
   * ones out of their set. Pending sets are found by SCAN on every master. Returns how many it kicked.
   */
  async sweep(): Promise<number> {
    const { redis, keys } = this.needs;
    let kicked = 0;
    for await (const sets of scanKeys(redis, allPendingSets(keys))) {
      for (const set of sets) {
        for (const list of await redis.smembers(set)) {
          if (await this.recover(list)) kicked++;
        }
      }
    }
    return kicked;
  }

  /** Sweeps now, then every `intervalMs` until the outbox closes. */
  async start(): Promise<void> {
    await this.run();
    this.schedule();
  }

  /** Schedules no further sweep; one running goes on (see `running`). */
  cancel(): void {
    clearTimeout(this.timer);
  }

  private async recover(list: string): Promise<boolean> {
    const { redis, keys, log } = this.needs;
    try {
      const k = outboxKeys(list, keys);
      const { length, delivered } = await position(redis, list, k);
      if (delivered < length) {
        await this.needs.kick(list);
        return true;
      }
      await finish(redis, list, k);
    } catch (err) {
      log.warn("webhook stream not recovered", { list, error: errorMessage(err) });
    }
    return false;
  }

  private async run(): Promise<void> {
    const run = this.sweep().then((kicked) => {
      if (kicked > 0) this.needs.log.info("webhook streams recovered", { kicked });
    });
    this.running = run.catch(() => undefined);
    await run;
  }

  private schedule(): void {
    const every = this.needs.intervalMs;
    if (every <= 0 || this.needs.closing()) return;
    this.timer = setTimeout(() => {
      this.run()
        .catch((err: unknown) => {
          this.needs.log.warn("webhook sweep failed", { error: errorMessage(err) });
        })
        .finally(() => {
          this.schedule();
        });
    }, every);
    this.timer.unref();
  }
}

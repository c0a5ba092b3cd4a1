/** The jobs a worker holds, each until BullMQ has written its outcome, so that close can wait for them. */
import { DelayedError } from "bullmq";

/** How long after a job's processing ends its outcome's write is waited for, at most, by close. */
const OUTCOME_WAIT_MS = 1_000;

/** A job in hand: settled once BullMQ has written its outcome. */
export interface Held {
  settled: Promise<void>;
  settle: () => void;
}

export class JobsInHand {
  /** The jobs this worker holds, by BullMQ token, each settled once BullMQ wrote its outcome. */
  private readonly inHand = new Map<string, Held>();

  /** Runs a job, counted in hand until BullMQ has written its outcome (see WebhookOutbox.close). */
  async hold(token: string | undefined, run: () => Promise<string>): Promise<string> {
    const key = token ?? "";
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const held: Held = { settled, settle };
    this.inHand.set(key, held);
    try {
      return await run();
    } catch (err) {
      // Put back with moveToDelayed already: BullMQ writes nothing more for it.
      if (err instanceof DelayedError) this.release(key, held);
      throw err;
    } finally {
      // BullMQ writes the outcome in one round trip and then says so ("completed", "failed");
      // should that write fail (its "error" event says why), the job is not waited for longer.
      setTimeout(() => {
        this.release(key, held);
      }, OUTCOME_WAIT_MS).unref();
    }
  }

  /** Settles the job held under `token` (only if it is still `held`, when given). */
  release(token: string | undefined, held?: Held): void {
    const current = this.inHand.get(token ?? "");
    if (current === undefined || (held !== undefined && current !== held)) return;
    this.inHand.delete(token ?? "");
    current.settle();
  }

  /** Settles once no job is in hand (a job taken meanwhile, while closing, is put back at once). */
  async done(): Promise<void> {
    while (this.inHand.size > 0) await Promise.all([...this.inHand.values()].map((h) => h.settled));
  }
}

import { performance } from "node:perf_hooks";
import { refusedBy, type RingfenceError } from "../errors.js";
import { tooManyAttempts } from "../otp/code.js";

/** The pause after a report call of an account that others wait behind, per ms the call took. */
const PAUSE_PER_MS_TAKEN = 2;
/** The longest pause between two report calls of one account. */
const MOST_PAUSE_MS = 1000;

/**
 * The report calls of one account, run one after the other on this instance (docs/fraud.md#pages):
 * however many an account makes at once, its pages are built one at a time, and a call that
 * waited starts only after a pause twice as long as the call before it took (at most a second).
 * An account's burst of reads thus takes at most a third of the process's time, and its
 * neighbours' calls keep their pace; a single read waits for nothing. At most `most` calls of an account wait
 * or run; one more is refused with 429 (the rule named `rule`) until one of them is answered.
 */
export class AccountLanes {
  private readonly lanes = new Map<string, { tail: Promise<void>; calls: number }>();

  constructor(
    private readonly most: number,
    private readonly rule: string,
  ) {}

  async run<T>(account: string, work: () => Promise<T>): Promise<T> {
    let lane = this.lanes.get(account);
    if (lane === undefined) {
      lane = { tail: Promise.resolve(), calls: 0 };
      this.lanes.set(account, lane);
    }
    if (lane.calls >= this.most) throw this.busy();
    lane.calls += 1;
    const before = lane.tail;
    let release: () => void = () => undefined;
    lane.tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    let tookMs = 0;
    try {
      await before;
      const t0 = performance.now();
      try {
        return await work();
      } finally {
        tookMs = performance.now() - t0;
      }
    } finally {
      // The account's next call waits twice as long as this one took: its calls take at most a
      // third of the time, whatever their number, and a single read waits for nothing.
      if (lane.calls > 1) setTimeout(release, Math.min(PAUSE_PER_MS_TAKEN * tookMs, MOST_PAUSE_MS));
      else release();
      lane.calls -= 1;
      if (lane.calls === 0) this.lanes.delete(account);
    }
  }

  private busy(): RingfenceError {
    return refusedBy(
      this.rule,
      tooManyAttempts(`${this.most} reads of this account's reports are already running or waiting`, 1000),
    );
  }
}

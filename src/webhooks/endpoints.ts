import { parseHttpUrl } from "../net/http-url.js";

/**
 * An endpoint is one owner's receiver: the hook's `secret_ref` (the account, or the app's webhook
 * subscription) with the origin (scheme, host, port) of its URL. The origin, not the whole URL,
 * because what hangs is a host, all of its paths with it, and a V1 `callback_url` that names the
 * authentication in its path or query must not make every send an endpoint of its own; the
 * owner, because accounts that share a host (a hosted automation service) must not share one
 * share of the outbox, nor one pause. Undefined when the URL is not http(s) (never POSTed).
 */
export function endpointOf(hook: {
  url?: string | undefined;
  secret_ref?: string | undefined;
}): string | undefined {
  const parsed = hook.url === undefined ? undefined : parseHttpUrl(hook.url);
  return parsed === undefined ? undefined : `${hook.secret_ref ?? ""} ${parsed.origin}`;
}

export interface EndpointSchedulerOptions {
  /** POSTs in flight at once to one endpoint (WEBHOOK_ENDPOINT_CONCURRENCY). */
  concurrency: number;
  /** First pause of an endpoint that does not answer; doubled at each pause in a row. */
  pauseBaseMs: number;
  /** Longest pause. */
  pauseMaxMs: number;
  /** Longest a delivery is put back for while its endpoint is busy (or past the end of a pause). */
  parkMaxMs: number;
}

/** Whether a delivery may POST now, or how long it is put back for and why. */
export type Turn = { run: true } | { run: false; delayMs: number; reason: "busy" | "paused" };

/** POSTs in a row an endpoint leaves unanswered (timed out, connection failed) before it is paused. */
const PAUSE_AFTER = 2;
/** How many deliveries an endpoint queues within RANK_WINDOW_MS in plain arrival order. */
const FIFO_RANKS = 10;
const RANK_WINDOW_MS = 60_000;
/** The highest BullMQ priority (2^21 - 1); a larger one is refused. */
const MAX_PRIORITY = 2 ** 21 - 1;
/** A slot's expected hold before the endpoint has answered anything. */
const FIRST_SLOT_MS = 100;
/** Weight of the newest POST in the expected hold of a slot. */
const SLOT_WEIGHT = 0.25;
const PAUSE_JITTER = 0.2;
/** Endpoints remembered before idle ones are forgotten (at most once a second). */
const PRUNE_ABOVE = 1_024;

interface EndpointState {
  inFlight: number;
  /** Expected time a POST holds a slot: a moving average of the endpoint's POSTs. */
  slotMs: number;
  /** When the last delivery put back is expected to find a slot: each one put back goes after it. */
  nextFreeAt: number;
  /** POSTs in a row that got no answer. */
  unanswered: number;
  pausedUntil: number;
  /** Start of the window deliveries are ranked in, and how many were queued in it. */
  windowStart: number;
  queued: number;
}

/**
 * The per-endpoint share of one process's webhook deliveries (docs/decisions.md#15-webhook-delivery),
 * after Svix, which throttles and disables per endpoint: at most `concurrency` POSTs in flight to one
 * endpoint; past that a delivery is put back (parked) for about when a slot should be free, so it
 * holds none of the process's delivery slots while it waits. An endpoint that leaves PAUSE_AFTER
 * POSTs in a row unanswered is paused with exponential backoff; its deliveries are parked until the
 * pause ends, then one POST probes it, and the first answer of any status lifts the pause.
 * In-process only: each worker keeps its own view, nothing of it needs to survive a restart.
 */
export class EndpointScheduler {
  private readonly states = new Map<string, EndpointState>();
  private prunedAt = 0;

  constructor(private readonly options: EndpointSchedulerOptions) {}

  /**
   * The BullMQ priority of a delivery queued now for `endpoint`: 0 (plain arrival order) for the
   * endpoint's first FIFO_RANKS in a minute, then its rank, so that its nth delivery waits behind
   * every other endpoint's first n - 1 (BullMQ serves unprioritized jobs first, then by priority).
   */
  priority(endpoint: string, now: number): number {
    const s = this.state(endpoint, now);
    if (now - s.windowStart >= RANK_WINDOW_MS) {
      s.windowStart = now;
      s.queued = 0;
    }
    s.queued++;
    return s.queued <= FIFO_RANKS ? 0 : Math.min(s.queued, MAX_PRIORITY);
  }

  /** Takes a slot of `endpoint` (give it back with `done`), or says how long to park the delivery. */
  take(endpoint: string, now: number): Turn {
    const s = this.state(endpoint, now);
    if (s.pausedUntil > now) return this.park(s, now, "paused");
    if (s.inFlight >= this.limit(s)) return this.park(s, now, "busy");
    s.inFlight++;
    return { run: true };
  }

  /** Gives back a slot taken by `take`. */
  done(endpoint: string): void {
    const s = this.states.get(endpoint);
    if (s !== undefined && s.inFlight > 0) s.inFlight--;
  }

  /**
   * One POST to `endpoint` ended after `ms`, answered (any status) or not (timed out, connection
   * failed). Returns how long the endpoint is now paused for, when this POST paused it.
   */
  posted(endpoint: string, answered: boolean, ms: number, now: number): number | undefined {
    const s = this.state(endpoint, now);
    if (answered && s.unanswered > 0) {
      // Back: what its silence taught says nothing of how soon it answers now, and the deliveries
      // parked behind it are put back at the new pace as they come.
      s.slotMs = Math.max(1, ms);
      s.nextFreeAt = now;
    } else {
      s.slotMs += SLOT_WEIGHT * (Math.max(1, ms) - s.slotMs);
    }
    if (answered) {
      s.unanswered = 0;
      s.pausedUntil = 0;
      return undefined;
    }
    s.unanswered++;
    if (s.unanswered < PAUSE_AFTER) return undefined;
    const { pauseBaseMs, pauseMaxMs } = this.options;
    const doublings = Math.min(s.unanswered - PAUSE_AFTER, 40);
    const pauseMs = Math.max(
      1,
      Math.round(Math.min(pauseMaxMs, pauseBaseMs * 2 ** doublings) * (1 - PAUSE_JITTER * Math.random())),
    );
    s.pausedUntil = now + pauseMs;
    return pauseMs;
  }

  /** Endpoints paused now. */
  paused(now: number): number {
    let n = 0;
    for (const s of this.states.values()) if (s.pausedUntil > now) n++;
    return n;
  }

  /** POSTs allowed at once: one (a probe) while the endpoint's last POSTs went unanswered. */
  private limit(s: EndpointState): number {
    return s.unanswered >= PAUSE_AFTER ? 1 : this.options.concurrency;
  }

  /**
   * Parks a delivery behind those already parked for the endpoint: each one goes a slot's expected
   * hold (shared by its slots) after the one before, from the end of a pause, and never later than
   * parkMaxMs after it (a parked delivery that still finds no slot is parked again).
   */
  private park(s: EndpointState, now: number, reason: "busy" | "paused"): Turn {
    const from = Math.max(now, s.pausedUntil);
    const next = Math.max(from, s.nextFreeAt) + s.slotMs / this.limit(s);
    s.nextFreeAt = Math.min(next, from + this.options.parkMaxMs);
    return { run: false, delayMs: Math.max(1, Math.round(s.nextFreeAt - now)), reason };
  }

  private state(endpoint: string, now: number): EndpointState {
    let s = this.states.get(endpoint);
    if (s === undefined) {
      this.prune(now);
      s = {
        inFlight: 0,
        slotMs: FIRST_SLOT_MS,
        nextFreeAt: 0,
        unanswered: 0,
        pausedUntil: 0,
        windowStart: now,
        queued: 0,
      };
      this.states.set(endpoint, s);
    }
    return s;
  }

  /** Forgets endpoints with nothing in flight, parked, paused or ranked, once there are many. */
  private prune(now: number): void {
    if (this.states.size < PRUNE_ABOVE || now - this.prunedAt < 1_000) return;
    this.prunedAt = now;
    for (const [endpoint, s] of this.states) {
      const idle =
        s.inFlight === 0 &&
        s.unanswered === 0 &&
        s.pausedUntil <= now &&
        s.nextFreeAt <= now &&
        now - s.windowStart >= RANK_WINDOW_MS;
      if (idle) this.states.delete(endpoint);
    }
  }
}

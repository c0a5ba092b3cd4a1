/** What one load run of one cell against one target measured. */
export interface LoadResult {
  /** Calls answered 2xx (gRPC: OK). */
  ok: number;
  /** Calls answered otherwise, or failed (connection error, timeout). */
  failed: number;
  /** Wall time of the run. */
  seconds: number;
  /** ok / seconds. */
  rps: number;
  /** Latency percentiles of every answered call, in ms. */
  p50: number;
  p99: number;
  /** Answers by V1 `status` (send, check) or by HTTP / gRPC status. */
  statuses: Record<string, number>;
  /** Requests built, answered or not (the check pool is consumed by it). */
  issued: number;
  /** Send: the authentications made, for the checks and read-backs that follow. */
  authUuids?: string[];
  /** The first few failures, for the report. */
  errors: string[];
  /**
   * CPU time the server's processes spent per call it answered in the run, in µs (bench/cpu.ts);
   * set by the bench where /proc exists.
   */
  serverCpuUs?: number;
  /** Redis's CPU per call answered in the same run (user and system time of redis-server). */
  redisCpuUs?: number;
}

/** A growable list of latencies in ms, and its percentiles (nearest rank). */
export class Latencies {
  private values = new Float64Array(1 << 16);
  private n = 0;

  add(ms: number): void {
    if (this.n === this.values.length) {
      const bigger = new Float64Array(this.values.length * 2);
      bigger.set(this.values);
      this.values = bigger;
    }
    this.values[this.n++] = ms;
  }

  percentiles(...ps: number[]): number[] {
    const sorted = this.values.slice(0, this.n).sort();
    return ps.map((p) =>
      this.n === 0 ? NaN : (sorted[Math.min(this.n - 1, Math.ceil((p / 100) * this.n) - 1)] ?? NaN),
    );
  }
}

/** The middle value (the lower middle of an even count). */
export function medianBy<T>(items: T[], key: (t: T) => number): T | undefined {
  const sorted = [...items].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

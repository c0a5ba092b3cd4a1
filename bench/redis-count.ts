import type { Redis } from "ioredis";
import type { RedisRoundTrips } from "./redis-proxy.js";

/** Redis work per call of one cell, from a sequential run less the background of an idle period. */
export interface RedisCount {
  calls: number;
  /** Commands Redis executed per call (INFO commandstats), those run inside Lua scripts included. */
  commands: number;
  /** The same by command name, for the JSON report. */
  byCommand: Record<string, number>;
  /** Bytes the service wrote to Redis per call (every command as sent, keys and arguments included). */
  bytesWritten: number;
  /** Client-to-server bursts per call over every connection of the service, whenever they happen. */
  roundTrips: number;
  /**
   * Round trips the answer waited for: how much the median call lengthens per ms added to the
   * delay of every Redis answer (from 5 to 15 ms, as the answers really got it). Work not awaited (fire-and-forget) adds nothing.
   */
  answerPathRoundTrips: number;
}

/** Calls per command name so far, the bench's own INFO left out. */
async function commandStats(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info("commandstats");
  const stats = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== undefined && m[1] !== "info") stats.set(m[1], Number(m[2]));
  }
  return stats;
}

function delta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const d = new Map<string, number>();
  for (const [name, n] of after) {
    const diff = n - (before.get(name) ?? 0);
    if (diff !== 0) d.set(name, diff);
  }
  return d;
}

/** The delays added to every Redis answer in the second and third runs. */
const DELAYS_MS = [5, 15] as const;

/** Calls made before counting (`call(calls)` onwards), so that a first call's caching is not counted. */
export const WARMUP_CALLS = 10;

const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Makes `calls` calls one after the other (`call(i)`), then waits as long again with nothing
 * sent, and returns the Redis commands and round trips per call, the idle period's subtracted;
 * then makes `calls` more with every Redis answer delayed (half by 5 ms, half by 15), for the
 * round trips awaited. Indexes `0` to `2 * calls + WARMUP_CALLS` are used. `stats` is a direct connection to Redis (its INFO
 * does not pass the proxy).
 */
export async function countRedisWork(
  stats: Redis,
  proxy: RedisRoundTrips,
  calls: number,
  call: (i: number) => Promise<void>,
): Promise<RedisCount> {
  for (let i = calls; i < calls + WARMUP_CALLS; i++) await call(i);
  // Let work left behind (off the answer path) finish first.
  await sleep(100);
  const statsBefore = await commandStats(stats);
  const burstsBefore = proxy.count();
  const bytesBefore = proxy.written();
  const started = performance.now();
  await timed(calls, call, 0);
  // Work started by the last call after its answer belongs to it too.
  await sleep(50);
  const busyMs = performance.now() - started;
  const statsAfter = await commandStats(stats);
  const bursts = proxy.count() - burstsBefore;
  const bytes = proxy.written() - bytesBefore;

  const idleStatsBefore = await commandStats(stats);
  const idleBurstsBefore = proxy.count();
  const idleBytesBefore = proxy.written();
  await sleep(busyMs);
  const idleStats = delta(idleStatsBefore, await commandStats(stats));
  const idleBursts = proxy.count() - idleBurstsBefore;
  const idleBytes = proxy.written() - idleBytesBefore;

  // Two delays: what a delayed answer costs besides the delay (waking an idle process) cancels out.
  const half = Math.max(10, Math.floor(calls / 2));
  const slow = async (delayMs: number, from: number) => {
    proxy.delayMs = delayMs;
    proxy.takeMeanDelay();
    const median = await timed(half, call, from);
    proxy.delayMs = 0;
    return { median, unit: proxy.takeMeanDelay() };
  };
  const short = await slow(DELAYS_MS[0], calls + WARMUP_CALLS);
  const long = await slow(DELAYS_MS[1], calls + WARMUP_CALLS + half);

  const work = delta(statsBefore, statsAfter);
  const byCommand: Record<string, number> = {};
  for (const [name, n] of work) {
    const perCall = (n - (idleStats.get(name) ?? 0)) / calls;
    if (Math.abs(perCall) >= 0.005) byCommand[name] = round(perCall);
  }
  return {
    calls,
    commands: round((sum(work) - sum(idleStats)) / calls),
    byCommand,
    bytesWritten: Math.round((bytes - idleBytes) / calls),
    roundTrips: round((bursts - idleBursts) / calls),
    answerPathRoundTrips: round((long.median - short.median) / (long.unit - short.unit)),
  };
}

/** Makes calls `from` to `from + calls - 1` one after the other; resolves their median duration in ms. */
async function timed(calls: number, call: (i: number) => Promise<void>, from: number): Promise<number> {
  const ms: number[] = [];
  for (let i = from; i < from + calls; i++) {
    const t0 = performance.now();
    await call(i);
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return ms[Math.floor(ms.length / 2)] ?? NaN;
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

// `ringfence fraud simulate`: replays a labelled traffic file through the real engine (judge.lua,
// convert.lua) on the engine's own clock, in a Redis namespace of its own that is deleted after
// the run (docs/fraud.md#try-a-policy-simulate).
import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { Secrets } from "../crypto/secrets.js";
import { parseE164 } from "../phone/e164.js";
import { Keys, scanKeys, type RedisClient } from "../redis/client.js";
import { FRAUD_APIS, FraudEngine, type Destination, type FraudApi, type FraudSettings } from "./engine.js";

/** The tenant modes a simulation can take. */
export const SIMULATE_MODES = ["enforce", "shadow"] as const;
export type SimulateMode = (typeof SIMULATE_MODES)[number];

const LABELS = ["legit", "fraud"] as const;
type Label = (typeof LABELS)[number];

const FIELDS = new Set([
  "at",
  "api",
  "tenant",
  "phone_number",
  "ip",
  "device_id",
  "verified_after_s",
  "label",
]);

/** One line of the traffic file, checked. */
export interface TrafficLine {
  /** 1-based line number in the file. */
  line: number;
  atMs: number;
  api: FraudApi;
  tenant: string;
  e164: string;
  ip?: string;
  deviceId?: string;
  /** Milliseconds after the send at which its code is entered; null: never. */
  verifiedAfterMs: number | null;
  label?: Label;
}

/** A traffic file that cannot be replayed: names the line and the field. */
export class TrafficError extends Error {}

// RFC 3339 date-time: the date, T, the time (seconds required, fraction optional), Z or an offset.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** Milliseconds since the epoch of an RFC 3339 time, or undefined (a 30 February included). */
export function parseRfc3339(value: string): number | undefined {
  const m = RFC3339.exec(value);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMin = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMin = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(`0${m[7]}`) * 1000);
  const utc = new Date(0);
  utc.setUTCFullYear(year, month - 1, day);
  utc.setUTCHours(hour, minute, second, fraction);
  return utc.getTime() - offsetMin * 60_000;
}

/**
 * Checks every line of a traffic file (one JSON object a line; blank lines are skipped) before
 * anything runs. Throws a TrafficError naming the first bad line and its field.
 */
export function parseTraffic(text: string): TrafficLine[] {
  const lines: TrafficLine[] = [];
  for (const [i, row] of text.split("\n").entries()) {
    const raw = row.trim();
    if (raw !== "") lines.push(parseLine(raw, i + 1));
  }
  return lines;
}

function parseLine(raw: string, line: number): TrafficLine {
  const fail = (field: string, problem: string): never => {
    throw new TrafficError(`line ${line}: ${field} ${problem}`);
  };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return fail("the line", "is not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return fail("the line", "is not a JSON object");
  }
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!FIELDS.has(key)) fail(JSON.stringify(key), "is not a field of a traffic line");
  }

  const at = o.at;
  if (at === undefined) fail("at", "is missing");
  const atMs = typeof at === "string" ? parseRfc3339(at) : undefined;
  if (atMs === undefined) return fail("at", `${shown(at)} is not an RFC 3339 time`);

  const api = o.api;
  if (api === undefined) fail("api", "is missing");
  if (!FRAUD_APIS.includes(api as FraudApi))
    fail("api", `${shown(api)} is not one of ${FRAUD_APIS.join(", ")}`);

  const tenant = o.tenant;
  if (tenant === undefined) fail("tenant", "is missing");
  if (typeof tenant !== "string" || !/^[^\s{}]{1,200}$/.test(tenant)) {
    fail("tenant", `${shown(tenant)} is not 1 to 200 characters without spaces or braces`);
  }

  const phone = o.phone_number;
  if (phone === undefined) fail("phone_number", "is missing");
  const parsed = typeof phone === "string" ? parseE164(phone) : undefined;
  if (parsed === undefined) return fail("phone_number", `${shown(phone)} is not a valid E.164 number`);

  const ip = o.ip;
  if (ip !== undefined && (typeof ip !== "string" || isIP(ip) === 0)) {
    fail("ip", `${shown(ip)} is not an IP address`);
  }
  const device = o.device_id;
  if (device !== undefined && (typeof device !== "string" || device === "" || device.length > 200)) {
    fail("device_id", `${shown(device)} is not a string of 1 to 200 characters`);
  }

  if (!("verified_after_s" in o)) fail("verified_after_s", "is missing (a number of seconds, or null)");
  const after = o.verified_after_s;
  if (after !== null && (typeof after !== "number" || !Number.isFinite(after) || after < 0)) {
    fail("verified_after_s", `${shown(after)} is not a number of seconds at least 0, or null`);
  }

  const label = o.label;
  if (label !== undefined && !LABELS.includes(label as Label)) {
    fail("label", `${shown(label)} is not one of ${LABELS.join(", ")}`);
  }

  return {
    line,
    atMs,
    api: api as FraudApi,
    tenant: tenant as string,
    e164: parsed.e164,
    ...(ip === undefined ? {} : { ip: ip as string }),
    ...(device === undefined ? {} : { deviceId: device as string }),
    verifiedAfterMs: after === null ? null : Math.round((after as number) * 1000),
    ...(label === undefined ? {} : { label: label as Label }),
  };
}

function shown(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** What `ringfence fraud simulate` prints; the first six are the contract's (docs/fraud.md#try-a-policy-simulate). */
export interface SimulateReport {
  sends: number;
  blocked: number;
  fraud_sends: number;
  fraud_blocked: number;
  legit_sends: number;
  legit_blocked: number;
  /** Sends shadow mode let through that enforce would have refused. */
  would_block: number;
  fraud_would_block: number;
  legit_would_block: number;
  /** Conversions counted (codes entered of sends that went out). */
  verified: number;
  /** Blocks and would-blocks by rule. */
  rules: Record<string, number>;
  mode: SimulateMode;
}

/** A line and where its number goes. */
interface Send {
  line: TrafficLine;
  d: Destination;
}

/** One pending code entry: when, and for which send. */
interface Conversion {
  atMs: number;
  seq: number;
  send: Send;
}

/**
 * The pending code entries, in time order, then in the order of their sends. Few at a time (codes
 * entered within seconds), so a sorted array is enough.
 */
class ConversionQueue {
  private readonly items: Conversion[] = [];

  push(c: Conversion): void {
    let low = 0;
    let high = this.items.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      const m = this.items[mid];
      if (m !== undefined && (m.atMs < c.atMs || (m.atMs === c.atMs && m.seq < c.seq))) low = mid + 1;
      else high = mid;
    }
    this.items.splice(low, 0, c);
  }

  /** The first entry due at or before `atMs` (all of them without it), taken off the queue. */
  next(atMs = Infinity): Conversion | undefined {
    const first = this.items[0];
    if (first === undefined || first.atMs > atMs) return undefined;
    return this.items.shift();
  }
}

/**
 * Replays checked traffic through the engine, in time order, each send judged at its own `at`
 * (judge.lua, as session codes are judged) and each code entered at `at + verified_after_s` when
 * its send was not blocked (convert.lua), between the sends in time order. Every key lives under
 * `prefix` (see simulationPrefix in keys.ts), all of them deleted when the run ends, failed or not.
 */
export async function simulate(
  traffic: readonly TrafficLine[],
  deps: { redis: RedisClient; prefix: string; config: FraudSettings; mode: SimulateMode },
): Promise<SimulateReport> {
  const { redis, prefix, config, mode } = deps;
  // Its numbers are remembered under a key of its own: every key is deleted when it ends.
  const engine = new FraudEngine({
    redis,
    keys: new Keys(prefix),
    config,
    secrets: new Secrets(randomBytes(32)),
  });
  // Where each number goes, as the service computes it (parseE164, describeNumber), before any write.
  const destinations = new Map<string, Destination>();
  const sends: Send[] = [];
  for (const line of traffic) {
    let d = destinations.get(line.e164);
    if (d === undefined) {
      const phone = parseE164(line.e164);
      if (phone === undefined) throw new TrafficError(`line ${line.line}: phone_number is not valid`);
      d = await engine.destinationOf(phone);
      destinations.set(line.e164, d);
    }
    sends.push({ line, d });
  }
  sends.sort((a, b) => a.line.atMs - b.line.atMs || a.line.line - b.line.line);
  const report: SimulateReport = {
    sends: 0,
    blocked: 0,
    fraud_sends: 0,
    fraud_blocked: 0,
    legit_sends: 0,
    legit_blocked: 0,
    would_block: 0,
    fraud_would_block: 0,
    legit_would_block: 0,
    verified: 0,
    rules: {},
    mode,
  };
  const pending = new ConversionQueue();
  const windowMs = config.FRAUD_WINDOW_SECONDS * 1000;
  const convert = async ({ send, atMs }: Conversion) => {
    if (await engine.converted(send.line.api, send.line.tenant, send.d, atMs)) report.verified++;
  };
  try {
    if (mode === "shadow") {
      const keepMs = (config.FRAUD_BASELINE_DAYS + 1) * 86_400_000;
      for (const tenant of new Set(sends.map((s) => s.line.tenant))) {
        const policy = engine.keys.policy(tenant);
        await redis.hset(policy, "mode", "shadow");
        await redis.pexpire(policy, keepMs);
      }
    }
    for (const [seq, send] of sends.entries()) {
      const { line, d } = send;
      for (let due = pending.next(line.atMs); due !== undefined; due = pending.next(line.atMs)) {
        await convert(due);
      }
      const decision = await engine.judge(line.api, line.tenant, d, line.atMs, {
        ip: line.ip ?? "",
        deviceId: line.deviceId ?? "",
      });
      report.sends++;
      if (line.label === "fraud") report.fraud_sends++;
      if (line.label === "legit") report.legit_sends++;
      if (decision.action === "block") {
        report.blocked++;
        if (line.label === "fraud") report.fraud_blocked++;
        if (line.label === "legit") report.legit_blocked++;
      } else if (decision.action === "would_block") {
        report.would_block++;
        if (line.label === "fraud") report.fraud_would_block++;
        if (line.label === "legit") report.legit_would_block++;
      }
      if (decision.action !== "allow") report.rules[decision.rule] = (report.rules[decision.rule] ?? 0) + 1;
      // As in the service, a code entered once its send left the window converts nothing.
      const converts = line.verifiedAfterMs !== null && line.verifiedAfterMs < windowMs;
      if (decision.action !== "block" && converts) {
        pending.push({ atMs: line.atMs + (line.verifiedAfterMs ?? 0), seq, send });
      }
    }
    for (let due = pending.next(); due !== undefined; due = pending.next()) await convert(due);
  } finally {
    await dropNamespace(redis, prefix);
  }
  return report;
}

/** Deletes every key under `prefix`, on every primary of a Cluster (scanKeys). */
export async function dropNamespace(redis: RedisClient, prefix: string): Promise<void> {
  for await (const keys of scanKeys(redis, `${prefix}*`, 1000)) {
    // One key a command: a Cluster's keys of several tenants sit in several slots.
    await Promise.all(keys.map((k) => redis.unlink(k)));
  }
}

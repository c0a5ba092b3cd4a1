// A labelled traffic scenario for the fraud engine: the lines `ringfence fraud simulate` replays
// (docs/fraud.md#try-a-policy-simulate), also meant to be driven over the real API. Deterministic:
// the same options give the same records, from a seeded PRNG, with no I/O and no clock.
import { parseE164 } from "../../src/phone/e164.js";

/** One send, as a line of the simulate file. */
export interface TrafficRecord {
  /** RFC 3339, UTC, millisecond precision. */
  at: string;
  api: "v1" | "v2" | "session";
  tenant: string;
  phone_number: string;
  ip?: string;
  device_id?: string;
  /** Seconds after the send at which the code is entered; null when it never is. */
  verified_after_s: number | null;
  label?: "legit" | "fraud";
}

export interface ScenarioOptions {
  /** Seed of the PRNG: the same seed, the same scenario. Default 1. */
  seed?: number;
  /** Time of the scenario's start, RFC 3339. Default 2025-03-03T09:00:00.000Z. */
  start?: string;
  /** The tenant (an account's customer uuid) every send is for. */
  tenant?: string;
  /** Length of the legitimate traffic, in seconds. Default 1200. */
  durationS?: number;
  /** Legitimate sends per minute once ramped up (a Poisson process). Default 60. */
  legitPerMinute?: number;
  /**
   * Seconds over which the legitimate rate grows linearly from 0 to `legitPerMinute`. Default 120.
   * A service that starts cold must not see 10 unconverted sends to one country in its first
   * seconds: that is a surge to a never-served destination (FRAUD_NEW_DESTINATION_SENDS).
   */
  rampS?: number;
  /** Share of legitimate sends on V1 (the rest on V2). Default 0.3. */
  v1Share?: number;
  /** Share of legitimate sends whose code is never entered. Default 0.15. */
  abandonShare?: number;
  /** Codes are entered uniformly between these many seconds after the send. Default [2, 8]. */
  verifyDelayS?: [number, number];
  /**
   * Share of all legitimate sends to the attacked network (FR Lycamobile, 208-25): the tenant
   * serves it, a little. Default 0.01 (keep it below 0.02).
   */
  attackNetworkLegitShare?: number;
  /** Seconds after the start at which the attack begins. Default 40% of `durationS`. */
  attackStartS?: number;
  /** Length of the attack, in seconds. Default 300. */
  attackDurationS?: number;
  /** Attack sends per minute to the never-served country (LV). Default 60; 0 for none. */
  newCountryPerMinute?: number;
  /** Attack sends per minute to the served network (FR 208-25). Default 60; 0 for none. */
  networkPerMinute?: number;
}

/** The tenant of the scenario unless told otherwise. */
export const SCENARIO_TENANT = "5d1b9a52-3f0e-4c7b-9a54-2f6c1e8d0b17";
/** Where part (a) of the attack goes: a country the tenant never served. */
export const ATTACK_COUNTRY = "LV";
/** Where part (b) goes: a network of a served country, as describeNumber resolves it. */
export const ATTACK_NETWORK = "208-25";
/**
 * The ranges of ATTACK_NETWORK (Lycamobile France in libphonenumber's carrier data), national
 * digits after +33, each then followed by random digits up to 9.
 */
export const ATTACK_NETWORK_RANGES: readonly string[] = [
  ...["7510", "7511", "7512", "7513", "7514", "7515", "753", "758"],
  ...["7592", "7593", "7594", "7598"],
];
/** Lycamobile's other French range, which legitimate numbers avoid too. */
const ATTACK_NETWORK_OTHER = ["6055", "6056", "6057", "6058", "6059"];

/** Legitimate countries, their weights, and how their mobile numbers start. */
const LEGIT_COUNTRIES: readonly { country: string; weight: number; heads: string[]; digits: number }[] = [
  // FR: +33 then 9 digits, 6 or 7 first.
  { country: "FR", weight: 0.4, heads: ["+336", "+337"], digits: 12 },
  // DE: +49 15x/16x/17x, 10 or 11 national digits; invalid draws are drawn again.
  { country: "DE", weight: 0.25, heads: ["+4915", "+4916", "+4917"], digits: 14 },
  // GB: +44 7 then 9 digits.
  { country: "GB", weight: 0.2, heads: ["+447"], digits: 13 },
  // ES: +34 6 or 7 then 8 digits.
  { country: "ES", weight: 0.15, heads: ["+346", "+347"], digits: 12 },
];

/** mulberry32: a small, fast PRNG with a 32-bit state; good enough for traffic. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * A labelled scenario, sorted by time: one tenant's legitimate V1 and V2 traffic to FR, DE, GB and
 * ES mobiles (most codes entered 2 to 8 s after the send, `abandonShare` never), ramping up over
 * `rampS`; and in its middle a pumping attack, every send with its own ip and device_id, to
 * numbers that never repeat and are never verified: (a) to LV mobiles (a country the tenant never
 * served), (b) to FR Lycamobile (208-25), a network the tenant serves little. Records are plain
 * objects: write one JSON a line for `ringfence fraud simulate`.
 */
export function fraudScenario(options: ScenarioOptions = {}): TrafficRecord[] {
  const o = {
    seed: 1,
    start: "2025-03-03T09:00:00.000Z",
    tenant: SCENARIO_TENANT,
    durationS: 1200,
    legitPerMinute: 60,
    rampS: 120,
    v1Share: 0.3,
    abandonShare: 0.15,
    verifyDelayS: [2, 8] as [number, number],
    attackNetworkLegitShare: 0.01,
    attackDurationS: 300,
    newCountryPerMinute: 60,
    networkPerMinute: 60,
    ...options,
  };
  const attackStartS = options.attackStartS ?? o.durationS * 0.4;
  const startMs = Date.parse(o.start);
  if (Number.isNaN(startMs)) throw new Error(`start "${o.start}" is not a time`);
  const random = prng(o.seed);
  const used = new Set<string>();
  const out: { ms: number; record: TrafficRecord }[] = [];

  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const digits = (n: number): string => {
    let s = "";
    for (let i = 0; i < n; i++) s += String(Math.floor(random() * 10));
    return s;
  };
  const hex = (n: number): string => {
    let s = "";
    for (let i = 0; i < n; i++) s += Math.floor(random() * 16).toString(16);
    return s;
  };
  /** A valid mobile of `country` starting with one of `heads`, never drawn before. */
  const number = (
    country: string,
    heads: readonly string[],
    length: number,
    avoid: readonly string[] = [],
  ) => {
    for (;;) {
      const head = pick(heads);
      // DE mobiles have 10 or 11 national digits: draw either length.
      const size = country === "DE" ? length - Math.floor(random() * 2) : length;
      const e164 = head + digits(size - head.length);
      if (used.has(e164) || avoid.some((p) => e164.startsWith(p))) continue;
      const parsed = parseE164(e164);
      if (parsed?.countryCode !== country || parsed.lineType !== "Mobile") continue;
      used.add(e164);
      return e164;
    }
  };
  const attackHeads = ATTACK_NETWORK_RANGES.map((r) => `+33${r}`);
  const notAttacked = [...attackHeads, ...ATTACK_NETWORK_OTHER.map((r) => `+33${r}`)];
  /** Poisson arrivals at `perMinute` × shape(t) over [fromS, toS), by thinning. */
  const arrivals = (perMinute: number, fromS: number, toS: number, shape: (s: number) => number) => {
    const times: number[] = [];
    if (perMinute <= 0) return times;
    const perS = perMinute / 60;
    for (let s = fromS; ;) {
      s += -Math.log(1 - random()) / perS;
      if (s >= toS) return times;
      if (random() < shape(s)) times.push(s);
    }
  };
  const at = (s: number) => startMs + Math.round(s * 1000);

  for (const s of arrivals(o.legitPerMinute, 0, o.durationS, (t) => Math.min(1, t / o.rampS))) {
    let phone: string;
    if (random() < o.attackNetworkLegitShare) {
      phone = number("FR", attackHeads, 12);
    } else {
      let r = random();
      const c = LEGIT_COUNTRIES.find((x) => (r -= x.weight) < 0) ?? LEGIT_COUNTRIES[0]!;
      phone = number(c.country, c.heads, c.digits, c.country === "FR" ? notAttacked : []);
    }
    const [low, high] = o.verifyDelayS;
    const abandoned = random() < o.abandonShare;
    const delay = Math.round((low + random() * (high - low)) * 10) / 10;
    out.push({
      ms: at(s),
      record: {
        at: "",
        api: random() < o.v1Share ? "v1" : "v2",
        tenant: o.tenant,
        phone_number: phone,
        ip: `100.${64 + Math.floor(random() * 64)}.${Math.floor(random() * 256)}.${1 + Math.floor(random() * 254)}`,
        device_id: `d-${hex(16)}`,
        verified_after_s: abandoned ? null : delay,
        label: "legit",
      },
    });
  }

  let attacker = 0;
  const attack = (phone: string, s: number) => {
    attacker++;
    out.push({
      ms: at(s),
      record: {
        at: "",
        api: random() < 0.5 ? "v1" : "v2",
        tenant: o.tenant,
        phone_number: phone,
        // 198.18.0.0/15: one address per send.
        ip: `198.${18 + (attacker >> 16)}.${(attacker >> 8) & 255}.${attacker & 255}`,
        device_id: `x-${hex(16)}`,
        verified_after_s: null,
        label: "fraud",
      },
    });
  };
  const attackEndS = attackStartS + o.attackDurationS;
  for (const s of arrivals(o.newCountryPerMinute, attackStartS, attackEndS, () => 1)) {
    attack(number(ATTACK_COUNTRY, ["+3712"], 12), s);
  }
  for (const s of arrivals(o.networkPerMinute, attackStartS, attackEndS, () => 1)) {
    attack(number("FR", attackHeads, 12), s);
  }

  out.sort((a, b) => a.ms - b.ms);
  return out.map(({ ms, record }) => ({ ...record, at: new Date(ms).toISOString() }));
}

/** The scenario as a simulate file: one JSON object a line. */
export function scenarioJsonl(records: readonly TrafficRecord[]): string {
  return records.map((r) => JSON.stringify(r)).join("\n") + "\n";
}

import { isIP } from "node:net";
import type { Secrets } from "../crypto/secrets.js";
import type { Logger } from "../log.js";
import { errorMessage } from "../log.js";
import { describeNumber, type NumberFacts } from "../lookup/numbers.js";
import { parseE164, type ParsedNumber } from "../phone/e164.js";
import type { Metrics } from "../observability/metrics.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { limitSubject, normalizeAddress, sourceNetwork } from "../net/cidr.js";
import { FraudKeys } from "./keys.js";
import type { FraudSettings } from "./settings.js";

/** The APIs whose sends the engine judges (decision records' `api`, the metrics' label). */
export const FRAUD_APIS = ["v1", "v2", "session"] as const;
export type FraudApi = (typeof FRAUD_APIS)[number];
/** What the engine answers a send. */
export const FRAUD_ACTIONS = ["allow", "block", "would_block"] as const;
export type FraudAction = (typeof FRAUD_ACTIONS)[number];
/** Why: `none` for an allowed send, else the rule that refused it (docs/fraud.md#how-it-decides). */
export const FRAUD_RULES = [
  "none",
  "geo",
  "destination_surge",
  "conversion_drop",
  "new_destination_budget",
  "source_fanout",
] as const;
export type FraudRule = (typeof FRAUD_RULES)[number];
/** A tenant's mode: `enforce` (the default), `shadow` (records `would_block`, blocks nothing), `off`. */
export const FRAUD_MODES = ["enforce", "shadow", "off"] as const;
export type FraudMode = (typeof FRAUD_MODES)[number];
/** A tenant's permission for one country. */
export const GEO_PERMISSIONS = ["allow", "block", "trust"] as const;
export type GeoPermission = (typeof GEO_PERMISSIONS)[number];

/** The country id of numbers outside any country (+800, +881, ...), as libphonenumber names it. */
export const NON_GEOGRAPHIC = "001";

export const FRAUD_LIBRARY = new URL("./engine.lua", import.meta.url);

/** The keyed hash numbers and sources are remembered by (128 bits of it, with the tenant). */
const DIGEST_PURPOSE = "fraud-number";

/** Decides, records and counts one send on its own (session codes, simulate). */
export const judgeScript = defineScript({
  file: new URL("./judge.lua", import.meta.url),
  libraries: [FRAUD_LIBRARY],
  keys: ["policy"],
  rest: "tail",
  argv: ["f"],
});

/** Counts the conversion of the last send to a number. */
export const convertScript = defineScript({
  file: new URL("./convert.lua", import.meta.url),
  libraries: [FRAUD_LIBRARY],
  keys: ["sent", "all", "number"],
  rest: "tail",
  argv: ["f"],
});

/** Where a send goes, as the engine counts it. */
export interface Destination {
  /** ISO 3166 alpha-2, or 001 outside any country. */
  country: string;
  /** `<mcc>-<mnc>` or the carrier's name as the lookup knows it; '' when it knows neither. */
  network: string;
  /** `+` and the first FRAUD_PREFIX_DIGITS digits. */
  prefix: string;
  /** The destination ids counted: `c:<country>`, `n:<network>` (when known), `p:<prefix>`. */
  dests: string[];
  /** The number as decision records show it: `+3361234**78`. */
  masked: string;
  e164: string;
}

/** The number with the two digits before its last two starred: `+33612345678` -> `+3361234**78`. */
export function maskNumber(e164: string): string {
  return `${e164.slice(0, -4)}**${e164.slice(-2)}`;
}

/** The network id of a number: its MCC and MNC, else its carrier's name, else ''. */
export function networkOf(facts: Pick<NumberFacts, "mcc" | "mnc" | "carrier">): string {
  if (facts.mcc !== "" && facts.mnc !== "") return `${facts.mcc}-${facts.mnc}`;
  return facts.carrier.trim().toLowerCase().replace(/\s+/g, "-");
}

export function destinationOf(
  phone: Pick<ParsedNumber, "e164" | "countryCode">,
  facts: Pick<NumberFacts, "mcc" | "mnc" | "carrier">,
  prefixDigits: number,
): Destination {
  const country = phone.countryCode === "" ? NON_GEOGRAPHIC : phone.countryCode;
  const network = networkOf(facts);
  const prefix = phone.e164.slice(0, prefixDigits + 1);
  return {
    country,
    network,
    prefix,
    dests: [`c:${country}`, ...(network === "" ? [] : [`n:${network}`]), `p:${prefix}`],
    masked: maskNumber(phone.e164),
    e164: phone.e164,
  };
}

/** The rules' numbers as engine.lua reads them. */
export interface FraudRules {
  windowSeconds: number;
  slices: number;
  sliceMs: number;
  days: number;
  newSends: number;
  /**
   * Unconverted sends per window to countries without history, all together (fraud_budget in
   * engine.lua), and destinations blocked sends may add per window (fraud_count).
   */
  newDestinationBudget: number;
  /** How long a converted number stays a returning user (fraud_returning). */
  returningMs: number;
  /** A source's unconverted sends in a day past which it is refused (fraud_source). */
  sourceSends: number;
  /** The countries a source may send to in a day (fraud_source). */
  sourceCountries: number;
  /** The share of a surge's sends at most two sources must have made for them to be refused instead. */
  sourceShare: number;
  /** The networks or prefixes of a country refused in a window before the country is (fraud_spread). */
  countrySpread: number;
  share: number;
  credit: number;
  graceMs: number;
  minSends: number;
  drop: number;
  decisionsMax: number;
}

/** The window is counted in 12 slices. */
export const WINDOW_SLICES = 12;

export function fraudRules(config: FraudSettings): FraudRules {
  return {
    windowSeconds: config.FRAUD_WINDOW_SECONDS,
    slices: WINDOW_SLICES,
    sliceMs: (config.FRAUD_WINDOW_SECONDS * 1000) / WINDOW_SLICES,
    days: config.FRAUD_BASELINE_DAYS,
    newSends: config.FRAUD_NEW_DESTINATION_SENDS,
    newDestinationBudget: config.FRAUD_NEW_DESTINATION_BUDGET,
    returningMs: config.FRAUD_RETURNING_DAYS * 86_400_000,
    sourceSends: config.FRAUD_SOURCE_SENDS,
    sourceCountries: config.FRAUD_SOURCE_COUNTRIES,
    sourceShare: config.FRAUD_SOURCE_SHARE,
    countrySpread: config.FRAUD_COUNTRY_SPREAD,
    share: config.FRAUD_BASELINE_SHARE,
    credit: config.FRAUD_CONVERSION_CREDIT,
    graceMs: config.FRAUD_GRACE_SECONDS * 1000,
    minSends: config.FRAUD_CONVERSION_MIN_SENDS,
    drop: config.FRAUD_CONVERSION_DROP,
    decisionsMax: config.FRAUD_DECISIONS_MAX,
  };
}

export type { FraudSettings } from "./settings.js";

/**
 * Where a send was asked from, as its API tells (V1 `ip` and `device_id`, V2 `signals.ip` and
 * `signals.device_id`, a login's caller address): empty strings when it does not.
 */
export interface FraudSource {
  ip: string;
  deviceId: string;
}

/** A send with no source given. */
export const NO_SOURCE: FraudSource = { ip: "", deviceId: "" };

/**
 * The sources the engine counts a send under (docs/fraud.md#sources), as decision records name
 * them: an IPv4 address and its /24, an IPv6 /64, the device id. The address's network (else the
 * device) is the one a destination's surge is attributed to.
 */
export function sourceLabels(source: FraudSource): { labels: string[]; tracked: string | undefined } {
  const labels: string[] = [];
  const ip = source.ip === "" ? "" : normalizeAddress(source.ip);
  if (isIP(ip) === 4) labels.push(`address ${ip}`, `network ${sourceNetwork(ip)}`);
  else if (isIP(ip) === 6) labels.push(`network ${limitSubject(ip)}`);
  const device = source.deviceId.slice(0, 128);
  if (device !== "") labels.push(`device ${device}`);
  return { labels, tracked: labels.find((l) => l.startsWith("network ")) ?? labels.at(-1) };
}

/** What engine.lua takes for one send (`f` in its functions). */
export interface FraudArgs {
  now: number;
  api: FraudApi;
  country: string;
  network: string;
  prefix: string;
  masked: string;
  /** The number (E.164): engine.lua names the policy fields that would trust it (fraud_candidates). */
  e164: string;
  dests: string[];
  /** The send's sources (sourceLabels), their keys at the end of the tail, in the same order. */
  sources: string[];
  /** The keyed hash of the source a destination's surge is attributed to; '' without one. */
  track: string;
  /** That source as decision records name it. */
  trackLabel: string;
  rules: FraudRules;
}

/** A send's own part of FraudArgs: what the rules judge. */
export type FraudCall = Omit<FraudArgs, "rules">;

/**
 * The keys a send through the engine writes. The scripts are given the policy key and the tail
 * (fraudTail); engine.lua names the others the same way from the policy key (fraud_keys).
 */
export interface FraudSendKeys {
  policy: string;
  all: string;
  index: string;
  decisions: string;
  sent: string;
  /** The counters of each destination, in the order of `Destination.dests`. */
  dests: string[];
  /** What the tenant knows of the number, under its keyed hash (engine.lua fraud_returning). */
  number: string;
  /** The day's counters of each source of the send (FraudArgs.sources), under keyed hashes. */
  sources: string[];
}

/**
 * The tail of keys the send scripts take after the policy key: the number's (engine.lua
 * fraud_number_key), then the sources' (fraud_source_keys), named by keyed hashes that only the
 * service can make.
 */
export function fraudTail(k: Pick<FraudSendKeys, "number" | "sources">): string[] {
  return [k.number, ...k.sources];
}

/** The engine's answer to one send. */
export interface FraudDecision {
  action: FraudAction;
  rule: FraudRule;
  detail: string;
}

/** The setting-like name a block is counted under in ringfence_abuse_refusals_total. */
export function refusalName(rule: FraudRule): string {
  return `FRAUD_${rule.toUpperCase()}`;
}

/**
 * The engine's side of every code-carrying send: the keys and arguments the send scripts take, the
 * judge for sends that are not verification scripts (session codes), conversions, and metrics.
 */
export class FraudEngine {
  readonly keys: FraudKeys;
  readonly rules: FraudRules;

  constructor(
    private readonly deps: {
      redis: RedisClient;
      keys: Keys;
      config: FraudSettings;
      /** Keys the numbers the engine remembers (returning users, credit per number). */
      secrets: Secrets;
      metrics?: Metrics;
      log?: Logger;
    },
  ) {
    this.keys = new FraudKeys(deps.keys);
    this.rules = fraudRules(deps.config);
  }

  destination(
    phone: Pick<ParsedNumber, "e164" | "countryCode">,
    facts: Pick<NumberFacts, "mcc" | "mnc" | "carrier">,
  ): Destination {
    return destinationOf(phone, facts, this.deps.config.FRAUD_PREFIX_DIGITS);
  }

  /** Where a number goes, from what the lookup knows of it (no Redis). */
  async destinationOf(phone: ParsedNumber): Promise<Destination> {
    return this.destination(phone, await describeNumber(phone));
  }

  /** The conversion of the last send to `e164`: a right code, V1 feedback `onboarded`. */
  async convertedNumber(api: FraudApi, tenant: string, e164: string): Promise<boolean> {
    const phone = parseE164(e164);
    return phone === undefined ? false : this.converted(api, tenant, await this.destinationOf(phone));
  }

  /** A keyed hash (128 bits) naming what the engine keeps of a number or a source of a tenant. */
  private digest(tenant: string, value: string): string {
    return this.deps.secrets.hash(DIGEST_PURPOSE, `${tenant}\0${value}`).slice(0, 32);
  }

  /**
   * The sources' keys follow sourceLabels(source); the rankings of the send's UTC day are named by
   * engine.lua (fraud_rank_keys).
   */
  /**
   * The keys a send the engine does not judge still names (an email code): the tenant's policy in
   * each place, so that the script's keys stay on the tenant's slot; none is read or written.
   */
  unjudgedKeys(tenant: string): FraudSendKeys {
    const policy = this.keys.policy(tenant);
    return {
      policy,
      all: policy,
      index: policy,
      decisions: policy,
      sent: policy,
      dests: [],
      number: policy,
      sources: [],
    };
  }

  sendKeys(tenant: string, d: Destination, source: FraudSource = NO_SOURCE): FraudSendKeys {
    const k = this.keys;
    return {
      sources: sourceLabels(source).labels.map((label) => k.source(tenant, this.digest(tenant, label))),
      policy: k.policy(tenant),
      all: k.counters(tenant, "all"),
      index: k.index(tenant),
      decisions: k.decisions(tenant),
      sent: k.sent(tenant, d.e164),
      number: k.number(tenant, this.digest(tenant, d.e164)),
      dests: d.dests.map((id) => k.counters(tenant, id)),
    };
  }

  args(api: FraudApi, d: Destination, now: number, tenant = "", source: FraudSource = NO_SOURCE): FraudArgs {
    return { ...this.sendArgs(api, d, now, tenant, source), rules: this.rules };
  }

  /**
   * The same without the rules, for the send scripts that carry them in their text
   * (`Script.configured`, the verification engine's `SendRules`).
   */
  sendArgs(
    api: FraudApi,
    d: Destination,
    now: number,
    tenant = "",
    source: FraudSource = NO_SOURCE,
  ): FraudCall {
    const { labels, tracked } = sourceLabels(source);
    return {
      now,
      api,
      country: d.country,
      network: d.network,
      prefix: d.prefix,
      masked: d.masked,
      e164: d.e164,
      dests: d.dests,
      sources: labels,
      track: tracked === undefined ? "" : this.digest(tenant, tracked),
      trackLabel: tracked ?? "",
    };
  }

  /** One send judged on its own (session login and step-up codes): counted as sent unless blocked. */
  async judge(
    api: FraudApi,
    tenant: string,
    d: Destination,
    now = Date.now(),
    source: FraudSource = NO_SOURCE,
  ): Promise<FraudDecision> {
    const k = this.sendKeys(tenant, d, source);
    const reply = (await judgeScript.run(
      this.deps.redis,
      { policy: k.policy },
      { f: JSON.stringify(this.args(api, d, now, tenant, source)) },
      fraudTail(k),
    )) as [FraudAction, FraudRule, string];
    const decision = { action: reply[0], rule: reply[1], detail: reply[2] };
    this.noted(api, decision, d.country);
    return decision;
  }

  /** Counts a decision a send script made. */
  noted(api: FraudApi, decision: Pick<FraudDecision, "action" | "rule">, country: string): void {
    this.deps.metrics?.fraudDecision(api, decision.action, decision.rule, country);
  }

  /**
   * The conversion of the last send to the number (a right code, V1 feedback `onboarded`). A
   * failure here is logged, not answered: the check itself has succeeded.
   */
  async converted(api: FraudApi, tenant: string, d: Destination, now = Date.now()): Promise<boolean> {
    const k = this.sendKeys(tenant, d);
    try {
      // The send's record names its sources, whose keys the script must be given: read, then
      // count unless another send replaced the record meanwhile (then read again).
      for (let attempt = 0; attempt < 3; attempt++) {
        const record = await this.deps.redis.get(k.sent);
        if (record === null) return false;
        const digests = (record.split("|")[3] ?? "").split(".").filter((x) => x !== "");
        const reply = (await convertScript.run(
          this.deps.redis,
          { sent: k.sent, all: k.all, number: k.number },
          { f: JSON.stringify({ now, rules: this.rules, record, sources: digests.length }) },
          [...k.dests, ...digests.map((x) => this.keys.source(tenant, x))],
        )) as [string];
        if (reply[0] === "changed") continue;
        if (reply[0] !== "converted") return false;
        this.deps.metrics?.verified(api, d.country);
        return true;
      }
      return false;
    } catch (err) {
      this.deps.log?.warn("a conversion was not counted", { error: errorMessage(err) });
      return false;
    }
  }
}

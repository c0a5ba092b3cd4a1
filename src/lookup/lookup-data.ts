import { parse } from "csv-parse/sync";
import { z } from "zod";
import { scanKeys, type Keys, type RedisClient } from "../redis/client.js";
import { ALL_ENTRIES, announceChange, WatchedCache } from "../redis/watched-cache.js";
import { isLineType, parseE164, type LineType } from "./numbers.js";

/**
 * What an operator knows of one number beyond public data: porting, caller name (CNAM), and
 * overrides of the disposable flag and line type. A paid upstream can implement the same interface.
 */
export interface NumberRecord {
  numberPorted?: boolean;
  callerName?: string;
  temporaryPhoneNumber?: boolean;
  lineType?: LineType;
}

export interface LookupDataSource {
  get(e164: string): Promise<NumberRecord | undefined>;
  /**
   * Whether the number may have an override of what the spam rules read (line type, disposable
   * flag): false only when it is known to have none, so a send decides without reading it.
   */
  mayOverrideSpam(e164: string): Promise<boolean>;
}

/**
 * How many leading characters of an E.164 number name its override prefix ("+33612": the
 * country code and the next digits): at most 100,000 prefixes, whatever the amount of data.
 */
export const OVERRIDE_PREFIX_LENGTH = 6;
/** The longest a process uses the prefixes it keeps when an import's announcement is lost. */
export const OVERRIDE_PREFIXES_MAX_AGE_MS = 1_000;

const overridePrefix = (e164: string) => e164.slice(0, OVERRIDE_PREFIX_LENGTH);
const overridesSpam = (r: NumberRecord) => r.temporaryPhoneNumber !== undefined || r.lineType !== undefined;

interface KeptPrefixes {
  version: string;
  prefixes: ReadonlySet<string>;
}

export class RedisLookupData implements LookupDataSource {
  /** Announces imports, so every process reads the override prefixes again. */
  readonly changes: string;
  /** The prefixes of every number with a spam-relevant override (a set), and its version. */
  private readonly prefixesKey: string;
  private readonly versionKey: string;
  /** "1" once the prefixes hold every stored record's (imports keep them; a start completes them). */
  private readonly completeKey: string;
  private readonly kept: WatchedCache<KeptPrefixes>;
  private last: KeptPrefixes | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {
    this.changes = keys.key("changed", "numbers");
    this.prefixesKey = keys.key("numovr", "prefixes");
    this.versionKey = keys.key("numovr", "prefixes", "version");
    this.completeKey = keys.key("numovr", "prefixes", "complete");
    this.kept = new WatchedCache(this.changes, { maxAgeMs: OVERRIDE_PREFIXES_MAX_AGE_MS, maxEntries: 1 });
  }

  private key(e164: string): string {
    return this.keys.key("num", e164);
  }

  async mayOverrideSpam(e164: string): Promise<boolean> {
    const kept = await this.kept.get("prefixes", () => this.readPrefixes());
    return kept === undefined || kept.prefixes.has(overridePrefix(e164));
  }

  /** The prefixes, read again only when their version moved; undefined while not complete. */
  private async readPrefixes(): Promise<KeptPrefixes | undefined> {
    const [complete, version] = await this.redis.mget(this.completeKey, this.versionKey);
    if (complete !== "1") return undefined;
    const last = this.last;
    if (last !== undefined && last.version === (version ?? "0")) return last;
    const prefixes = new Set(await this.redis.smembers(this.prefixesKey));
    this.last = { version: version ?? "0", prefixes };
    return this.last;
  }

  /** Listens for imports on `subscriber` (see WatchedCache.watch). */
  watch(subscriber: RedisClient): Promise<() => Promise<void>> {
    return this.kept.watch(subscriber);
  }

  /**
   * Gives the override prefixes every stored record's (records imported before they existed).
   * Idempotent; scans every primary of a Cluster, then marks the prefixes complete. Returns how
   * many records it read.
   */
  async completeOverridePrefixes(): Promise<number> {
    if ((await this.redis.get(this.completeKey)) === "1") return 0;
    let read = 0;
    for await (const keys of scanKeys(this.redis, this.keys.key("num", "*"), 500)) {
      const prefixes = new Set<string>();
      for (const key of keys) {
        const e164 = /\{([^}]*)\}$/.exec(key)?.[1];
        if (e164 === undefined) continue;
        const [temporary, lineType] = await this.redis.hmget(key, "temporary_phone_number", "line_type");
        read += 1;
        if (temporary !== null || lineType !== null) prefixes.add(overridePrefix(e164));
      }
      if (prefixes.size > 0) await this.redis.sadd(this.prefixesKey, ...prefixes);
    }
    await this.redis.set(this.completeKey, "1");
    await this.announce();
    return read;
  }

  private async announce(): Promise<void> {
    await this.redis.incr(this.versionKey);
    await announceChange(this.redis, this.changes, ALL_ENTRIES);
  }

  async get(e164: string): Promise<NumberRecord | undefined> {
    const h = await this.redis.hgetall(this.key(e164));
    if (Object.keys(h).length === 0) return undefined;
    const record: NumberRecord = {};
    if (h.number_ported !== undefined) record.numberPorted = h.number_ported === "1";
    if (h.caller_name !== undefined) record.callerName = h.caller_name;
    if (h.temporary_phone_number !== undefined)
      record.temporaryPhoneNumber = h.temporary_phone_number === "1";
    if (h.line_type !== undefined && isLineType(h.line_type)) record.lineType = h.line_type;
    return record;
  }

  /**
   * Writes validated records; each number's fields are merged into what it had. One key per
   * number spreads over Cluster slots, so writes go out in bounded concurrent batches.
   */
  async put(records: ReadonlyMap<string, NumberRecord>): Promise<void> {
    const writes: [string, Record<string, string>][] = [];
    for (const [e164, r] of records) {
      const fields: Record<string, string> = {};
      if (r.numberPorted !== undefined) fields.number_ported = r.numberPorted ? "1" : "0";
      if (r.callerName !== undefined) fields.caller_name = r.callerName;
      if (r.temporaryPhoneNumber !== undefined)
        fields.temporary_phone_number = r.temporaryPhoneNumber ? "1" : "0";
      if (r.lineType !== undefined) fields.line_type = r.lineType;
      if (Object.keys(fields).length > 0) writes.push([this.key(e164), fields]);
    }
    // The prefixes first: a send that reads a record not written yet finds what was there before.
    const prefixes = new Set(
      [...records].filter(([, r]) => overridesSpam(r)).map(([e164]) => overridePrefix(e164)),
    );
    if (prefixes.size > 0) await this.redis.sadd(this.prefixesKey, ...prefixes);
    for (let i = 0; i < writes.length; i += 500) {
      await Promise.all(writes.slice(i, i + 500).map(([key, fields]) => this.redis.hset(key, fields)));
    }
    if (prefixes.size > 0) await this.announce();
  }
}

const flag = z
  .enum(["", "true", "false", "1", "0", "yes", "no"], { error: "must be true or false (or empty)" })
  .transform((v) => (v === "" ? undefined : ["true", "1", "yes"].includes(v)));

export const IMPORT_COLUMNS = [
  "phone_number",
  "number_ported",
  "caller_name",
  "temporary_phone_number",
  "line_type",
] as const;

const Row = z.object({
  phone_number: z.string(),
  number_ported: flag.optional(),
  caller_name: z.string().max(64, "must be at most 64 characters").optional(),
  temporary_phone_number: flag.optional(),
  line_type: z
    .string()
    .refine(
      (v) => v === "" || isLineType(v),
      "must be one of the line_type values of docs/v1-api.md#line-types",
    )
    .optional(),
});

export class ImportError extends Error {
  override readonly name = "ImportError";
}

/**
 * Reads a CSV import file (header row naming any of IMPORT_COLUMNS; phone_number required; an
 * empty cell leaves that fact unchanged). Every row is checked before anything is written: one
 * bad row rejects the whole file with its line number.
 */
export function parseImport(csv: string): Map<string, NumberRecord> {
  let rows: Record<string, string>[];
  try {
    rows = parse<Record<string, string>>(csv, {
      columns: true,
      skip_empty_lines: true,
      trim: true,
      bom: true,
    });
  } catch (err) {
    throw new ImportError(`not a CSV file: ${err instanceof Error ? err.message : String(err)}`);
  }
  const first = rows[0];
  if (first === undefined) throw new ImportError("the file has no rows");
  const unknown = Object.keys(first).filter((c) => !(IMPORT_COLUMNS as readonly string[]).includes(c));
  if (unknown.length > 0)
    throw new ImportError(`unknown column ${unknown.join(", ")}; allowed: ${IMPORT_COLUMNS.join(", ")}`);
  if (!("phone_number" in first)) throw new ImportError("the phone_number column is required");

  const records = new Map<string, NumberRecord>();
  rows.forEach((raw, i) => {
    const line = i + 2;
    const row = Row.safeParse(raw);
    if (!row.success) {
      const issue = row.error.issues[0];
      throw new ImportError(
        `line ${line}: ${issue?.path.join(".") ?? "row"} ${issue?.message ?? "is invalid"}`,
      );
    }
    const parsed = parseE164(row.data.phone_number);
    if (parsed === undefined) throw new ImportError(`line ${line}: phone_number is not a valid E.164 number`);
    const r: NumberRecord = { ...records.get(parsed.e164) };
    if (row.data.number_ported !== undefined) r.numberPorted = row.data.number_ported;
    if (row.data.caller_name !== undefined && row.data.caller_name !== "")
      r.callerName = row.data.caller_name;
    if (row.data.temporary_phone_number !== undefined)
      r.temporaryPhoneNumber = row.data.temporary_phone_number;
    if (row.data.line_type !== undefined && isLineType(row.data.line_type)) r.lineType = row.data.line_type;
    records.set(parsed.e164, r);
  });
  return records;
}

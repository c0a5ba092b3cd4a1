import type { Readable } from "node:stream";
import { parse as parseStream } from "csv-parse";
import { z } from "zod";
import { scanKeys, type Keys, type RedisClient } from "../redis/client.js";
import { ALL_ENTRIES, announceChange, WatchedCache } from "../redis/watched-cache.js";
import { parseE164 } from "../phone/e164.js";
import { isLineType, type LineType } from "../phone/line-types.js";
import { ImportError, IMPORT_COLUMNS } from "./import-format.js";
import { LookupKeys } from "./keys.js";

export { ImportError, IMPORT_COLUMNS };

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
  private readonly keys: LookupKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
  ) {
    this.keys = new LookupKeys(keys);
    this.changes = this.keys.changes();
    this.prefixesKey = this.keys.overridePrefixes();
    this.versionKey = this.keys.overridePrefixesVersion();
    this.completeKey = this.keys.overridePrefixesComplete();
    this.kept = new WatchedCache(this.changes, { maxAgeMs: OVERRIDE_PREFIXES_MAX_AGE_MS, maxEntries: 1 });
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
    for await (const keys of scanKeys(this.redis, this.keys.allNumbers(), 500)) {
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
    const h = await this.redis.hgetall(this.keys.number(e164));
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
  async put(records: Iterable<readonly [string, NumberRecord]>): Promise<void> {
    const writes: [string, Record<string, string>][] = [];
    for (const [e164, r] of records) {
      const fields = storedFields(r);
      if (Object.keys(fields).length > 0) writes.push([this.keys.number(e164), fields]);
    }
    // The prefixes first: a send that reads a record not written yet finds what was there before.
    const prefixes = new Set<string>();
    for (const [e164, r] of records) if (overridesSpam(r)) prefixes.add(overridePrefix(e164));
    if (prefixes.size > 0) await this.redis.sadd(this.prefixesKey, ...prefixes);
    for (let i = 0; i < writes.length; i += 500) {
      await Promise.all(writes.slice(i, i + 500).map(([key, fields]) => this.redis.hset(key, fields)));
    }
    if (prefixes.size > 0) await this.announce();
  }

  /**
   * Writes a stream of checked rows in order, a batch at a time (later rows of a number merge into
   * what earlier ones wrote), each batch's override prefixes before its records; announces once
   * at the end when any record overrides what the spam rules read. Returns the rows written.
   */
  async putAll(rows: AsyncIterable<ImportRow>, progress?: (written: number) => void): Promise<number> {
    let batch: [string, NumberRecord][] = [];
    let written = 0;
    let overrides = false;
    /** Writes the batch; true when it held an override of what the spam rules read. */
    const flush = async (): Promise<boolean> => {
      const prefixes = new Set<string>();
      for (const [e164, r] of batch) if (overridesSpam(r)) prefixes.add(overridePrefix(e164));
      if (prefixes.size > 0) await this.redis.sadd(this.prefixesKey, ...prefixes);
      await Promise.all(
        batch.flatMap(([e164, r]) => {
          const fields = storedFields(r);
          return Object.keys(fields).length === 0 ? [] : [this.redis.hset(this.keys.number(e164), fields)];
        }),
      );
      written += batch.length;
      batch = [];
      progress?.(written);
      return prefixes.size > 0;
    };
    for await (const row of rows) {
      batch.push([row.e164, row.record]);
      if (batch.length >= IMPORT_BATCH) overrides = (await flush()) || overrides;
    }
    if (batch.length > 0) overrides = (await flush()) || overrides;
    if (overrides) await this.announce();
    return written;
  }
}

/** Rows written at once by an import: one auto-pipelined burst of HSETs. */
const IMPORT_BATCH = 1_000;

function storedFields(r: NumberRecord): Record<string, string> {
  const fields: Record<string, string> = {};
  if (r.numberPorted !== undefined) fields.number_ported = r.numberPorted ? "1" : "0";
  if (r.callerName !== undefined) fields.caller_name = r.callerName;
  if (r.temporaryPhoneNumber !== undefined)
    fields.temporary_phone_number = r.temporaryPhoneNumber ? "1" : "0";
  if (r.lineType !== undefined) fields.line_type = r.lineType;
  return fields;
}

const flag = z
  .enum(["", "true", "false", "1", "0", "yes", "no"], { error: "must be true or false (or empty)" })
  .transform((v) => (v === "" ? undefined : ["true", "1", "yes"].includes(v)));

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

/** One row of an import file, checked: its line in the file, its number and what it says of it. */
export interface ImportRow {
  line: number;
  e164: string;
  record: NumberRecord;
}

/**
 * Reads a CSV import file as a stream (header row naming any of IMPORT_COLUMNS; phone_number
 * required; an empty cell leaves that fact unchanged), checking each row as it comes: the first
 * bad row throws an ImportError naming its line. Memory stays bounded whatever the file's size,
 * so callers that must refuse a whole file for one bad row read it twice (check, then write).
 */
export async function* readImport(input: Readable): AsyncGenerator<ImportRow> {
  const parser = input.pipe(
    parseStream({ columns: true, skip_empty_lines: true, trim: true, bom: true, info: true }),
  );
  let first = true;
  try {
    for await (const chunk of parser as AsyncIterable<{
      record: Record<string, string>;
      info: { lines: number };
    }>) {
      const raw = chunk.record;
      if (first) {
        first = false;
        const unknown = Object.keys(raw).filter((c) => !(IMPORT_COLUMNS as readonly string[]).includes(c));
        if (unknown.length > 0)
          throw new ImportError(
            `unknown column ${unknown.join(", ")}; allowed: ${IMPORT_COLUMNS.join(", ")}`,
          );
        if (!("phone_number" in raw)) throw new ImportError("the phone_number column is required");
      }
      yield checkRow(raw, chunk.info.lines);
    }
  } catch (err) {
    if (err instanceof ImportError) throw err;
    throw new ImportError(`not a CSV file: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    input.destroy();
  }
  if (first) throw new ImportError("the file has no rows");
}

function checkRow(raw: Record<string, string>, line: number): ImportRow {
  const row = Row.safeParse(raw);
  if (!row.success) {
    const issue = row.error.issues[0];
    throw new ImportError(
      `line ${line}: ${issue?.path.join(".") ?? "row"} ${issue?.message ?? "is invalid"}`,
    );
  }
  const parsed = parseE164(row.data.phone_number);
  if (parsed === undefined) throw new ImportError(`line ${line}: phone_number is not a valid E.164 number`);
  const record: NumberRecord = {};
  if (row.data.number_ported !== undefined) record.numberPorted = row.data.number_ported;
  if (row.data.caller_name !== undefined && row.data.caller_name !== "")
    record.callerName = row.data.caller_name;
  if (row.data.temporary_phone_number !== undefined)
    record.temporaryPhoneNumber = row.data.temporary_phone_number;
  if (row.data.line_type !== undefined && isLineType(row.data.line_type))
    record.lineType = row.data.line_type;
  return { line, e164: parsed.e164, record };
}

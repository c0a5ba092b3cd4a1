import { parse } from "csv-parse/sync";
import { z } from "zod";
import { Keys, type RedisClient } from "../redis/client.js";
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
}

export class RedisLookupData implements LookupDataSource {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  private key(e164: string): string {
    return this.keys.key("num", e164);
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
    for (let i = 0; i < writes.length; i += 500) {
      await Promise.all(writes.slice(i, i + 500).map(([key, fields]) => this.redis.hset(key, fields)));
    }
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

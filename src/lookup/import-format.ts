// What an import file may hold, kept apart from lookup-data.ts (and the phone metadata it loads)
// so that the CLI can describe the command without loading them.

/** The columns of `ringfence lookup-data import`'s CSV header (phone_number required). */
export const IMPORT_COLUMNS = [
  "phone_number",
  "number_ported",
  "caller_name",
  "temporary_phone_number",
  "line_type",
] as const;

/** An import file refused: not a CSV, an unknown column, or a bad row (its line is named). */
export class ImportError extends Error {
  override readonly name = "ImportError";
}

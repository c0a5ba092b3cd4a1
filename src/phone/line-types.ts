// Kept apart from numbers.ts, whose phone metadata weighs tens of megabytes: the configuration
// and the CLI read these names without loading it.

/** The `line_type` values of docs/v1-api.md#line-types, in that order. */
export const LINE_TYPES = [
  "CallingCards",
  "FixedLine",
  "InternetServiceProvider",
  "LocalRate",
  "Mobile",
  "Other",
  "Pager",
  "PayPhone",
  "PremiumRate",
  "Satellite",
  "Service",
  "SharedCost",
  "ShortCodesCommercial",
  "TollFree",
  "UniversalAccess",
  "Unknown",
  "VPN",
  "VoiceMail",
  "Voip",
] as const;

export type LineType = (typeof LINE_TYPES)[number];

const LINE_TYPE_SET: ReadonlySet<string> = new Set(LINE_TYPES);

export function isLineType(v: string): v is LineType {
  return LINE_TYPE_SET.has(v);
}

/**
 * A phone number as every domain takes it: strict E.164 that libphonenumber's full metadata
 * considers valid, its region, calling code and line type from the number alone
 * (docs/v1-api.md#line-types). What public data adds (carrier, MCC/MNC, disposable) is the lookup's
 * (src/lookup/numbers.ts). This file loads libphonenumber's metadata, tens of megabytes: settings
 * and the CLI take the line type names from src/phone/line-types.ts instead.
 */
import { parsePhoneNumberFromString, type NumberType, type PhoneNumber } from "libphonenumber-js/max";
import type { LineType } from "./line-types.js";

/** Every type libphonenumber's `getType()` can return, apart from `undefined` (type not determined). */
export type LibphonenumberType = NonNullable<NumberType>;

/**
 * libphonenumber type → line type (docs/v1-api.md#line-types). `undefined` (no type pattern matched) maps to `Unknown`.
 *
 * `FIXED_LINE_OR_MOBILE` maps to `Unknown` here and is refined by {@link describeNumber}: it becomes
 * `Mobile` when Google's carrier data names a carrier for the number. Libphonenumber returns this type
 * where the numbering plan does not separate mobile from fixed ranges — above all the whole NANP (+1:
 * US, Canada and most of the Caribbean), where any geographic number can be either. Google's carrier
 * data only covers mobile ranges, so a carrier name is evidence that the range is mobile; without one the
 * honest answer is `Unknown`, not a guess.
 *
 * Satellite numbers are not a libphonenumber type: see {@link SATELLITE_PREFIXES}.
 */
export const NUMBER_TYPE_LINE_TYPES = {
  MOBILE: "Mobile",
  FIXED_LINE: "FixedLine",
  FIXED_LINE_OR_MOBILE: "Unknown",
  TOLL_FREE: "TollFree",
  PREMIUM_RATE: "PremiumRate",
  SHARED_COST: "SharedCost",
  VOIP: "Voip",
  PERSONAL_NUMBER: "Other",
  PAGER: "Pager",
  UAN: "UniversalAccess",
  VOICEMAIL: "VoiceMail",
} as const satisfies Readonly<Record<LibphonenumberType, LineType>>;

/**
 * E.164 prefixes (calling code plus leading national digits) of satellite services, whatever
 * libphonenumber's type says (it calls them MOBILE): +881 is the ITU's Global Mobile Satellite System
 * code (8810/8811 ICO, 8812/8813 Ellipso, 8816/8817 Iridium, 8818/8819 Globalstar) and +870 is
 * Inmarsat's single network access code.
 */
export const SATELLITE_PREFIXES: readonly string[] = ["881", "870"];

export interface ParsedNumber {
  /** Canonical E.164, identical to the accepted input. */
  e164: string;
  /** ISO 3166-1 alpha-2 region, '' for non-geographic calling codes (+800, +870, +881, +882, …). */
  countryCode: string;
  /** Country calling code without '+', e.g. "33". */
  callingCode: string;
  /** Line type from the number alone; {@link describeNumber} may refine `Unknown` to `Mobile`. */
  lineType: LineType;
  /** National significant number, e.g. "612345678". */
  nationalNumber: string;
}

export const STRICT_E164 = /^\+[1-9]\d{1,14}$/;

/**
 * Parses a strict E.164 number (`+` then 2 to 15 digits, no leading 0, nothing else) that
 * libphonenumber's full metadata considers valid. Anything else gives `undefined`.
 */
export function parseE164(input: string): ParsedNumber | undefined {
  const valid = parseValid(input);
  if (valid === undefined) return undefined;
  const { phone, type } = valid;
  return {
    e164: phone.number,
    countryCode: phone.country ?? "",
    callingCode: phone.countryCallingCode,
    lineType: lineTypeOf(type, phone.number, false),
    nationalNumber: phone.nationalNumber,
  };
}

/**
 * The valid numbers parsed last, with their type: a send parses its number where it is
 * validated, described and sent, and libphonenumber's parse and `getType` each cost tens of
 * microseconds. Numbers come from callers, so at most RECENT_MAX are kept, started again when full.
 */
const RECENT_MAX = 256;
const recent = new Map<string, { phone: PhoneNumber; type: NumberType }>();

export function parseValid(input: string): { phone: PhoneNumber; type: NumberType } | undefined {
  const known = recent.get(input);
  if (known !== undefined) return known;
  if (!STRICT_E164.test(input)) return undefined;
  const phone = parsePhoneNumberFromString(input);
  // `number === input` rejects inputs libphonenumber would silently rewrite (e.g. "+330612345678").
  if (phone?.isValid() !== true || phone.number !== input) return undefined;
  const valid = { phone, type: phone.getType() };
  if (recent.size >= RECENT_MAX) recent.clear();
  recent.set(input, valid);
  return valid;
}

/**
 * Line type from libphonenumber's type, the E.164 string and whether a carrier is known for the number
 * (see {@link NUMBER_TYPE_LINE_TYPES} for why the carrier matters).
 */
export function lineTypeOf(type: NumberType, e164: string, carrierKnown: boolean): LineType {
  if (SATELLITE_PREFIXES.some((prefix) => e164.startsWith(`+${prefix}`))) return "Satellite";
  if (type === undefined) return "Unknown";
  if (type === "FIXED_LINE_OR_MOBILE" && carrierKnown) return "Mobile";
  return NUMBER_TYPE_LINE_TYPES[type];
}

import { z } from "zod";
import { quote, RingfenceError } from "../errors.js";
import { parseE164, type ParsedNumber } from "../phone/e164.js";

/**
 * The input rules more than one service keeps, written once: http(s) URLs, and E.164 numbers
 * within an account's regions.
 */

/** The longest URL any field or setting takes. */
export const MAX_URL_LENGTH = 2048;
export { NOT_HTTP_URL, parseHttpUrl } from "./http-url.js";
import { NOT_HTTP_URL, parseHttpUrl } from "./http-url.js";

/** True for an http or https URL of at most MAX_URL_LENGTH characters. */
export function isHttpUrl(value: string): boolean {
  return value.length <= MAX_URL_LENGTH && parseHttpUrl(value) !== undefined;
}

/**
 * A request field holding an http(s) URL: `required` refuses "" with "is required"; otherwise ""
 * means not given.
 */
export function httpUrlField(options: { required: boolean }) {
  return z
    .string()
    .refine((v) => !options.required || v !== "", "is required")
    .refine((v) => v.length <= MAX_URL_LENGTH, `must be at most ${MAX_URL_LENGTH} characters`)
    .refine((v) => v === "" || parseHttpUrl(v) !== undefined, NOT_HTTP_URL);
}

/**
 * A V1 phone number: E.164 (`invalid_phone_number`) and, when the account is limited to some
 * regions, within them (`unsupported_region`).
 */
export function phoneInRegions(e164: string, regions: readonly string[]): ParsedNumber {
  const parsed = parseE164(e164);
  if (parsed === undefined) {
    throw new RingfenceError("invalid_phone_number", `${quote(e164)} is not a valid E.164 phone number`);
  }
  if (regions.length > 0 && !regions.includes(parsed.countryCode)) {
    throw new RingfenceError(
      "unsupported_region",
      `numbers of ${parsed.countryCode || "this range"} are outside this account's regions`,
    );
  }
  return parsed;
}

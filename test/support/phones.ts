import { getCountries, getExampleNumber, parsePhoneNumberFromString } from "libphonenumber-js/max";
import examples from "libphonenumber-js/mobile/examples";

/** Countries (not `except`) and `count` numbers of each, as mobiles() gives them. */
export function countriesWith(count: number, from: number, except: readonly string[] = []): string[][] {
  const out: string[][] = [];
  for (const cc of getCountries()) {
    if (except.includes(cc)) continue;
    const numbers = mobiles(cc, count, from);
    if (numbers !== undefined) out.push(numbers);
  }
  return out;
}

/**
 * `count` mobile numbers of `country`: its example mobile number with the last four digits
 * replaced, spread over its range as real users' are (SPAM_RANGE_BURST refuses runs of
 * neighbouring numbers); undefined when one of them is not a valid mobile number there.
 */
export function mobiles(country: string, count: number, from = 0): string[] | undefined {
  const example = getExampleNumber(country as Parameters<typeof getExampleNumber>[0], examples);
  if (example === undefined) return undefined;
  const out: string[] = [];
  for (let i = from; i < from + count; i++) {
    const n = `${example.number.slice(0, -4)}${String((i * 7919 + 1234) % 10_000).padStart(4, "0")}`;
    const type = parsePhoneNumberFromString(n)?.getType();
    if (type !== "MOBILE" && type !== "FIXED_LINE_OR_MOBILE") return undefined;
    out.push(n);
  }
  return out;
}

import type { LookupSettings } from "./settings.js";
import type { LookupDataSource } from "./lookup-data.js";
import type { ParsedNumber } from "../phone/e164.js";
import { describeNumber, type NumberFacts } from "./numbers.js";

/**
 * The static spam rule every SMS obeys, V1 sends, logins and step-up alike: a number whose line
 * type is listed in SPAM_LINE_TYPES (premium-rate, shared-cost by default), or a disposable
 * number while SPAM_DISPOSABLE is on. Imported lookup data wins over the built-in facts; it is
 * read only when the number's prefix has overrides, so most sends spend no round trip here.
 * Answers the setting that refuses the number, or undefined, and the number's facts (its network
 * for the fraud engine).
 */
export async function screenNumber(
  rules: Pick<LookupSettings, "SPAM_LINE_TYPES" | "SPAM_DISPOSABLE">,
  data: LookupDataSource,
  phone: ParsedNumber,
): Promise<{ rule: "SPAM_LINE_TYPES" | "SPAM_DISPOSABLE" | undefined; facts: NumberFacts }> {
  const read = async () => ((await data.mayOverrideSpam(phone.e164)) ? data.get(phone.e164) : undefined);
  const [facts, record] = await Promise.all([describeNumber(phone), read()]);
  const lineType = record?.lineType ?? facts.lineType;
  const disposable = record?.temporaryPhoneNumber ?? facts.disposable;
  if ((rules.SPAM_LINE_TYPES as readonly string[]).includes(lineType))
    return { rule: "SPAM_LINE_TYPES", facts };
  if (rules.SPAM_DISPOSABLE && disposable) return { rule: "SPAM_DISPOSABLE", facts };
  return { rule: undefined, facts };
}

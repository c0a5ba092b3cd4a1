import type { Config } from "../config.js";
import type { LookupDataSource } from "./lookup-data.js";
import { describeNumber, type ParsedNumber } from "./numbers.js";

/**
 * The static spam rule every SMS obeys, V1 sends, logins and step-up alike: a number whose line
 * type is listed in SPAM_LINE_TYPES (premium-rate, shared-cost by default), or a disposable
 * number while SPAM_DISPOSABLE is on. Imported lookup data wins over the built-in facts; it is
 * read only when the number's prefix has overrides, so most sends spend no round trip here.
 * Answers the setting that refuses the number, or undefined.
 */
export async function staticSpamRule(
  rules: Pick<Config, "SPAM_LINE_TYPES" | "SPAM_DISPOSABLE">,
  data: LookupDataSource,
  phone: ParsedNumber,
): Promise<"SPAM_LINE_TYPES" | "SPAM_DISPOSABLE" | undefined> {
  const read = async () => ((await data.mayOverrideSpam(phone.e164)) ? data.get(phone.e164) : undefined);
  const [facts, record] = await Promise.all([describeNumber(phone), read()]);
  const lineType = record?.lineType ?? facts.lineType;
  const disposable = record?.temporaryPhoneNumber ?? facts.disposable;
  if ((rules.SPAM_LINE_TYPES as readonly string[]).includes(lineType)) return "SPAM_LINE_TYPES";
  if (rules.SPAM_DISPOSABLE && disposable) return "SPAM_DISPOSABLE";
  return undefined;
}

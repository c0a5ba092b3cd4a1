import { quote, RingfenceError } from "../errors.js";
import type { Secrets } from "../crypto/secrets.js";
import type { AccountStore } from "../accounts/store.js";
import type { StoredAccount } from "../accounts/account.js";
import { accountOf } from "../accounts/authenticate.js";
import type { Handlers } from "../rpc/binding.js";
import type { LookupServiceService } from "../gen/ringfence/lookup/v1/lookup_service.js";
import type { LookupDataSource, NumberRecord } from "./lookup-data.js";
import type { ParsedNumber } from "../phone/e164.js";
import { describeNumber, type NumberFacts } from "./numbers.js";
import { phoneInRegions } from "../net/validate.js";
import { successorLink, V1_SUCCESSORS } from "../v1/deprecation.js";

export const LOOKUP_TYPES = ["cnam"] as const;

export interface LookupDeps {
  accounts: AccountStore;
  secrets: Secrets;
  data: LookupDataSource;
}

/** What is known of one number, whichever API answers: public data and the operator's record. */
export interface LookedUp {
  number: ParsedNumber;
  facts: NumberFacts;
  record: NumberRecord | undefined;
  /** The caller asked for the caller name and its account may have it. */
  wantsCnam: boolean;
}

/**
 * One lookup for V1 and V2: the requested types checked, the number within the account's
 * regions, then public and operator data combined.
 */
export async function lookUp(
  data: LookupDataSource,
  account: StoredAccount,
  phoneNumber: string,
  types: readonly string[],
): Promise<LookedUp> {
  const unknownType = types.find((t) => !(LOOKUP_TYPES as readonly string[]).includes(t));
  if (unknownType !== undefined) {
    throw new RingfenceError(
      "bad_request",
      `type: unknown value ${quote(unknownType)}; allowed: ${LOOKUP_TYPES.join(", ")}`,
      {},
      { field: "type" },
    );
  }
  const number = phoneInRegions(phoneNumber, account.regions);
  const [facts, record] = await Promise.all([describeNumber(number), data.get(number.e164)]);
  return { number, facts, record, wantsCnam: types.includes("cnam") && account.features.includes("cnam") };
}

/** GET /v1/lookup/{phone_number}: authenticate, validate, then combine public and operator data. */
export function lookupHandlers(deps: LookupDeps): Handlers<typeof LookupServiceService> {
  return {
    async lookupPhoneNumber(req, ctx) {
      const { number, facts, record, wantsCnam } = await lookUp(
        deps.data,
        accountOf(ctx),
        req.phoneNumber,
        req.type,
      );
      // The successor of this very call: the V2 lookup of the same number.
      ctx.setHeader("link", successorLink(`${V1_SUCCESSORS.lookup}/${number.e164}`));
      return {
        phoneNumber: number.e164,
        mcc: known(facts.mcc),
        mnc: known(facts.mnc),
        callerName: wantsCnam ? known(record?.callerName) : undefined,
        carrier: known(facts.carrier),
        countryCode: known(number.countryCode),
        numberPorted: record?.numberPorted ?? false,
        temporaryPhoneNumber: record?.temporaryPhoneNumber ?? facts.disposable,
        lineType: record?.lineType ?? facts.lineType,
      };
    },
  };
}

/** Optional answer fields are left out when unknown, never sent as "" (the original SDKs' models). */
export function known(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

import { quote, RingfenceError } from "../errors.js";
import type { Secrets } from "../crypto/secrets.js";
import type { AccountStore } from "../accounts/store.js";
import { accountOf } from "../accounts/authenticate.js";
import type { Handlers } from "../rpc/binding.js";
import type { LookupServiceService } from "../gen/ringfence/lookup/v1/lookup_service.js";
import type { LookupDataSource } from "./lookup-data.js";
import { describeNumber } from "./numbers.js";
import { phoneInRegions } from "../net/validate.js";

export const LOOKUP_TYPES = ["cnam"] as const;

export interface LookupDeps {
  accounts: AccountStore;
  secrets: Secrets;
  data: LookupDataSource;
}

/** GET /v1/lookup/{phone_number}: authenticate, validate, then combine public and operator data. */
export function lookupHandlers(deps: LookupDeps): Handlers<typeof LookupServiceService> {
  return {
    async lookupPhoneNumber(req, ctx) {
      const account = accountOf(ctx);

      const unknownType = req.type.find((t) => !(LOOKUP_TYPES as readonly string[]).includes(t));
      if (unknownType !== undefined) {
        throw new RingfenceError(
          "bad_request",
          `type: unknown value ${quote(unknownType)}; allowed: ${LOOKUP_TYPES.join(", ")}`,
        );
      }
      const number = phoneInRegions(req.phoneNumber, account.regions);

      const [facts, record] = await Promise.all([describeNumber(number), deps.data.get(number.e164)]);
      const wantsCnam = req.type.includes("cnam") && account.features.includes("cnam");
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
function known(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

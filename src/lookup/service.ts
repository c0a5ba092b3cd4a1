import { quote, RingfenceError } from "../errors.js";
import type { Secrets } from "../crypto/secrets.js";
import type { AccountStore } from "../accounts/store.js";
import { authenticateCustomer } from "../accounts/authenticate.js";
import type { Handlers } from "../rpc/binding.js";
import type { LookupServiceService } from "../gen/ringfence/lookup/v1/lookup_service.js";
import type { LookupDataSource } from "./lookup-data.js";
import { describeNumber, parseE164 } from "./numbers.js";

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
      const account = await authenticateCustomer(
        deps.accounts,
        deps.secrets,
        ctx.header("customer-uuid"),
        ctx,
      );

      const unknownType = req.type.find((t) => !(LOOKUP_TYPES as readonly string[]).includes(t));
      if (unknownType !== undefined) {
        throw new RingfenceError(
          "bad_request",
          `type: unknown value ${quote(unknownType)}; allowed: ${LOOKUP_TYPES.join(", ")}`,
        );
      }
      const number = parseE164(req.phoneNumber);
      if (number === undefined) {
        throw new RingfenceError(
          "invalid_phone_number",
          `${quote(req.phoneNumber)} is not a valid E.164 phone number`,
        );
      }
      if (account.regions.length > 0 && !account.regions.includes(number.countryCode)) {
        throw new RingfenceError(
          "unsupported_region",
          `numbers of ${number.countryCode || "this range"} are outside this account's regions`,
        );
      }

      const [facts, record] = await Promise.all([describeNumber(number), deps.data.get(number.e164)]);
      const wantsCnam = req.type.includes("cnam") && account.features.includes("cnam");
      return {
        phoneNumber: number.e164,
        mcc: facts.mcc,
        mnc: facts.mnc,
        callerName: wantsCnam ? record?.callerName : undefined,
        carrier: facts.carrier,
        countryCode: number.countryCode,
        numberPorted: record?.numberPorted ?? false,
        temporaryPhoneNumber: record?.temporaryPhoneNumber ?? facts.disposable,
        lineType: record?.lineType ?? facts.lineType,
      };
    },
  };
}

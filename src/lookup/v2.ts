import { accountOf } from "../accounts/authenticate.js";
import type { Handlers } from "../rpc/binding.js";
import type { LookupServiceService, NetworkInfo } from "../gen/ringfence/lookup/v2/lookup_service.js";
import type { LineType } from "../phone/line-types.js";
import { known, lookUp, type LookupDeps } from "./service.js";

/** V2 `line_type` of each V1 line type (docs/v2-api.md#lookup): the original V2 API's names. */
export const V2_LINE_TYPES = {
  CallingCards: "calling_cards",
  FixedLine: "fixed_line",
  InternetServiceProvider: "isp",
  LocalRate: "local_rate",
  Mobile: "mobile",
  Other: "other",
  Pager: "pager",
  PayPhone: "payphone",
  PremiumRate: "premium_rate",
  Satellite: "satellite",
  Service: "service",
  SharedCost: "shared_cost",
  ShortCodesCommercial: "short_codes_commercial",
  TollFree: "toll_free",
  UniversalAccess: "universal_access",
  Unknown: "unknown",
  VPN: "vpn",
  VoiceMail: "voice_mail",
  Voip: "voip",
} as const satisfies Record<LineType, string>;

/** `flags` of a V2 lookup. */
export const V2_LOOKUP_FLAGS = ["ported", "temporary"] as const;

/** GET /v2/lookup/{phone_number}: the V1 lookup's data in the original V2 API's shape. */
export function lookupV2Handlers(deps: LookupDeps): Handlers<typeof LookupServiceService> {
  return {
    async lookupPhoneNumber(req, ctx) {
      // The original SDK sends a list of types joined by commas (`type=cnam,...`).
      const types = req.type.flatMap((t) => t.split(","));
      const { number, facts, record, wantsCnam } = await lookUp(
        deps.data,
        accountOf(ctx),
        req.phoneNumber,
        types,
      );
      const ported = record?.numberPorted ?? false;
      const temporary = record?.temporaryPhoneNumber ?? facts.disposable;
      // The range's carrier is the original one; it still serves the number unless it was ported.
      const original: NetworkInfo | undefined =
        facts.carrier === "" && facts.mcc === ""
          ? undefined
          : { carrierName: known(facts.carrier), mcc: known(facts.mcc), mnc: known(facts.mnc) };
      return {
        phoneNumber: number.e164,
        countryCode: known(number.countryCode),
        flags: [...(ported ? ["ported"] : []), ...(temporary ? ["temporary"] : [])],
        lineType: V2_LINE_TYPES[record?.lineType ?? facts.lineType],
        networkInfo: ported ? undefined : original,
        originalNetworkInfo: original,
        callerName: wantsCnam ? known(record?.callerName) : undefined,
      };
    },
  };
}

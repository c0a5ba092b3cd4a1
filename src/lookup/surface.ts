import { LookupServiceService } from "../gen/ringfence/lookup/v1/lookup_service.js";
import { LookupServiceService as LookupV2Service } from "../gen/ringfence/lookup/v2/lookup_service.js";
import { declareService } from "../rpc/surface.js";
import { V1_SURFACE } from "../v1/deprecation.js";

/** What lookup declares of its REST surface beyond the protos (src/rpc/surface.ts). */

/** V1 lookup (deprecated): by an account's API key, the account named in a header (GET has no body). */
export const LOOKUP_V1 = declareService(LookupServiceService, {
  ...V1_SURFACE,
  callers: { lookupPhoneNumber: "account" },
  headerParameters: {
    lookupPhoneNumber: [
      {
        name: "customer-uuid",
        schema: { type: "string", format: "uuid" },
        description: "The account's customer_uuid",
      },
    ],
  },
});

/** V2 lookup, `/v2/lookup` and below in the V2 error body. */
export const LOOKUP_V2 = declareService(LookupV2Service, {
  dialect: "v2",
  v2Areas: ["lookup"],
  callers: { lookupPhoneNumber: "account" },
});

import { VerifyServiceService } from "../gen/ringfence/verify/v1/verify_service.js";
import { VerificationServiceService } from "../gen/ringfence/verify/v2/verification_service.js";
import { declareService } from "../rpc/surface.js";
import { V1_SURFACE } from "../v1/deprecation.js";

/** What verify declares of its REST surface beyond the protos (src/rpc/surface.ts). */

/** V1 verify (deprecated): every call by an account's API key. */
export const VERIFY_V1 = declareService(VerifyServiceService, {
  ...V1_SURFACE,
  callers: {
    createAuthentication: "account",
    checkAuthentication: "account",
    retryAuthentication: "account",
    createFeedback: "account",
    getAuthentication: "account",
  },
});

/** V2 verification, `/v2/verification` and below in the V2 error body. */
export const VERIFICATION_V2 = declareService(VerificationServiceService, {
  dialect: "v2",
  v2Areas: ["verification"],
  callers: { createVerification: "account", checkVerification: "account" },
});

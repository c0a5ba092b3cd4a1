import { FraudServiceService } from "../gen/ringfence/verify/v2/fraud_service.js";
import { declareService } from "../rpc/surface.js";

/**
 * What fraud declares of its REST surface beyond the proto (src/rpc/surface.ts): the reports of
 * the calling account, `/v2/insights` and `/v2/fraud` and below in the V2 error body.
 */
export const FRAUD_V2 = declareService(FraudServiceService, {
  dialect: "v2",
  v2Areas: ["insights", "fraud"],
  callers: { listVerificationInsights: "account", listFraudDecisions: "account" },
});

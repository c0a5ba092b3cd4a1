import { DeliveryReportServiceService } from "../gen/ringfence/delivery/v1/delivery_report_service.js";
import { declareService } from "../rpc/surface.js";

/**
 * What delivery declares of its REST surface beyond the proto (src/rpc/surface.ts): a report is
 * answered 204, and its caller is the provider its path names, by that provider's status token.
 */
export const DELIVERY_REPORTS = declareService(DeliveryReportServiceService, {
  dialect: "session",
  successStatuses: { reportDeliveryStatus: 204 },
  callers: { reportDeliveryStatus: "provider" },
});

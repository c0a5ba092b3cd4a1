import { StepUpServiceService } from "../gen/ringfence/stepup/v1/stepup_service.js";
import { declareService } from "../rpc/surface.js";

/** What step-up declares of its REST surface beyond the proto (src/rpc/surface.ts). */
export const STEP_UP = declareService(StepUpServiceService, {
  dialect: "session",
  successStatuses: { createStepUpConfig: 201, resetPassword: 204 },
  callers: { createStepUpConfig: "app", requestStepUp: "session", resetPassword: "session" },
});

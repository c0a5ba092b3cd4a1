import { SessionServiceService } from "../gen/ringfence/session/v1/session_service.js";
import { declareService } from "../rpc/surface.js";

/** What session declares of its REST surface beyond the proto (src/rpc/surface.ts). */
export const SESSION = declareService(SessionServiceService, {
  dialect: "session",
  successStatuses: { logout: 204, createAppWebhook: 201 },
  callers: { logout: "session", getMe: "session", createAppWebhook: "app" },
});

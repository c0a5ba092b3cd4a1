import { PasskeyServiceService } from "../gen/ringfence/session/v1/passkey_service.js";
import { declareService } from "../rpc/surface.js";

/** What passkeys declare of their REST surface beyond the proto (src/rpc/surface.ts). */
export const PASSKEYS = declareService(PasskeyServiceService, {
  dialect: "session",
  successStatuses: { registerPasskey: 201, deletePasskey: 204 },
  callers: {
    createPasskeyOptions: "session",
    registerPasskey: "session",
    listPasskeys: "session",
    deletePasskey: "session",
  },
});

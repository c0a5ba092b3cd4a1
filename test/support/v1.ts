import type { CreateAuthenticationRequest } from "../../src/gen/ringfence/verify/v1/verify_service.js";

/** A gRPC send-a-code request: every optional field empty unless given. */
export function sendRequest(
  fields: Partial<CreateAuthenticationRequest> &
    Pick<CreateAuthenticationRequest, "customerUuid" | "phoneNumber">,
): CreateAuthenticationRequest {
  return {
    ip: "",
    deviceId: "",
    deviceType: "",
    appVersion: "",
    senderId: "",
    callbackUrl: "",
    appRealm: "",
    osVersion: "",
    deviceModel: "",
    templateId: "",
    correlationId: "",
    locale: "",
    ...fields,
  };
}

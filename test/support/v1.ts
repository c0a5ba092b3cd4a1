import type { CreateAuthenticationRequest } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import type { AccountStore } from "../../src/accounts/store.js";
import { rest, type RestAnswer } from "./rest.js";

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

/** An account with money to send: 10.00 by default, and a limit that never gets in the way. */
export function fundedAccount(accounts: AccountStore, name: string, balanceMicros = 10_000_000) {
  return accounts.create({
    name,
    balanceMicros,
    spendingLimitMicros: 1_000_000_000,
    features: [],
    regions: [],
  });
}

/** POST /v1/authentication over REST with an account's key. */
export function postSend(
  baseUrl: string,
  apiKey: string,
  body: Record<string, unknown>,
): Promise<RestAnswer> {
  return rest(baseUrl).post("/v1/authentication", body, { "x-api-key": apiKey });
}

import type { VerifyApi } from "./events.js";
import { decodeRow, type RowState } from "./row.js";

/** The device and user data points given at creation (empty strings: not given). */
export interface Signals {
  ip: string;
  deviceId: string;
  deviceType: string;
  appVersion: string;
  osVersion: string;
  deviceModel: string;
  isReturningUser?: boolean | undefined;
}

/** What a new authentication is stored with; its status and code come from send-code.lua. */
export interface NewAuthentication {
  /** The API that created it: its events and answers take that API's shapes. */
  api: VerifyApi;
  customerUuid: string;
  phoneNumber: string;
  countryCode: string;
  createdAt: string;
  expiresAt: string;
  expiresAtMs: number;
  correlationId: string;
  locale: string;
  templateId: string;
  from: string;
  appRealm: string;
  callbackUrl: string;
  /** The price of one message to this number when it was created, in millionths. */
  priceMicros: number;
  /** Digits of its codes (V2 `code_size`; V1 the service's OTP_LENGTH). */
  codeLength: number;
  signals: Signals;
}

export interface StoredAuthentication extends NewAuthentication, RowState {}

/** A row (either format, src/verify/row.ts) as the service reads it; undefined when none. */
export function decodeAuthentication(
  customer: string,
  h: Record<string, string>,
): { auth: StoredAuthentication; compact: string[] } | undefined {
  const decoded = decodeRow(h);
  if (decoded === undefined) return undefined;
  return { auth: { ...decoded.row, customerUuid: customer }, compact: decoded.events };
}

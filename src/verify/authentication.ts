import { decodeRow, type RowFacts, type RowState } from "./row.js";

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
export interface NewAuthentication extends RowFacts {
  /** In the row's key, not in the row. */
  customerUuid: string;
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

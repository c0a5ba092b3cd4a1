import type {
  AuthenticationSignals,
  AuthenticationStatusEvent,
  GetAuthenticationResponse,
} from "../gen/ringfence/verify/v1/verify_service.js";
import type { DeliveryState } from "../messaging/provider.js";
import type { Envelope } from "./model.js";
import type { StoredAuthentication } from "./authentication.js";

/** Event types of the original API's read-back. */
export const READ_BACK_EVENT_TYPES = ["attempt", "check", "delivery_status", "balance_update"] as const;
/** Statuses of a read-back `attempt`. */
export const ATTEMPT_STATUSES = ["pending", "delivered", "failed", "rate_limited", "expired"] as const;
/** Statuses of a read-back `delivery_status`. */
export const DELIVERY_STATUSES = [
  "unknown",
  "submitted",
  "in_transit",
  "delivered",
  "undeliverable",
] as const;
/** Channel of every attempt: SMS. */
export const ATTEMPT_CAPABILITY = "text";

type AttemptStatus = (typeof ATTEMPT_STATUSES)[number];
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** A provider's delivery receipt state in the original API's words. */
export const DELIVERY_STATUS: Readonly<Record<DeliveryState, DeliveryStatus>> = {
  accepted: "in_transit",
  delivered: "delivered",
  failed: "undeliverable",
  expired: "undeliverable",
  rejected: "undeliverable",
  unknown: "unknown",
};

/**
 * One authentication in the original API's read-back shape, from what it stored: its signals and
 * its events (the webhook envelopes). Each message sent is an `attempt` followed by the
 * `balance_update` of its charge; each check of a code a `check`; each receipt a
 * `delivery_status` naming its attempt. A creation refused by the send limits is an `attempt`
 * in `rate_limited`. Codes are never stored, so none is shown.
 */
export function readBack(
  uuid: string,
  auth: StoredAuthentication,
  events: readonly Envelope[],
  nowMs: number,
): GetAuthenticationResponse {
  const expired = nowMs >= auth.expiresAtMs;
  const attemptIds = new Map<number, string>();
  const delivered = new Map<number, DeliveryStatus>();
  for (const e of events) {
    const n = attemptNumber(e);
    if (e.type === "attempt" && isSend(e) && n !== undefined) attemptIds.set(n, e.id);
    if (e.type === "delivery_status" && n !== undefined) {
      const status = deliveryStatus(e.payload.status);
      // A final answer is not undone by a later, vaguer one.
      if (!isFinal(delivered.get(n))) delivered.set(n, status);
    }
  }

  const out: AuthenticationStatusEvent[] = [];
  for (const e of events) {
    const n = attemptNumber(e);
    if (e.type === "authentication" && e.payload.status === "rate_limited") {
      out.push(
        event("attempt", e.created_at, {
          id: e.id,
          attemptNumber: 1,
          capability: ATTEMPT_CAPABILITY,
          senderId: auth.from,
          status: "rate_limited",
        }),
      );
    } else if (e.type === "attempt" && isSend(e) && n !== undefined) {
      out.push(
        event("attempt", e.created_at, {
          id: e.id,
          attemptNumber: n,
          capability: ATTEMPT_CAPABILITY,
          senderId: auth.from,
          status: attemptStatus(delivered.get(n), expired),
        }),
      );
      out.push(
        event("balance_update", e.created_at, {
          amount: -auth.priceMicros / 1_000_000,
          balanceUpdateType: "attempt",
        }),
      );
    } else if (e.type === "attempt" && e.payload.action === "check") {
      out.push(event("check", e.created_at, { id: e.id, status: String(e.payload.status) }));
    } else if (e.type === "delivery_status" && n !== undefined) {
      out.push(
        event("delivery_status", e.created_at, {
          attemptId: attemptIds.get(n),
          attemptNumber: n,
          originatedAt: e.created_at,
          status: deliveryStatus(e.payload.status),
        }),
      );
    }
  }

  return {
    uuid,
    phoneNumber: auth.phoneNumber,
    createdAt: auth.createdAt,
    correlationId: auth.correlationId === "" ? undefined : auth.correlationId,
    templateId: auth.templateId,
    signals: signals(auth),
    events: out,
  };
}

function event(
  type: (typeof READ_BACK_EVENT_TYPES)[number],
  createdAt: string,
  fields: Partial<AuthenticationStatusEvent>,
): AuthenticationStatusEvent {
  return { type, createdAt, ...fields };
}

function isSend(e: Envelope): boolean {
  return e.payload.action === "send" || e.payload.action === "retry";
}

function attemptNumber(e: Envelope): number | undefined {
  const n = e.payload.attempt;
  return typeof n === "number" && Number.isInteger(n) && n > 0 ? n : undefined;
}

function deliveryStatus(state: unknown): DeliveryStatus {
  return typeof state === "string" && Object.hasOwn(DELIVERY_STATUS, state)
    ? DELIVERY_STATUS[state as DeliveryState]
    : "unknown";
}

function isFinal(s: DeliveryStatus | undefined): boolean {
  return s === "delivered" || s === "undeliverable";
}

function attemptStatus(delivery: DeliveryStatus | undefined, expired: boolean): AttemptStatus {
  if (delivery === "delivered") return "delivered";
  if (delivery === "undeliverable") return "failed";
  return expired ? "expired" : "pending";
}

function signals(auth: StoredAuthentication): AuthenticationSignals {
  const s = auth.signals;
  const text = (v: string) => (v === "" ? undefined : v);
  return {
    ip: text(s.ip),
    deviceId: text(s.deviceId),
    deviceType: text(s.deviceType),
    appVersion: text(s.appVersion),
    appRealm: text(auth.appRealm),
    osVersion: text(s.osVersion),
    deviceModel: text(s.deviceModel),
    isReturningUser: s.isReturningUser,
  };
}

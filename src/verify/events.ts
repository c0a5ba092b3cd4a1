import { createHash, randomBytes } from "node:crypto";
import { correlatedEnvelope, makeEnvelope, type CorrelatedEnvelope } from "../webhooks/stream.js";
import type { DeliveryReceipt } from "../messaging/provider.js";
import type { AuthenticationStatus, Envelope } from "./model.js";
import { DELIVERY_STATUS } from "./read-back.js";

/** Which API created an authentication: its webhook events and answers take that API's shapes. */
export const VERIFY_APIS = ["v1", "v2"] as const;
export type VerifyApi = (typeof VERIFY_APIS)[number];

/** What every event of one authentication says of it. */
export interface EventFacts {
  authUuid: string;
  phone: string;
  correlationId: string;
  /** The price of one message to the number, in millionths of SMS_CURRENCY. */
  priceMicros: number;
  currency: string;
  /** The carrier of the number's range, when known (V2 `carrier_information`). */
  network?: { mcc: string; mnc: string } | undefined;
}

/**
 * The `authentication` event a send records, for whichever status its script decides, sent once:
 * for each status of `statuses`, the event is `event[0] .. status .. event[1]`, or `event[0]`
 * alone when it does not name its status; `compact` the same for the compact record the row may
 * keep instead (src/verify/row.ts), which the script keeps only when it fits its 64 bytes.
 */
export interface CreatedEvent {
  statuses: ("pending" | "rate_limited" | "spam_detected")[];
  event: [string] | [string, string];
  compact: [string, string] | null;
}

/**
 * The webhook events of an authentication, in the shapes of the API that created it. Each is the
 * envelope whose JSON is POSTed as it is; `created` answers "" when that API records no event.
 */
export interface EventShapes {
  /** The creation, decided `status` by the send script. */
  created(f: EventFacts, status: AuthenticationStatus, createdAt: string, expiresAt: string): string;
  /** A message the provider accepted: the first send or a retry. */
  sent(f: EventFacts, attempt: number, action: "send" | "retry", at: string): Envelope;
  /** A code compared by a check, completed with the stored correlation_id; undefined: none recorded. */
  checked(authUuid: string, status: "valid" | "invalid", at: string): CorrelatedEnvelope | undefined;
  /** A provider's delivery receipt for attempt `attempt`. */
  receipt(f: EventFacts, attempt: number, receipt: DeliveryReceipt): Envelope;
}

/** V1's envelope `{id, type, created_at, correlation_id?, payload}` (docs/v1-api.md#webhooks). */
const V1_EVENTS: EventShapes = {
  created: (f, status, createdAt, expiresAt) =>
    JSON.stringify(
      makeEnvelope({
        type: "authentication",
        createdAt,
        correlationId: f.correlationId,
        payload: {
          authentication_uuid: f.authUuid,
          status,
          phone_number: f.phone,
          created_at: createdAt,
          expires_at: expiresAt,
        },
      }),
    ),
  sent: (f, attempt, action, at) =>
    makeEnvelope({
      type: "attempt",
      createdAt: at,
      correlationId: f.correlationId,
      payload: { authentication_uuid: f.authUuid, attempt, action, status: "sent" },
    }),
  checked: (authUuid, status, at) =>
    correlatedEnvelope({
      type: "attempt",
      createdAt: at,
      payload: { authentication_uuid: authUuid, action: "check", status },
    }),
  receipt: (f, attempt, r) =>
    makeEnvelope({
      type: "delivery_status",
      createdAt: r.at,
      correlationId: f.correlationId,
      payload: {
        authentication_uuid: f.authUuid,
        attempt,
        status: r.state,
        provider_status: r.providerStatus,
        ...(r.errorCode === undefined ? {} : { error_code: r.errorCode }),
      },
    }),
};

/** A V2 verification's id: `vrf_` and its authentication's uuid in hex, so each gives the other. */
export function verificationId(authUuid: string): string {
  return `vrf_${authUuid.replace(/-/g, "")}`;
}

/** The authentication uuid of a V2 verification id; undefined when it is not one. */
export function authUuidOfVerification(id: string): string | undefined {
  const m = /^vrf_([0-9a-f]{8})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{12})$/.exec(id);
  return m === null ? undefined : m.slice(1).join("-");
}

/** An attempt's id, derived so that its delivery statuses name it without a read. */
export function attemptId(authUuid: string, attempt: number): string {
  return `att_${createHash("sha256").update(`${authUuid}:${attempt}`).digest("hex").slice(0, 26)}`;
}

const randomId = (prefix: string) => `${prefix}_${randomBytes(13).toString("hex")}`;

/** What every V2 payload says of its verification: id, target, price, metadata. */
function v2Common(f: EventFacts) {
  return {
    verification_id: verificationId(f.authUuid),
    // An email verification keeps its address where a number's keeps the number.
    target: { type: f.phone.includes("@") ? "email_address" : "phone_number", value: f.phone },
    price: { amount: f.priceMicros / 1_000_000, currency: f.currency },
    ...(f.network === undefined || f.network.mcc === ""
      ? {}
      : { carrier_information: { mcc: f.network.mcc, mnc: f.network.mnc } }),
    ...(f.correlationId === "" ? {} : { metadata: { correlation_id: f.correlationId } }),
  };
}

/**
 * The original V2 API's events `{id, type, payload, created_at}` (docs/v2-api.md#webhooks):
 * `verify.authentication` once a verification is created and billed, `verify.attempt` for each
 * message, `verify.delivery_status` for each receipt. Checks record none.
 */
const V2_EVENTS: EventShapes = {
  created: (f, status, createdAt) =>
    status !== "pending"
      ? ""
      : JSON.stringify(
          makeEnvelope({
            id: randomId("evt"),
            type: "verify.authentication",
            createdAt,
            payload: { ...v2Common(f), time: createdAt },
          }),
        ),
  sent: (f, attempt, _action, at) =>
    makeEnvelope({
      id: randomId("evt"),
      type: "verify.attempt",
      createdAt: at,
      payload: {
        id: attemptId(f.authUuid, attempt),
        ...v2Common(f),
        delivery_status: "submitted",
        time: at,
      },
    }),
  checked: () => undefined,
  receipt: (f, attempt, r) =>
    makeEnvelope({
      id: randomId("evt"),
      type: "verify.delivery_status",
      createdAt: r.at,
      payload: {
        id: randomId("dls"),
        attempt_id: attemptId(f.authUuid, attempt),
        ...v2Common(f),
        status: DELIVERY_STATUS[r.state],
        time: r.at,
      },
    }),
};

export const EVENT_SHAPES: Readonly<Record<VerifyApi, EventShapes>> = { v1: V1_EVENTS, v2: V2_EVENTS };

import { isIPv4 } from "node:net";
import { z } from "zod";
import type { ErrorCode } from "../errors.js";
import { httpUrlField } from "../net/validate.js";
import { SENDER_ID } from "../accounts/account.js";
import type { WebhookEnvelope } from "../webhooks/stream.js";

/** Authentication status at creation (docs/v1-api.md#send-a-code). */
export const AUTHENTICATION_STATUSES = ["pending", "rate_limited", "spam_detected"] as const;
export type AuthenticationStatus = (typeof AUTHENTICATION_STATUSES)[number];

/** Check statuses (docs/v1-api.md#check), shared with login and step-up codes. */
export { CHECK_STATUSES, type CheckStatus } from "../otp/code.js";

/** Retry statuses (docs/v1-api.md#retry). */
export const RETRY_STATUSES = [
  "approved",
  "denied",
  "no_attempt",
  "rate_limited",
  "expired_auth",
  "already_validated",
  "spam_detected",
] as const;
export type RetryStatus = (typeof RETRY_STATUSES)[number];

export const DEVICE_TYPES = ["IOS", "ANDROID", "WEB"] as const;
export const FEEDBACK_STATUSES = ["onboarded", "not_onboarded"] as const;
export const EVENT_TYPES = ["authentication", "attempt", "delivery_status"] as const;
export type EventType = (typeof EVENT_TYPES)[number];
/** Event types of V2 verifications (docs/v2-api.md#webhooks). */
export const V2_EVENT_TYPES = ["verify.authentication", "verify.attempt", "verify.delivery_status"] as const;
export type V2EventType = (typeof V2_EVENT_TYPES)[number];

/** Webhook envelope of an authentication's events; the payload never holds a code. */
export type Envelope = WebhookEnvelope<EventType | V2EventType, Record<string, unknown>>;

/** An optional text field of a request ("" for none), at most `max` characters. */
export const optionalText = (max: number) => z.string().max(max, `must be at most ${max} characters`);

/** An optional sender ID of a request ("" for none), by the accounts' SENDER_ID rule. */
export const optionalSenderId = z
  .string()
  .refine((v) => v === "" || SENDER_ID.safeParse(v).success, "must be up to 11 letters or digits");

/** POST /v1/authentication, after proto3 decoding: absent strings arrive as "". */
export const CreateAuthenticationInput = z.object({
  customerUuid: z.string(),
  phoneNumber: z.string(),
  ip: z.string().refine((v) => v === "" || isIPv4(v), "must be an IPv4 address"),
  deviceId: optionalText(256),
  deviceType: z.enum(["", ...DEVICE_TYPES], { error: `must be one of ${DEVICE_TYPES.join(", ")}` }),
  appVersion: optionalText(64),
  senderId: optionalSenderId,
  callbackUrl: httpUrlField({ required: false }),
  appRealm: z.string(),
  osVersion: optionalText(64),
  deviceModel: optionalText(128),
  isReturningUser: z.boolean().optional(),
  templateId: optionalText(64),
  correlationId: optionalText(256),
  locale: optionalText(35),
});
export type CreateAuthenticationInput = z.infer<typeof CreateAuthenticationInput>;

/** The original API's finer error code of a create field, where it has one. */
export const CREATE_FIELD_CODES = {
  device_id: "invalid_device_id",
  app_version: "invalid_app_version",
  sender_id: "invalid_sender_id",
  os_version: "invalid_os_version",
  device_model: "invalid_device_model",
  template_id: "invalid_template_id",
} as const satisfies Record<string, ErrorCode>;

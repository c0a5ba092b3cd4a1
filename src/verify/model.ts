import { isIPv4 } from "node:net";
import { z } from "zod";

/** Authentication status at creation (specification "Authentication"). */
export const AUTHENTICATION_STATUSES = ["pending", "rate_limited", "spam_detected"] as const;
export type AuthenticationStatus = (typeof AUTHENTICATION_STATUSES)[number];

/** Check statuses (decisions section 4), shared with login and step-up codes. */
export { CHECK_STATUSES, type CheckStatus } from "../otp/code.js";

/** Retry statuses (decisions section 4). */
export const RETRY_STATUSES = [
  "approved",
  "denied",
  "no_attempt",
  "rate_limited",
  "expired_auth",
  "already_validated",
] as const;
export type RetryStatus = (typeof RETRY_STATUSES)[number];

export const DEVICE_TYPES = ["IOS", "ANDROID", "WEB"] as const;
export const FEEDBACK_STATUSES = ["onboarded", "not_onboarded"] as const;
export const EVENT_TYPES = ["authentication", "attempt", "delivery_status"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Webhook envelope (decisions section 4); the payload never holds a code. */
export interface Envelope {
  id: string;
  type: EventType;
  created_at: string;
  correlation_id?: string;
  payload: Record<string, unknown>;
}

const optionalText = (max: number) => z.string().max(max, `must be at most ${max} characters`);
const httpUrl = z
  .string()
  .max(2048, "must be at most 2048 characters")
  .refine((v) => {
    if (v === "") return true;
    try {
      const u = new URL(v);
      return u.protocol === "http:" || u.protocol === "https:";
    } catch {
      return false;
    }
  }, "must be an http or https URL");

/** POST /v1/authentication, after proto3 decoding: absent strings arrive as "". */
export const CreateAuthenticationInput = z
  .object({
    customerUuid: z.string(),
    phoneNumber: z.string(),
    ip: z.string().refine((v) => v === "" || isIPv4(v), "must be an IPv4 address"),
    deviceId: optionalText(256),
    deviceType: z.enum(["", ...DEVICE_TYPES], { error: `must be one of ${DEVICE_TYPES.join(", ")}` }),
    appVersion: optionalText(64),
    senderId: z
      .string()
      .refine(
        (v) => v === "" || /^([A-Za-z0-9 ]{1,11}|\+?\d{1,15})$/.test(v),
        "must be up to 11 letters or digits",
      ),
    callbackUrl: httpUrl,
    appRealm: z.string(),
    osVersion: optionalText(64),
    deviceModel: optionalText(128),
    isReturningUser: z.boolean().optional(),
    templateId: optionalText(64),
    correlationId: optionalText(256),
    locale: optionalText(35),
  })
  .refine((v) => v.appRealm === "" || v.deviceType === "ANDROID", {
    path: ["appRealm"],
    message: "requires device_type ANDROID",
  });
export type CreateAuthenticationInput = z.infer<typeof CreateAuthenticationInput>;

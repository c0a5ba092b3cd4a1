import { z } from "zod";
import { defineSettings, setting } from "../settings/define.js";

/** One-time codes (docs/settings.md#one-time-codes): what every code-carrying flow issues. */
export const otpSettings = defineSettings({
  OTP_LENGTH: setting({
    schema: z.coerce.number().int().min(4).max(10).default(6),
    section: "otp",
    text: "Digits in a code.",
  }),
  OTP_TTL_SECONDS: setting({
    schema: z.coerce.number().int().min(30).max(86_400).default(600),
    section: "otp",
    text: "Lifetime of a V1 authentication and its code.",
  }),
  OTP_MAX_CHECKS: setting({
    schema: z.coerce.number().int().min(1).max(100).default(5),
    section: "otp",
    text: "Checks per authentication or challenge.",
  }),
});

/** The one-time code settings, parsed. */
export type OtpSettings = ReturnType<(typeof otpSettings)["finish"]>;

/** What a code looks like and how long and how often it may be checked, for every flow that sends one. */
export interface CodePolicy {
  /** Digits in a code. */
  length: number;
  /** Lifetime of a code (and of a V1 authentication). */
  ttlSeconds: number;
  /** Checks per authentication or challenge. */
  maxChecks: number;
}

export function codePolicy(s: OtpSettings): CodePolicy {
  return { length: s.OTP_LENGTH, ttlSeconds: s.OTP_TTL_SECONDS, maxChecks: s.OTP_MAX_CHECKS };
}

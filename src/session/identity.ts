import { badField } from "../errors.js";
import { parseE164 } from "../phone/e164.js";
import { isEmailAddress } from "../net/email-address.js";

/**
 * The identity terms of the session service, defined once: what identifies a user, how a granted
 * scope lives, and the password-change scope.
 */

/** The kinds of identifier a user logs in with, in the order a user's identifiers are listed. */
export const IDENTIFIER_TYPES = ["phone_number", "email_address"] as const;
export type IdentifierType = (typeof IDENTIFIER_TYPES)[number];

export interface Identifier {
  type: IdentifierType;
  value: string;
}

/** How a granted scope lives: consumed by its first use, or for the rest of the session. */
export const GRANT_MODES = ["single-use", "session"] as const;
export type GrantMode = (typeof GRANT_MODES)[number];

/** The scope of the password-change flow. */
export const PASSWORD_SCOPE = "svc:pwd:write";

/** An identifier as callers send it, validated (a phone number in its E.164 form). */
export function readIdentifier(id: { type: string; value: string } | undefined): Identifier {
  if (id === undefined) throw badField("identifier", "is required");
  if (id.type === "phone_number") {
    const parsed = parseE164(id.value);
    if (parsed === undefined) throw badField("identifier.value", "must be an E.164 phone number");
    return { type: "phone_number", value: parsed.e164 };
  }
  if (id.type === "email_address") {
    if (!isEmailAddress(id.value)) throw badField("identifier.value", "must be an email address");
    return { type: "email_address", value: id.value };
  }
  throw badField("identifier.type", "must be phone_number or email_address");
}

/**
 * The authentication methods (RFC 8176 `amr` values) of a login by a code sent to the identifier:
 * a one-time code, by SMS for a phone number (`["otp", "sms"]`); RFC 8176 names no email method,
 * so an emailed code is `["otp"]`. A password login is `["pwd"]`.
 */
export function codeLoginAmr(identifier: Identifier): string[] {
  return identifier.type === "phone_number" ? ["otp", "sms"] : ["otp"];
}

/** The `amr` of a password login (RFC 8176 `pwd`). */
export const PASSWORD_LOGIN_AMR: readonly string[] = ["pwd"];
